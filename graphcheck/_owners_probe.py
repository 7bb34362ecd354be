"""A cheap answer to "do the owners still hold the very arrays a graph baked?".

A full replay check walks the owners' object graph (:func:`graphcheck.buffers_of`),
which takes milliseconds for hundreds of buffers: too much before every launch. After a
full check passed, an :class:`OwnersProbe` remembers, for every owned buffer the graph
baked an address of, the path to its array from the owners (``owner.state.x``,
``owner.buffers[3]``) and which array it was. Before a launch it follows those paths
again in one generated function and compares identities: the same arrays at the same
places (none freed, none reassigned, none resized, since a resized array is a new array)
means the full check would find the same buffers there. A weak reference to each array
tells, at no cost per launch, when one is freed (its id could then be reused).

Whatever the probe cannot follow (a closure variable, a set member, a path through an
object whose lookup fails) makes it unavailable: the full check runs every time then.
"""

from __future__ import annotations

import ast
import keyword
import re
import weakref
from collections.abc import Iterable
from typing import Any

from . import _warp

# One step of a label: ".name", "[3]" or "['key']" (see graphcheck.buffers._JOINS).
_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[(-?\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")
_ROOT = re.compile(r"owner(?=[.\[]|$)|owners\[(\d+)\]")


class Unsupported(Exception):
    """The probe cannot follow a path: the full check must run every time."""


def _parse(label: str) -> tuple[int, list[tuple[str, Any]]]:
    root = _ROOT.match(label)
    if root is None:
        raise Unsupported(label)
    index = int(root.group(1)) if root.group(1) is not None else 0
    steps: list[tuple[str, Any]] = []
    position = root.end()
    while position < len(label):
        step = _STEP.match(label, position)
        if step is None:
            raise Unsupported(label)
        name, number, key = step.groups()
        if name is not None:
            if keyword.iskeyword(name):
                raise Unsupported(label)  # not an attribute the generated code can spell
            steps.append(("attr", name))
        elif number is not None:
            steps.append(("item", int(number)))
        else:
            steps.append(("item", ast.literal_eval(key)))
        position = step.end()
    return index, steps


class OwnersProbe:
    """Which arrays sit at the baked buffers' places in the owners, checked cheaply.

    Args:
        owners: the owners, as the guard walked them.
        labels: the labels of the owned buffers the graph baked addresses of.
        single: whether the owners were walked as one ``owner`` (else ``owners[i]``).

    Raises:
        Unsupported: when a label cannot be followed to a live array.
    """

    def __init__(self, owners: tuple[Any, ...], labels: Iterable[str], single: bool) -> None:
        lines: list[str] = []
        names: dict[tuple[Any, ...], str] = {}
        keys: dict[str, Any] = {}

        def name_of(prefix: tuple[Any, ...]) -> str:
            # One local variable per object on the way, shared by every path through it.
            if prefix not in names:
                if len(prefix) == 1:
                    expression = f"roots[{prefix[0]}]"
                else:
                    parent, (kind, key) = name_of(prefix[:-1]), prefix[-1]
                    if kind == "attr":
                        expression = f"{parent}.{key}"
                    else:
                        keys[f"k{len(keys)}"] = key
                        expression = f"{parent}[k{len(keys) - 1}]"
                names[prefix] = f"v{len(names)}"
                lines.append(f"    {names[prefix]} = {expression}")
            return names[prefix]

        leaves = []
        for label in sorted(set(labels)):
            index, steps = _parse(label)
            if index >= (1 if single else len(owners)):
                raise Unsupported(label)
            leaves.append(name_of((index, *steps)))
        body = "\n".join([*lines, "    pass"])
        source = (
            f"def objects(roots):\n{body}\n    return ({''.join(f'{leaf}, ' for leaf in leaves)})\n"
            f"def ids(roots):\n{body}\n    return ({''.join(f'id({leaf}), ' for leaf in leaves)})\n"
        )
        namespace: dict[str, Any] = dict(keys)
        exec(compile(source, "<graphcheck owners probe>", "exec"), namespace)
        self._ids = namespace["ids"]
        self._roots = owners
        self.freed = False
        try:
            arrays = namespace["objects"](owners)
        except Exception as error:  # a path that cannot be followed by attribute and item
            raise Unsupported(f"{error}") from None
        for array in arrays:
            if not _warp.is_array(array):
                raise Unsupported(f"{type(array).__name__} is not an array")
        # Held weakly: a freed array, whose id a new one may take, makes the probe stale.
        self._refs = [weakref.ref(array, self._on_free) for array in arrays]
        self._expected = tuple(map(id, arrays))

    def _on_free(self, _ref: Any) -> None:
        self.freed = True

    def unchanged(self) -> bool:
        """Whether the same live arrays are still at every place."""
        if self.freed:
            return False
        try:
            return bool(self._ids(self._roots) == self._expected)
        except Exception:  # a path no longer leads anywhere: the full check says what happened
            return False

"""A cheap answer to "do the owners still hold the very arrays a graph baked?".

A full replay check walks the owners' object graph (:func:`graphcheck.buffers_of`),
which takes milliseconds for hundreds of buffers: too much before every launch. After a
full check passed, an :class:`OwnersProbe` remembers, for every owned buffer the graph
baked an address of, the path to its array from the owners (``owner.state.x``,
``owner.buffers[3]``) and which array it was. Before a launch it follows those paths
again in one generated function and compares identities: the same arrays at the same
places (none freed, none reassigned, none resized, since a resized array is a new array)
means the full check would find the same buffers there. The identities are compared as
the bytes of the object pointers in one tuple of the objects found (one memcmp; on other
Pythons than CPython, a tuple of ids). A weak reference to each array tells, at no cost
per launch, when one is freed (its id could then be reused), so equal pointers are the
same live objects.

Whatever the probe cannot follow (a set member or another container's that cannot be
indexed, the object a bound method is bound to, a path whose lookup fails) makes it
unavailable: the full check runs every time then. It follows every other way in the walk
takes: attributes, items, plain dict keys, a mapping's n-th key and value, a function's
variables (closed over, or a parameter's default).
"""

from __future__ import annotations

import ast
import ctypes
import keyword
import re
import struct
import sys
import weakref
from collections.abc import Iterable
from typing import Any

from . import _warp
from .buffers import nth, variable

# One step of a label: ".keys()[0]" or ".values()[0]" (a mapping's first key or value),
# ".name", "[3]", "['key']" or ".<name>", a function's variable (see graphcheck.buffers._JOINS).
_STEP = re.compile(
    r"\.(keys|values)\(\)\[(\d+)\]|\.([A-Za-z_]\w*)|\[(-?\d+)\]"
    r"|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]|\.<([A-Za-z_]\w*)>"
)
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
        view, position_in_view, name, number, key, cell = step.groups()
        if view is not None:
            steps.append((view, int(position_in_view)))
        elif cell is not None:
            steps.append(("cell", cell))
        elif name is not None:
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
        parents: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
        expressions: dict[tuple[Any, ...], str] = {}
        keys: dict[str, Any] = {}
        leaves: list[tuple[Any, ...]] = []
        for label in sorted(set(labels)):
            index, steps = _parse(label)
            if index >= (1 if single else len(owners)):
                raise Unsupported(label)
            path: tuple[Any, ...] = (index, *steps)
            leaves.append(path)
            for depth in range(1, len(path) + 1):
                prefix = path[:depth]
                if prefix in expressions:
                    continue
                parents[prefix] = prefix[:-1] if depth > 1 else None
                if depth == 1:
                    expressions[prefix] = f"roots[{index}]"
                elif prefix[-1][0] == "attr":
                    expressions[prefix] = f"{{}}.{prefix[-1][1]}"
                elif prefix[-1][0] == "cell":
                    expressions[prefix] = f"_variable({{}}, {prefix[-1][1]!r})"
                elif prefix[-1][0] in ("keys", "values"):
                    expressions[prefix] = f"_nth({{}}.{prefix[-1][0]}(), {prefix[-1][1]})"
                else:
                    keys[f"k{len(keys)}"] = prefix[-1][1]
                    expressions[prefix] = f"{{}}[k{len(keys) - 1}]"
        order = list(expressions)  # parents before children
        names = {prefix: f"v{i}" for i, prefix in enumerate(order)}

        def function(name: str, results: list[str], needed: set[tuple[Any, ...]]) -> str:
            lines = [f"def {name}(roots):"]
            for prefix in order:
                if prefix in needed:
                    parent = parents[prefix]
                    expression = (
                        expressions[prefix].format(names[parent]) if parent is not None else expressions[prefix]
                    )
                    lines.append(f"    {names[prefix]} = {expression}")
            if len(results) == 1 and results[0].startswith("*tuple("):
                return "\n".join([*lines, f"    return {results[0][1:]}"]) + "\n"
            return "\n".join([*lines, f"    return ({''.join(r + ', ' for r in results)})"]) + "\n"

        def with_parents(prefixes: Iterable[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
            needed: set[tuple[Any, ...]] = set()
            for prefix in prefixes:
                while prefix is not None and prefix not in needed:
                    needed.add(prefix)
                    prefix = parents[prefix]  # type: ignore[assignment]
            return needed

        # Many buffers in one list or tuple (owner.buffers[0..499]): the ids of the whole
        # sequence, in one C loop, rather than one lookup per item. Any change to the
        # sequence then counts as a change, which only costs a full check.
        by_parent: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for leaf in leaves:
            if leaf[-1][0] == "item" and type(leaf[-1][1]) is int and leaf not in parents.values():
                by_parent.setdefault(leaf[:-1], []).append(leaf)
        grouped = {parent for parent, items in by_parent.items() if len(items) >= 8}
        single_ids = [leaf for leaf in leaves if leaf[:-1] not in grouped or leaf in parents.values()]
        grouped_order = sorted(grouped, key=order.index)
        needed = with_parents([*single_ids, *grouped_order])
        place_results = [names[leaf] for leaf in single_ids] + [f"*{names[parent]}" for parent in grouped_order]
        if len(place_results) == 1 and place_results[0].startswith("*"):
            place_results = [f"*tuple({place_results[0][1:]})"]  # one copy, not a list and then a tuple
        id_results = [f"id({names[leaf]})" for leaf in single_ids]
        id_results += [f"*map(id, {names[parent]})" for parent in grouped_order]
        source = function("objects", [names[leaf] for leaf in leaves], with_parents(leaves))
        source += function("places", place_results, needed) + function("ids", id_results, needed)
        self.source = source
        namespace: dict[str, Any] = {**keys, "_variable": variable, "_nth": nth}
        exec(compile(source, "<graphcheck owners probe>", "exec"), namespace)
        self._places = namespace["places"]
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
        # The objects at the places, compared by identity: as the bytes of the pointers a
        # tuple of them holds (one C copy and one memcmp, no int per object), or by their
        # ids where tuples are not laid out as CPython's.
        places = self._places(owners)
        if _pointers(places) == struct.pack(f"{len(places)}P", *map(id, places)):
            self._expected: Any = _pointers(places)
            self.unchanged = self._unchanged_pointers  # type: ignore[method-assign]
        else:
            self._expected = self._ids(owners)

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

    def _unchanged_pointers(self) -> bool:
        if self.freed:  # (then an id may belong to another object now)
            return False
        try:
            return _pointers(self._places(self._roots)) == self._expected
        except Exception:  # a path no longer leads anywhere: the full check says what happened
            return False


def _pointers(objects: tuple[Any, ...]) -> bytes:
    """The object pointers a tuple holds, as bytes (CPython: equal to their ids packed);
    empty where tuples are laid out otherwise. The tuple is held while it is read."""
    if not _TUPLE_ITEMS:
        return b""
    return ctypes.string_at(id(objects) + _TUPLE_ITEMS, _POINTER * len(objects))


# Where a CPython tuple's items start: its items follow the fixed part inline.
_POINTER = struct.calcsize("P")
_TUPLE_ITEMS = tuple.__basicsize__ if sys.implementation.name == "cpython" and tuple.__itemsize__ == _POINTER else 0

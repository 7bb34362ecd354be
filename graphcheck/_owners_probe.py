"""A cheap answer to "do the owners still hold the very arrays a graph baked?".

A full replay check walks the owners' object graph (:func:`graphcheck.buffers_of`),
which takes milliseconds for hundreds of buffers: too much before every launch. After a
full check passed, an :class:`OwnersProbe` remembers, for every owned buffer the graph
baked an address of, the path to its array from the owners (``owner.state.x``,
``owner.buffers[3]``) and which array it was. Before a launch it follows those paths
again in one generated function and compares identities: the same arrays at the same
places (none freed, none reassigned, none resized, since a resized array is a new array)
means the full check would find the same buffers there. Each array is compared by its
id, a constant in the generated code (many arrays at their own places as the item
pointers of one tuple of them); many kept in one object's plain ``__dict__`` (a
simulator's state as attributes: MuJoCo Warp's ``Data`` holds 161) by that dict's keys
and values, read in place (CPython 3.11 and later); a list or tuple holding many is
compared as the bytes of its item pointers, read in place (one memcmp against the bytes
expected, no copy; on other Pythons than CPython, a tuple of ids). A weak
reference to each array tells, at no cost per launch, when one is freed (its id could
then be reused), so equal ids are the same live objects: the probe keeps none of them
alive. A mesh, hash grid, BVH, volume or texture reaches kernels as its ``id``: the
probe compares that handle, as the full check does.

Whatever the probe cannot follow (a set member or another container's that cannot be
indexed, a path whose lookup fails) makes it unavailable: the full check runs every time
then. It follows every other way in the walk takes: attributes, items, plain dict keys, a
mapping's n-th key and value, a function's variables (closed over, or a parameter's
default), the object a bound method is bound to (the owner of ``gc.capture(sim.step)``).
"""

from __future__ import annotations

import ast
import ctypes
import keyword
import re
import struct
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable, Iterable, Sequence
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


#: Where a path step's expression puts its parent's (a NUL: no repr of a key or name holds one).
_PARENT = "\0"


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


def _follow(obj: Any, step: tuple[str, Any]) -> Any:
    """The object one step of a label leads to from ``obj`` (as the generated code follows it)."""
    kind, key = step
    if kind == "attr":
        return getattr(obj, key)
    if kind == "cell":
        return variable(obj, key)
    if kind in ("keys", "values"):
        return nth(getattr(obj, kind)(), key)
    return obj[key]


class OwnersProbe:
    """Which arrays sit at the baked buffers' places in the owners, checked cheaply.

    Args:
        owners: the owners, as the guard walked them.
        labels: the labels of the owned buffers the graph baked addresses of.
        single: whether the owners were walked as one ``owner`` (else ``owners[i]``).
        values: ``(label, bytes baked)`` of the structs and ``wp.Launch`` commands the graph
            baked bytes of (see :func:`graphcheck._warp.baked_by_value`): the same objects
            must be there, holding the same bytes.
        replay: ``(launch, graph)``: :attr:`replayed` then calls ``launch(graph, stream)``
            when nothing changed (Warp's ``wp.capture_launch`` and the graph).

    Raises:
        Unsupported: when a label cannot be followed to a live array (or struct, or command).
    """

    def __init__(
        self,
        owners: tuple[Any, ...],
        labels: Iterable[str],
        single: bool,
        values: Iterable[tuple[str, tuple[bytes, ...]]] = (),
        replay: tuple[Callable[[Any, Any], Any], Any] | None = None,
    ) -> None:
        values = list(values)
        labels = [*labels, *(label for label, _ in values)]
        parents: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
        expressions: dict[tuple[Any, ...], str] = {}
        leaves: list[tuple[Any, ...]] = []
        leaf_of: dict[str, tuple[Any, ...]] = {}
        for label in sorted(set(labels)):
            index, steps = _parse(label)
            if index >= (1 if single else len(owners)):
                raise Unsupported(label)
            path: tuple[Any, ...] = (index, *steps)
            leaves.append(path)
            leaf_of[label] = path
            for depth in range(1, len(path) + 1):
                prefix = path[:depth]
                if prefix in expressions:
                    continue
                parents[prefix] = prefix[:-1] if depth > 1 else None
                if depth == 1:
                    expressions[prefix] = f"root{index}"  # a default: one local read
                # _PARENT stands for the parent's expression: a key written as a literal may
                # hold braces, so no str.format.
                elif prefix[-1][0] == "attr":
                    expressions[prefix] = f"{_PARENT}.{prefix[-1][1]}"
                elif prefix[-1][0] == "cell":
                    expressions[prefix] = f"_variable({_PARENT}, {prefix[-1][1]!r})"
                elif prefix[-1][0] in ("keys", "values"):
                    expressions[prefix] = f"_nth({_PARENT}.{prefix[-1][0]}(), {prefix[-1][1]})"
                else:
                    expressions[prefix] = f"{_PARENT}[{prefix[-1][1]!r}]"  # an int or a str, as a literal
        order = list(expressions)  # parents before children
        names = {prefix: f"v{i}" for i, prefix in enumerate(order)}

        def assignments(needed: set[tuple[Any, ...]]) -> list[str]:
            lines = []
            for prefix in order:
                if prefix in needed:
                    parent = parents[prefix]
                    if parent is None:
                        expression = expressions[prefix]
                    else:
                        base = f"{names[parent]}.__self__" if parent in bound else names[parent]
                        expression = expressions[prefix].replace(_PARENT, base)
                    lines.append(f"    {names[prefix]} = {expression}")
            return lines

        def with_parents(prefixes: Iterable[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
            needed: set[tuple[Any, ...]] = set()
            for prefix in prefixes:
                while prefix is not None and prefix not in needed:
                    needed.add(prefix)
                    prefix = parents[prefix]  # type: ignore[assignment]
            return needed

        # Every object on the paths, as found now. A bound method stands for the object it is
        # bound to, as in the walk (``gc.capture(sim.step)``: its owner is ``sim.step``, whose
        # labels are ``sim``'s): its children are followed from its ``__self__``. The leaves must
        # be arrays, structs and commands baked by value, or a structure's handle (``.id``).
        found: dict[tuple[Any, ...], Any] = {}
        bound: set[tuple[Any, ...]] = set()
        for prefix in order:
            parent = parents[prefix]
            try:
                if parent is None:
                    obj = owners[prefix[0]]
                else:
                    obj = _follow(found[parent].__self__ if parent in bound else found[parent], prefix[-1])
            except Exception as error:  # a path that cannot be followed by attribute and item
                raise Unsupported(f"{error}") from None
            found[prefix] = obj
            if isinstance(obj, types.MethodType):
                bound.add(prefix)
        value_leaves = {leaf_of[label] for label, _ in values}
        handles: dict[tuple[Any, ...], type] = {}  # a structure's id leaf -> the structure's class
        for leaf in leaves:
            obj, parent = found[leaf], parents[leaf]
            if _warp.is_array(obj) or (leaf in value_leaves and _warp.baked_by_value(obj) is not None):
                continue
            if (
                leaf[-1] == ("attr", "id")
                and parent is not None
                and parent not in bound
                and type(obj) is int
                and _warp.structure_handle(found[parent]) == obj
            ):
                handles[leaf] = type(found[parent])
                continue
            raise Unsupported(f"{type(obj).__name__} is not an array")
        arrays = [found[leaf] for leaf in leaves if leaf not in handles]

        # Many buffers in one list or tuple (owner.buffers[0..499]): the item pointers of the
        # whole sequence, compared in place with the bytes expected (one memcmp), rather
        # than one lookup and one id per item. Any change to the sequence then counts as a
        # change, which only costs a full check.
        by_parent: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for leaf in leaves:
            # (an owner that is itself an array is a leaf of one step: no container holds it)
            if len(leaf) > 1 and leaf[-1][0] == "item" and type(leaf[-1][1]) is int and leaf not in parents.values():
                by_parent.setdefault(leaf[:-1], []).append(leaf)
        grouped = {
            parent for parent, items in by_parent.items() if len(items) >= 8 and type(found[parent]) in (list, tuple)
        }
        singles = [leaf for leaf in leaves if leaf[:-1] not in grouped or leaf in parents.values()]
        namespace: dict[str, Any] = {"_variable": variable, "_nth": nth}
        conditions: list[str] = []
        for leaf in singles:
            if leaf in handles:  # the same kind of structure, handing kernels the same id
                kind = f"structure{len(conditions)}"  # a name for the handle's type in the generated code
                namespace[kind] = handles[leaf]
                holder = names[parents[leaf]]  # type: ignore[index]
                conditions.append(f"type({holder}) is {kind} and {names[leaf]} == {found[leaf]}")
        objects = [leaf for leaf in singles if leaf not in handles]
        # Many arrays kept in one object's plain __dict__ (MuJoCo Warp's Data and Model: hundreds
        # of arrays and numbers): that dict's table compared in place (see _dict_condition) rather
        # than each array looked up by name; where anything in the dict changed, the arrays are
        # looked up and compared as before. The arrays then need no name of their own.
        by_keeper: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        interior = set(parents.values())
        for leaf in objects:
            if len(leaf) > 1 and leaf[-1][0] == "attr" and leaf not in interior and leaf not in value_leaves:
                by_keeper.setdefault(parents[leaf], []).append(leaf)  # type: ignore[arg-type]
        notes: list[str] = []  # what the generated test's dict comparisons stand for
        in_dicts: set[tuple[Any, ...]] = set()
        keepers: list[tuple[Any, ...]] = []
        for keeper, attributes in by_keeper.items():
            if len(attributes) < _IN_DICT or keeper in bound:
                continue
            attribute_names = [leaf[-1][1] for leaf in attributes]
            number = len(keepers)
            condition = _dict_condition(names[keeper], found[keeper], attribute_names, number, namespace)
            if condition is None:
                continue
            conditions.append(condition)
            notes.append(
                f"{names[keeper]} keeps {len(attributes)} of the arrays in its __dict__: dict{number}_* compare "
                f"its table, keys and values in order, in place; else its arrays are compared one by one"
            )
            keepers.append(keeper)
            in_dicts.update(attributes)
        objects = [leaf for leaf in objects if leaf not in in_dicts]
        if len(objects) >= _MANY and _TUPLE_ITEMS:
            # Many arrays at their own places (a simulator's state as attributes): the tuple
            # of what is there now, compared by its item pointers (one read, one memcmp)
            # rather than one id() and one comparison per array.
            namespace["expected_objects"] = struct.pack(f"{len(objects)}P", *(id(found[leaf]) for leaf in objects))
            namespace["_pointers"] = _pointers
            conditions.append(f"_pointers(({', '.join(names[leaf] for leaf in objects)},)) == expected_objects")
        else:
            conditions += [f"id({names[leaf]}) == {id(found[leaf])}" for leaf in objects]
        for number, parent in enumerate(sorted(grouped, key=order.index)):
            conditions.append(_sequence_condition(names[parent], found[parent], number, namespace))
        for number, (label, baked) in enumerate(values):
            conditions.append(_value_condition(names[leaf_of[label]], found[leaf_of[label]], baked, number, namespace))
        named = [leaf for leaf in singles if leaf not in in_dicts]
        body = ["    " + line for line in assignments(with_parents([*named, *grouped, *keepers]))]
        body += [f"        # {note}" for note in notes]
        same = " and ".join(conditions) or "True"
        used = sorted({prefix[0] for prefix in order})
        roots = "".join(f"root{index}=root{index}, " for index in used)
        namespace.update({f"root{index}": owners[index] for index in used})
        self.source = "\n".join(
            [
                f"def unchanged({roots}freed=freed):",
                "    if freed:  # (then an id may belong to another object now)",
                "        return False",
                "    try:",
                *body,
                f"        return {same}",
                "    except Exception:  # a path no longer leads anywhere: the full check says what happened",
                "        return False",
                "",
            ]
        )
        if replay is not None:
            # The same test, then the replay itself: a launch that changed nothing makes one
            # call of graphcheck's (this) before Warp's own.
            self.source += "\n".join(
                [
                    f"def replayed(stream, {roots}freed=freed, _launch=_launch, _graph=_graph):",
                    "    if freed:",
                    "        return False",
                    "    try:",
                    *body,
                    f"        if not ({same}):",
                    "            return False",
                    "    except Exception:",
                    "        return False",
                    "    _launch(_graph, stream)  # outside the try: Warp's own errors reach the caller",
                    "    return True",
                    "",
                ]
            )
            namespace.update(_launch=replay[0], _graph=replay[1])
        # Held weakly: a freed array, whose id a new one may take, makes the probe stale. (A
        # structure is not: its handle is compared, as the full check compares it.)
        self._freed: list[bool] = []
        self._refs = [weakref.ref(array, self._on_free) for array in arrays]
        namespace.update(freed=self._freed)
        exec(compile(self.source, "<graphcheck owners probe>", "exec"), namespace)
        #: Whether the same live arrays are still at every place (the owners unchanged).
        self.unchanged: Callable[[], bool] = namespace["unchanged"]
        #: With ``replay``: replay (``replay[0](replay[1], stream)``) if :attr:`unchanged`, and say whether it did.
        self.replayed: Callable[[Any], bool] | None = namespace.get("replayed")

    @property
    def freed(self) -> bool:
        """Whether an array the graph baked was freed since (the probe is then stale)."""
        return bool(self._freed)

    def _on_free(self, _ref: Any) -> None:
        self._freed.append(True)


def _sequence_condition(name: str, sequence: Sequence[Any], number: int | str, namespace: dict[str, Any]) -> str:
    """The generated test that the list or tuple ``name`` still holds the objects ``sequence``
    holds now, in order; what it reads goes into ``namespace``.

    On CPython the item pointers are read where the sequence keeps them, through a view
    made now (a memoryview of a ctypes array at their address) and compared in place with
    the bytes expected (``bytes.startswith``: one memcmp, no copy, no ctypes call per
    launch): only once ``name`` is the very sequence (its type and id), so the views read
    live memory, and for a tuple of that length, for a list while its length and item
    storage are those it had (its ``ob_size`` and ``ob_item``, compared the same way). Another
    sequence holding the same objects (a list built again) is copied into a tuple, whose
    pointers are read. Elsewhere, a tuple of ids.
    """
    count, expected = len(sequence), struct.pack(f"{len(sequence)}P", *map(id, sequence))
    kind = type(sequence).__name__
    namespace[f"expected{number}"] = expected
    same = f"type({name}) is {kind} and id({name}) == {id(sequence)}"
    if kind == "tuple" and _TUPLE_ITEMS:
        same += f" and len({name}) == {count}"
        items_at = id(sequence) + _TUPLE_ITEMS
    elif kind == "list" and _LIST_ITEMS and _TUPLE_ITEMS:
        header = _view(id(sequence) + _LIST_SIZE, _LIST_ITEMS + _POINTER - _LIST_SIZE)  # ob_size, ob_item
        namespace[f"header{number}"] = header
        namespace[f"holds_header{number}"] = header.tobytes().startswith
        same += f" and holds_header{number}(header{number})"
        items_at = ctypes.c_void_p.from_address(id(sequence) + _LIST_ITEMS).value or 0
    else:
        namespace[f"expected{number}"] = tuple(map(id, sequence))
        return f"tuple(map(id, {name})) == expected{number}"
    namespace[f"items{number}"] = _view(items_at, len(expected))
    # bytes.startswith reads a buffer in place: with equal lengths, one memcmp.
    namespace[f"holds{number}"] = expected.startswith
    namespace["_pointers"] = _pointers
    return f"(({same} and holds{number}(items{number})) or _pointers({name}) == expected{number})"


def _view(address: int, nbytes: int) -> memoryview:
    """The ``nbytes`` bytes at ``address``, read in place whenever the view is read."""
    return memoryview((ctypes.c_char * nbytes).from_address(address))


def _value_condition(name: str, holder: Any, baked: tuple[bytes, ...], number: int, namespace: dict[str, Any]) -> str:
    """The generated test that ``name`` (the struct or command ``holder``, by the id the
    probe compares) still holds the bytes ``baked``; what it reads goes into ``namespace``.

    A struct's bytes are read through a view of the ctypes struct Warp updates in place; a
    command's parameters are first compared as a sequence (``set_param_*`` and ``set_dim``
    replace them), then each read through a view (one set in place).
    """
    kind, parts = _warp.baked_by_value(holder)  # type: ignore[misc]
    condition = ""
    if kind == "launch":
        namespace["_params"] = _warp.command_params
        namespace[f"params{number}"] = parts
        condition = _sequence_condition(f"_params({name})", parts, f"p{number}", namespace) + " and "
    views = []
    for part, (at, expected) in zip(parts, enumerate(baked)):
        namespace[f"view{number}_{at}"] = (ctypes.c_char * ctypes.sizeof(part)).from_buffer(part)
        namespace[f"bytes{number}_{at}"] = expected
        views.append(f"view{number}_{at}.raw == bytes{number}_{at}")
    return condition + " and ".join(views) if len(parts) == len(baked) else "False"


def _dict_condition(
    name: str, holder: Any, attributes: Sequence[str], number: int, namespace: dict[str, Any]
) -> str | None:
    """The generated test that the object ``name`` (``holder`` now) still has the very arrays
    ``holder`` has now as its ``attributes``; what it reads goes into ``namespace``. None where
    reading them from its ``__dict__`` in place could differ from looking them up.

    ``name.attribute`` is the value ``name``'s ``__dict__`` holds under that key when ``name``
    is of ``holder``'s class, whose ``__getattribute__`` is object's and which defines no data
    descriptor (property, slot) of that name. Then, once ``name``'s ``__dict__`` is the very
    dict ``holder`` has, and that dict's table (see :func:`_dict_table`) holds the same keys and
    values in the same order, every attribute is the same object: one comparison of bytes in
    place per part of the table, no lookup per array. A change anywhere in the dict (a number
    reassigned, an attribute added) fails that test, and the arrays are then looked up and
    compared as one tuple of them, as without it: correct either way, the dict's test only
    saves the lookups. (A class changed after the capture, a property added over an array's
    name, is taken not to happen.)
    """
    kind = type(holder)
    held = getattr(holder, "__dict__", None)
    if type(held) is not dict or kind.__getattribute__ is not object.__getattribute__:
        return None
    for attribute in attributes:
        if attribute not in held:
            return None
        for cls in kind.__mro__:
            if attribute in vars(cls):
                descriptor = type(vars(cls)[attribute])
                if hasattr(descriptor, "__set__") or hasattr(descriptor, "__delete__"):
                    return None  # a data descriptor: it answers, not the dict
                break
    table = _dict_table(held)
    if table is None:
        return None
    namespace[f"dict{number}_type"] = kind
    namespace[f"dict{number}_expected"] = struct.pack(f"{len(attributes)}P", *(id(held[a]) for a in attributes))
    namespace["_pointers"] = _pointers
    # Each part is read only once those before it matched, so that it reads live memory: the
    # dict's own pointers, then (once the dict still points to it) the keys object's sizes,
    # then (once it is as large as it was) its entries, then a split table's values (once the
    # count of keys it has values for is the same). bytes.startswith reads a buffer in place:
    # with equal lengths, one memcmp; a few bytes compare faster as two views of bytes ('B'),
    # which compare byte by byte.
    same = [f"type({name}) is dict{number}_type", f"id({name}.__dict__) == {id(held)}"]
    for part, (view, expected) in zip(("table", "sizes", "entries", "values"), table):
        if len(expected) <= _FEW_BYTES:
            namespace[f"dict{number}_{part}"] = view.cast("B")
            namespace[f"dict{number}_{part}_was"] = memoryview(expected)
            same.append(f"dict{number}_{part} == dict{number}_{part}_was")
        else:
            namespace[f"dict{number}_{part}"] = view
            namespace[f"dict{number}_same_{part}"] = expected.startswith
            same.append(f"dict{number}_same_{part}(dict{number}_{part})")
    one_by_one = ", ".join(f"{name}.{attribute}" for attribute in attributes)
    return f"(({' and '.join(same)}) or _pointers(({one_by_one},)) == dict{number}_expected)"


def _dict_table(held: dict[Any, Any]) -> list[tuple[memoryview, bytes]] | None:
    """Views of what decides which value ``held`` gives for each key, each with the bytes it
    holds now; None where ``held``'s table is not laid out as read here (see ``_DICT_KEYS``).

    The parts, in the order they must be compared: the dict's keys and values pointers
    (``ma_keys``; ``ma_values``, NULL for a combined table); the keys object's sizes
    (``dk_log2_size``, ``dk_log2_index_bytes``, ``dk_kind``); its count of entries
    (``dk_nentries``), index table and entries (a (key, value) pair of pointers each, all
    keys str), which follow one another; for a split table (keys shared by a class's
    instances, each entry's value NULL), its values, one pointer per entry, NULL for a key
    this dict lacks. Neither ``dk_version``, which the interpreter's caches set, nor
    ``dk_usable`` is read.
    """
    return _read_table(held, _DICT_KEYS, _SPLIT_VALUES) if _DICT_KEYS else None


def _read_table(
    held: dict[Any, Any], keys_offset: int, values_offset: int | None
) -> list[tuple[memoryview, bytes]] | None:
    table_at = id(held) + keys_offset
    keys, values = struct.unpack("2P", ctypes.string_at(table_at, 2 * _POINTER))
    if not keys or (values and values_offset is None):
        return None
    header = ctypes.string_at(keys, _KEYS_INDICES)
    (count,) = struct.unpack_from("n", header, _KEYS_COUNT)
    entries_at = keys + _KEYS_INDICES + (1 << header[_KEYS_SIZES + 1])
    # The count, the index table and the entries lie one after the other: one part.
    end = entries_at + 2 * _POINTER * count
    parts = [(table_at, 2 * _POINTER), (keys + _KEYS_SIZES, 3), (keys + _KEYS_COUNT, end - keys - _KEYS_COUNT)]
    if not values:
        expected = struct.pack(f"{2 * len(held)}P", *(id(part) for item in held.items() for part in item))
        if count != len(held) or ctypes.string_at(entries_at, len(expected)) != expected:
            return None  # entries deleted, or keys that are not all str (a hash in each entry)
    else:
        entries = struct.unpack(f"{2 * count}P", ctypes.string_at(entries_at, 2 * _POINTER * count))
        value_of = {id(key): id(value) for key, value in held.items()}
        if any(entries[1::2]) or not value_of.keys() <= set(entries[::2]):
            return None
        expected = struct.pack(f"{count}P", *(value_of.get(key, 0) for key in entries[::2]))
        values_at = values + (values_offset or 0)
        if ctypes.string_at(values_at, len(expected)) != expected:
            return None
        parts.append((values_at, len(expected)))
    return [(_view(at, size), ctypes.string_at(at, size)) for at, size in parts]


def _pointers(sequence: Any) -> bytes:
    """The object pointers a copy of ``sequence`` into a tuple holds, as bytes (CPython: equal
    to their ids packed). The tuple is held while it is read."""
    objects = tuple(sequence)
    return ctypes.string_at(id(objects) + _TUPLE_ITEMS, _POINTER * len(objects))


# Where a CPython tuple's items start (they follow its fixed part inline), where a list
# keeps the pointer to its items (after its fixed part) and its length (just before); 0
# where objects are laid out otherwise (checked on a live tuple and list), and the probe
# compares tuples of ids.
_POINTER = struct.calcsize("P")
# From how many arrays on their own a probe compares them as one tuple's item pointers.
_MANY = 16
# From how many arrays in one object's __dict__ a probe compares that dict's table instead.
_IN_DICT = 8
# Up to how many bytes a part of a dict's table is compared as a view of bytes (see _dict_condition).
_FEW_BYTES = 64


def _layout_offsets() -> tuple[int, int, int]:
    if sys.implementation.name != "cpython":
        return 0, 0, 0
    objects = (object(), object())
    expected = struct.pack("2P", *map(id, objects))
    tuple_items = tuple.__basicsize__ if tuple.__itemsize__ == _POINTER else 0
    if tuple_items and ctypes.string_at(id(objects) + tuple_items, 2 * _POINTER) != expected:
        tuple_items = 0
    as_list = list(objects)
    list_items = list.__basicsize__ - 2 * _POINTER  # ob_item, then allocated
    list_size = list_items - _POINTER  # ob_size, just before ob_item
    storage = ctypes.c_void_p.from_address(id(as_list) + list_items).value
    if (
        not storage
        or ctypes.string_at(storage, 2 * _POINTER) != expected
        or ctypes.c_ssize_t.from_address(id(as_list) + list_size).value != len(as_list)
    ):
        list_items = list_size = 0
    return tuple_items, list_items, list_size


_TUPLE_ITEMS, _LIST_ITEMS, _LIST_SIZE = _layout_offsets()

# A dict's table, read in place (CPython 3.11 and later, with the GIL): a dict ends with its
# ma_keys and ma_values pointers (_DICT_KEYS: where, 0 elsewhere); its keys object holds
# dk_log2_size, dk_log2_index_bytes and dk_kind at _KEYS_SIZES, dk_nentries at _KEYS_COUNT,
# then from _KEYS_INDICES its index table (1 << dk_log2_index_bytes bytes) and its entries;
# a split table's values start _SPLIT_VALUES bytes after ma_values (3.13 puts 4 bytes of
# sizes and flags first), None where that did not hold. Checked at import on live objects'
# dicts, a combined and a split one, and again on each dict a probe reads.
_KEYS_SIZES, _KEYS_COUNT, _KEYS_INDICES = 8, 24, 32


class _Sample:
    """An object of a few attributes: its ``__dict__`` is a split table (keys shared by the class)."""


def _dict_layout() -> tuple[int, int | None]:
    if (
        sys.implementation.name != "cpython"
        or sys.version_info < (3, 11)
        or sysconfig.get_config_var("Py_GIL_DISABLED")
        or dict.__basicsize__ < 6 * _POINTER
        or not _TUPLE_ITEMS  # (where the dict changed, the arrays are compared as a tuple's pointers)
    ):
        return 0, None

    def holds(table: list[tuple[memoryview, bytes]] | None) -> bool:
        return table is not None and all(expected.startswith(view) for view, expected in table)

    keys_offset = dict.__basicsize__ - 2 * _POINTER
    combined = types.SimpleNamespace(**{f"a{i}": object() for i in range(40)})
    if not holds(_read_table(vars(combined), keys_offset, None)):
        return 0, None
    split = _Sample()
    for i in range(4):
        setattr(split, f"a{i}", object())
    values_offset = 0 if sys.version_info < (3, 13) else _POINTER
    return keys_offset, values_offset if holds(_read_table(vars(split), keys_offset, values_offset)) else None


_DICT_KEYS, _SPLIT_VALUES = _dict_layout()

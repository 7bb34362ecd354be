"""The buffers a producer owns: the walk of the owners.

:func:`buffers_of` collects every Warp array reachable from a producer (a simulator,
an environment, a closure) into a :class:`~graphcheck.BufferSet` labelled by path
(``sim.state.x``); :meth:`BufferSet.locate <graphcheck.BufferSet.locate>` then says which
buffer, and at which offset, holds an address (:mod:`graphcheck.buffer_set`).
:func:`holders_of` walks once for the buffers and for the structs and ``wp.Launch``
commands the owners hold, with every path to each array.
"""

from __future__ import annotations

import array
import dataclasses
import functools
import itertools
import mmap
import types
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _warp
from ._memo import remember
from ._words import article
from .buffer_set import KEPT, PLAIN, WITHIN, Buffer, BufferSet, reach_index

__all__ = ["Buffer", "BufferSet", "arrays_of", "buffers_of", "holders_of", "reach_index"]


# Never entered: plain values, code, modules, numpy data.
_LEAVES = (
    str, bytes, bytearray, int, float, complex, bool, type(None), type, range,
    types.ModuleType, types.BuiltinFunctionType, types.CodeType, types.FrameType,
    np.ndarray, np.generic,
)  # fmt: skip


def buffers_of(*objects: Any, root: str | Sequence[str] | None = None, max_depth: int = 12) -> BufferSet:
    """Every Warp array reachable from ``objects``, labelled by the path to it.

    The walk goes through attributes (``__dict__`` and ``__slots__``), dataclass fields,
    ``@wp.struct`` fields (and the arrays a struct keeps beside them), mappings (their keys
    too: ``{param: state}``), sequences and sets, the variables a function holds (those it
    closes over and its parameters' defaults: ``lambda v, f=field: ...``), a
    ``functools.partial``'s function, arguments and keywords, the object a bound method is
    bound to, and the members of any other container whose iteration is built in (a
    ``collections.deque``, a dict view), up to ``max_depth`` levels; each array's gradient
    and an indexed array's indices are collected too (``<path>.grad``). An iterator or
    generator is never iterated (that would consume it), nor a container whose ``__iter__``
    is Python code; what a weak mapping or weak reference holds weakly is not owned. Warp's
    own containers (optimizers, fem fields, sparse matrices, meshes, hash grids, BVHs,
    volumes) are entered; Warp's handles (devices, streams, kernels, modules, graphs),
    modules, types and a function's globals are not. A numpy array the objects hold counts
    as an owned host buffer. Each object is visited once, so cycles are safe.

    Labels spell the way in: ``sim.state.x`` (attribute), ``sim.buffers[2]`` (item),
    ``sim.named['v']`` (a key that is a plain value), ``sim.moments.keys()[0]`` and
    ``sim.moments.values()[0]`` (the first key of a mapping keyed by other objects, and
    its value), ``sim.update.<f>`` (a function's variable), ``sim.pending{0}`` (a member
    of a set or of a container that cannot be indexed).

    Args:
        objects: the producer and anything else it runs on.
        root: the label of each object: one string for one object, one per object, or
            None for ``obj0``, ``obj1``...
        max_depth: how many levels deep to look.

    Returns:
        A :class:`BufferSet` with labels like ``"sim.state.x"`` and ``"sim.buffers[2]"``.

    Raises:
        TypeError: when ``root`` does not give one label per object, or an object cannot hold
            arrays (a number, a string, None).
    """
    _check_holders(objects)
    return _walk(objects, root, max_depth, None)


def _check_holders(objects: Sequence[Any]) -> None:
    """A TypeError for a value that cannot hold a buffer (``buffers_of(42)``): the user's mistake, not an empty set."""
    for obj in objects:
        if obj is None or isinstance(obj, (str, bytes, int, float, complex)):
            raise TypeError(
                f"buffers_of() takes the objects that hold Warp arrays (a simulator, a state, arrays), got {obj!r} "
                f"({article(type(obj).__name__)}, which holds none)"
            )


def _check_root(root: Any) -> None:
    """A TypeError for a label that is no string (``root=3``)."""
    labels = [root] if isinstance(root, str) or root is None else root
    if not isinstance(labels, (list, tuple)) or not all(isinstance(r, str) or r is None for r in labels):
        raise TypeError(
            f"buffers_of(root=...) takes a label (a str, such as 'sim') or one label per object, got {root!r}"
        )


def arrays_of(*objects: Any, root: str | Sequence[str] | None = None, max_depth: int = 12) -> list[tuple[str, Any]]:
    """``(path, array)`` of every Warp array :func:`buffers_of` finds, in the order it finds them.

    The same walk and the same labels, with the arrays themselves, to read what they hold.
    """
    found: list[tuple[str, Any]] = []
    _walk(objects, root, max_depth, found)
    return found


def holders_of(
    *objects: Any,
    root: str | Sequence[str] | None = None,
    max_depth: int = 12,
    remade: Collection[int] = (),
    every_path: bool = False,
) -> tuple[BufferSet, list[tuple[str, Any]]]:
    """:func:`buffers_of`, and ``(path, object)`` of every ``@wp.struct`` instance and
    ``wp.Launch`` command the same walk passes: the objects whose bytes a graph bakes by
    value (a struct's fields, a command's parameters), where it found them.

    The set also knows the paths by which the walk reached each array that lead through such
    an object or an indexed array (:meth:`BufferSet.kept_paths`: the objects built once that
    keep a buffer however the owners name it elsewhere; ``remade``: the ids of those a call
    re-derived, which keep nothing), and the other names of an array first met through one;
    with ``every_path``, every path to every array."""
    holders: list[tuple[str, Any]] = []

    def visit(path: str, obj: Any) -> bool:
        if _warp.baked_by_value(obj) is None:
            return False
        holders.append((path, obj))
        return True

    return _walk(objects, root, max_depth, None, visit, paths=[], remade=remade, every_path=every_path), holders


def _walk(
    objects: Sequence[Any],
    root: str | Sequence[str] | None,
    max_depth: int,
    found: list[tuple[str, Any]] | None,
    visit: Callable[[str, Any], bool] | None = None,
    paths: list[tuple[str, int, int, int]] | None = None,
    remade: Collection[int] = (),
    every_path: bool = False,
) -> BufferSet:
    _check_root(root)
    if isinstance(root, str):
        roots = [root] if len(objects) == 1 else [f"{root}{i}" for i in range(len(objects))]
    elif root is None:
        roots = [f"obj{i}" for i in range(len(objects))]
    else:
        roots = [str(r) for r in root]
        if len(roots) != len(objects):
            raise TypeError(f"buffers_of() got {len(objects)} object(s) but {len(roots)} root label(s): {roots!r}")
    out = BufferSet()
    buffers = out._buffers
    seen: set[int] = set()
    array_span = _warp.array_span
    array_parts = _warp.array_parts
    structure_handle = _warp.structure_handle
    # With ``paths``: the paths of the structs, commands and indexed arrays passed, and of what
    # lies inside them (``inside``: those built once; ``within``: all), and each array's span,
    # to name it again where it is met again.
    inside: set[str] = set()
    within: set[str] = set()
    spans: dict[int, tuple[int, int, int]] = {}  # id -> (start, end, how it was first met)

    # An explicit stack, not recursion: deep object graphs must not hit the recursion
    # limit. Entries are (object, parent's path, key, how the key joins the path, depth);
    # a path is only formatted for objects that are looked into, and plain values are
    # never pushed.
    stack: list[tuple[Any, str, Any, int, int]] = [(obj, name, None, _SAME, 0) for obj, name in zip(objects, roots)]
    stack.reverse()
    while stack:
        obj, parent, key, join, depth = stack.pop()
        if id(obj) in seen:
            if paths is not None and id(obj) in spans:  # an array met again, by another path
                start, end, first = spans[id(obj)]
                how = KEPT if parent in inside else WITHIN if parent in within else PLAIN
                if every_path or how != PLAIN or first != PLAIN:  # one met first by a name is labelled by it
                    paths.append((_JOINS[join](parent, key), start, end, how))
            continue
        branch = _BRANCHES.get(type(obj))
        if branch is None:
            branch = _branch_of(obj)
        if branch == _ARRAY:
            seen.add(id(obj))
            span = array_span(obj)
            parts = array_parts(obj)
            if span is None and not parts and found is None:
                continue  # a null array (an empty one, as simulators hold by the hundred): nothing to name
            path = _JOINS[join](parent, key)
            if span is not None:
                buffers.append(Buffer(span[0], span[1], path))
                if paths is not None:
                    # An indexed array holds its data (one made again each call keeps nothing).
                    indexed = bool(parts) and any(name == "data" for name, _ in parts)
                    kept = parent in inside or (indexed and id(obj) not in remade)
                    how = KEPT if kept else WITHIN if indexed or parent in within else PLAIN
                    spans[id(obj)] = (span[0], span[1], how)
                    if every_path or how != PLAIN:
                        paths.append((path, *span, how))
                    if kept:
                        inside.add(path)
                    if how != PLAIN:
                        within.add(path)
            if found is not None:
                found.append((path, obj))
            for name, inner in parts:
                stack.append((inner, path, name, _ATTR, depth))
            continue
        path = _JOINS[join](parent, key)
        if branch == _HOST_ARRAY:
            # Host memory the producer keeps (a staging array): owned like its Warp arrays.
            seen.add(id(obj))
            span = _host_span(obj)
            if span is not None:
                buffers.append(Buffer(span[0], span[1], path))
            continue
        if branch == _LEAF:
            if type(obj) not in _LEAF_TYPES:  # an enum member, a numpy scalar: later ones are not pushed
                if len(_LEAF_TYPES) >= 4096:
                    _LEAF_TYPES.intersection_update(_PLAIN_LEAF_TYPES)  # classes made on the fly are not kept
                _LEAF_TYPES.add(type(obj))
            continue
        if branch == _STRUCTURE:
            handle = structure_handle(obj)
            if handle is not None:
                # A mesh, hash grid, BVH or volume reaches kernels as its id: owned as a one-byte
                # handle, so a structure rebuilt after capture is a stale handle in the graph.
                buffers.append(Buffer(handle, handle + 1, f"{path}.id"))
        if depth > max_depth:
            continue
        seen.add(id(obj))
        holder = visit(path, obj) if visit is not None else False  # a struct or a command: its bytes hold addresses
        if paths is not None and (holder or parent in within):
            within.add(path)
            if (holder and id(obj) not in remade) or parent in inside:
                inside.add(path)
        items: Any
        if branch == _SEQUENCE:
            items, join = enumerate(obj), _INDEX
        elif branch == _DICT:
            stack.extend(_entries(list(obj.items()), path, depth + 1))
            continue
        elif branch == _STRUCT:
            items, join = _warp.struct_attributes(obj), _ATTR
        elif branch == _HANDLE:
            continue
        elif branch == _METHOD:
            items, join = [(None, obj.__self__)], _SAME
        elif branch == _FUNCTION:
            items, join = _variables(obj), _VARIABLE
        elif branch == _PARTIAL:
            items, join = [("func", obj.func), ("args", obj.args), ("keywords", obj.keywords), *_attributes(obj)], _ATTR
        elif branch == _MAPPING:
            try:
                entries = list(obj.items())
            except Exception:  # a mapping whose items() fails is looked into no further
                continue
            # What a weak mapping holds weakly, it does not own: it may vanish under the graph.
            keys, values = (
                not isinstance(obj, weakref.WeakKeyDictionary),
                not isinstance(obj, weakref.WeakValueDictionary),
            )
            stack.extend(_entries(entries, path, depth + 1, keys=keys, values=values))
            continue
        elif branch == _SET:
            items, join = enumerate(obj), _MEMBER
        else:  # any other object (a structure too): its attributes, and the members of a built-in container
            items, join = _attributes(obj), _ATTR
            kind = type(obj)
            members = _MEMBERS.get(kind)
            if members is None:
                members = remember(_MEMBERS, kind, _members_join(kind))  # (bounded: classes made on the fly)
            if members:
                try:
                    held = list(iter(obj))  # built-in iteration, sized by its iterator: no user code runs
                except Exception:  # changed size while iterated (another thread): not looked into
                    held = []
                inner = [(v, path, i, members, depth + 1) for i, v in enumerate(held) if type(v) not in _LEAF_TYPES]
                inner.reverse()
                stack.extend(inner)
        children = [(v, path, k, join, depth + 1) for k, v in items if type(v) not in _LEAF_TYPES]
        children.reverse()
        stack.extend(children)
    out._dirty = True
    out._paths = paths
    return out


_SAME, _ATTR, _INDEX, _KEY, _VARIABLE, _MEMBER, _NTH_KEY, _NTH_VALUE = range(8)
_JOINS: tuple[Callable[[str, Any], str], ...] = (
    lambda parent, key: parent,
    lambda parent, key: f"{parent}.{key}",
    lambda parent, key: f"{parent}[{key}]",
    lambda parent, key: f"{parent}[{key!r}]",
    lambda parent, key: f"{parent}.<{key}>",
    lambda parent, key: f"{parent}{{{key}}}",
    lambda parent, key: f"{parent}.keys()[{key}]",
    lambda parent, key: f"{parent}.values()[{key}]",
)
# What the walk does with an object (see _branch_of).
_ARRAY, _HOST_ARRAY, _LEAF, _STRUCTURE, _SEQUENCE, _DICT, _STRUCT, _HANDLE, _METHOD, _FUNCTION, _PARTIAL, _MAPPING, \
    _SET, _OBJECT = range(14)  # fmt: skip


def _branch_of(obj: Any) -> int:
    """What the walk does with ``obj``: the first of its questions that ``obj`` answers yes.

    The answers are kept per type (:data:`_BRANCHES`) where the type alone gives them: the
    walk meets hundreds of objects of a few types (arrays, a model's attribute specs), and
    asks each type its dozen questions once. Not kept for a type that looks attributes up
    its own way or has a ``__class__`` of its own (a proxy, a mock), whose objects can
    answer otherwise one by one.
    """
    kind = type(obj)
    if _warp.is_array(obj):
        branch = _ARRAY
    elif isinstance(obj, _warp.structure_classes()):
        branch = _STRUCTURE  # a plain object to the questions below; reaches kernels by its id
    elif kind is np.ndarray:
        branch = _HOST_ARRAY
    elif isinstance(obj, _LEAVES):
        branch = _LEAF
    elif kind is list or kind is tuple:
        branch = _SEQUENCE
    elif kind is dict:
        branch = _DICT
    elif _warp.is_struct_instance(obj):
        branch = _STRUCT
    elif _warp.is_warp_handle(obj):
        branch = _HANDLE
    elif isinstance(obj, types.MethodType):
        branch = _METHOD
    elif isinstance(obj, types.FunctionType):
        branch = _FUNCTION
    elif isinstance(obj, functools.partial):
        branch = _PARTIAL
    elif isinstance(obj, Mapping):
        branch = _MAPPING
    elif isinstance(obj, (list, tuple)):
        branch = _SEQUENCE
    elif isinstance(obj, (set, frozenset)):
        branch = _SET
    else:
        branch = _OBJECT
    if kind in _BUILT_IN_CONTAINERS or (
        kind.__getattribute__ is object.__getattribute__ and not any("__class__" in vars(c) for c in kind.__mro__[:-1])
    ):
        remember(_BRANCHES, kind, branch)  # (bounded: classes made on the fly)
    return branch


# Built-in containers, which look attributes up their own way (in C) but whose objects are
# of their class and no other.
_BUILT_IN_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


#: type -> what the walk does with its objects (see _branch_of).
_BRANCHES: dict[type, int] = {}
_PLAIN_LEAF_TYPES: frozenset[type] = frozenset({str, bytes, int, float, bool, complex, type(None)})
# Types whose objects are never pushed onto the walk's stack: the plain values, and every
# type the walk met as a leaf (an IntEnum's members: Newton's models hold hundreds).
_LEAF_TYPES: set[type] = set(_PLAIN_LEAF_TYPES)
# Mapping keys a label spells as themselves (``['v']``); any other key (an array, a struct,
# an object) by its position (``.keys()[0]``): its repr could be long, costly or user code.
_PLAIN_KEYS = frozenset({str, int})


def _entries(
    pairs: list[tuple[Any, Any]], path: str, depth: int, *, keys: bool = True, values: bool = True
) -> list[tuple[Any, str, Any, int, int]]:
    """The stack entries of a mapping's keys and values (those it holds strongly: ``keys``,
    ``values``), in reverse order, so that they are popped in order."""
    out = []
    for i, (key, value) in enumerate(pairs):
        plain = type(key) in _PLAIN_KEYS
        if keys and not plain and type(key) not in _LEAF_TYPES:
            out.append((key, path, i, _NTH_KEY, depth))
        if values and type(value) not in _LEAF_TYPES:
            out.append((value, path, key, _KEY, depth) if plain else (value, path, i, _NTH_VALUE, depth))
    out.reverse()
    return out


def _variables(fn: types.FunctionType) -> list[tuple[str, Any]]:
    """``(name, value)`` of every variable a function holds a value for: those it closes
    over, then its parameters' defaults (see :func:`variable`)."""
    code = fn.__code__
    out = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            out.append((name, cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    defaults = fn.__defaults__
    if defaults:
        positional = code.co_varnames[: code.co_argcount]
        out.extend(zip(positional[len(positional) - len(defaults) :], defaults))
    if fn.__kwdefaults__:
        out.extend(fn.__kwdefaults__.items())
    return out


def variable(fn: types.FunctionType, name: str) -> Any:
    """The value function ``fn`` holds for its variable ``name`` (a label's ``.<name>``): the
    variable it closes over, else its parameter's default.

    Raises:
        LookupError: when ``fn`` holds no value for ``name``.
        ValueError: when the closed-over variable is not bound.
    """
    code = fn.__code__
    if name in code.co_freevars:
        return fn.__closure__[code.co_freevars.index(name)].cell_contents  # type: ignore[index]
    if fn.__kwdefaults__ and name in fn.__kwdefaults__:
        return fn.__kwdefaults__[name]
    positional = code.co_varnames[: code.co_argcount]
    defaults = fn.__defaults__ or ()
    first = len(positional) - len(defaults)
    if name in positional[first:]:
        return defaults[positional.index(name, first) - first]
    raise LookupError(f"{fn.__qualname__} holds no variable {name!r}")


def nth(iterable: Iterable[Any], position: int) -> Any:
    """The item at ``position`` of ``iterable`` (a label's ``.keys()[i]`` and ``.values()[i]``).

    Raises:
        IndexError: when there are fewer items.
    """
    for item in itertools.islice(iterable, position, None):
        return item
    raise IndexError(f"no item at position {position}")


# Containers (of no kind above) whose members are walked, by type: None when not yet decided,
# else how their members join a path (0: not iterated).
_MEMBERS: dict[type, int] = {}
# Built-in iterables of plain values: iterating them finds no array and costs one object a byte.
_PLAIN_ITERABLES = (array.array, memoryview, mmap.mmap)
_ARRAY_INTERFACES = ("__array_interface__", "__cuda_array_interface__", "__dlpack__", "__array__")


def _members_join(kind: type) -> int:
    """How the members of a ``kind`` object join a path when the walk iterates them: ``_INDEX``
    for a sequence (``collections.deque``), ``_MEMBER`` for another container (a dict view),
    0 for no iteration at all.

    Iterated are only containers whose iteration is built in (``__iter__`` implemented in C),
    so that no user code runs, and that are not iterators themselves: iterating an iterator
    or a generator would consume it. Nor are arrays of numbers (a CuPy array, anything with
    an array interface): they hold no Warp array, and iterating one costs an object an item.
    """
    method = getattr(kind, "__iter__", None)
    if (
        method is None
        or hasattr(kind, "__next__")
        or issubclass(kind, _PLAIN_ITERABLES)
        or any(hasattr(kind, name) for name in _ARRAY_INTERFACES)
        or not isinstance(method, (types.WrapperDescriptorType, types.MethodDescriptorType))
    ):
        return 0
    return _INDEX if issubclass(kind, Sequence) else _MEMBER


def _host_span(array: np.ndarray) -> tuple[int, int] | None:
    if not array.size or array.dtype.hasobject:
        return None
    start = array.__array_interface__["data"][0]
    if array.flags.c_contiguous:  # what the sums below come to (only a dimension of 1 may have another stride)
        return start, start + array.nbytes
    low = sum((n - 1) * st for n, st in zip(array.shape, array.strides) if st < 0)
    high = sum((n - 1) * st for n, st in zip(array.shape, array.strides) if st > 0)
    return start + low, start + high + array.itemsize


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of an object's dataclass fields, ``__dict__`` entries and slots, in that order."""
    kind = type(obj)
    plan = _ATTRIBUTE_PLANS.get(kind)
    if plan is None:
        plan = remember(_ATTRIBUTE_PLANS, kind, _attribute_plan(kind))  # (bounded: classes made on the fly)
    fields, slots, plain = plan
    d = getattr(obj, "__dict__", None)
    if plain and type(d) is dict and (not fields or tuple(itertools.islice(d, len(fields))) == fields):
        # The usual object: its fields (if any) are entries of its __dict__, read there as
        # getattr would, and first in it, in their order (as a dataclass's __init__ sets
        # them): its entries are the attributes, in order, each read once.
        return list(d.items())
    attrs: dict[str, Any] = {}
    for name in fields:
        try:
            attrs[name] = getattr(obj, name)
        except AttributeError:
            pass
    if isinstance(d, dict):
        for k, v in d.items():
            attrs.setdefault(str(k), v)
    for slot in slots:
        if slot in attrs:
            continue
        try:
            attrs[slot] = getattr(obj, slot)
        except AttributeError:
            pass
    return list(attrs.items())


# type -> (its dataclass fields' names, its slots' names along the MRO, whether its __dict__
# alone answers for its attributes): what _attributes reads, worked out once per type (the
# walk meets hundreds of objects of a few types).
_ATTRIBUTE_PLANS: dict[type, tuple[tuple[str, ...], tuple[str, ...], bool]] = {}


def _attribute_plan(kind: type) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    fields = tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else ()
    slots: list[str] = []
    for cls in kind.__mro__:
        names = cls.__dict__.get("__slots__", ())
        if isinstance(names, str):
            names = (names,)
        slots += [name for name in names if name not in ("__dict__", "__weakref__")]
    # getattr reads a field from __dict__ unless the class looks attributes up its own way or
    # a data descriptor of the class (a property) takes the name over.
    plain = (
        not slots
        and kind.__getattribute__ is object.__getattribute__
        and not any(_data_descriptor(kind, name) for name in fields)
    )
    return fields, tuple(slots), plain


def _data_descriptor(kind: type, name: str) -> bool:
    """Whether the class attribute ``name`` of ``kind`` (along its MRO) is a data descriptor."""
    for cls in kind.__mro__:
        if name in cls.__dict__:
            handler = type(cls.__dict__[name])
            return hasattr(handler, "__set__") or hasattr(handler, "__delete__")
    return False

"""The recording fast path's own form of an eager CPU launch: a tuple of ids, bytes and
numbers, made a :class:`~graphcheck.LaunchRecord` only when read (:func:`from_raw`).

Every eager CPU launch passes the recorder while a trace is active, so the recorder keeps
what it needs at the least cost (:mod:`graphcheck._session`): the kernel by the id of an
object held for good (:func:`hold`), the parameter block as Warp packed it, split into
parameters once per layout (:func:`hold_param_sizes`, :func:`split_block`). A reference
call compared with its capture launch by launch is read without making its records
(:func:`same_launch`).
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Callable
from typing import Any

from . import _warp
from ._memo import remember
from .operations import LaunchRecord

__all__ = ["from_raw", "hold", "hold_param_sizes", "same_launch", "seq_of", "split_block", "struct_block"]


#: Objects a kept record names by id (kernels and code objects of the recording fast
#: path), held for good so that an id is never reused.
_held: dict[int, Any] = {}


#: How a recorded parameter block splits into parameters, one call each (an
#: ``operator.itemgetter`` of slices): by ``(id of the held kernel, adjoint)`` for an
#: eager launch's joined parameters, by the types of Warp's argument structs for a launch
#: inside a capture (their fields padded as C lays them out).
_splitters: dict[tuple[Any, Any], Callable[[bytes], tuple[bytes, ...]]] = {}


def hold(obj: Any) -> int:
    """Keep ``obj`` for good; returns its id, by which records name it."""
    _held.setdefault(id(obj), obj)
    return id(obj)


def _splitter(slices: list[tuple[int, int]]) -> Callable[[bytes], tuple[bytes, ...]]:
    if len(slices) == 1:  # an itemgetter of one item returns the item, not a tuple
        start, end = slices[0]
        return lambda block: (block[start:end],)
    return operator.itemgetter(*[slice(start, end) for start, end in slices])


def hold_param_sizes(kernel: Any, adjoint: bool, sizes: tuple[int, ...]) -> None:
    """How one joined parameter block of ``kernel`` splits into parameters."""
    slices, offset = [], 0
    for size in sizes:
        slices.append((offset, offset + size))
        offset += size
    _splitters[(hold(kernel), adjoint)] = _splitter(slices)


_NoneType = type(None)


def struct_block(bounds: Any, args: Any, adjoint: Any) -> tuple[bytes, tuple[Any, Any]]:
    """The parameter block of a CPU launch Warp made as structs (the launch bounds, the
    argument struct, the adjoint one or None), as one ``bytes``, and the key that splits it
    (:func:`split_block`)."""
    return b"".join([s for s in (bounds, args, adjoint) if s is not None]), (type(args), type(adjoint))


def split_block(block: bytes, key: tuple[Any, Any]) -> tuple[bytes, ...]:
    """The parameters of a block :func:`struct_block` joined: the launch bounds, then each
    field of each struct, its padding left out."""
    split = _splitters.get(key)
    if split is None:
        args_type, adjoint_type = key
        structs = [t for t in (args_type, adjoint_type) if t is not _NoneType]
        offset = len(block) - sum(ctypes.sizeof(t) for t in structs)  # past the launch bounds
        slices = [(0, offset)]
        for struct_type in structs:
            slices += [(offset + at, offset + at + size) for at, size in _warp.struct_param_slices(struct_type)]
            offset += ctypes.sizeof(struct_type)
        split = _splitters[key] = _splitter(slices)
    return split(block)


_cpu_block_dims: dict[Any, int] = {}


def _cpu_block_dim(asked: Any) -> int:
    """The block size a CPU launch that asked for ``asked`` ran with (one answer per value)."""
    try:
        resolved = _cpu_block_dims.get(asked)
    except TypeError:  # not hashable: asked of Warp each time
        return _warp.resolve_block_dim("cpu", asked)
    if resolved is None:
        resolved = _cpu_block_dims[asked] = _warp.resolve_block_dim("cpu", asked)
    return resolved


# (id of the held kernel, adjoint, the raw record's length, parameter block) -> its
# parameters (an eager block and a captured one are laid out differently).
_split_blocks: dict[tuple[int, bool, int, bytes], tuple[bytes, ...]] = {}


def _params_of(raw: tuple[Any, ...]) -> tuple[bytes, ...]:
    """The parameters of a launch the fast path kept (see :func:`from_raw`).

    A step repeats the same launches (every substep, every iteration): launches with the
    same block share one split, whose bytes then hash once (decoded()) and compare by
    identity (same_params).
    """
    kernel_id, adjoint, params = raw[:3]
    if type(params) is not bytes:
        return params
    key = (kernel_id, adjoint, len(raw), params)
    split = _split_blocks.get(key)
    if split is None:
        split = _splitters[(kernel_id, adjoint)](params) if len(raw) == 7 else split_block(params, (raw[8], _NoneType))
        remember(_split_blocks, key, split)
    return split


def from_raw(raw: tuple[Any, ...]) -> LaunchRecord:
    """The record of a launch the fast path kept (see :mod:`graphcheck._session`): an eager
    CPU launch (7 items: the parameters joined into one bytes, or a tuple of bytes) or a
    forward CPU launch inside a capture (9 items: Warp's launch bounds and argument struct
    joined, then the block size asked for and the argument struct's type). A raw launch
    holds the place of the latest allocation made before it, and stands at the odd place
    just after it (see ``_session._sequence``)."""
    kernel_id, adjoint, _, max_blocks, code, lasti, after = raw[:7]
    block_dim = 1 if len(raw) == 7 else _cpu_block_dim(raw[7])
    record = LaunchRecord(
        "launch", _held[kernel_id], adjoint, _params_of(raw), None, "cpu", block_dim, max_blocks or 0, None,
        code, lasti, "launch", False, after + 1,
    )  # fmt: skip
    if len(raw) == 7:
        record.uncaptured = 0  # an eager launch: it ran at once (no CPU capture was recording)
    return record


def seq_of(item: Any) -> int:
    """The :attr:`~LaunchRecord.seq` of what a trace holds: a record, or a raw launch (whose
    record :func:`from_raw` would make), left unread."""
    return item[6] + 1 if type(item) is tuple else item.seq


def same_launch(raw: Any, record: LaunchRecord) -> bool:
    """Whether ``record`` would bake the same graph node as the eager CPU launch ``raw``
    kept by the recording fast path, without making raw's record: what comparing
    ``from_raw(raw)`` with ``record`` would say when they are alike (False: compare them).

    A reference call and its capture launch alike at every safe site: comparing them
    this way leaves the reference call's launches unread.
    """
    if type(raw) is not tuple or len(raw) != 7:
        return False
    kernel_id, adjoint, _, max_blocks = raw[:4]
    if (
        record.kind != "launch"
        or id(record.kernel_object) != kernel_id
        or record.adjoint != adjoint
        or record.max_blocks != (max_blocks or 0)
        or record.block_dim != 1
        or record.tile_block_dim is not None
        or record.stream is not None
        or record.nested
        or record.internal
    ):
        return False
    params = record._params
    return _params_of(raw) == (params if type(params) is tuple else record.param_bytes)

"""Buffer swaps that carry no state: two owned buffers that trade places between the
calls, each overwritten whole before it is read in both (a ping-pong whose every step
starts afresh), are a remark, not a ``buffer-drift``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _warp
from ..params import ArrayRef

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..compare import Difference
    from ..operations import LaunchRecord
    from ..record import LaunchTrace

__all__ = ["carrying_state", "overwritten_first", "swapped_pair"]


def carrying_state(
    diffs: list[Difference],
    reference: LaunchTrace,
    captured: LaunchTrace,
    buffers: BufferSet | None,
    remarks: list[str] | None,
) -> list[Difference]:
    """``diffs`` less the buffer swaps that carry no state: two owned buffers that trade
    places between the calls, each overwritten whole before it is read in both calls
    (see :func:`overwritten_first`). Whichever of the two a replay writes first, it reads
    only what the call itself wrote, as eager stepping does; by name too, since every
    replay leaves them as the capture's call did. Each such pair is said in ``remarks``."""
    if buffers is None or not any(d.is_array for d in diffs):
        return diffs
    kept, stateless = [], {}
    judged: dict[tuple[Any, ...], bool] = {}
    for diff in diffs:
        pair = swapped_pair(diff, buffers)
        if pair is not None:
            if pair not in judged:
                judged[pair] = all(overwritten_first(t, b) for t in (reference, captured) for b in pair)
            if judged[pair]:
                stateless[frozenset(pair)] = pair
                continue
        kept.append(diff)
    if remarks is not None:
        for a, b in stateless.values():
            remarks.append(
                f"{a.label} and {b.label} trade places between the reference call and the capture, but each call "
                "overwrites both before it reads them: the swap carries no state from one call to the next"
            )
    return kept


def swapped_pair(diff: Difference, buffers: BufferSet) -> tuple[Any, Any] | None:
    """The two owned buffers an array argument points into, in the reference call and the
    capture, when it points to the start of one in each (a swap); else None."""
    va, vb = diff.value_a, diff.value_b
    if diff.what != "arg" or not (isinstance(va, ArrayRef) and isinstance(vb, ArrayRef)) or not (va.ptr and vb.ptr):
        return None
    a, b = buffers.buffer_at(va.ptr), buffers.buffer_at(vb.ptr)
    if a is None or b is None or a == b or a.start != va.ptr or b.start != vb.ptr or a.nbytes != b.nbytes:
        return None
    return a, b


def overwritten_first(trace: LaunchTrace, buffer: Any) -> bool:
    """Whether the first operation of ``trace`` that touches ``buffer`` (a
    :class:`~graphcheck.buffers.Buffer`) writes it without reading it: a copy or a fill of
    the whole buffer, or a launch of a kernel that never reads that parameter and writes
    every element it covers (see :func:`graphcheck._warp.first_writes`): at its thread
    index over the array's shape, in a grid-stride loop launched over as many threads as
    its stride, or at the slots a counter hands out. Then no value it held before the call
    is read during the call (of a buffer the call fills up to a bound or a count, the
    elements past it are taken to be read by nothing)."""
    for record in trace.records:
        touching = [a for a in record.addresses() if a.start < buffer.end and buffer.start < a.end]
        if not touching:
            continue
        if record.nested or len(touching) != 1:
            return False  # inside a conditional body, or used twice by one operation
        (address,) = touching
        if (address.start, address.nbytes) != (buffer.start, buffer.nbytes):
            return False
        ref = record.args.get(address.arg)
        if not isinstance(ref, ArrayRef) or not _dense(ref):
            return False
        if record.kind == "memset":
            return address.arg == "dest"
        if record.kind == "copy":
            args = record.args
            whole = args.get("dest_offset") == 0 and args.get("count") == _elements(ref)
            return address.arg == "dest" and whole
        if record.kind == "launch" and not record.adjoint and record.kernel_object is not None:
            return _writes_all(record, address.arg, ref)
        return False
    return False


def _writes_all(record: LaunchRecord, arg: str, ref: ArrayRef) -> bool:
    """Whether ``record``'s kernel writes every element of argument ``arg`` it covers (see
    :func:`overwritten_first`), launched as it was."""
    how, stride = _warp.first_writes(record.kernel_object).get(arg, (None, None))
    if how == _warp.AT_THREAD:
        return tuple(record.dim) == tuple(ref.shape)
    if how == _warp.IN_STRIDE_LOOP:
        threads = 1
        for size in record.dim:
            threads *= size
        return stride is not None and record.args.get(stride) == threads
    return how == _warp.AT_COUNTED_SLOTS


def _elements(ref: ArrayRef) -> int:
    count = 1
    for size in ref.shape:
        count *= size
    return count


def _dense(ref: ArrayRef) -> bool:
    """Whether an array is laid out contiguously, its last dimension fastest."""
    if not ref.shape or not ref.strides:
        return False
    step = ref.strides[-1]
    for size, stride in zip(reversed(ref.shape), reversed(ref.strides)):
        if stride != step:
            return False
        step *= size
    return ref.nbytes == step

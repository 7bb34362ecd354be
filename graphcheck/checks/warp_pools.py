"""Memory Warp holds for itself, not the owners: scratch from its pools, buffers it made
during the reference call and kept, and its process-wide caches. None of it is
``foreign-buffer`` or ``buffer-drift``: a replay finds it where Warp left it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _warp
from ..buffers import buffers_of
from ..compare import Difference, reused
from ..params import ArrayRef

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..findings import Finding
    from ..operations import Allocation
    from ..record import LaunchTrace

__all__ = ["held_by_warp", "held_for_the_process", "without_warp_scratch"]


def without_warp_scratch(
    diffs: list[Difference],
    reference: LaunchTrace,
    captured: LaunchTrace,
    buffers: BufferSet | None,
    remarks: list[str] | None,
) -> list[Difference]:
    """``diffs`` less the arguments that are Warp's own scratch: memory no owner holds and the
    reference call did not make (a pool's, ``warp.fem``'s ``TemporaryStore``), where the
    capture has a device temporary Warp made for itself. Warp bypasses its pools while it
    captures, so that no later borrow is handed what the graph bakes; the graph keeps its
    temporary valid on every replay. Said in ``remarks``."""
    kept = [d for d in diffs if not _warp_scratch(d, reference, captured, buffers)]
    if remarks is not None and len(kept) < len(diffs):
        count = len(diffs) - len(kept)
        remarks.append(
            f"{count} argument{'s' if count != 1 else ''} used Warp's own scratch: pooled memory in the reference "
            "call (warp.fem's TemporaryStore), a temporary Warp made for the capture, which bypasses its pools: "
            "the graph keeps it valid on every replay"
        )
    return kept


def _warp_scratch(diff: Difference, reference: LaunchTrace, captured: LaunchTrace, buffers: BufferSet | None) -> bool:
    va, vb, ra, rb = diff.value_a, diff.value_b, diff.record_a, diff.record_b
    if diff.what != "arg" or not (isinstance(va, ArrayRef) and isinstance(vb, ArrayRef)) or not (va.ptr and vb.ptr):
        return False
    if ra is None or rb is None or reference.allocation_at(va.ptr, ra.seq) is not None:
        return False  # the reference call's own temporary is compared as one
    if buffers is not None and buffers.find(va.ptr) is not None:
        return False  # owned in the reference call
    made = captured.allocation_at(vb.ptr, rb.seq)
    return made is not None and made.by_warp and not made.from_host and made.how != "structure"


def held_by_warp(captured: LaunchTrace, reference: LaunchTrace | None) -> dict[int, Allocation]:
    """Buffers Warp made for itself during the reference call and kept, that the captured
    call uses (``wp.fem.integrate``'s quadrature points): start address -> allocation.

    Warp holds them (its own caches), not the owners; a replay finds them where it left
    them, so they are not ``foreign-buffer``.
    """
    if reference is None or not any(alloc.by_warp for alloc in reference.allocations):
        return {}  # the reference call made nothing for Warp (as a rule): the capture's ranges go unread
    return {
        address.start: alloc
        for address, alloc in reused(reference, captured)
        if alloc.by_warp and address.end <= alloc.end
    }


def held_for_the_process(foreign: list[Finding]) -> tuple[list[Finding], str | None]:
    """The ``foreign-buffer`` findings whose buffer none of Warp's process-wide caches holds,
    and a note on those one does (warp.fem's quadrature formulas an earlier call made).

    Warp made them for itself and keeps them for every later call, not the owners: a replay
    finds them where it left them, as it finds those made during the reference call
    (:func:`held_by_warp`). The caches are walked only when there is a foreign address.
    """
    caches = _warp.process_caches()
    if not caches:
        return foreign, None
    cached = buffers_of(*(cache for _, cache in caches), root=[name for name, _ in caches])
    kept = [f for f in foreign if cached.find(f.detail["address"], f.detail["bytes"]) is not None]
    if not kept:
        return foreign, None
    where = ", ".join(name for name, _ in caches)
    note = (
        f"{len(kept)} buffer(s) Warp keeps for the process in {where} ({sum(f.detail['bytes'] for f in kept)} "
        "bytes) are used: Warp holds them, the owners need not"
    )
    return [f for f in foreign if f not in kept], note

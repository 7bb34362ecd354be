"""Buffers and structures made during the captured call: a ``per-call-allocation`` where a
replay cannot rely on them, a note on the device temporaries the graph owns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..findings import Finding, make_finding
from ..params import Address
from .vocabulary import Outcome

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..operations import Allocation, LaunchRecord
    from ..record import LaunchTrace

__all__ = ["allocations", "check", "graph_owned", "reported_allocation", "structures_made"]


def _uses_of_made(captured: LaunchTrace) -> Iterator[tuple[int, LaunchRecord, Address]]:
    """``(index, record, address)`` of every address range the captured call hands the device
    that starts in an allocation made during the call (see :meth:`LaunchTrace.made_here`)."""
    for index, record in enumerate(captured.records):
        for address in captured.made_here(record.addresses()):
            yield index, record, address


def reported_allocation(alloc: Allocation, owned: BufferSet | None, strict: bool) -> bool:
    """Whether an allocation made during the call is a ``per-call-allocation``.

    Warp keeps memory allocated during a capture valid on every replay, so a temporary
    whose content the device produces is fine. Content from host memory that lives only
    for the call is not, unless the owners hold that memory (a staging array they keep).
    With ``strict``, every buffer the user's code made during the call is reported; scratch
    Warp made for itself inside one of its own calls (``warp.fem``'s ``TemporaryStore``
    bypassed while capturing) is Warp's, as its pools are, and no owner could hold it.
    """
    if alloc.how == "wrapped" and owned is not None and owned.find(alloc.start) is not None:
        return False  # host memory the owners keep, wrapped: nothing was allocated
    if alloc.how == "structure":
        return False  # Warp's rule for structures: structures_made()
    return alloc.from_host or (strict and not alloc.by_warp)


def allocations(captured: LaunchTrace, owned: BufferSet | None = None, *, strict: bool = False) -> list[Finding]:
    """One finding per buffer made during the captured call, used by an operation, that a
    replay cannot rely on (see :func:`reported_allocation`)."""
    uses: dict[Allocation, list[tuple[int, LaunchRecord, str]]] = {}
    if not any(reported_allocation(alloc, owned, strict) for alloc in captured.allocations):
        return []  # the commonest case: device temporaries only, which a replay can rely on
    for index, record, address in _uses_of_made(captured):
        alloc = captured.allocation_at(address.start, record.seq)
        if alloc is not None and reported_allocation(alloc, owned, strict):
            uses.setdefault(alloc, []).append((index, record, address.arg))
    findings = []
    for alloc, used in uses.items():
        index, record, name = used[0]
        via = f"wp.{alloc.via}" if alloc.via and alloc.via != "array" else "wp.array"
        if alloc.how == "wrapped":
            how = "wraps host memory that lives only for the call"
        elif alloc.how == "uploaded":
            how = "holds host data that a replay does not upload again"
        else:
            how = "is a device temporary (strict_ownership: every buffer must be owned)"
        more = f"; used by {len(used) - 1} more operation{'s' if len(used) > 2 else ''}" if len(used) > 1 else ""
        findings.append(
            make_finding(
                "per-call-allocation",
                record.kernel,
                kernel=record.kernel,
                arg=name,
                index=index,
                site=record.site,
                captured=alloc.label,
                values=f"{alloc.label} made by {via} at {alloc.site.short} during the call {how}{more}",
                detail={
                    "allocated at": alloc.site,
                    "address": alloc.start,
                    "bytes": alloc.nbytes,
                    "how": alloc.how,
                },
                fix=None if alloc.from_host else _OWN_IT,
            )
        )
    return findings


_OWN_IT = "allocate the buffer once, outside the captured call, and keep it on the producer"


#: Structures Warp builds natively when they are made (a HashGrid is made empty; its build
#: is an operation a CPU graph records since Warp 1.16).
_BUILT_WHEN_MADE = frozenset({"Bvh", "Mesh", "Volume"})


def structures_made(captured: LaunchTrace, owned: BufferSet | None, device: str) -> list[Finding]:
    """One ``per-call-allocation`` per mesh, hash grid, BVH, volume or texture made during
    the captured call whose id an operation uses, where Warp's rule makes the replay wrong.

    On the CPU the structure lives on the host and a CPU graph bakes its id: valid on every
    replay while someone keeps the structure, freed with its last reference otherwise. So
    one the owners keep (``self.grid = wp.HashGrid(...)``, then ``build``) is fine, one they
    drop is not; a BVH, mesh or volume is built when it is made, natively, outside the graph:
    every replay keeps the capture call's (a ``capture-error``, as ``Mesh.refit`` is).
    In a CUDA capture Warp's constructors upload the structure's descriptor from host memory
    that lives only for the call (``wp_memcpy_h2d`` from a local in ``warp/native``; without
    the memory pool they cannot allocate while capturing at all): a replay re-reads it.
    """
    made = {a.start: a for a in captured.allocations if a.how == "structure" and a.nbytes == 1}
    if not made:
        return []
    findings = []
    for index, record in enumerate(captured.records):
        for name, value in record.args.items():
            alloc = made.pop(value, None) if type(value) is int else None
            if alloc is None:
                continue
            kind = "per-call-allocation"
            if device.startswith("cpu") and alloc.dtype in _BUILT_WHEN_MADE:
                kind = "capture-error"
                why = (
                    "is built when it is made, natively, which a CPU graph does not record: every replay uses the "
                    "structure the capture call built"
                )
                fix = "make it once, outside the captured call, and refit or rebuild it inside the call"
            elif device.startswith("cpu"):
                if owned is None or owned.handle(alloc.start) is not None:
                    continue  # kept by the owners: the graph's id stays valid
                why = "that no owner keeps: Warp frees it with its last reference, and every replay uses its id"
                fix = "keep the structure on the producer (self.grid = ...), or make it once, outside the call"
            else:
                why = (
                    "inside a CUDA capture: Warp uploads its descriptor from host memory that lives only for the call, "
                    "which every replay reads again"
                )
                fix = "make the structure once, outside the captured call, and rebuild or refit it inside the call"
            findings.append(
                make_finding(
                    kind,
                    record.kernel,
                    kernel=record.kernel,
                    arg=name,
                    index=index,
                    site=record.site,
                    captured=alloc.label,
                    values=f"{alloc.label} made by wp.{alloc.via} at {alloc.site.short} during the call {why}",
                    detail={"allocated at": alloc.site, "id": alloc.start, "how": alloc.how},
                    fix=fix,
                )
            )
    return findings


def graph_owned(captured: LaunchTrace, owned: BufferSet | None = None, *, strict: bool = False) -> str | None:
    """A note on the device temporaries the captured call made, which the graph owns."""
    temporaries = [
        a for a in captured.allocations
        if not reported_allocation(a, owned, strict) and not a.from_host and a.how != "structure"
    ]  # fmt: skip
    if not temporaries:
        return None
    yours = [a for a in temporaries if not a.by_warp]
    warps = [a for a in temporaries if a.by_warp]
    said = []
    if yours:
        said.append(
            f"{_count(yours)} made during the call ({_size(sum(a.nbytes for a in yours))}): device temporaries Warp "
            "keeps valid on every replay (strict_ownership=True reports them)"
        )
    if warps:
        said.append(
            f"{_count(warps)} Warp made for its own scratch during the call ({_size(sum(a.nbytes for a in warps))}): "
            "Warp's, as its pools are (strict_ownership=True leaves them to Warp)"
        )
    return "; ".join(said)


def _count(allocations: list[Allocation]) -> str:
    return f"{len(allocations)} graph-owned allocation{'s' if len(allocations) != 1 else ''}"


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} bytes"
    return f"{nbytes / 1024:.1f} KiB" if nbytes < 1024**2 else f"{nbytes / 1024**2:.1f} MiB"


def check(captured: LaunchTrace, owned: BufferSet | None, *, strict: bool, device: str) -> Outcome:
    """The buffers and structures the captured call made (:func:`allocations`,
    :func:`structures_made`), and a note on the temporaries the graph owns."""
    out = Outcome(ran=["allocations"])
    if captured.allocations:
        out.findings += allocations(captured, owned, strict=strict) + structures_made(captured, owned, device)
        temporaries = graph_owned(captured, owned, strict=strict)
        if temporaries:
            out.notes.append(temporaries)
    return out

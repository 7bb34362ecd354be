"""The host-side checks on one capture site, each turning traces into findings.

- :func:`drift` compares the eager reference call with the captured call;
- :func:`allocations` finds buffers allocated during the captured call and baked into it;
- :func:`ownership` finds addresses outside every buffer the owners hold;
- :func:`cuda_rules` finds what a CPU capture runs but a CUDA one cannot (what a CPU graph
  leaves out, the graph cross-check finds: :mod:`graphcheck.crosscheck`);
- :func:`capture_failed` turns a capture Warp could not complete into a finding;
- :func:`stale_pointers` finds, before a replay, baked addresses the owners no longer hold.

The pipeline (:func:`graphcheck.guard.judge`) runs them in stages, each stage giving an
:class:`Outcome`: :func:`comparison`, :func:`host_rules`, :func:`owned_by_producer`.

Each cause gives one finding: differences of one argument at one call site are
grouped, a run of extra or missing operations is one finding, and an address already
reported as a per-call allocation is not reported again as drift or as foreign.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _warp
from ._memo import ByIdentity
from .buffers import buffers_of
from .compare import Difference, compare_traces, reused, value_texts
from .findings import KINDS, Allow, Finding, Report, make_finding
from .params import Address, ArrayRef, Opaque, ParamKind, ParamSpec, decode, launch_dim
from .site import CodeKind, Site

if TYPE_CHECKING:
    from .buffers import BufferSet
    from .operations import Allocation, Baked, BakedValue, LaunchRecord
    from .record import LaunchTrace

__all__ = [
    "Outcome", "allocations", "capture_failed", "comparison", "cuda_rules", "drift", "host_inputs",
    "host_rules", "is_capture_error", "owned_by_producer", "ownership", "stale_pointers", "uncaptured",
]  # fmt: skip


def _kind_of(diff: Difference) -> str:
    what = diff.what
    if what in ("missing", "extra", "kernel"):
        return "launch-sequence-drift"
    if what in ("dim", "block_dim", "max_blocks"):
        return "dim-drift"
    if what == "stream":
        return "stream-drift"
    if diff.is_array:
        return "buffer-drift"
    if diff.record.kind in ("copy", "memset"):
        return "copy-drift"
    return "scalar-drift"


#: The kinds :func:`drift` and :func:`host_inputs` give: the capture differs from the call it
#: is compared with (a difference only the first call has is settled by a later call).
COMPARED_KINDS = frozenset({"launch-sequence-drift", "scalar-drift", "dim-drift", "buffer-drift", "copy-drift"})

#: What a capture is compared with, as the findings name it: an eager reference call,
#: (at a site validated before) the capture that was validated, (a guarded block after a
#: retry) the capture graphcheck made of the reference after later calls, or (a new capture
#: after a retry) the first capture.
REFERENCE_CALL = "the reference call"
VALIDATED_CAPTURE = "the validated capture"
LATER_CAPTURE = "the reference's later capture"
FIRST_CAPTURE = "the first capture"


def _where(diff: Difference, against: str) -> str:
    if diff.where_a and diff.where_b:
        # Both addresses are in owned buffers: name them, by the names the owners give
        # them after the capture (a swapped buffer has changed names since).
        return f"{diff.where_a} in {against}, {diff.where_b} captured (buffers named as the owners hold them now)"
    left, right, delta = value_texts(diff.value_a, diff.value_b, diff.where_a, diff.where_b)
    return f"{left} in {against}, {right} captured" + (f" (Δ {delta})" if delta else "")


def drift(
    reference: LaunchTrace,
    captured: LaunchTrace,
    buffers: BufferSet | None,
    *,
    strict: bool = False,
    notes: list[str] | None = None,
    first_call: str | None = None,
    against: str = REFERENCE_CALL,
    remarks: list[str] | None = None,
) -> list[Finding]:
    """Findings for every way the captured call differs from the reference call (or from
    what ``against`` names: the validated capture).

    Temporaries the two calls made are matched by allocation order, not by address; an
    argument that points into a buffer :func:`allocations` reports is left to it.

    ``first_call`` (when given) is said in the fix of the operations only one call issued
    when they look like work only a first call does (see :func:`first_call_shaped`).
    ``notes`` gets what could not be compared; ``remarks`` what is no finding (a buffer
    swap that carries no state).
    """
    diffs = compare_traces(reference, captured, buffers, streams=True, notes=notes)
    first_call = first_call if first_call_shaped(diffs) else None
    diffs = _carrying_state(diffs, reference, captured, buffers, remarks)
    diffs = _without_warp_scratch(diffs, reference, captured, buffers, remarks)
    # Findings in report order; a group's key holds its place while the group fills up.
    findings: list[Finding | tuple[Any, ...]] = []
    groups: dict[tuple[Any, ...], list[Difference]] = {}
    run: list[Difference] = []

    def flush_run() -> None:
        if run:
            findings.append(_sequence_finding(run, against, first_call))
            run.clear()

    for diff in diffs:
        if diff.what in ("missing", "extra"):
            if run and (run[-1].what != diff.what or not _adjacent(run[-1], diff)):
                flush_run()
            run.append(diff)
            continue
        flush_run()
        if diff.what == "kernel":
            findings.append(_sequence_finding([diff], against))
            continue
        if diff.is_array and _in_reported_allocation(diff, captured, buffers, strict):
            continue  # the per-call allocation is the cause; allocations() reports it
        kind = _kind_of(diff)
        # A changed scalar is one cause per argument; buffers that moved in one operation
        # (a swap) are one cause per operation.
        arg = None if kind == "buffer-drift" else diff.arg
        key = (kind, diff.record.kernel, arg, diff.record.site)
        if key not in groups:
            groups[key] = []
            findings.append(key)
        groups[key].append(diff)
    flush_run()
    return [f if isinstance(f, Finding) else _drift_finding(groups[f], against, buffers) for f in findings]


def _carrying_state(
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
        pair = _swapped(diff, buffers)
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


def _without_warp_scratch(
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


def _swapped(diff: Difference, buffers: BufferSet) -> tuple[Any, Any] | None:
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


def first_call_shaped(diffs: list[Difference]) -> bool:
    """Whether the operations the two calls issued differ as work only a first call does:
    the reference call issued operations the capture did not (lazy set-up), or the capture
    issued operations the reference call never reached (gradients zeroed from the second
    call on), one or the other, and no operation replaced by another."""
    kinds = {d.what for d in diffs if d.what in ("missing", "extra", "kernel")}
    return kinds in ({"missing"}, {"extra"})


def first_call_fix(warmup: int) -> str:
    """What the fix of a first-call-shaped sequence drift says, after ``warmup`` warm-up calls."""
    if warmup == 0:
        return (
            "this looks like first-call work (set-up only the first call does): warmup=1 (an eager call before the "
            "reference call) settles it if so"
        )
    return (
        f"this looks like work only the first calls do (set-up): warmup={warmup + 1} ({warmup + 1} eager calls "
        "before the reference call) settles it if so"
    )


def host_inputs(reference: LaunchTrace, captured: LaunchTrace, buffers: BufferSet | None) -> list[Finding]:
    """One ``copy-drift`` per copy (and call site) whose host source held other bytes in the
    captured call than in the reference call, the call itself having written them.

    A graph copies whatever its host source holds at replay. Staging the owners keep and
    the program fills between replays, outside the captured call, is the intended use: the
    two calls then read the same bytes. Different bytes mean the call computes what it
    uploads (``self.host[:] = f(frame)``), and every replay uploads what the capture call
    left there. A source an operation of the call may write (a launch using it, a copy into
    it) is device state flowing through the graph; a temporary made during the call is
    :func:`allocations`' business, unless it wraps host memory the owners keep
    (``array.assign(self.host)`` of an owned numpy array).
    """
    earlier = _host_copies(reference)
    findings: list[Finding] = []
    reported: set[Site] = set()
    for key, (index, record) in _host_copies(captured).items():
        pair = earlier.get(key)
        if pair is None or pair[1].host_bytes == record.host_bytes or record.site in reported:
            continue
        ref_index, ref_record = pair
        src, ref_src = record.args.get("src"), ref_record.args.get("src")
        if not isinstance(src, ArrayRef) or src != ref_src:
            continue  # another source (buffer, offset, length) is drift()'s business
        made = captured.allocation_at(src.ptr, record.seq)
        if made is not None and not (made.how == "wrapped" and buffers is not None and buffers.find(made.start)):
            continue  # a temporary of the call, not host memory the owners keep: allocations() judges it
        if _written_in(captured, src) or _written_in(reference, ref_src):
            continue
        reported.add(record.site)
        hit = buffers.find(src.ptr) if buffers is not None else None
        name = hit.label if hit is not None else str(src)
        findings.append(
            make_finding(
                "copy-drift",
                f"{record.kernel} from host memory",
                kernel=record.kernel,
                arg="src",
                index=index,
                site=record.site,
                reference=ref_record.host_bytes,
                captured=record.host_bytes,
                values=(
                    f"{name} held other contents when the captured call copied it than in the reference call "
                    f"({_first_difference(ref_record.host_bytes, record.host_bytes, src.dtype)}): the call writes the "
                    "host memory it uploads, and every replay uploads what the capture call left there"
                ),
                detail={"buffer": name, "address": src.ptr, "reference index": ref_index},
                fix=(
                    "write the host staging buffer outside the captured call, before each replay (the captured call "
                    "only copies it), or compute the data on the device inside the call"
                ),
            )
        )
    return findings


def _host_copies(trace: LaunchTrace) -> dict[tuple[Site, int], tuple[int, LaunchRecord]]:
    """``(site, occurrence at that site) -> (index, record)`` of every copy from host memory."""
    out: dict[tuple[Site, int], tuple[int, LaunchRecord]] = {}
    seen: Counter[Site] = Counter()
    for index, record in enumerate(trace.records):
        if record.kind == "copy" and record.host_bytes is not None and not (record.nested or record.internal):
            out[(record.site, seen[record.site])] = (index, record)
            seen[record.site] += 1
    return out


def _written_in(trace: LaunchTrace, src: ArrayRef) -> bool:
    """Whether an operation of the call may write memory ``src`` spans: a launch using it, a
    copy into it, a fill. Device state on Warp's CPU device is host memory too; what the
    call's own operations write differs between the two calls for that reason alone."""
    start, end = src.start, src.start + src.nbytes
    seen: set[tuple[int, bool]] = set()  # launches with the same arguments share one tuple of addresses
    for record in trace.records:
        addresses = record.addresses()
        copy = record.kind == "copy"
        if (id(addresses), copy) in seen:
            continue
        seen.add((id(addresses), copy))  # the records hold the tuple: its id is not reused here
        for address in addresses:
            if address.start < end and start < address.end and not (copy and address.arg == "src"):
                return True
    return False


def _first_difference(a: bytes | None, b: bytes | None, dtype: str) -> str:
    if a is None or b is None or a.startswith(b"digest:") or b.startswith(b"digest:") or len(a) != len(b):
        return "their digests differ"
    first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    try:
        kind = np.dtype(dtype)
    except TypeError:
        return f"first at byte {first}"
    element = first // kind.itemsize
    at = slice(element * kind.itemsize, (element + 1) * kind.itemsize)
    before, after = np.frombuffer(a[at], kind)[0], np.frombuffer(b[at], kind)[0]
    return f"element [{element}]: {before} in the reference call, {after} captured"


def _in_reported_allocation(diff: Difference, captured: LaunchTrace, owned: BufferSet | None, strict: bool) -> bool:
    value = diff.value_b
    if not isinstance(value, ArrayRef) or diff.record_b is None:
        return False
    alloc = captured.allocation_at(value.ptr, diff.record_b.seq)
    return alloc is not None and reported_allocation(alloc, owned, strict)


def _adjacent(a: Difference, b: Difference) -> bool:
    if a.what == "missing":
        return a.index_a is not None and b.index_a == a.index_a + 1
    return a.index_b is not None and b.index_b == a.index_b + 1


def _drift_finding(group: list[Difference], against: str, buffers: BufferSet | None = None) -> Finding:
    first = group[0]
    record = first.record
    kind = _kind_of(first)
    values = (
        _where(first, against)
        if kind not in ("dim-drift", "stream-drift")
        else (f"{first.value_a!r} in {against}, {first.value_b!r} captured")
    )
    args = list(dict.fromkeys(d.arg for d in group))
    operations = list(dict.fromkeys(d.index_b for d in group))
    if kind == "buffer-drift" and len(args) > 1:
        values = "; ".join(f"{d.arg}: {_where(d, against)}" for d in group if d.index_b == first.index_b)
    if len(operations) > 1:
        values += f"; and in {len(operations) - 1} more operation{'s' if len(operations) > 2 else ''}"
    arg = (
        ", ".join(a for a in args if a) if kind == "buffer-drift" else first.arg if first.what == "arg" else first.what
    )
    return make_finding(
        kind,
        record.kernel,
        kernel=record.kernel,
        arg=arg,
        index=first.index_b,
        site=record.site,
        reference=first.value_a,
        captured=first.value_b,
        values=values,
        detail={
            "operations": [d.index_b for d in group],
            "reference index": first.index_a,
            **_per_argument(group),
            **_swaps(group, buffers),
        },
    )


def _swaps(group: list[Difference], buffers: BufferSet | None) -> dict[str, Any]:
    """``{"swapped buffers": [[reference's, captured], ...]}`` when every difference of a
    buffer-drift is two owned buffers trading places (see :func:`_swapped`), else nothing."""
    if buffers is None:
        return {}
    pairs = [_swapped(d, buffers) for d in group if d.is_array]
    swapped = [p for p in pairs if p is not None]
    if not swapped or len(swapped) != len(pairs):
        return {}
    return {"swapped buffers": [list(p) for p in dict.fromkeys((a.label, b.label) for a, b in swapped)]}


def _per_argument(group: list[Difference]) -> dict[str, Any]:
    """Each array argument's values and the owned buffers they lie in, for JSON readers."""
    arrays = {d.arg: d for d in group if d.is_array and d.arg and d.index_b == group[0].index_b}
    if not arrays:
        return {}
    return {"arguments": {arg: {"reference": d.value_a, "captured": d.value_b, "reference buffer": d.where_a,
                                "captured buffer": d.where_b} for arg, d in arrays.items()}}  # fmt: skip


def _sequence_finding(run: list[Difference], against: str, first_call: str | None = None) -> Finding:
    first = run[0]
    if first.what == "kernel":
        assert first.record_a is not None and first.record_b is not None
        if first.record_a.kind == "launch" and _warp.same_kernel_key(
            first.record_a.kernel_object, first.record_b.kernel_object
        ):
            return _recompiled(first)
        return make_finding(
            "launch-sequence-drift",
            f"{first.record_b.kernel} where {against} issued {first.record_a.kernel}",
            kernel=first.record_b.kernel,
            index=first.index_b,
            site=first.record_b.site,
            reference=first.record_a.kernel,
            captured=first.record_b.kernel,
            values=f"{first.record_a.kernel} in {against} ({first.record_a.site.short}), "
            f"{first.record_b.kernel} captured",
        )
    record = first.record
    names = list(dict.fromkeys(d.record.kernel for d in run))
    count = len(run)
    ops = f"{count} operation{'s' if count != 1 else ''}"
    if first.what == "extra":
        what = f"{ops} issued only by the captured call, starting with {record.kernel}"
        index = first.index_b
    else:
        what = f"{ops} issued only by {against}, starting with {record.kernel}"
        index = first.index_a
    return make_finding(
        "launch-sequence-drift",
        what,
        kernel=record.kernel,
        index=index,
        site=record.site,
        reference=count if first.what == "missing" else 0,
        captured=count if first.what == "extra" else 0,
        values=f"{', '.join(names[:4])}{' ...' if len(names) > 4 else ''}",
        detail={"what": first.what, "operations": count, **({"first call": True} if first_call else {})},
        fix=f"{first_call}; else {KINDS['launch-sequence-drift'].fix}" if first_call else None,
    )


def _recompiled(diff: Difference) -> Finding:
    """The same kernel by name, compiled to other code in the two calls: a kernel declared
    inside the call whose code changed (a closure constant it captures), a real drift."""
    ra, rb = diff.record_a, diff.record_b
    assert ra is not None and rb is not None
    code_a = _warp.kernel_code(ra.kernel_object) or "?"
    code_b = _warp.kernel_code(rb.kernel_object) or "?"
    name_a, name = ra.kernel, rb.kernel
    return make_finding(
        "launch-sequence-drift",
        f"{name} (code {code_b}) where the reference call issued {name_a} (code {code_a})",
        kernel=name,
        index=diff.index_b,
        site=rb.site,
        reference=f"{name_a} code {code_a}",
        captured=f"{name} code {code_b}",
        values=(
            f"the same kernel compiled to other code: {name_a} code {code_a} in the reference call "
            f"({ra.site.short}), {name} code {code_b} captured; a kernel declared inside the call whose code changed "
            "between calls (a closure constant it captures changed): every replay runs the captured code"
        ),
        detail={"reference code": code_a, "captured code": code_b},
        fix=(
            "declare the kernel once, outside the captured call, and pass the value that changes as a kernel "
            "argument read from a device array"
        ),
    )


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
    With ``strict``, every buffer made during the call is reported.
    """
    if alloc.how == "wrapped" and owned is not None and owned.find(alloc.start) is not None:
        return False  # host memory the owners keep, wrapped: nothing was allocated
    if alloc.how == "structure":
        return False  # Warp's rule for structures: structures_made()
    return strict or alloc.from_host


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
    count, nbytes = len(temporaries), sum(a.nbytes for a in temporaries)
    return (
        f"{count} graph-owned allocation{'s' if count != 1 else ''} made during the call ({_size(nbytes)}): "
        "device temporaries Warp keeps valid on every replay (strict_ownership=True reports them)"
    )


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} bytes"
    return f"{nbytes / 1024:.1f} KiB" if nbytes < 1024**2 else f"{nbytes / 1024**2:.1f} MiB"


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


def ownership(captured: LaunchTrace, owned: BufferSet, held: dict[int, Allocation] | None = None) -> list[Finding]:
    """One finding per address range outside the owned buffers (and outside every
    buffer the call made, and every buffer Warp holds for itself: see :func:`held_by_warp`)."""
    # One finding per foreign address: a shared scratch buffer used by three launches
    # is one cause.
    held = held or {}
    groups: dict[int, list[tuple[int, LaunchRecord, Address]]] = {}
    # A step uses the same few buffers in many launches: each range is looked up once, and
    # launches with the same arguments (one shared tuple of addresses) all inside the owned
    # buffers are judged once (whether a range is a temporary depends on when it is used;
    # whether it is owned does not).
    inside: dict[tuple[int, int], bool] = {}
    owned_tuples: set[int] = set()  # ids of address tuples all inside the owned buffers
    made = bool(captured.allocations)
    for index, record in enumerate(captured.records):
        addresses = record.addresses()
        if id(addresses) in owned_tuples:
            continue
        all_owned = True
        for address in addresses:
            key = (address.start, address.nbytes)
            known = inside.get(key)
            if known is None:
                known = inside[key] = address.start in held or owned.find(address.start, address.nbytes) is not None
            if known:
                continue
            all_owned = False
            if made and captured.allocation_at(address.start, record.seq) is not None:
                continue  # a temporary of the call: allocations() judges it
            groups.setdefault(address.start, []).append((index, record, address))
        if all_owned:
            owned_tuples.add(id(addresses))  # the records hold the tuple: its id is not reused here
    findings = []
    for ptr, used in groups.items():
        index, record, address = used[0]
        kernel = record.kernel
        hit = owned.buffer_at(ptr)
        if hit is not None:
            values = f"{ptr:#x} (+{address.nbytes} bytes) starts in {hit.label} but runs past its end"
        else:
            values = f"{ptr:#x} is in none of the {len(owned)} owned buffers"
        if len(used) > 1:
            values += f"; and in {len(used) - 1} more operation{'s' if len(used) > 2 else ''}"
        ref = record.args.get(address.arg)
        findings.append(
            make_finding(
                "foreign-buffer",
                kernel,
                kernel=kernel,
                arg=address.arg,
                index=index,
                site=record.site,
                captured=ref if isinstance(ref, ArrayRef) else ptr,
                values=values,
                detail={"address": ptr, "bytes": address.nbytes},
            )
        )
    return findings


def cuda_rules(captured: LaunchTrace) -> list[Finding]:
    """On the CPU, what would break the same capture on CUDA: one finding per readback or
    synchronisation (and call site) inside the captured call.

    A CPU capture defers its operations and runs a readback at once, so the readback sees
    data the graph has not computed yet; a CUDA capture cannot run one at all.
    """
    findings = []
    for (what, site), count in Counter((sync.what, sync.site) for sync in captured.host_syncs).items():
        times = f" ({count} times)" if count > 1 else ""
        findings.append(
            make_finding(
                "capture-error",
                f"{what} inside the captured call{times}",
                site=site,
                captured=what,
                values=(
                    "works on the CPU, fails in a CUDA capture (a CUDA stream cannot synchronise or copy to the "
                    "host while capturing), and on the CPU it reads data the deferred graph has not computed yet"
                ),
                detail={"cpu_only": True},
            )
        )
    return findings


def uncaptured(captured: LaunchTrace) -> list[Finding]:
    """On CUDA, operations that went to a stream the capture does not record while it ran:
    each ran once, at capture time, and is missing from the graph (a ``stream-drift``).

    Warp sends ``zero_``, ``fill_`` and its native helpers (sort, scan, hash grids) to the
    device's current stream, and ``wp.ScopedCapture(stream=s)`` does not make ``s``
    current; a launch without ``stream=`` goes there too.
    """
    findings = []
    for index, record in enumerate(captured.records):
        if not record.uncaptured or record.stream is None:
            continue
        findings.append(
            make_finding(
                "stream-drift",
                f"{record.kernel} ran outside the capture",
                kernel=record.kernel,
                arg="stream",
                index=index,
                site=record.site,
                reference=record.uncaptured,
                captured=record.stream,
                values=(
                    f"it went to stream {record.stream:#x} while the capture records stream {record.uncaptured:#x}: "
                    "it ran once, at capture time, and a replay does not run it"
                ),
                fix=(
                    "make the capture's stream current for the captured call (with wp.ScopedStream(s): "
                    "with wp.ScopedCapture(): ...), or pass stream=s to every operation that takes one"
                ),
            )
        )
    return findings


def undecoded(captured: LaunchTrace) -> list[str]:
    """Notes naming each argument whose type graphcheck cannot decode (compared by its bytes,
    so a change is still found, but an address inside it is not checked).

    Read from each kernel's parameter layout, once per kernel: decoding every launch's
    arguments only to look for such a type would cost more than the checks themselves.
    """
    seen: dict[tuple[str, str], str] = {}
    layouts: set[int] = set()
    kernels: set[tuple[int, bool]] = set()  # (kernel, direction) of the CPU launches read
    for record in captured.records:
        if record.kind == "launch":
            if record.cuda is None:  # a CPU launch has no hidden parameters: one per kernel is enough
                key = (id(record.kernel_object), record.adjoint)
                if key in kernels:
                    continue
                kernels.add(key)
            layout = record.layout
            if id(layout) in layouts and len(record.param_bytes) <= len(layout):
                continue
            layouts.add(id(layout))
            extra = len(record.param_bytes) - len(layout)
            found = [*_opaque_in(layout)]
            found += [(f"param{len(layout) + i}", "hidden parameter") for i in range(max(extra, 0))]
        else:
            found = [(name, value.type_name) for name, value in record.args.items() if isinstance(value, Opaque)]
        for name, type_name in found:
            seen.setdefault((record.kernel, name), type_name)
    return [
        f"{kernel} argument {name!r} has type {type_name}, which graphcheck cannot decode: it is compared by its "
        "bytes, and no address inside it is checked"
        for (kernel, name), type_name in seen.items()
    ]


# (name, type name) of each argument of a layout graphcheck cannot decode. Every capture
# reads the layout of each kernel it launched (MuJoCo Warp's step: about 60, of up to 40
# parameters), almost never finding one: each layout is read once.
_opaque_in: ByIdentity[tuple[ParamSpec, ...], tuple[tuple[str, str], ...]] = ByIdentity(
    lambda layout: tuple((f"{prefix}{spec.name}", str(spec.dtype or "?")) for prefix, spec in _opaque(layout))
)


def _opaque(specs: Iterable[ParamSpec], prefix: str = "") -> Iterator[tuple[str, ParamSpec]]:
    for spec in specs:
        if spec.kind is ParamKind.OPAQUE:
            yield prefix, spec
        elif spec.kind is ParamKind.STRUCT:
            yield from _opaque(spec.children, f"{prefix}{spec.name}.")


_MEMPOOL_FIX = (
    "enable the device's memory pool before capturing (wp.set_mempool_enabled(device, True)), so that memory the "
    "call allocates becomes graph-owned; or allocate the buffers once, outside the captured call"
)


_HOST_ARRAY_FIX = (
    "keep a device array on the owner (wp.array(..., device=...), made once) and pass that: Warp uploads a numpy "
    "array passed to wp.launch into a temporary on every eager call, which its CPU capture cannot record; write new "
    "host data into the device array outside the captured call (array.assign, wp.copy)"
)


def capture_failed(error: BaseException, site: Site | None, operations: int) -> Finding:
    """The ``capture-error`` for a capture Warp could not complete, at the user's line.

    Allocating on a CUDA device whose memory pool is off fails inside a capture: the fix
    then is the memory pool, not moving a readback. An error Warp's CPU capture recorder
    raises itself (an ``AttributeError`` on a numpy array passed to ``wp.launch``) is named
    as the capture's failure, with the cure, not left as a traceback from inside Warp.
    """
    text = str(error).strip()
    what = f"the capture failed with {type(error).__name__}"
    values = text.splitlines()[0] if text else type(error).__name__
    in_recorder = _raised_in_capture_machinery(error)
    if in_recorder:
        values = f"Warp's CPU capture recorder raised {type(error).__name__}: {values}"
    if "mempool" in text or "memory pool" in text:
        fix: str | None = _MEMPOOL_FIX
    elif in_recorder and "numpy.ndarray" in text:
        what = f"a numpy array passed to wp.launch: {what}"
        fix = _HOST_ARRAY_FIX
    elif "capture already in progress" in text:
        # Opened inside another capture (a GraphGuard or wp.ScopedCapture within one): no readback is involved.
        fix = (
            "capture one block at a time: end the capture already open on this device (a GraphGuard or "
            "wp.ScopedCapture around this one) before opening another, or guard only the outer one"
        )
    elif isinstance(error, NotImplementedError):
        # Warp cannot capture this operation at all (a CPU capture of a strided copy or
        # fill): its own message says what it does not support.
        fix = f"do this operation outside the captured call, or in a way Warp can capture ({text.splitlines()[0]})"
    else:
        fix = None
    return make_finding(
        "capture-error",
        what,
        index=operations or None,
        site=site,
        captured=text,
        values=values,
        fix=fix,
    )


def cpu_overloads(captured: LaunchTrace) -> list[Finding]:
    """On the CPU, one ``capture-error`` per generic kernel launched with two overloads or
    more in one capture.

    Warp's CPU graphs register a launched kernel's code under its module's hash and its key
    (``wp_apic_register_cpu_kernel`` in Warp 1.19's ``native/apic.cpp``; the last launch
    registered wins), which the overloads of a generic kernel share once they are built into
    one module, as a reference call or any warm-up builds them: every replay runs one
    overload's code for all of them. Every launch, address and scalar matches the eager call,
    so it is Warp's rule, not a comparison, that finds it.
    """
    if not _warp.cpu_graph_shares_overload_code():
        return []
    first: dict[int, tuple[int, LaunchRecord]] = {}  # id(kernel) -> its first launch
    for index, record in enumerate(captured.records):
        kernel = record.kernel_object
        if kernel is not None and id(kernel) not in first and record.kind == "launch":
            first[id(kernel)] = (index, record)
    # Kernels of one key and module that are the same code (a kernel factory called twice
    # with the same options) run the same function from the shared entry: one overload.
    overloads: dict[tuple[str, int], dict[Any, tuple[int, LaunchRecord]]] = {}
    for index, record in first.values():
        kernel = record.kernel_object
        key = (str(getattr(kernel, "key", "")), id(getattr(kernel, "module", None)))
        overloads.setdefault(key, {}).setdefault(_warp.cpu_kernel_code(kernel), (index, record))
    findings = []
    for codes in overloads.values():
        launched = list(codes.values())  # in the order of their first launch
        if len(launched) < 2:
            continue
        index, record = launched[0]
        sites = ", ".join(dict.fromkeys(r.site.short for _, r in launched))
        findings.append(
            make_finding(
                "capture-error",
                f"{len(launched)} overloads of the generic kernel {record.kernel} in one CPU capture",
                kernel=record.kernel,
                index=index,
                site=record.site,
                captured=len(launched),
                values=(
                    f"launched at {sites}: warp-lang {_warp.WARP_VERSION}'s CPU graphs keep one entry of code per "
                    "kernel key and module hash, which the overloads share, so every replay runs the last "
                    "launched overload's code for all of them (on other dtypes: wrong values, writes past the smaller "
                    "arrays)"
                ),
                detail={"overloads": len(launched), "launched at": [r.site for _, r in launched]},
                fix=(
                    "give each dtype a kernel of its own (separate @wp.kernel functions, not overloads of one generic "
                    "kernel), or capture on a CUDA device, whose graph nodes each hold their own function"
                ),
            )
        )
    return findings


# -- Stages: what the pipeline runs, each giving an Outcome --------------------------------


@dataclass
class Outcome:
    """What a stage of the checks found, and what it says it did.

    Attributes:
        findings: what it found.
        ran: the checks that ran in full (a report's ``checks``).
        skipped: ``(check, why)`` of the checks that did not run, or ran only in part.
        notes: what it noticed that is no finding.
    """

    findings: list[Finding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __iadd__(self, other: Outcome) -> Outcome:
        self.findings += other.findings
        self.ran += other.ran
        self.skipped += other.skipped
        self.notes += other.notes
        return self

    def report(self, *, allow: tuple[Allow, ...], name: str, device: str, operations: int) -> Report:
        """The outcome as a capture site's :class:`~graphcheck.Report`."""
        return Report(self.findings, allow=allow, name=name, device=device, operations=operations,
                      checks=self.ran, skipped=self.skipped, notes=self.notes)  # fmt: skip


#: Why the comparison and ownership checks did not run at a site that passed before.
VALIDATED_BEFORE = "validated before in this process (revalidate=True runs it again)"


def comparison(
    reference: LaunchTrace | None, captured: LaunchTrace, owned: BufferSet | None, *, strict: bool,
    validated_before: bool, first_call: str | None = None, against: str = REFERENCE_CALL,
) -> Outcome:  # fmt: skip
    """The eager reference call (or ``against``: the validated capture) against the captured
    call (:func:`drift`; ``first_call``: what to say of operations only one call issued that
    look like first-call work)."""
    if reference is not None:
        uncompared: list[str] = []  # conditional bodies the reference call did not run
        remarks: list[str] = []
        found = drift(reference, captured, owned, strict=strict, notes=uncompared, first_call=first_call,
                      against=against, remarks=remarks)  # fmt: skip
        if against == REFERENCE_CALL:
            # Only a call made just before the capture reads the host memory the program left
            # for it: staging fed between replays differs from what an earlier capture read.
            found += host_inputs(reference, captured, owned)
        return Outcome(found, ["compare"], [("compare", why) for why in uncompared], remarks)
    if validated_before:
        return Outcome(skipped=[("compare", VALIDATED_BEFORE), ("ownership", VALIDATED_BEFORE)])
    return Outcome(skipped=[("compare", "no reference call (pass reference=, or use graphcheck.capture)")])


def host_rules(captured: LaunchTrace, owned: BufferSet | None, *, strict: bool, device: str) -> Outcome:
    """What the captured call's own record shows: buffers it allocated, arguments graphcheck
    could not decode, and on the CPU what a CUDA capture could not do."""
    out = Outcome(ran=["allocations"])
    if captured.allocations:
        out.findings += allocations(captured, owned, strict=strict) + structures_made(captured, owned, device)
        temporaries = graph_owned(captured, owned, strict=strict)
        if temporaries:
            out.notes.append(temporaries)
    out.notes += undecoded(captured)
    out.findings += uncaptured(captured)
    if device.startswith("cpu"):
        out.findings += cuda_rules(captured) + cpu_overloads(captured)
    if not len(captured):
        out.notes.append("the capture recorded no operation: the graph does nothing when replayed")
    return out


def owned_by_producer(
    captured: LaunchTrace, owned: BufferSet | None, reference: LaunchTrace | None, *, validated_before: bool
) -> Outcome:
    """Every address against the owners' buffers (:func:`ownership`), buffers Warp keeps for
    itself aside."""
    if owned is None:
        return Outcome(skipped=[("ownership", "no owners (pass owners=)"),
                                ("replay", "no owners: replays are not checked")])  # fmt: skip
    if validated_before:
        return Outcome()
    out = Outcome(ran=["ownership"])
    held = held_by_warp(captured, reference)
    if held:
        kept = set(held.values())
        vias = ", ".join(sorted({f"wp.{a.via}" for a in kept}))
        out.notes.append(
            f"{len(kept)} buffer(s) Warp made for itself during the reference call and kept "
            f"({sum(a.nbytes for a in kept)} bytes, under {vias}) are used: Warp holds them, the owners need not"
        )
    foreign = ownership(captured, owned, held)
    if foreign:
        foreign, cached = held_for_the_process(foreign)
        if cached:
            out.notes.append(cached)
    out.findings += foreign
    return out


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


# -- Before a replay -------------------------------------------------------------------------


def stale_pointers(
    baked: Iterable[Baked],
    owned: BufferSet,
    kept_now: Callable[[], BufferSet] | None = None,
    held_at: dict[int, str] | None = None,
) -> list[Finding]:
    """A ``stale-pointer`` for every baked address that lay in an owned buffer at capture
    and no longer lies in that same buffer (by its label: the path the step reaches it by),
    or no longer fits in it, unless one of the objects built once that the operation took
    it from (a struct, a ``wp.Launch`` command, an indexed array: :attr:`Baked.kept`) still
    keeps it at the same path: the step reaches it through that object, as the graph does.

    Addresses the owners did not hold at capture were reported then and are not checked.

    Args:
        baked: the graph's addresses.
        owned: the owners' buffers now.
        kept_now: the owners' buffers now, walked for every path to each array
            (:func:`graphcheck.buffers.holders_of`); called at most once, for an address
            not found under its label first.
        held_at: gets, for each address found through such a path, its position in
            ``baked`` -> the path (where to look for it before the next replay).
    """
    stale: dict[int, list[Any]] = {}
    walked: list[BufferSet] = []
    for position, address in enumerate(baked):
        if address.label is None:
            continue  # not owned at capture: reported then
        hit = owned.find(address.ptr, address.nbytes) or owned.buffer_at(address.ptr)
        if (hit is None or hit.label != address.label) and kept_now is not None:
            if not walked:
                walked.append(kept_now())
            path = _still_held(address, walked[0])
            if path is not None:
                if held_at is not None and path != address.label:
                    held_at[position] = path
                continue
        if hit is None:
            problem = f"{address.ptr:#x} ({address.label} at capture) is in no buffer the owners hold now"
        elif address.ptr + address.nbytes > hit.end:
            problem = (
                f"{address.ptr:#x} (+{address.nbytes} bytes) no longer fits in {hit.label} "
                f"({hit.nbytes} bytes now): the buffer was resized"
            )
        elif hit.label != address.label:
            problem = f"{address.ptr:#x} was {address.label} at capture and is {hit.label} now"
        else:
            continue
        # One finding per stale address, however many operations use it.
        entry = stale.setdefault(address.ptr, [address, hit, problem, 0])
        entry[3] += 1
    findings = []
    for address, hit, problem, uses in stale.values():
        more = f"; used by {uses - 1} more operation{'s' if uses > 2 else ''}" if uses > 1 else ""
        findings.append(
            make_finding(
                "stale-pointer",
                address.kernel,
                kernel=address.kernel,
                arg=address.arg,
                index=address.index,
                site=address.site,
                reference=address.label,
                captured=None if hit is None else hit.label,
                values=problem + more,
            )
        )
    return findings


def _still_held(address: Baked, now: BufferSet) -> str | None:
    """The path the step reaches ``address`` by that still holds it whole (one of the objects
    built once that kept it, or else its label, though another path names it first now),
    else None."""
    for path in address.kept or (address.label,):
        span = now.held_at(path) if path is not None else None
        if span is not None and span[0] <= address.ptr and address.ptr + address.nbytes <= span[1]:
            return path
    return None


def stale_values(values: Iterable[BakedValue], holders: Mapping[str, Any]) -> list[Finding]:
    """A finding for every argument whose bytes the graph baked from an object the owners
    hold (a struct's field, a ``wp.Launch`` command's parameter) and that the object now
    holds otherwise: ``scalar-drift`` for a value, ``buffer-drift`` for an array,
    ``dim-drift`` for a command's launch dimensions. The graph replays what it baked.

    Args:
        values: what the graph baked (:func:`graphcheck.replay.baked_values`).
        holders: the owners' structs and commands now, by label.
    """
    findings = []
    for value in values:
        held = _warp.baked_by_value(holders.get(value.label))
        if held is None or held[0] != value.kind:
            continue  # no longer held there: nothing the graph would take from it
        now = tuple(bytes(part) for part in held[1])
        if now == value.baked or len(now) != len(value.baked):
            continue
        record, baked, params = value.record, value.params_with(value.baked), value.params_with(now)
        layout = record.layout
        changed: list[tuple[str, str, Any, Any]] = []
        if params[0] != baked[0]:
            changed.append(("dim-drift", "dim", launch_dim(layout[0], baked[0]), launch_dim(layout[0], params[0])))
        after = decode(layout, params)
        for name, before in decode(layout, baked).items():
            if after.get(name) != before:
                kind = "buffer-drift" if isinstance(before, ArrayRef) else "scalar-drift"
                changed.append((kind, name, before, after.get(name)))
        what = "a wp.Launch command" if value.kind == "launch" else "a struct"
        fix = (
            f"the graph replays what {value.label} held at capture: capture again after changing it, or keep what "
            "changes between replays in a device array the kernel reads"
        )
        for kind, name, before, after_value in changed:
            findings.append(
                make_finding(
                    kind,
                    f"{record.kernel} replays {what} the owners changed since capture:",
                    kernel=record.kernel,
                    arg=name,
                    index=value.index,
                    site=record.site,
                    reference=before,
                    captured=after_value,
                    values=f"{_shown(before)} baked at capture, {_shown(after_value)} in {value.label} now",
                    fix=fix,
                )
            )
    return findings


def _shown(value: Any) -> str:
    return str(value) if isinstance(value, ArrayRef) else repr(value)


# Warp's own errors when work inside a capture cannot be captured.
_CAPTURE_ERROR_WORDS = ("capture", "capturing")


def is_capture_error(error: BaseException) -> bool:
    """Whether Warp raised ``error`` because the capture itself failed (raised in Warp's
    own code, saying so, or in Warp's capture recorder), rather than the user's code raising."""
    if not isinstance(error, Exception):
        return False
    if _raised_in_capture_machinery(error):
        return True
    if not isinstance(error, (RuntimeError, NotImplementedError)):
        return False
    text = str(error).lower()
    if not any(word in text for word in _CAPTURE_ERROR_WORDS):
        return False
    code = _raised_in(error)
    return code is not None and _warp.code_kind(code) is CodeKind.WARP


def _raised_in(error: BaseException) -> Any:
    """The code object of the innermost frame ``error`` was raised in, or None."""
    tb = error.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return None if last is None else last.tb_frame.f_code


def _raised_in_capture_machinery(error: BaseException) -> bool:
    code = _raised_in(error)
    return code is not None and _warp.in_capture_machinery(code)

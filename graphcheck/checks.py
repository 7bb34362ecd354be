"""The checks on one capture site, each turning traces into findings.

- :func:`drift` compares the eager reference call with the captured call;
- :func:`allocations` finds buffers allocated during the captured call and baked into it;
- :func:`ownership` finds addresses outside every buffer the owners hold.

Each cause gives one finding: differences of one argument at one call site are
grouped, a run of extra or missing operations is one finding, and an address already
reported as a per-call allocation is not reported again as drift or as foreign.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .compare import Difference, compare_traces, value_texts
from .findings import Finding, make_finding
from .params import ArrayRef

if TYPE_CHECKING:
    from .buffers import BufferSet
    from .record import Allocation, LaunchRecord, LaunchTrace

__all__ = ["allocations", "drift", "ownership"]


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


def _where(diff: Difference) -> str:
    if diff.where_a and diff.where_b:
        # Both addresses are in owned buffers: name them, by the names the owners give
        # them after the capture (a swapped buffer has changed names since).
        return (
            f"{diff.where_a} in the reference call, {diff.where_b} captured (buffers named as the owners hold them now)"
        )
    left, right, delta = value_texts(diff.value_a, diff.value_b, diff.where_a, diff.where_b)
    return f"{left} in the reference call, {right} captured" + (f" (Δ {delta})" if delta else "")


def drift(reference: LaunchTrace, captured: LaunchTrace, buffers: BufferSet | None) -> list[Finding]:
    """Findings for every way the captured call differs from the reference call."""
    diffs = compare_traces(reference, captured, buffers, streams=True)
    # Findings in report order; a group's key holds its place while the group fills up.
    findings: list[Finding | tuple[Any, ...]] = []
    groups: dict[tuple[Any, ...], list[Difference]] = {}
    run: list[Difference] = []

    def flush_run() -> None:
        if run:
            findings.append(_sequence_finding(run))
            run.clear()

    for diff in diffs:
        if diff.what in ("missing", "extra"):
            if run and (run[-1].what != diff.what or not _adjacent(run[-1], diff)):
                flush_run()
            run.append(diff)
            continue
        flush_run()
        if diff.what == "kernel":
            findings.append(_sequence_finding([diff]))
            continue
        if diff.is_array and diff.where_b and diff.where_b.startswith("allocated at"):
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
    return [f if isinstance(f, Finding) else _drift_finding(groups[f]) for f in findings]


def _adjacent(a: Difference, b: Difference) -> bool:
    if a.what == "missing":
        return a.index_a is not None and b.index_a == a.index_a + 1
    return a.index_b is not None and b.index_b == a.index_b + 1


def _drift_finding(group: list[Difference]) -> Finding:
    first = group[0]
    record = first.record
    kind = _kind_of(first)
    values = (
        _where(first)
        if kind not in ("dim-drift", "stream-drift")
        else (f"{first.value_a!r} in the reference call, {first.value_b!r} captured")
    )
    args = list(dict.fromkeys(d.arg for d in group))
    operations = list(dict.fromkeys(d.index_b for d in group))
    if kind == "buffer-drift" and len(args) > 1:
        values = "; ".join(f"{d.arg}: {_where(d)}" for d in group if d.index_b == first.index_b)
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
        detail={"operations": [d.index_b for d in group], "reference index": first.index_a, **_per_argument(group)},
    )


def _per_argument(group: list[Difference]) -> dict[str, Any]:
    """Each array argument's values and the owned buffers they lie in, for JSON readers."""
    arrays = {d.arg: d for d in group if d.is_array and d.arg and d.index_b == group[0].index_b}
    if not arrays:
        return {}
    return {"arguments": {arg: {"reference": d.value_a, "captured": d.value_b, "reference buffer": d.where_a,
                                "captured buffer": d.where_b} for arg, d in arrays.items()}}  # fmt: skip


def _sequence_finding(run: list[Difference]) -> Finding:
    first = run[0]
    if first.what == "kernel":
        assert first.record_a is not None and first.record_b is not None
        return make_finding(
            "launch-sequence-drift",
            f"{first.record_b.kernel} where the reference call issued {first.record_a.kernel}",
            kernel=first.record_b.kernel,
            index=first.index_b,
            site=first.record_b.site,
            reference=first.record_a.kernel,
            captured=first.record_b.kernel,
            values=f"{first.record_a.kernel} in the reference call ({first.record_a.site.short}), "
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
        what = f"{ops} issued only by the reference call, starting with {record.kernel}"
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
        detail={"what": first.what, "operations": count},
    )


def _addresses(record: LaunchRecord) -> Iterator[tuple[str, int, int]]:
    """``(argument, address, bytes)`` of every array an operation hands to the device."""
    for name, ref in record.arrays():
        yield name, ref.start, max(ref.nbytes, 1)
        if ref.grad:
            yield f"{name}.grad", ref.grad, max(ref.nbytes, 1)


def _native_words(record: LaunchRecord) -> Iterator[tuple[str, int]]:
    if record.kind == "native":
        for name, value in record.args.items():
            if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF:
                yield name, value


def _in_owned_host_memory(alloc: Allocation, owned: BufferSet | None) -> bool:
    # Warp wraps host memory it did not allocate (assign(numpy_array)): fine when the
    # owners hold that memory.
    return alloc.how == "wrapped" and owned is not None and owned.locate(alloc.start) is not None


def allocations(captured: LaunchTrace, owned: BufferSet | None = None) -> list[Finding]:
    """One finding per buffer allocated during the captured call that an operation uses."""
    uses: dict[Allocation, list[tuple[int, LaunchRecord, str]]] = {}
    for index, record in enumerate(captured.records):
        pointers = [(n, p) for n, p, _ in _addresses(record)] + list(_native_words(record))
        for name, ptr in pointers:
            alloc = captured.allocation_at(ptr, record.seq)
            if alloc is not None and not _in_owned_host_memory(alloc, owned):
                uses.setdefault(alloc, []).append((index, record, name))
    findings = []
    for alloc, used in uses.items():
        index, record, name = used[0]
        via = f"wp.{alloc.via}" if alloc.via and alloc.via != "array" else "wp.array"
        how = f"wraps host memory ({via})" if alloc.how == "wrapped" else f"was allocated by {via}"
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
                values=f"{alloc.label} {how} at {alloc.site.short} during the call{more}",
                detail={"allocated at": alloc.site, "address": alloc.start, "bytes": alloc.end - alloc.start},
            )
        )
    return findings


def ownership(captured: LaunchTrace, owned: BufferSet) -> list[Finding]:
    """One finding per argument (at one call site) that points outside the owned buffers."""
    # One finding per foreign address: a shared scratch buffer used by three launches
    # is one cause.
    groups: dict[int, list[tuple[int, LaunchRecord, str]]] = {}
    for index, record in enumerate(captured.records):
        for name, ptr, nbytes in _addresses(record):
            if captured.allocation_at(ptr, record.seq) is not None:
                continue  # reported by allocations()
            hit = owned.buffer_at(ptr)
            if hit is not None and ptr + nbytes <= hit.end:
                continue
            groups.setdefault(ptr, []).append((index, record, name))
    findings = []
    for ptr, used in groups.items():
        index, record, name = used[0]
        kernel = record.kernel
        hit = owned.buffer_at(ptr)
        if hit is not None:
            values = f"{ptr:#x} starts in {hit.label} but runs past its end"
        else:
            values = f"{ptr:#x} is in none of the {len(owned)} owned buffers"
        if len(used) > 1:
            values += f"; and in {len(used) - 1} more operation{'s' if len(used) > 2 else ''}"
        ref = record.args.get(name.removesuffix(".grad"))
        findings.append(
            make_finding(
                "foreign-buffer",
                kernel,
                kernel=kernel,
                arg=name,
                index=index,
                site=record.site,
                captured=ref if isinstance(ref, ArrayRef) else ptr,
                values=values,
                detail={"address": ptr},
            )
        )
    return findings

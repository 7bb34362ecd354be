"""What differs between the reference call and the capture: the ``*-drift`` kinds.

:func:`drift` aligns the two calls operation by operation (:mod:`graphcheck.compare`) and
gives one finding per cause: differences of one argument at one call site are grouped, a
run of extra or missing operations is one ``launch-sequence-drift``, and an address already
reported as a per-call allocation is left to :mod:`~graphcheck.checks.made_per_call`. Buffer
swaps that carry no state (:mod:`~graphcheck.checks.swaps`) and Warp's own scratch
(:mod:`~graphcheck.checks.warp_pools`) are remarks, not findings; host memory the call
writes and uploads is :mod:`~graphcheck.checks.host_inputs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _warp
from ..compare import Difference, compare_traces, value_texts
from ..findings import KINDS, Finding, make_finding
from ..params import ArrayRef
from .host_inputs import host_inputs
from .made_per_call import reported_allocation
from .swaps import carrying_state, swapped_pair
from .vocabulary import REFERENCE_CALL, VALIDATED_BEFORE, Outcome
from .warp_pools import without_warp_scratch

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..record import LaunchTrace

__all__ = ["COMPARED_KINDS", "check", "drift", "first_call_fix", "first_call_shaped"]


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
    argument that points into a buffer :func:`~graphcheck.checks.made_per_call.allocations`
    reports is left to it.

    ``first_call`` (when given) is said in the fix of the operations only one call issued
    when they look like work only a first call does (see :func:`first_call_shaped`).
    ``notes`` gets what could not be compared; ``remarks`` what is no finding (a buffer
    swap that carries no state).
    """
    diffs = compare_traces(reference, captured, buffers, streams=True, notes=notes)
    first_call = first_call if first_call_shaped(diffs) else None
    diffs = carrying_state(diffs, reference, captured, buffers, remarks)
    diffs = without_warp_scratch(diffs, reference, captured, buffers, remarks)
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
    buffer-drift is two owned buffers trading places (see :func:`swapped_pair`), else nothing."""
    if buffers is None:
        return {}
    pairs = [swapped_pair(d, buffers) for d in group if d.is_array]
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


def check(
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

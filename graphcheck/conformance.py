"""The producer conformance kit: what a producer must do for its step to be captured, checked at once.

:func:`check_producer` runs four checks on producers ``make`` builds and gives one report:

1. static topology: ``calls`` consecutive calls of one producer issue the same operations
   (temporaries the call allocates are matched between calls, as the comparison does); a
   difference only the first call has is settled by later calls as :func:`graphcheck.capture`
   settles it (:mod:`graphcheck.settling`);
2. disjoint buffers: two producers built alike use no buffer in common (``shared-buffer``,
   naming where each holds it: a module-level cache, a class attribute, a default argument);
3. the capture and replay checks of :func:`graphcheck.capture`;
4. the value check of :func:`graphcheck.verify_replay`.

Example::

    report = gc.check_producer(Simulator, calls=3, device="cpu")   # GraphCheckError if it does not conform
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

from . import checks, settling
from .buffer_set import BufferSet
from .buffers import arrays_of, buffers_of
from .findings import Finding, Report, act, check_on_failure, make_finding
from .operations import LaunchRecord
from .options import check_count, check_method
from .record import LaunchTrace, trace_launches
from .values import build, check_values, not_checked, resolve_device, step_of

__all__ = ["check_producer"]


def check_producer(
    make: Callable[..., Any],
    calls: int = 3,
    device: Any = None,
    method: str = "step",
    on_failure: str = "raise",
) -> Report:
    """Check that the producers ``make`` builds can have their step captured and replayed.

    1. Static topology: one producer's ``calls`` consecutive calls each issue the operations
       the first did (the drift kinds: ``launch-sequence-drift``, ``scalar-drift``...). When
       calls 1 and 2 differ, calls 3 and 4 are compared, and call 2 with each call from the
       fourth on (the step is called up to twice more when ``calls`` is below 4, said in a
       note): a difference only the first call has (a warm start, lazy set-up, a first swap)
       is settled with a note, as :func:`graphcheck.capture` settles it; drift that
       continues stays reported.
    2. Disjoint buffers: two producers built alike, one call each, use no buffer in common;
       else ``shared-buffer``, naming the buffer and where each producer holds it.
    3. The capture and replay checks (:func:`graphcheck.capture`, ``check_replay``).
    4. The value check (:func:`graphcheck.verify_replay`, ``calls`` steps): a
       ``replay-divergence`` is reported as a finding when nothing else explains it, and
       as a note when other findings do.

    Args:
        make: builds a fresh producer (a class or a factory), called with ``device=``
            when it takes one; it may also return the step callable itself.
        calls: how many consecutive calls the topology and value checks make (at least 2).
        device: the device (None: Warp's default device).
        method: the producer's method to capture.
        on_failure: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"``.

    Returns:
        One :class:`Report` with a finding per cause; ``"not-checked"``, with nothing built
        or run, while ``GRAPHCHECK_DISABLE`` is set.

    Raises:
        GraphCheckError: with ``on_failure="raise"``, when the producer does not conform.
        ValueError: for ``calls < 2``, or a ``make`` that builds producers that differ before any step.
        TypeError: when ``make`` is not callable or the producer has no ``method``.
    """
    __tracebackhide__ = True
    check_on_failure(on_failure)
    check_count("calls", calls, 2, "later calls are compared with the first")
    check_method(method)
    device = resolve_device(device)
    report = not_checked(make, method, device)
    if report is None:
        report = _check(make, calls, device, method)
    act(report, on_failure)
    return report


def _check(make: Callable[..., Any], calls: int, device: str, method: str) -> Report:
    first = build(make, device)
    first_step = step_of(first, method, make)
    owned = buffers_of(first, root="producer")
    traces = []
    for _ in range(calls):
        with trace_launches() as trace:
            first_step()
        traces.append(trace)
    topology, settled = _topology(first_step, traces, owned)
    second = build(make, device)
    second_step = step_of(second, method, make)
    with trace_launches() as other:
        second_step()
    shared = _shared_buffers(first, traces[0], second, other, make, first_step)
    shared_addresses = {f.detail["address"] for f in shared}
    rest = check_values(make, calls, device, method, 0.0, 0.0)
    # A shared buffer the owners do not hold (a class attribute) is also foreign to them: one cause.
    structural = [
        f
        for f in rest.findings
        if f.kind != "replay-divergence"
        and not (f.kind == "foreign-buffer" and f.detail.get("address") in shared_addresses)
    ]
    diverged = rest.of_kind("replay-divergence")
    findings = shared + _one_per_cause(topology + structural)
    notes = [*settled, *rest.notes]
    if diverged and findings:
        notes.append(
            "the replay diverged too, as the findings above predict: "
            + "; ".join(f.message.split("; fix")[0] for f in diverged)
        )
    else:
        findings += diverged
    checks_run = ["topology", "disjoint buffers", *rest.checks]
    return Report(
        findings,
        name=rest.name,
        device=device,
        operations=len(traces[0]),
        checks=checks_run,
        notes=notes,
    )


def _one_per_cause(findings: list[Finding]) -> list[Finding]:
    """The first finding of each cause: a value that changes on every call drifts between calls 1
    and 2, calls 1 and 3, and between the capture's reference call and its capture."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for finding in findings:
        cause = (finding.kind, finding.kernel, finding.arg, finding.site)
        if cause not in seen:
            seen.add(cause)
            out.append(finding)
    return out


def _topology(
    step: Callable[[], Any], traces: list[LaunchTrace], owned: BufferSet | None
) -> tuple[list[Finding], list[str]]:
    """The drift between call 1 and each later call, settled as :func:`graphcheck.capture` settles
    a capture unlike its reference call (:mod:`graphcheck.settling`): when calls 1 and 2 differ,
    calls 3 and 4 are compared as they were, and call 2 with every call from the fourth on (the
    step is called again until there are four calls). A difference only the first call has is
    gone from them: a note; one that continues stays reported (``traces`` gains the extra calls).

    Returns:
        The findings, and the note on the later calls (none when calls 1 and 2 are alike).
    """
    topology = []
    for number, trace in enumerate(traces[1:], start=2):
        topology += [_between_calls(f, 1, number) for f in checks.drift(traces[0], trace, owned)]
    first = [f for f in topology if f.detail["calls"] == (1, 2)]
    if not settling.compared_differences(first):
        return topology, []
    made = len(traces)
    while len(traces) < 4:
        with trace_launches() as more:
            step()
        traces.append(more)
    later = [_between_calls(f, 3, 4) for f in checks.drift(traces[2], traces[3], owned)]
    again = [
        _between_calls(f, 2, number)
        for number, trace in enumerate(traces[3:], start=4)
        for f in checks.drift(traces[1], trace, owned)
    ]
    words = _kit_calls(made, len(traces) - made)
    note = settling.settling_note(first, later, unlike_first=bool(again), own_block=False, calls=words)
    if settling.compared_differences([*later, *again]):
        return topology + settling.same_causes_once(topology, [*later, *again]), [note]
    return [f for f in topology if f not in settling.compared_differences(topology)], [note]


def _kit_calls(made: int, extra: int) -> settling.LaterCalls:
    """The words of the kit's later calls: ``made`` calls asked for (``calls=``), ``extra`` more taken."""
    taken = (
        f"{extra} extra step{'s' if extra != 1 else ''} after the calls={made}"
        if extra
        else f"no extra step: calls={made}"
    )
    return settling.LaterCalls(
        compared="calls 1 and 2 differed",
        steps=f"graphcheck compared calls 3 and 4, and call 2 with each call from the fourth on ({taken})",
        later="calls 3 and 4",
        first="call 2",
        new="a later call",
        all_three=f"calls 2 to {made + extra}",
        instead="the capture check settles its reference call alike",
        otherwise="graphcheck.capture with warmup=0 reports the difference instead",
    )


# Words of the capture comparison's findings, and what they mean between two calls.
_WORDING = (
    (re.compile(r"the reference call"), "call {a}"),
    (re.compile(r"the captured call"), "call {b}"),
    (re.compile(r" captured\b"), " in call {b}"),
)


def _between_calls(finding: Finding, a: int, b: int) -> Finding:
    """A drift finding of the capture comparison, reworded for call ``a`` against call ``b``."""
    message = finding.message
    for pattern, words in _WORDING:
        message = pattern.sub(words.format(a=a, b=b), message)
    return dataclasses.replace(finding, message=message, detail={**finding.detail, "calls": (a, b)})


# -- shared buffers -------------------------------------------------------------------------


def _used(trace: LaunchTrace) -> Iterator[tuple[int, LaunchRecord, str, int, int]]:
    """``(index, record, argument, start, end)`` of every owned-or-foreign buffer a call used:
    buffers the call allocated itself are left out (the allocator hands their memory out again)."""
    for index, record in enumerate(trace.records):
        for name, ref in record.arrays():
            if ref.start and trace.allocation_at(ref.start, record.seq) is None:
                yield index, record, name, ref.start, ref.start + max(ref.nbytes, 1)


def _shared_buffers(
    first: Any, first_trace: LaunchTrace, second: Any, second_trace: LaunchTrace, make: Any, step: Any
) -> list[Finding]:
    """One ``shared-buffer`` finding per buffer that both producers' calls used."""
    theirs = BufferSet()
    for _, _, _, start, end in _used(second_trace):
        theirs.add_range(start, end, "used")
    holders = [
        buffers_of(first, root="first producer"),
        buffers_of(second, root="second producer"),
        _shared_places(first, make, step),
    ]
    findings, seen = [], set()
    for index, record, name, start, end in _used(first_trace):
        hit = theirs.buffer_at(start)
        if hit is None:
            continue
        held = [b for places in holders for b in _holding(places, start)]
        key = held[0].start if held else start
        if key in seen:
            continue
        seen.add(key)
        where = ", ".join(dict.fromkeys(b.label for b in held)) or "neither producer holds it"
        findings.append(
            make_finding(
                "shared-buffer",
                record.kernel,
                kernel=record.kernel,
                arg=name,
                index=index,
                site=record.site,
                reference=f"{start:#x}",
                captured=f"{start:#x}",
                values=f"both producers use the buffer at {start:#x} ({end - start} bytes); it is held by {where}",
                detail={"address": start, "held by": [b.label for b in held]},
            )
        )
    return findings


def _holding(places: BufferSet, ptr: int) -> list[Any]:
    hit = places.buffer_at(ptr)
    return [hit] if hit is not None else []


def _shared_places(producer: Any, make: Any, step: Any) -> BufferSet:
    """The arrays every producer built alike can reach: its class's attributes, the globals of the
    modules that define the producer, ``make`` and the step, and default arguments."""
    places = BufferSet()
    functions: list[Any] = [make, step, getattr(step, "__func__", None)]
    for cls in type(producer).__mro__[:-1]:
        for name, value in vars(cls).items():
            if isinstance(value, (types.FunctionType, classmethod, staticmethod)):
                functions.append(getattr(value, "__func__", value))
            elif not name.startswith("__"):
                _add(places, value, f"class attribute {cls.__qualname__}.{name}")
    for function in functions:
        code = getattr(function, "__code__", None)
        if code is None:
            continue
        defaults = dict(zip(reversed(code.co_varnames[: code.co_argcount]), reversed(function.__defaults__ or ())))
        defaults.update(function.__kwdefaults__ or {})
        for name, value in defaults.items():
            _add(places, value, f"default argument {function.__qualname__}({name}=...)")
    modules = dict.fromkeys(m for m in map(inspect.getmodule, (type(producer), make, step)) if m is not None)
    for module in modules:
        for name, value in vars(module).items():
            if not isinstance(value, (types.ModuleType, type)) and not name.startswith("__"):
                _add(places, value, f"module global {module.__name__}.{name}")
    return places


def _add(places: BufferSet, value: Any, label: str) -> None:
    for path, arr in arrays_of(value, root=label, max_depth=4):
        places.add(arr, path)

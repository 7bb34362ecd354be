"""Settling a verdict with later calls: a difference only the first call has.

The capture is the second call of the step, the reference call the first. When they differ
(a scalar, a launch dimension, a fill value, a copy range, a swap, a struct field, a
recorded command's parameter, the operations issued) and the user did not choose
``warmup``, a later eager call is the evidence (:func:`needs_later_calls`): a difference
only the first call has (a warm start, a first step size, lazy set-up, gradients a reused
tape zeroes from the second call on) is gone between later calls; one that continues (a
counter, every other call, a growing list) is still there.

So graphcheck replays the first capture once, calls the step once more eagerly and captures
it again (:func:`capture_again`); that eager call and the new capture are compared as the
reference call and the capture are, and the first capture with the new one
(:func:`settle`). The new graph is the one handed back: nothing graphcheck runs comes after
the graph it returns.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _capturing, _warp
from ._words import note_on
from .checks import FIRST_CAPTURE, LATER_CAPTURE, between_calls
from .findings import Allow, Finding, Report, comment_allowances
from .record import LaunchTrace

if TYPE_CHECKING:
    from .buffer_set import BufferSet
    from .graph import GraphMatch
    from .options import CaptureOptions
    from .site import Site

__all__ = [
    "FirstCapture", "LaterCalls", "capture_again", "capture_calls", "compared_differences", "needs_later_calls",
    "no_later_calls", "same_causes_once", "settle", "settling_note",
]  # fmt: skip

#: True while ``fallback="recapture"`` captures again: that capture's reference call is the
#: launch's one step, so its verdict takes no later calls.
_recapturing: contextvars.ContextVar[bool] = contextvars.ContextVar("graphcheck_recapturing", default=False)


@dataclass
class FirstCapture:
    """What the first capture left when its verdict needs later calls."""

    report: Report  # the first capture's verdict
    trace: LaunchTrace  # the first capture's trace
    graph: Any  # the first capture's graph
    match: GraphMatch | None  # and its nodes matched to the trace (CUDA)


@contextmanager
def no_later_calls() -> Iterator[None]:
    """Captures made inside take no later calls (``fallback="recapture"``: the capture's
    reference call is a launch's one step)."""
    token = _recapturing.set(True)
    try:
        yield
    finally:
        _recapturing.reset(token)


def needs_later_calls(report: Report, *, warmup: int | None, reference_ran: bool) -> bool:
    """Whether a verdict needs later calls: a reference call ran, the capture differs from
    it, and the user did not choose ``warmup`` (see the module's docstring)."""
    if not reference_ran or _recapturing.get():
        return False
    return warmup is None and bool(compared_differences(report.findings))


def capture_again(
    graph: Any, reference: Callable[[], Any], block: Callable[[], Any], device: str, options: CaptureOptions
) -> tuple[LaunchTrace, Any, LaunchTrace, BaseException | None]:
    """Take the later calls a verdict needs: replay the first capture's ``graph`` once (the
    step it holds: the producer's device state catches up with its host state), call
    ``reference`` once more eagerly under a trace, and capture ``block`` again.

    So a temporary the step makes and keeps each call (``self.scratch = wp.clone(x)``) is,
    on the owner, the one the new graph's replays write. Two more steps of the producer.

    Returns:
        The eager call's trace, and the new capture's graph, trace and capture error (see
        :func:`graphcheck._capturing.capture_block`).
    """
    try:
        _warp.replay_once(graph, options.stream)
        with LaunchTrace(eager=True) as again:
            reference()
        new_graph, trace, error = _capturing.capture_block(block, device, options)
    except BaseException as exc:
        note_on(
            exc,
            "graphcheck raised this while calling the step again to settle its verdict (a retry after the "
            "capture differed from the reference call: see the first-call page of graphcheck's docs); "
            "warmup=0 turns the retry off, warmup=1 calls the step before the reference call instead",
        )
        raise
    return again, new_graph, trace, error


def settle(
    first: FirstCapture,
    report: Report,
    trace: LaunchTrace,
    owned: BufferSet | None,
    *,
    strict: bool,
    allow: tuple[Allow, ...],
    site: Site | None,
    own_block: bool,
) -> tuple[Report, bool]:
    """The new capture's verdict (``report``, of the later eager call against the new
    capture's ``trace``), with what the later calls showed.

    A difference only the first call made is gone from the later calls (else it is real),
    and the first capture (the second call) is also what the new one is (else the difference
    is not the first call's alone). A guarded block that is not a call of the reference
    (``own_block``: a user's own ``with`` block, whose new capture is of ``reference=``) must
    likewise issue what the reference's new capture issues.

    Returns:
        The verdict, and whether the block's own first capture is the graph to hand back
        (its own block differs from the new capture of ``reference=``).
    """
    kept = [*report.findings, *report.suppressed]
    later = compared_differences(kept)
    first_view, new = first.trace.user_view(), trace.user_view()
    reference, captured, against = (new, first_view, LATER_CAPTURE) if own_block else (
        first_view, new, FIRST_CAPTURE)  # fmt: skip
    again = between_calls.check(reference, captured, owned, strict=strict, validated_before=False,
                                against=against).findings  # fmt: skip
    kept += same_causes_once(kept, again)
    note = settling_note(first.report.findings, later, unlike_first=bool(again), own_block=own_block)
    comments, _ = comment_allowances(site, (record.site for record in (*first_view, *new)))  # said in report.notes
    settled = Report(kept, allow=allow + comments, name=report.name, device=report.device,
                     operations=report.operations, checks=report.checks, skipped=report.skipped,
                     notes=(*report.notes, note))  # fmt: skip
    return settled, own_block and bool(again)


def compared_differences(findings: Sequence[Finding]) -> list[Finding]:
    """The findings that say the capture differs from the call it was compared with (the
    kinds :func:`graphcheck.checks.drift` gives), which a later call may settle."""
    return [f for f in findings if f.kind in between_calls.COMPARED_KINDS]


def _cause(finding: Finding) -> tuple[Any, ...]:
    # Operations only one call issued are one cause wherever the run starts (the two
    # comparisons align the calls differently); a value is one cause per argument.
    if finding.kind == "launch-sequence-drift":
        return (finding.kind,)
    return finding.kind, finding.kernel, finding.arg


def same_causes_once(found: Sequence[Finding], more: Sequence[Finding]) -> list[Finding]:
    """``more`` less the findings of a cause ``found`` already reports: the first capture
    (a guarded block's) compared with the new capture sees again the drift the later calls
    showed (a tape reused without reset, substeps that adapt); one cause, one finding."""
    causes = {_cause(f) for f in found}
    return [f for f in more if _cause(f) not in causes]


def _difference_text(finding: Finding) -> str:
    if finding.kind == "launch-sequence-drift":
        count = finding.detail.get("operations", 1)
        return f"{count} operation{'s' if count != 1 else ''} only in one of them"
    kernel = (finding.kernel or "an operation").rsplit(".", 1)[-1]
    return f"a {finding.kind} of {kernel}{'' if not finding.arg else f' {finding.arg!r}'}"


@dataclass(frozen=True)
class LaterCalls:
    """The calls a settling note names, in its words.

    Attributes:
        compared: the first two calls' difference (``the reference call differed from the capture``).
        steps: what graphcheck did to take the later calls, with how many extra steps.
        later: the later pair compared as the first two were (``that eager call and the new capture``).
        first: the second call, compared again with the latest (``the first capture``).
        new: the latest call (``the new one``).
        all_three: the later calls together (``that eager call, the new capture and the first capture``).
        instead: how the user asks for a warm-up call instead.
        otherwise: how the user asks for the difference to be reported instead.
    """

    compared: str
    steps: str
    later: str
    first: str
    new: str
    all_three: str
    instead: str
    otherwise: str


def capture_calls(returned: str) -> LaterCalls:
    """The words of a capture's later calls (:func:`capture_again`); ``returned`` names the graph handed back."""
    return LaterCalls(
        compared="the reference call differed from the capture",
        steps=(
            "graphcheck replayed the capture once, called the step once more eagerly and captured it again (two "
            f"extra steps; the graph returned is {returned})"
        ),
        later="that eager call and the new capture",
        first="the first capture",
        new="the new one",
        all_three="that eager call, the new capture and the first capture",
        instead="warmup=1 makes one warm-up call before the reference call instead",
        otherwise="warmup=0 reports the difference instead",
    )


def settling_note(
    first: Sequence[Finding],
    later: Sequence[Finding],
    *,
    unlike_first: bool,
    own_block: bool,
    calls: LaterCalls | None = None,
) -> str:
    """What the later calls showed, for the report's notes.

    Args:
        first: the first two calls' differences (the first capture's findings, compared
            with the reference call).
        later: the differences between the later pair (the later eager call and the new capture).
        unlike_first: whether the second call (the first capture) differs from the latest
            (the new capture).
        own_block: whether the first capture is a user's guarded block (the graph returned
            when it differs from the new capture of its ``reference=``).
        calls: the calls' words (None: a capture's, :func:`capture_calls`).
    """
    if calls is None:
        calls = capture_calls("the guarded block's own capture" if own_block and unlike_first else "the new capture")
    steps = calls.steps
    if later:
        return f"{steps}: {calls.later} differ too, so the difference is not work only the first call does"
    if unlike_first and own_block:
        return (
            f"{steps}; the guarded block's own capture differs from that new capture of reference= (a guarded block "
            "must issue what reference= issues at every later call)"
        )
    if unlike_first:
        return (
            f"{steps}: {calls.later} matched, but {calls.first} differs from {calls.new}, so the difference is not "
            "the first call's alone (over four calls, work on the second call only looks like work every third call)"
        )
    differences = compared_differences(first)
    said = "; ".join(_difference_text(f) for f in differences[:3])
    if len(differences) > 3:
        said += f"; and {len(differences) - 3} more"
    return (
        f"{calls.compared} ({said}), as when the first call differs from later ones (set-up, a warm start, a first "
        f"step size): {steps}, and {calls.all_three} matched; this verdict compares them ({calls.instead}). Work the "
        "step does every few calls, first on the first call (a rebuild every 10 steps counted from 0), can look the "
        f"same, and the graph never does it: {calls.otherwise}"
    )

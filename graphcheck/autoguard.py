"""Guard every capture a program makes, without changing the program.

:class:`AutoGuard` replaces ``wp.ScopedCapture``, ``wp.capture_begin`` / ``wp.capture_end``
and ``wp.capture_launch`` while it is active. Each capture then runs as a
:class:`~graphcheck.GraphGuard` without a reference call: per-call allocations, foreign
buffers and (on CUDA) the graph cross-check are checked when the capture ends, and every
``wp.capture_launch`` of a guarded graph checks for stale pointers first. The owners of a
capture are taken from where it was opened: the ``self`` of the method that opened it, or
else that frame's variables.

With ``reference_call=True`` a capture block made only of calls (``sim.step()``), or of
names assigned a call's value (``obs = env.step()``), runs once more eagerly right after it
is captured, and the capture is compared with that eager call, so drift is found too. The
graph the program keeps is its own capture, made from the state the program left for it;
the program then takes one extra step per capture.

``graphcheck run SCRIPT`` and the pytest marker ``@pytest.mark.graphcheck`` use it.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from . import _warp
from .checked import CheckedGraph, observe_replays
from .checks.capture_errors import user_site
from .findings import NOT_APPLICABLE, Allow, Finding, Report, allowances, unused_line
from .guard import GraphGuard, InferredOwners, checking_enabled, observe, opening_capture
from .options import CaptureOptions
from .record import LaunchTrace
from .schema import combined_status
from .site import CodeKind, Site, site_of

__all__ = ["AutoGuard"]


def _owners_from_frame(frame: Any) -> InferredOwners | None:
    if frame is None:
        return None
    local = frame.f_locals
    if "self" in local:
        return InferredOwners((local["self"],))
    values = {k: v for k, v in local.items() if not k.startswith("__")}
    return InferredOwners((values,)) if values else None


def _user_frame(frame: FrameType | None) -> FrameType | None:
    while frame is not None and _warp.code_kind(frame.f_code) is not CodeKind.USER:
        frame = frame.f_back
    return frame


def block_reference(frame: FrameType) -> tuple[Callable[[], None] | None, str]:
    """The body of the ``with`` block ``frame`` is entering, as a callable that runs it eagerly.

    Only a body made of plain calls (``sim.step()``, ``self.simulate()``), or of names assigned
    a call's value (``obs = env.step()``), qualifies: running it once more changes nothing but
    the producer's own state, one extra step of it. The eager run binds its names in a copy
    of the frame's variables, so the program's own names keep what its capture returned.

    Returns:
        The callable, or None and why the block cannot serve as its own reference.
    """
    filename, line = frame.f_code.co_filename, frame.f_lineno
    try:
        tree = ast.parse("".join(linecache.getlines(filename, frame.f_globals)))
    except (SyntaxError, ValueError):
        return None, f"the source of {filename} cannot be read"
    blocks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.With)
        and node.lineno <= line <= max(item.context_expr.end_lineno or node.lineno for item in node.items)
    ]
    if not blocks:
        return None, "the capture is not opened by a with statement"
    block = max(blocks, key=lambda node: node.lineno)
    for statement in block.body:
        why_not = _not_plain(statement)
        if why_not:
            where = Site(filename, statement.lineno, "").short
            return None, f"the capture block cannot run again as it is: {where}, {why_not}"
    code = compile(ast.Module(body=block.body, type_ignores=[]), filename, "exec", dont_inherit=True)
    scope_globals, scope_locals = frame.f_globals, frame.f_locals

    def reference() -> None:
        exec(code, scope_globals, dict(scope_locals))

    return reference, ""


def _not_plain(statement: ast.stmt) -> str:
    """Why running ``statement`` once more could change the program ("" when it cannot: a
    call, or names assigned a call's value, which the eager run binds in a copy of the frame's
    variables)."""
    code = ast.unparse(statement).splitlines()[0]
    code = code if len(code) <= 60 else code[:57] + "..."
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return ""
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign) and isinstance(statement.value, ast.Call):
        targets = [statement.target]
    else:
        return f"`{code}`, is not a call (only calls, and names assigned a call's value, run again unchanged)"
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                return (
                    f"`{code}`, assigns to {ast.unparse(node)}, which running the block again would change (assign "
                    "the call's value to a name)"
                )
    return ""


#: What a capture is compared with under ``reference_call=True``, as its findings name it.
EAGER_AFTER = "the eager call after the capture"


class _ComparedAfter(GraphGuard):
    """A guard of a program's capture block that compares the capture with an eager run of
    the block made right after it. Nothing runs before the capture, so the graph is the one
    the program would have made without graphcheck; the eager call is the one extra step."""

    _against = EAGER_AFTER

    def __init__(self, device: Any, block: Callable[[], None] | None, owners: Any, options: CaptureOptions,
                 *, name: str, validate_step: str) -> None:  # fmt: skip
        super().__init__(device, None, owners, options, name=name)
        self._after = block
        self._validate = validate_step
        #: Why the eager call after the capture gave nothing to compare with (it raised), if it did not.
        self.after_failed: str | None = None

    def _judge(self, trace: LaunchTrace, capture_error: BaseException | None, retry: Any = None) -> None:
        if capture_error is None and self._after is not None and self._reference_trace is None:
            self._reference_trace = self._eager_after()
        super()._judge(trace, capture_error, retry)
        if self._reference_trace is not None:
            # Nothing ran between the capture and the eager call: every drift is host state
            # the block itself changes, which has two readings.
            self.report.findings = tuple(_both_readings(f, self._validate) for f in self.report.findings)
            self.report.suppressed = tuple(_both_readings(f, self._validate) for f in self.report.suppressed)
            if self.checked is not None:
                self.checked.report = self.report

    def _eager_after(self) -> LaunchTrace | None:
        """The block run once eagerly under a trace (None when it raised: said in :attr:`after_failed`)."""
        assert self._after is not None
        trace = LaunchTrace(eager=True)
        try:
            with trace:
                self._after()
        except Exception as error:
            site = user_site(error.__traceback__)
            where = f" at {site.short}" if site is not None else ""
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            self.after_failed = f"the eager call after the capture raised {type(error).__name__}{where}" + (
                f": {first}" if first else ""
            )
            return None
        finally:
            self.eager_calls += 1
        return trace


def _both_readings(finding: Finding, validate_step: str) -> Finding:
    """A drift between a capture and the eager call right after it, with both of its readings
    (``validate_step``: how the front end validates a step on its own)."""
    if not finding.kind.endswith("-drift"):
        return finding
    fix = (
        "the block itself changed this between the capture and the eager call after it. Either every replay repeats "
        f"what was captured, a bug if the program means it to advance each call ({finding.fix}); or the block is "
        "set-up captured once and never called again, and only the extra eager call differs: accept it, or validate "
        f"the step itself with {validate_step}"
    )
    if finding.kind == "launch-sequence-drift" and finding.detail.get("what") == "extra":
        fix = (
            "if these are set-up only a first call does, the program captured its first call and every replay repeats "
            f"them: call the step once before capturing it. Else {fix}"
        )
    return dataclasses.replace(finding, fix=fix, message=f"{finding.message.split('; fix: ')[0]}; fix: {fix}.")


class AutoGuard:
    """Guard every ``wp.ScopedCapture`` and ``wp.capture_launch`` while active.

    Args:
        options: a :class:`~graphcheck.CaptureOptions` for every capture (``allow``,
            ``allow_foreign_nodes``, ``strict_ownership``...). Findings are collected,
            never raised (``on_failure`` is ``"ignore"``), every launch is checked
            (``replay_check`` is ``"always"``), and each capture's ``stream``,
            ``force_module_load`` and ``capture_mode`` are its own.
        reference_call: run each capture block made of plain calls (or of names assigned a
            call's value) once more eagerly right after it is captured, and compare the
            capture with that call (one extra step of the program per capture; the graph
            stays the program's own capture).
        keep_graphs: keep every capture's :class:`~graphcheck.CheckedGraph` in
            :attr:`graphs` (for pictures; it keeps the graphs alive).
        to_compare: how the front end turns the comparison on, as the closing line and the
            NOT-checked line for ``compare`` say it (``rerun with `graphcheck run
            --reference-call```; the pytest plugin names its marker's ``reference_call=True``).
        validate_step: how the front end validates a step on its own, as the NOT-checked
            lines and a drift's fix suggest it (``graphcheck check MODULE:FACTORY``; the plugin
            names its fixture).
        allowance: how the front end writes an allowance it was given, where one matched
            nothing (the command line's ``--allow KIND:KERNEL``; default ``gc.Allow(...)``).
        keywords: capture options as keywords, in place of (or over) ``options``.

    Attributes:
        reports: the report of each guarded capture, in order (one whose block raised is
            ``not-checked``, and said in the closing lines).
        replay_reports: the reports of replay checks that found something (allowed
            findings included), each named
            after the ``wp.capture_launch`` line that ran it.
        graphs: with ``keep_graphs``, each capture's checked graph, in order.
        extra_steps: the eager calls of capture blocks graphcheck made (``reference_call``).

    Raises:
        ValueError: for a ``warmup`` option: warm-up calls before a capture would change
            the graph the program keeps (``gc.capture`` and ``graphcheck check`` take it).
    """

    def __init__(
        self,
        options: CaptureOptions | None = None,
        *,
        reference_call: bool = False,
        keep_graphs: bool = False,
        to_compare: str = "rerun with `graphcheck run --reference-call`",
        validate_step: str = "`graphcheck check MODULE:FACTORY`",
        allowance: Callable[[Allow], str] | None = None,
        **keywords: Any,
    ) -> None:
        self._to_compare, self._validate, self._allowance = to_compare, validate_step, allowance
        self.options = CaptureOptions.of(options, **keywords, on_failure="ignore", replay_check="always")
        if self.options.warmup is not None:
            raise ValueError(
                f"warmup={self.options.warmup}: a guarded program takes no warm-up calls (they would run before its "
                "capture and change the graph it keeps); its capture is compared with an eager call made after it. "
                "Warm up in the program before capturing, or validate the step with warmup= in gc.capture"
            )
        self.reference_call = reference_call
        self.extra_steps = 0
        self.reports: list[Report] = []
        self.keep_graphs = keep_graphs
        self.graphs: list[CheckedGraph] = []
        self.replay_reports: list[Report] = []
        self._graphs: weakref.WeakKeyDictionary[Any, CheckedGraph] = weakref.WeakKeyDictionary()
        self._reported: set[tuple[int, str]] = set()
        # The captures whose block raised, each as the report kept for it and what the closing lines say.
        self._raised: list[tuple[Report, str]] = []
        self._restore: Any = None
        self._scoped: Any = None
        # Captures opened with wp.capture_begin, by device, innermost last; and how deep
        # graphcheck's own use of Warp's capture_begin / capture_end is.
        self._begun: dict[str, list[Any]] = {}
        self._inside = 0
        self._checking = threading.local()  # .depth > 0 while this thread checks before a wp.capture_launch

    @property
    def findings(self) -> list[Any]:
        """Every finding of every capture and replay check."""
        return [f for r in self.reports + self.replay_reports for f in r.findings]

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"``, ``"partial"`` or ``"not-checked"`` (checking
        disabled, or no capture guarded), for every capture and replay check together."""
        if not self.reports or not checking_enabled():
            return "failed" if self.findings else "not-checked"
        return combined_status(r.status for r in self.reports + self.replay_reports)

    @property
    def ok(self) -> bool:
        """Whether every guarded capture passed every check (see :attr:`status`)."""
        return self.status == "passed"

    def __enter__(self) -> AutoGuard:
        if self._restore is not None:
            raise RuntimeError("this AutoGuard is already active")
        self._scoped = self._scoped_capture_class()
        self._restore = _warp.patch_capture_api(
            self._scoped, self._capture_launch, self._capture_begin, self._capture_end
        )
        stop_guards, stop_replays = observe(self._programs_guard), observe_replays(self._programs_replay_check)
        self._stop_observing = lambda: (stop_guards(), stop_replays())
        return self

    def __exit__(self, *exc: object) -> None:
        restore, self._restore = self._restore, None
        restore()
        self._stop_observing()

    def _programs_guard(self, guard: GraphGuard) -> None:
        """A verdict of the program's own GraphGuard (or gc.capture): already guarded, so its
        capture is left alone (see _capture_begin), and its report counts with the others."""
        if not self._inside:  # not one of this AutoGuard's own guards, which _record themselves
            self._record(guard)

    def _scoped_capture_class(self) -> type:
        autoguard = self
        base = _warp.ORIGINAL_SCOPED_CAPTURE

        class GuardedScopedCapture(base):  # type: ignore[misc, valid-type]
            """``wp.ScopedCapture`` under graphcheck (see graphcheck.autoguard)."""

            def __enter__(self) -> Any:
                if getattr(self, "external", False) or getattr(self, "apic", False):
                    return super().__enter__()  # not guarded: external and APIC captures
                frame = _user_frame(sys._getframe(1)) or sys._getframe(1)
                options = CaptureOptions.of(autoguard.options, stream=self.stream,
                                            force_module_load=self.force_module_load,
                                            capture_mode=getattr(self, "capture_mode", None))  # fmt: skip
                site = site_of(frame.f_code, frame.f_lasti).short
                block, why_not = block_reference(frame) if autoguard.reference_call else (None, "")
                self._graphcheck = _ComparedAfter(
                    self.device, block, _owners_from_frame(frame), options, name=f"capture at {site}",
                    validate_step=autoguard._validate,
                )  # fmt: skip
                self._graphcheck._site = site_of(frame.f_code, frame.f_lasti)  # the with line: its comment counts
                autoguard._inside += 1  # the guard's own capture reaches Warp's capture_begin
                try:
                    self._graphcheck.__enter__()
                finally:
                    autoguard._inside -= 1
                self._graphcheck_why_not = why_not
                self.active = True
                return self

            def __exit__(
                self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
            ) -> bool:
                guard = getattr(self, "_graphcheck", None)
                if guard is None:
                    return bool(super().__exit__(exc_type, exc, tb))
                autoguard._inside += 1
                try:
                    suppressed = guard.__exit__(exc_type, exc, tb)
                finally:
                    autoguard._inside -= 1
                    self.active = False
                    self.graph = guard.graph
                if exc is not None and not suppressed:
                    autoguard._block_raised(guard, exc)
                else:
                    if guard.eager_calls and not guard.after_failed:
                        guard.report.notes += (
                            "the block ran once more eagerly right after the capture, to compare with it (one extra "
                            "step; the graph is the program's own capture)",
                        )
                    autoguard._hinted(guard.report, guard.after_failed or self._graphcheck_why_not)
                    autoguard._record(guard)
                return bool(suppressed) and exc is None

        return GuardedScopedCapture

    def _block_raised(self, guard: GraphGuard, exc: BaseException) -> None:
        """A capture whose block raised (the program's error, or Ctrl-C): nothing was checked,
        which its report and the closing lines say."""
        site = guard._site.short if guard._site is not None else "an unknown line"
        what = "was interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt) else f"raised {type(exc).__name__}"
        self.reports.append(guard.report)
        self._raised.append((guard.report, f"the capture at {site} did not end: its block {what}"))

    def _capture_begin(self, device: Any = None, stream: Any = None, *args: Any, **kwargs: Any) -> None:
        """``wp.capture_begin``: a guarded capture, as ``wp.ScopedCapture`` opens one (not
        a capture a GraphGuard of the program opens: that one is guarded already)."""
        if self._inside or opening_capture():
            return _warp.ORIGINAL_CAPTURE_BEGIN(device, stream, *args, **kwargs)
        capture = self._scoped(device, stream, *args, **kwargs)
        capture.__enter__()
        self._begun.setdefault(str(_warp.get_device(device)), []).append(capture)
        return None

    def _capture_end(self, device: Any = None, stream: Any = None) -> Any:
        """``wp.capture_end``: ends (and checks) the guarded capture ``wp.capture_begin`` opened."""
        begun = self._begun.get(str(_warp.get_device(device)))
        if self._inside or opening_capture() or not begun:
            return _warp.ORIGINAL_CAPTURE_END(device=device, stream=stream)
        capture = begun.pop()
        capture.__exit__(None, None, None)
        return capture.graph

    def _programs_replay_check(self, checked: CheckedGraph, report: Report) -> None:
        """A replay check of the program's own (``checked.launch()``, ``check_replay()``) that
        found something: counted with the others, named after the program's line."""
        if not getattr(self._checking, "depth", 0):  # not the check this AutoGuard makes before wp.capture_launch
            self._replay_report(checked.graph, report, "the program's replay check", "found by")

    def _replay_report(self, graph: Any, report: Report, what: str, verb: str) -> None:
        # Suppressed findings too: the allowance that accepted them is then seen to match.
        new = [f for f in report.findings + report.suppressed if (id(graph), f.message) not in self._reported]
        if new:
            self._reported.update((id(graph), f.message) for f in new)
            frame = _user_frame(sys._getframe(1))
            site = site_of(frame.f_code, frame.f_lasti) if frame is not None else None
            self.replay_reports.append(_replayed_at(report, site, self.options.allow, what, verb))

    def _record(self, guard: GraphGuard) -> None:
        self.reports.append(guard.report)
        if isinstance(guard, _ComparedAfter):
            self.extra_steps += guard.eager_calls
        if guard.graph is not None and guard.checked is not None:
            self._graphs[guard.graph] = guard.checked
        if self.keep_graphs and guard.checked is not None:
            self.graphs.append(guard.checked)

    def _capture_launch(self, graph: Any, stream: Any = None) -> None:
        checked = self._graphs.get(graph)
        if checked is not None:
            # The check CheckedGraph.launch() makes before each replay: the owners' buffers
            # (the graph itself was read once, at capture; check_replay() reads it again).
            self._checking.depth = getattr(self._checking, "depth", 0) + 1
            try:
                report = checked.replay_check_due(on_failure="ignore")
            finally:
                self._checking.depth -= 1
            if report is not None:
                self._replay_report(graph, report, "wp.capture_launch", "replayed by")
        _warp.capture_launch(graph, stream)

    def _ended(self) -> list[Report]:
        """The reports of the captures whose block ran to its end (checked)."""
        return [r for r in self.reports if all(r is not report for report, _ in self._raised)]

    def unused_allow(self) -> list[Allow]:
        """The allowances that matched no finding of any capture or replay check."""
        reports = self._ended() + self.replay_reports
        if not reports:
            return []
        return [a for a in reports[0].unused_allow if all(a in r.unused_allow for r in reports[1:])]

    def summary(self, accept: Callable[[Finding], str] | None = None) -> str:
        """The :meth:`verdict` first, then every report with findings (``accept``: how the
        front end accepts a finding, as :meth:`Report.text` takes it); the allowances that
        matched nothing are said once, in the verdict."""
        reports = [
            r.text(accept=accept, allowance=self._allowance, unused=False)
            for r in self.reports + self.replay_reports
            if r.findings
        ]
        return "\n".join([self.verdict(), *reports])

    def not_checked(self) -> list[tuple[str, str]]:
        """``(check, why, and how to run it)`` for each check some guarded capture did not run
        (checks that cannot apply to a capture aside): one per
        reason, with how many captures it kept from the check when others had other reasons
        (fixing one reason does not run the check in every capture)."""
        skipped: dict[str, Counter[str]] = {}
        for report in self._ended():
            for check, reason in report.not_run:
                skipped.setdefault(check, Counter())[reason] += 1
        out = []
        for check, reasons in skipped.items():
            total = sum(reasons.values())
            if len(reasons) == 1:
                out.append((check, next(iter(reasons)) + (f" ({total} captures)" if total > 1 else "")))
            else:
                out.extend((check, f"{n} of the {total} captures: {reason}") for reason, n in reasons.items())
        return out

    def verdict(self) -> str:
        """The closing lines: how many captures were guarded, what they found, whether they
        were compared with an eager call, the extra steps taken, and what was NOT checked
        and how to check it."""
        captures = len(self.reports)
        guarded = f"{captures} capture{'s' if captures != 1 else ''}"
        if not checking_enabled():
            extra = " (no extra step was taken)" if self.reference_call else ""
            return f"graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, {guarded} ran unchecked{extra}"
        if not captures:
            return "graphcheck: NOT checked: the program opened no wp.ScopedCapture to guard"
        raised = [f"graphcheck: NOT checked: {why}, so nothing was checked" for _, why in self._raised]
        ended = self._ended()
        if not ended:
            return "\n".join(raised)
        captures = len(ended)
        guarded = f"{captures} capture{'s' if captures != 1 else ''}"
        count = len(self.findings)
        uncompared = sum(1 for r in ended if any(check == "compare" for check, _ in r.not_run))
        if count:
            line = f"graphcheck: {guarded} guarded, {count} finding{'s' if count != 1 else ''}"
        else:
            line = f"graphcheck: {guarded} guarded, no findings" + (" in what was checked" if uncompared else "")
        allowed = sum(len(r.suppressed) for r in self.reports + self.replay_reports)
        line += f", {allowed} allowed" if allowed else ""
        if uncompared:
            which = (
                ("the capture was" if captures == 1 else "the captures were")
                if uncompared == captures
                else f"{uncompared} of the {captures} captures {'was' if uncompared == 1 else 'were'}"
            )
            line += f"; {which} NOT compared with an eager call"
            line += f": {self._to_compare}" if not self.reference_call else ""
        if self.extra_steps:
            steps = f"{self.extra_steps} extra step{'s' if self.extra_steps != 1 else ''}"
            line += f"; the program took {steps} (an eager call of each capture block right after its capture)"
        lines = [line, *raised]
        lines.extend(f"graphcheck: NOT checked: {check}: {why}" for check, why in self.not_checked())
        lines.extend(f"graphcheck: {unused_line(a, self._allowance)}" for a in self.unused_allow())
        return "\n".join(lines)

    def _hinted(self, report: Report, why_not: str) -> None:
        """A guarded capture's NOT-checked reasons said for this front end, not for the Python
        API (``pass reference=``): how to compare, and how to validate the step on its own."""
        if why_not:
            compare = f"{why_not}; validate the step with {self._validate}"
        else:
            compare = (
                f"no reference call: {self._to_compare} to compare each capture block made of plain calls with an "
                f"eager call after it (one extra step), or validate the step with {self._validate}"
            )
        hints = {
            "compare": compare,
            "ownership": f"the frame that opened the capture holds no Warp arrays; validate the step with "
            f"{self._validate}",
        }
        report.skipped = tuple(
            (check, reason if reason.startswith(NOT_APPLICABLE) else hints.get(check, reason))
            for check, reason in report.skipped
        )


def _replayed_at(report: Report, site: Site | None, allow: Any, what: str, verb: str) -> Report:
    """``report`` named after the line whose replay check made it: ``what`` (the
    ``wp.capture_launch`` graphcheck checks before, or the program's own replay check) at
    that line, ``verb`` how the findings say so ("replayed by", "found by")."""
    if site is None:
        return report
    where = f"{what} at {site.short}"
    findings = [
        dataclasses.replace(
            f,
            message=f"{f.message.split('; fix: ')[0]}; {verb} {where}; fix: {f.fix}.",
            values=f"{f.values}; {verb} {where}" if f.values else f"{verb} {where}",
            detail={**f.detail, "replayed at": f"{site.filename}:{site.lineno}"},
        )
        for f in report.findings + report.suppressed
    ]
    return Report(
        findings,
        allow=allowances(allow),
        name=f"{where} ({report.name})",
        device=report.device,
        operations=report.operations,
        checks=report.checks,
        skipped=report.skipped,
        notes=report.notes,
    )

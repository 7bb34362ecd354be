"""Guard every capture a program makes, without changing the program.

:class:`AutoGuard` replaces ``wp.ScopedCapture``, ``wp.capture_begin`` / ``wp.capture_end``
and ``wp.capture_launch`` while it is active. Each capture then runs as a
:class:`~graphcheck.GraphGuard` without a reference call: per-call allocations, foreign
buffers and (on CUDA) the graph cross-check are checked when the capture ends, and every
``wp.capture_launch`` of a guarded graph checks for stale pointers first. The owners of a
capture are taken from where it was opened: the ``self`` of the method that opened it, or
else that frame's variables.

With ``reference_call=True`` a capture block made only of calls (``sim.step()``) runs
once eagerly before it is captured, as the reference call, so drift is found too; the
program then advances one extra step per capture.

``graphcheck run SCRIPT`` and the pytest marker ``@pytest.mark.graphcheck`` use it.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from . import _warp
from .checked import CheckedGraph, observe_replays
from .findings import Allow, Report, allowances
from .guard import GraphGuard, InferredOwners, checking_enabled, observe, opening_capture
from .options import CaptureOptions
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

    Only a body made of plain calls (``sim.step()``, ``self.simulate()``) qualifies: running
    it once more changes nothing but the producer's own state, one extra step of it.

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
    if not all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) for s in block.body):
        return None, "the capture block is not made of plain calls only (run its step as graphcheck check does)"
    code = compile(ast.Module(body=block.body, type_ignores=[]), filename, "exec")
    scope_globals, scope_locals = frame.f_globals, frame.f_locals

    def reference() -> None:
        exec(code, scope_globals, dict(scope_locals))

    return reference, ""


class AutoGuard:
    """Guard every ``wp.ScopedCapture`` and ``wp.capture_launch`` while active.

    Args:
        options: a :class:`~graphcheck.CaptureOptions` for every capture (``allow``,
            ``allow_foreign_nodes``, ``strict_ownership``...). Findings are collected,
            never raised (``on_failure`` is ``"ignore"``), every launch is checked
            (``replay_check`` is ``"always"``), and each capture's ``stream``,
            ``force_module_load`` and ``capture_mode`` are its own.
        reference_call: run a capture block made of plain calls once eagerly first, as
            the reference call that the capture is compared with (one extra step); a
            ``warmup`` option (eager calls of the block before the reference call) implies it.
        keep_graphs: keep every capture's :class:`~graphcheck.CheckedGraph` in
            :attr:`graphs` (for pictures; it keeps the graphs alive).
        rerun_to_compare: how the front end runs a reference call, as the NOT-checked line
            for ``compare`` names it (``graphcheck run --reference-call``; the pytest plugin
            names its marker's ``reference_call=True``).
        keywords: capture options as keywords, in place of (or over) ``options``.

    Attributes:
        reports: the report of each guarded capture, in order.
        replay_reports: the reports of replay checks that found something (allowed
            findings included), each named
            after the ``wp.capture_launch`` line that ran it.
        graphs: with ``keep_graphs``, each capture's checked graph, in order.
    """

    def __init__(
        self,
        options: CaptureOptions | None = None,
        *,
        reference_call: bool = False,
        keep_graphs: bool = False,
        rerun_to_compare: str = "graphcheck run --reference-call",
        **keywords: Any,
    ) -> None:
        self._how = {**_HOW, "compare": _HOW["compare"].format(rerun=rerun_to_compare)}
        self.options = CaptureOptions.of(options, **keywords, on_failure="ignore", replay_check="always")
        self.reference_call = reference_call
        self.reports: list[Report] = []
        self.keep_graphs = keep_graphs
        self.graphs: list[CheckedGraph] = []
        self.replay_reports: list[Report] = []
        self._graphs: weakref.WeakKeyDictionary[Any, CheckedGraph] = weakref.WeakKeyDictionary()
        self._reported: set[tuple[int, str]] = set()
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
                warmup = options.warmup or 0
                wanted = autoguard.reference_call or warmup > 0
                reference, why_not = block_reference(frame) if wanted else (None, "")
                if reference is None and warmup:
                    options = CaptureOptions.of(options, warmup=None)  # no block to warm up: said in the note
                self._graphcheck = GraphGuard(
                    self.device, reference, _owners_from_frame(frame), options, name=f"capture at {site}"
                )
                self._graphcheck._site = site_of(frame.f_code, frame.f_lasti)  # the with line: its comment counts
                self._graphcheck._block = reference  # the block's own calls, run again
                autoguard._inside += 1  # the guard's own capture reaches Warp's capture_begin
                try:
                    self._graphcheck.__enter__()
                finally:
                    autoguard._inside -= 1
                self._graphcheck_note = (
                    f"reference call: {why_not}"
                    if why_not
                    else f"the block ran {warmup + 1} times eagerly before the capture, {warmup} as warm-up and then "
                    f"as the reference call ({warmup + 1} extra steps)"
                    if reference is not None and warmup
                    else "the block ran once eagerly before the capture as the reference call (one extra step)"
                    if reference is not None
                    else ""
                )
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
                if exc is None or suppressed:
                    if self._graphcheck_note:
                        guard.report.notes += (self._graphcheck_note,)
                    autoguard._record(guard)
                return bool(suppressed) and exc is None

        return GuardedScopedCapture

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
        if guard.graph is not None and guard.checked is not None:
            self._graphs[guard.graph] = guard.checked
        if self.keep_graphs and guard.checked is not None:
            self.graphs.append(guard.checked)

    def _capture_launch(self, graph: Any, stream: Any = None) -> None:
        checked = self._graphs.get(graph)
        if checked is not None:
            self._checking.depth = getattr(self._checking, "depth", 0) + 1
            try:
                report = checked.check_replay(on_failure="ignore")
            finally:
                self._checking.depth -= 1
            self._replay_report(graph, report, "wp.capture_launch", "replayed by")
        _warp.capture_launch(graph, stream)

    def unused_allow(self) -> list[Allow]:
        """The allowances that matched no finding of any capture or replay check."""
        reports = self.reports + self.replay_reports
        if not reports:
            return []
        return [a for a in reports[0].unused_allow if all(a in r.unused_allow for r in reports[1:])]

    def summary(self) -> str:
        """The :meth:`verdict` first, then every report with findings."""
        return "\n".join([self.verdict(), *(str(r) for r in self.reports + self.replay_reports if r.findings)])

    def not_checked(self) -> list[tuple[str, str]]:
        """``(check, why, and how to run it)`` for each check some guarded capture did not run
        (checks that cannot apply, as the graph cross-check of a CPU graph, aside)."""
        skipped: dict[str, list[str]] = {}
        for report in self.reports:
            for check, reason in report.not_run:
                skipped.setdefault(check, []).append(reason)
        out = []
        for check, reasons in skipped.items():
            # Where _HOW says how to run the check, the guard's own hint (for its API) gives way.
            reason = reasons[0].split(" (")[0] if check in self._how else reasons[0]
            reason += f" ({len(reasons)} captures)" if len(reasons) > 1 else ""
            out.append((check, f"{reason}{self._how.get(check, '')}"))
        return out

    def verdict(self) -> str:
        """The closing lines: how many captures were guarded, what they found, and what was
        NOT checked and how to check it."""
        captures = len(self.reports)
        guarded = f"{captures} capture{'s' if captures != 1 else ''}"
        if not checking_enabled():
            return f"graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, {guarded} ran unchecked"
        if not captures:
            return "graphcheck: NOT checked: the program opened no wp.ScopedCapture to guard"
        count = len(self.findings)
        found = "no findings" if not count else f"{count} finding{'s' if count != 1 else ''}"
        lines = [f"graphcheck: {guarded} guarded, {found}"]
        lines.extend(f"graphcheck: NOT checked: {check}: {why}" for check, why in self.not_checked())
        lines.extend(f"graphcheck: allowance matched nothing: {a} (check the kernel and argument names)"
                     for a in self.unused_allow())  # fmt: skip
        return "\n".join(lines)


#: How to run a check that ``graphcheck run`` could not.
_HOW = {
    "compare": "; to compare with an eager call, rerun with `{rerun}` (one extra step), or "
    "validate the step with `graphcheck check MODULE:FACTORY` or gc.capture(step)",
    "ownership": "; the capture's frame holds no Warp arrays: validate it with gc.capture(step, owners=(sim,))",
}


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

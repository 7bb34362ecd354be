"""Guard every capture a program makes, without changing the program.

:class:`AutoGuard` replaces ``wp.ScopedCapture`` and ``wp.capture_launch`` while it is
active. Each capture then runs as a :class:`~graphcheck.GraphGuard` without a reference
call: per-call allocations, foreign buffers and (on CUDA) the graph cross-check are
checked when the capture ends, and every ``wp.capture_launch`` of a guarded graph checks
for stale pointers first. The owners of a capture are taken from where it was opened:
the ``self`` of the method that opened it, or else that frame's variables.

``graphcheck run SCRIPT`` and the pytest marker ``@pytest.mark.graphcheck`` use it.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from . import _warp
from .findings import Allow, Report
from .guard import CheckedGraph, GraphGuard, InferredOwners
from .record import site_of

__all__ = ["AutoGuard"]


def _owners_from_frame(frame: Any) -> InferredOwners | None:
    if frame is None:
        return None
    local = frame.f_locals
    if "self" in local:
        return InferredOwners((local["self"],))
    values = {k: v for k, v in local.items() if not k.startswith("__")}
    return InferredOwners((values,)) if values else None


class AutoGuard:
    """Guard every ``wp.ScopedCapture`` and ``wp.capture_launch`` while active.

    Args:
        allow: finding kinds, or :class:`~graphcheck.Allow` objects, to accept.
        allow_foreign_nodes: on CUDA, accept graph nodes of other libraries.

    Attributes:
        reports: the report of each guarded capture, in order.
        replay_reports: the reports of replay checks that found something.
    """

    def __init__(self, *, allow: Iterable[Allow | str] | None = None, allow_foreign_nodes: bool = False) -> None:
        self.allow = allow
        self.allow_foreign_nodes = allow_foreign_nodes
        self.reports: list[Report] = []
        self.replay_reports: list[Report] = []
        self._graphs: weakref.WeakKeyDictionary[Any, CheckedGraph] = weakref.WeakKeyDictionary()
        self._reported: set[tuple[int, str]] = set()
        self._restore: Any = None

    @property
    def findings(self) -> list[Any]:
        """Every finding of every capture and replay check."""
        return [f for r in self.reports + self.replay_reports for f in r.findings]

    @property
    def ok(self) -> bool:
        """Whether no guarded capture or replay found anything."""
        return not self.findings

    def __enter__(self) -> AutoGuard:
        if self._restore is not None:
            raise RuntimeError("this AutoGuard is already active")
        self._restore = _warp.patch_capture_api(self._scoped_capture_class(), self._capture_launch)
        return self

    def __exit__(self, *exc: object) -> None:
        restore, self._restore = self._restore, None
        restore()

    def _scoped_capture_class(self) -> type:
        autoguard = self
        base = _warp.ORIGINAL_SCOPED_CAPTURE

        class GuardedScopedCapture(base):  # type: ignore[misc, valid-type]
            """``wp.ScopedCapture`` under graphcheck (see graphcheck.autoguard)."""

            def __enter__(self) -> Any:
                if getattr(self, "external", False) or getattr(self, "apic", False):
                    return super().__enter__()  # not guarded: external and APIC captures
                frame = sys._getframe(1)
                options: dict[str, Any] = {"stream": self.stream, "force_module_load": self.force_module_load}
                if getattr(self, "capture_mode", None) is not None:
                    options["capture_mode"] = self.capture_mode
                site = site_of(frame.f_code, frame.f_lasti).short
                self._graphcheck = GraphGuard(
                    self.device,
                    None,
                    _owners_from_frame(frame),
                    on_failure="ignore",
                    allow=autoguard.allow,
                    replay_check="always",
                    allow_foreign_nodes=autoguard.allow_foreign_nodes,
                    name=f"capture at {site}",
                    **options,
                )
                self._graphcheck.__enter__()
                self.active = True
                return self

            def __exit__(
                self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
            ) -> bool:
                guard = getattr(self, "_graphcheck", None)
                if guard is None:
                    return bool(super().__exit__(exc_type, exc, tb))
                try:
                    suppressed = guard.__exit__(exc_type, exc, tb)
                finally:
                    self.active = False
                    self.graph = guard.graph
                if exc is None or suppressed:
                    autoguard._record(guard)
                return bool(suppressed) and exc is None

        return GuardedScopedCapture

    def _record(self, guard: GraphGuard) -> None:
        self.reports.append(guard.report)
        if guard.graph is not None and guard.checked is not None:
            self._graphs[guard.graph] = guard.checked

    def _capture_launch(self, graph: Any, stream: Any = None) -> None:
        checked = self._graphs.get(graph)
        if checked is not None:
            report = checked.check_replay(on_failure="ignore")
            new = [f for f in report.findings if (id(graph), f.message) not in self._reported]
            if new:
                self._reported.update((id(graph), f.message) for f in new)
                self.replay_reports.append(report)
        _warp.capture_launch(graph, stream)

    def summary(self) -> str:
        """Every report with findings, and the :meth:`verdict`."""
        lines = [str(r) for r in self.reports + self.replay_reports if not r.ok]
        lines.append(self.verdict())
        return "\n".join(lines)

    def verdict(self) -> str:
        """One line: how many captures were guarded and how many findings they had."""
        captures = len(self.reports)
        count = len(self.findings)
        found = "no findings" if not count else f"{count} finding{'s' if count != 1 else ''}"
        return f"graphcheck: {captures} capture{'s' if captures != 1 else ''} guarded, {found}"

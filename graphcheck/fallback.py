"""What a checked graph's ``launch()`` does in place of replaying a graph that failed its checks.

``gc.capture(step, fallback="eager")`` keeps a broken capture site computing what eager
stepping computes: when the capture's checks or a replay check find something,
:meth:`CheckedGraph.launch` calls the step itself instead of replaying the graph, and
says why once, with a :class:`~graphcheck.GraphCheckWarning`. ``fallback="recapture"``
captures the step again (its reference call is that launch's step), checks the new graph
and replays it from the next launch on; when the new capture fails its checks too, the
site steps eagerly from then on. Findings then never raise: production code keeps
running right while the report says why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _warp
from ._warnings import user_stacklevel
from .findings import GraphCheckWarning, Report, logger
from .options import FALLBACKS, check_fallback

if TYPE_CHECKING:
    from .checked import CheckedGraph

__all__ = ["FALLBACKS", "Fallback", "check_fallback", "on_failure_with"]


def on_failure_with(on_failure: str, fallback: str | None) -> str:
    """What a failed check does at a site with a fallback: warn rather than raise, since the site keeps running."""
    return "warn" if fallback is not None and on_failure == "raise" else on_failure


@dataclass
class Fallback:
    """A checked graph's fallback: what :meth:`CheckedGraph.launch` runs when the graph fails its checks.

    Attributes:
        mode: ``"eager"``, ``"recapture"``, or None (replay, and act on findings as ``on_failure`` says).
        report: why ``launch()`` runs the step instead of the graph (None while the graph replays).
        recaptures: how many times the graph was captured again.
    """

    mode: str | None
    call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = field(default=None, repr=False)
    recapture: Callable[[], CheckedGraph] | None = field(default=None, repr=False)
    report: Report | None = None
    recaptures: int = 0

    def launch(self, checked: CheckedGraph, mode: str, stream: Any) -> None:
        """Replay ``checked``'s graph when it passes its checks; else run ``mode`` in its place."""
        if self.call is None:
            raise ValueError(
                f"fallback={mode!r} needs the callable the graph captures: pass reference= to GraphGuard "
                f"(or use graphcheck.capture(fn, ...))"
            )
        if self.report is None:
            problem = _problem(checked)
            if problem is None:
                _warp.capture_launch(checked.graph, stream=stream)
                return
            on_failure = checked.options.on_failure
            if mode == "recapture":
                _say(self._recapture(checked, problem), on_failure)
                return  # the new capture's reference call was this launch's step
            _say(self._fall_back(problem, "eager"), on_failure)
        fn, args, kwargs = self.call
        fn(*args, **kwargs)

    def _recapture(self, checked: CheckedGraph, problem: Report) -> str:
        """Capture the step again; adopt the new graph when it passes. Returns what to say."""
        assert self.recapture is not None
        fresh = self.recapture()
        self.recaptures += 1
        if fresh.report.findings:
            return self._fall_back(fresh.report, "recapture")
        checked.adopt(fresh)
        return f"graphcheck: {problem.name} was captured again (fallback='recapture'), because:\n{problem}"

    def _fall_back(self, problem: Report, mode: str) -> str:
        """Step eagerly from now on. Returns what to say."""
        self.report = problem
        again = " captured again, and" if mode == "recapture" else ""
        return (
            f"graphcheck: {problem.name}{again} runs eagerly instead of replaying its graph (fallback={mode!r}), "
            f"because:\n{problem}"
        )


def _say(message: str, on_failure: str) -> None:
    """Say why a site falls back, once, as ``on_failure`` says: a warning where it would raise."""
    if on_failure in ("raise", "warn"):
        warnings.warn(message, GraphCheckWarning, stacklevel=user_stacklevel())
    elif on_failure == "log":
        logger.warning("%s", message)


def _problem(checked: CheckedGraph) -> Report | None:
    """The report that keeps ``checked``'s graph from replaying now, or None."""
    if checked.report.findings or checked.graph is None:
        return checked.report
    replay = checked.replay_check_due("ignore")  # None: none due, or unchanged since a clean check
    return replay if replay is not None and replay.findings else None

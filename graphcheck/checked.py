"""A captured graph, its verdict, and a launch that checks before it replays.

:class:`CheckedGraph` is what :func:`graphcheck.capture` returns and
:attr:`graphcheck.GraphGuard.checked` holds. Its :meth:`~CheckedGraph.launch` checks,
as :attr:`~graphcheck.CaptureOptions.replay_check` says, that every address the graph
baked still lies in the owned buffer it lay in at capture (:func:`graphcheck.checks.stale_pointers`),
then replays with Warp's own ``wp.capture_launch``. The full check walks the owners;
once it passed, an :class:`~graphcheck._owners_probe.OwnersProbe` of the very arrays it
found answers "unchanged" in microseconds, and only a change walks again.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from typing import Any

from . import _warp, checks, crosscheck
from ._owners_probe import OwnersProbe, Unsupported
from ._warnings import GraphCheckWarning, user_stacklevel
from .buffer_set import BufferSet
from .buffers import arrays_of, buffers_of, holders_of
from .fallback import Fallback, check_fallback
from .findings import Finding, Report, act
from .graph import GraphMatch
from .operations import Baked, BakedValue
from .options import CaptureOptions, check_stream
from .record import LaunchTrace

__all__ = ["CheckedGraph", "observe_replays", "owned_buffers"]

#: Who hears of each replay check that found something: ``callback(checked, report)``,
#: before it acts on the report (``graphcheck run`` and the pytest marker count a
#: program's own replay checks with theirs).
_replay_observers: list[Callable[[CheckedGraph, Report], None]] = []


def observe_replays(callback: Callable[[CheckedGraph, Report], None]) -> Callable[[], None]:
    """Call ``callback(checked, report)`` whenever a replay check finds something (in any
    thread); returns the function that stops it."""
    _replay_observers.append(callback)
    return lambda: _replay_observers.remove(callback)


def owned_buffers(
    owners: tuple[Any, ...] | BufferSet | None,
    holders: list[tuple[str, Any]] | None = None,
    remade: Collection[int] = (),
    every_path: bool = False,
) -> BufferSet | None:
    """The buffers ``owners`` hold now, labelled ``owner.<path>`` (``owners[i].<path>``);
    with ``holders``, the same walk adds to it the structs and ``wp.Launch`` commands they
    hold, and what those built once keep (see :func:`graphcheck.buffers.holders_of`;
    ``remade``: the ids of those the captured call re-derived)."""
    if owners is None or isinstance(owners, BufferSet):
        return owners
    root = [f"owners[{i}]" for i in range(len(owners))] if len(owners) > 1 else "owner"
    if holders is None:
        return buffers_of(*owners, root=root)
    owned, found = holders_of(*owners, root=root, remade=remade, every_path=every_path)
    holders += found
    return owned


def owned_arrays(owners: tuple[Any, ...] | BufferSet | None) -> dict[str, Any]:
    """The arrays ``owners`` hold now, by the labels :func:`owned_buffers` gives their buffers
    (none for a :class:`BufferSet`, which holds addresses only)."""
    if owners is None or isinstance(owners, BufferSet):
        return {}
    return dict(arrays_of(*owners, root=[f"owners[{i}]" for i in range(len(owners))] if len(owners) > 1 else "owner"))


class CheckedGraph:
    """A captured graph, its verdict, and a launch that checks before it replays.

    Attributes:
        graph: the ``wp.Graph`` (None when the capture failed).
        report: the verdict on the capture site.
        trace: the operations the captured call recorded (None with checking disabled).
        full_trace: the same with the operations Warp issued on its own behalf (the
            memset inside ``wp.zeros``), which made graph nodes too.
        device: the capture device.
        options: the :class:`~graphcheck.CaptureOptions` it was captured with.
        graph_match: the graph's nodes matched to the trace (None when the graph was
            not read): a CUDA graph's nodes, or the operations a CPU graph will replay;
            ``graph_match.lines()`` gives one line per node with the source line of the
            operation that made it (what ``graphcheck check --show-graph`` prints).
        baked_values: the bytes the graph baked by value from structs and ``wp.Launch``
            commands the owners hold (:func:`graphcheck.replay.baked_values`).
        fallback: what :meth:`launch` runs in place of a graph that fails its checks
            (:class:`~graphcheck.fallback.Fallback`: ``.mode``, and ``.report`` once it falls back).
        eager_calls: how many steps the producer took before this graph's first replay:
            ``warmup`` calls and the reference call, and, where the verdict needed later calls
            (the capture differed from the reference call, see ``warmup``), the first
            capture's one replay and one more eager call (this graph is then a second
            capture). An eagerly stepped twin steps as often.
    """

    def __init__(
        self,
        graph: Any,
        report: Report,
        *,
        device: str,
        owners: tuple[Any, ...] | BufferSet | None,
        baked: Callable[[], list[Baked]],
        options: CaptureOptions,
        enabled: bool = True,
        trace: LaunchTrace | None = None,
        graph_match: GraphMatch | None = None,
        fallback: Fallback | None = None,
        baked_values: list[BakedValue] | None = None,
    ) -> None:
        self.graph = graph
        self.graph_match = graph_match
        self.fallback = fallback or Fallback(None)
        self.options = options
        self.full_trace = trace  # with Warp's internal operations: they made graph nodes too
        self.trace = trace.user_view() if trace is not None else None
        self.report = report
        self.device = device
        self._owners = owners
        self._bake = baked  # worked out on the first replay check: most graphs need it once
        self._baked_addresses: list[Baked] | None = None
        self.baked_values = baked_values or []
        self._enabled = enabled
        self._replay_checked = False
        self._probe: OwnersProbe | None = None  # after a clean full replay check
        # Where the last full check found a baked address through a struct, a command or an
        # indexed array, its label having moved: position in baked -> path (the probe follows it).
        self._held_at: dict[int, str] = {}
        self.eager_calls = 0
        # What launch() calls first (see _replays_at_once): it replays at once and says so
        # when nothing is to be checked or the owners' probe found nothing changed; else it
        # replays nothing and launch() goes the whole way (fallback, check due, probe), as
        # until a launch went that way.
        self._replayed: Callable[[Any], bool] = _not_replayed

    @property
    def ok(self) -> bool:
        """Whether the capture site passed its checks."""
        return self.report.ok

    @property
    def replay_check(self) -> str:
        """When :meth:`launch` runs :meth:`check_replay` (see :class:`~graphcheck.CaptureOptions`)."""
        return self.options.replay_check

    @property
    def baked(self) -> list[Baked]:
        """Every address and structure id the graph baked (worked out when first asked)."""
        if self._baked_addresses is None:
            self._baked_addresses = self._bake()
        return self._baked_addresses

    def owned_buffers(self) -> BufferSet:
        """The buffers the owners hold now."""
        return owned_buffers(self._owners) or BufferSet()

    def check_replay(self, on_failure: str | None = None) -> Report:
        """Check the graph before it replays: every address it baked is still in a live
        owned buffer, and the graph still holds what was captured.

        Every address that lay in a buffer of the owners at capture must still lie in
        that same buffer (by its label) and fit in it. A reassigned attribute, a freed
        scratch array or a resized buffer each give a ``stale-pointer`` finding; contents
        changed in place are fine. Addresses the owners did not hold at capture were
        reported then (``foreign-buffer``, ``per-call-allocation``) and are not checked
        again. On CUDA the addresses are read from the graph's nodes. Bytes the graph
        baked from a struct or a ``wp.Launch`` command the owners hold must still be
        theirs: a field set or a parameter rebound since capture gives a ``scalar-drift``
        (``buffer-drift`` for an array, ``dim-drift`` for a command's dimensions).

        The graph itself is read again and held against the record, as at capture: a
        graph changed since gives a ``node-mismatch`` (or ``unrecorded-node``,
        ``capture-error``) the capture's report did not have: on the CPU, a launch's
        argument bytes or a copy's size rewritten in its operation stream; on CUDA, a node
        changed in the graph (``cuGraphKernelNodeSetParams``), or another graph put in
        :attr:`graph`. A CPU graph whose stream and region table are byte for byte those
        read at capture is not matched again. (:meth:`launch` checks without this read.)

        Args:
            on_failure: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"`` (default: as
                the graph was captured with).

        Returns:
            The replay :class:`Report`.

        Raises:
            GraphCheckError: with ``on_failure="raise"``, when an address is stale.
            RuntimeError: when the capture failed and there is no graph.
        """
        __tracebackhide__ = True
        return self._check_replay(on_failure, graph=True)

    def _check_replay(self, on_failure: str | None, graph: bool) -> Report:
        __tracebackhide__ = True
        name, device = self.report.name, self.device
        if not self._enabled:
            return Report(name=name, device=device, skipped=[("replay", "checking disabled by GRAPHCHECK_DISABLE")])
        if self.graph is None:
            raise RuntimeError(f"there is no graph to replay: the capture failed.\n{self.report}")
        findings: list[Finding] = []
        ran: list[str] = []
        skipped: list[tuple[str, str]] = []
        if self._owners is None:
            skipped.append(("replay", "no owners to check the graph's addresses against"))
        else:
            holders: list[tuple[str, Any]] | None = [] if self.baked_values else None
            remade = self.full_trace.remade if self.full_trace is not None else ()
            owned = owned_buffers(self._owners, holders, remade) or BufferSet()
            owners = self._owners

            def kept_now() -> BufferSet:  # every path to every array: walked where a label is not a buffer's first now
                return owned_buffers(owners, [], remade, every_path=True) or BufferSet()

            self._held_at = {}
            findings = checks.stale_pointers(self.baked, owned, kept_now, self._held_at)
            if holders is not None:
                stale = {(finding.index, finding.arg) for finding in findings}  # an address said stale already
                changed = checks.stale_values(self.baked_values, dict(holders))
                findings += [finding for finding in changed if (finding.index, finding.arg) not in stale]
            ran.append("replay")
        if graph and self.graph_match is not None:
            changed, partial = self._graph_again()
            findings += changed
            if partial:
                skipped.append(("graph", "read again, in part: " + "; ".join(partial)))
            else:
                ran.append("graph")
        report = Report(findings, allow=self.options.allow, name=name, device=device,
                        operations=self.report.operations, checks=ran, skipped=skipped)  # fmt: skip
        if report.findings or report.suppressed:
            for callback in list(_replay_observers):
                callback(self, report)
        act(report, on_failure or self.options.on_failure)
        return report

    def _graph_again(self) -> tuple[list[Finding], list[str]]:
        """The graph read again and held against the record: the findings the capture's
        report did not have, and what could not be checked."""
        match, trace = self.graph_match, self.full_trace
        if match is None or trace is None or match.holds_what_was_read(self.graph):
            return [], []
        again = crosscheck.check_graph(self.graph, trace, allow_foreign_nodes=self.options.allow_foreign_nodes)
        known = {_said(f) for f in (*self.report.findings, *self.report.suppressed)}
        return [f for f in again.findings if _said(f) not in known], again.notes

    def launch(self, stream: Any = None, *, fallback: str | None = None) -> None:
        """Check before replaying (as :attr:`replay_check` says), then ``wp.capture_launch``.

        Args:
            stream: passed to ``wp.capture_launch``.
            fallback: ``"eager"`` or ``"recapture"``: what to do instead of replaying a graph
                whose checks failed (None: as the graph was captured with; see
                :mod:`graphcheck.fallback`).

        Raises:
            GraphCheckError: when the check fails and the graph was captured with
                ``on_failure="raise"`` and no fallback; the graph is then not launched.
        """
        # The steady state first, in as few calls as it takes: after a launch that replayed,
        # one generated call runs the owners' probe (or nothing, when no check is due) and,
        # when this launch may replay too, Warp's wp.capture_launch.
        if fallback is None and self._replayed(stream):
            return
        self._replayed = _not_replayed  # until this launch replays: a check that raises leaves it so
        check_stream(stream)  # on this way only: every first launch, and every one a check precedes
        mode = check_fallback(fallback) or self.fallback.mode
        if mode is not None and self._enabled:
            self.fallback.launch(self, mode, stream)
        else:
            if self.graph is None:
                raise RuntimeError(f"there is no graph to launch: the capture failed.\n{self.report}")
            if self._enabled:
                self.replay_check_due(None)
            _capture_launch(self.graph, stream)
        self._replayed = self._replays_at_once()

    def _replays_at_once(self) -> Callable[[Any], bool]:
        """What the next :meth:`launch` calls first: given the stream, it replays at once
        where the whole way would (no fallback in place, no check due or the probe says
        nothing changed) and says whether it did."""
        if self.graph is None:
            return _not_replayed
        if not self._enabled:
            return _replaying(self.graph)
        if self.fallback.mode is not None and (self.fallback.report is not None or self.report.findings):
            return _not_replayed  # the fallback steps in its place, or decides again
        mode = self.options.replay_check
        if mode == "never" or (mode == "first" and self._replay_checked):
            return _replaying(self.graph)
        probe = self._probe
        if mode != "always" or probe is None or probe.replayed is None:
            return _not_replayed
        return probe.replayed

    def replay_check_due(self, on_failure: str | None) -> Report | None:
        """The replay check :attr:`replay_check` calls for before this launch, if any: None
        when none is due, or nothing changed since a clean one."""
        mode = self.options.replay_check
        if mode == "never" or (mode == "first" and self._replay_checked):
            return None
        self._replay_checked = True
        if self._probe is not None and self._probe.unchanged():
            return None
        report = self._check_replay(on_failure, graph=False)
        clean = "replay" in report.checks and not report.findings and not report.suppressed
        self._probe = self._owners_probe() if clean else None
        return report

    def _owners_probe(self) -> OwnersProbe | None:
        owners = self._owners
        if not isinstance(owners, tuple):
            return None  # a BufferSet: its check walks nothing
        labels = [self._held_at.get(i, baked.label) for i, baked in enumerate(self.baked) if baked.label is not None]
        values = [(value.label, value.baked) for value in self.baked_values]
        try:
            return OwnersProbe(
                owners, labels, single=len(owners) == 1, values=values, replay=(_capture_launch, self.graph)
            )
        except Unsupported:
            return None
        except Exception as error:  # a probe graphcheck could not build: the full check runs instead
            message = (
                f"graphcheck could not build its quick replay probe ({type(error).__name__}: {error}): every launch "
                "of this graph runs the full replay check instead (slower, as thorough); please report it"
            )
            warnings.warn(message, GraphCheckWarning, stacklevel=user_stacklevel())
            return None

    def adopt(self, other: CheckedGraph) -> None:
        """Take over another capture's graph and verdict, keeping this site's fallback and
        ``on_failure`` (``fallback="recapture"``)."""
        fallback, on_failure = self.fallback, self.options.on_failure
        self.__dict__.update(other.__dict__)
        self.fallback = fallback
        if self.options.on_failure != on_failure:
            self.options = CaptureOptions.of(self.options, on_failure=on_failure)

    def __repr__(self) -> str:
        return f"<CheckedGraph on {self.device}: {'ok' if self.ok else dict(self.report.kinds())}>"


def _said(finding: Finding) -> tuple[Any, ...]:
    """What a finding says, to tell a finding of the capture's from a new one."""
    return finding.kind, finding.kernel, finding.index, finding.values


def _replaying(graph: Any) -> Callable[[Any], bool]:
    """A first call of :meth:`CheckedGraph.launch` that always replays ``graph``."""

    def replayed(stream: Any) -> bool:
        _capture_launch(graph, stream)
        return True

    return replayed


def _not_replayed(stream: Any) -> bool:
    return False


# Warp's own wp.capture_launch, called directly: launch() replays the most often of anything.
_capture_launch = _warp.ORIGINAL_CAPTURE_LAUNCH

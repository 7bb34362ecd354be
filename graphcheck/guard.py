"""The user-facing heart: validate a capture site, then guard its replays.

:class:`GraphGuard` wraps ``wp.ScopedCapture``; :func:`capture` wraps a callable. Both

1. run the reference call eagerly under a trace (when there is one),
2. capture the call with a real ``wp.ScopedCapture`` under a trace (CUDA or CPU),
3. compare the two, check every address against the owners' buffers and against the
   allocations made during the call, cross-check the CUDA graph's nodes,
4. and hand back a :class:`CheckedGraph` whose :meth:`~CheckedGraph.launch` checks,
   before replaying, that every address baked into the graph is still a live owned
   buffer.

Set the environment variable ``GRAPHCHECK_DISABLE=1`` to turn every check off: the
guard is then a plain ``wp.ScopedCapture`` and ``launch`` a plain ``wp.capture_launch``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import CodeType, TracebackType
from typing import Any

from . import _warp, checks, crosscheck
from ._cuda import GraphInspectError
from ._owners_probe import OwnersProbe, Unsupported
from .buffers import BufferSet, buffers_of
from .config import disabled_by_environment
from .fallback import Fallback, check_fallback, on_failure_with
from .findings import Allow, Finding, Report, act, allowances, check_on_failure, make_finding
from .graph import GraphMatch, read_match
from .operations import LaunchRecord
from .record import LaunchTrace, trace_launches
from .site import Site, site_of

__all__ = ["CheckedGraph", "GraphGuard", "capture", "checking_enabled"]

_REPLAY_CHECKS = ("first", "always", "never")


@dataclass(frozen=True)
class _Validated:
    """What a passed validation leaves for the next capture at the same site."""

    producer: Any  # a weak reference to the callable's object
    report: Report
    buffers: tuple[Any, ...] | None  # the owners' buffers then (start, end, label), if known
    graph: Any  # a weak reference to the validated CheckedGraph, whose baked addresses serve again


#: Sites whose validation passed: (code of the call, its object's id, where the guard
#: was made, device) -> what the validation left.
_validated: dict[tuple[Any, ...], _Validated] = {}


def _site_key(fn: Any, code: CodeType | None, lasti: int, device: str) -> tuple[tuple[Any, ...], Any] | None:
    """The registry key of a capture site and a weak reference to its callable's object.

    The object (a bound method's instance, or the function) is part of the key: a second
    producer captured at the same line is validated on its own.
    """
    if fn is None:
        return None
    target = getattr(fn, "__self__", fn)
    try:
        ref = weakref.ref(target)
    except TypeError:
        return None
    return (_code_of(fn), id(target), code, lasti, device), ref


def _remember(key: tuple[tuple[Any, ...], Any], entry: _Validated) -> None:
    if len(_validated) > 1024:  # forget sites whose producer is gone
        for stale in [k for k, v in _validated.items() if v.producer() is None]:
            del _validated[stale]
    _validated[key[0]] = entry


def _validated_before(key: tuple[tuple[Any, ...], Any] | None) -> _Validated | None:
    if key is None:
        return None
    entry = _validated.get(key[0])
    return entry if entry is not None and entry.producer() is key[1]() else None


def _signature(buffers: BufferSet | None) -> tuple[Any, ...] | None:
    return tuple(buffers) if buffers is not None else None


def checking_enabled() -> bool:
    """False when the environment variable ``GRAPHCHECK_DISABLE`` is 1, true, yes or on
    (any case); any other value, ``0`` and ``false`` included, leaves checking on."""
    return not disabled_by_environment()


@dataclass(frozen=True)
class _Baked:
    """An address baked into a graph, and what it was at capture time."""

    ptr: int
    nbytes: int
    label: str | None
    index: int
    kernel: str
    arg: str
    site: Site

    @classmethod
    def at(cls, ptr: int, nbytes: int, owned: BufferSet | None, index: int, record: LaunchRecord, arg: str) -> _Baked:
        """``ptr`` as ``record``'s argument ``arg``, labelled by the owned buffer holding it."""
        hit = owned.find(ptr, nbytes) if owned is not None else None
        return cls(ptr, max(nbytes, 1), hit.label if hit else None, index, record.kernel, arg, record.site)


def _baked_handles(user: LaunchTrace, owned: BufferSet | None) -> list[_Baked]:
    """The ids of owned meshes, hash grids, BVHs and volumes passed to kernels: baked into the
    graph like addresses, and stale once the structure is rebuilt."""
    if owned is None:
        return []
    out = []
    for index, record in enumerate(user.records):
        for name, value in record.args.items():
            if owned.handle(value) is not None:
                out.append(_Baked.at(value, 1, owned, index, record, name))
    return out


def _check_device(device: Any) -> str:
    try:
        resolved = _warp.get_device(device)
    except (RuntimeError, ValueError) as error:
        available = ", ".join(str(d) for d in _available_devices())
        hint = (
            "this machine has no CUDA device; use device='cpu' (graphcheck checks CPU captures too)"
            if not _warp.cuda_available()
            else f"use one of: {available}"
        )
        raise ValueError(f"cannot capture on device {device!r}: {error}. Warp sees: {available}; {hint}.") from None
    return str(resolved)


def _available_devices() -> list[Any]:
    import warp as wp

    return list(wp.get_devices())


class InferredOwners(tuple):
    """Owners graphcheck worked out itself (from the callable, or from where a capture
    was opened): unlike owners the user names, they may hold no arrays at all."""


def _owners_tuple(owners: Any) -> tuple[Any, ...] | BufferSet:
    if isinstance(owners, BufferSet):
        return owners
    items = tuple(owners) if isinstance(owners, (list, tuple, set, frozenset)) else (owners,)
    for item in items:
        if item is None or isinstance(item, (str, bytes, int, float, bool)):
            raise TypeError(
                f"owners= takes the objects that hold the call's buffers (a simulator, an environment, "
                f"arrays) or a graphcheck.BufferSet; got {item!r} (a {type(item).__name__}) in owners={owners!r}"
            )
    return items


def _owned_buffers(owners: tuple[Any, ...] | BufferSet | None) -> BufferSet | None:
    """The buffers ``owners`` hold now, labelled ``owner.<path>`` (``owners[i].<path>``)."""
    if owners is None or isinstance(owners, BufferSet):
        return owners
    return buffers_of(*owners, root=[f"owners[{i}]" for i in range(len(owners))] if len(owners) > 1 else "owner")


def _caller_site(depth: int) -> tuple[CodeType | None, int]:
    frame: Any = sys._getframe(depth)
    while frame is not None and _warp.code_kind(frame.f_code) == 2:
        frame = frame.f_back
    if frame is None:
        return None, -1
    return frame.f_code, frame.f_lasti


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__name__
    return str(name)


def _code_of(fn: Any) -> Any:
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None) or type(fn)


class CheckedGraph:
    """A captured graph, its verdict, and a launch that checks before it replays.

    Attributes:
        graph: the ``wp.Graph`` (None when the capture failed).
        report: the verdict on the capture site.
        trace: the operations the captured call recorded (None with checking disabled).
        device: the capture device.
        replay_check: when :meth:`launch` runs :meth:`check_replay`: ``"always"`` (every
            launch; a full check only when the owners' baked arrays changed), ``"first"``
            (the first launch only) or ``"never"``.
        graph_match: on CUDA, the graph's nodes matched to the trace (None when the
            graph was not read).
        fallback: what :meth:`launch` runs in place of a graph that fails its checks
            (:class:`~graphcheck.fallback.Fallback`: ``.mode``, and ``.report`` once it falls back).
    """

    def __init__(
        self,
        graph: Any,
        report: Report,
        *,
        device: str,
        owners: tuple[Any, ...] | BufferSet | None,
        baked: Callable[[], list[_Baked]],
        on_failure: str,
        replay_check: str,
        enabled: bool = True,
        trace: LaunchTrace | None = None,
        allow: tuple[Allow, ...] = (),
        graph_match: GraphMatch | None = None,
        fallback: Fallback | None = None,
    ) -> None:
        self.graph = graph
        self.graph_match = graph_match  # the CUDA graph's nodes as the cross-check matched them
        self.fallback = fallback or Fallback(None)
        self._allow = allow
        self._full_trace = trace  # with Warp's internal operations: they made graph nodes too
        self.trace = trace.user_view() if trace is not None else None
        self.report = report
        self.device = device
        self.replay_check = replay_check
        self._owners = owners
        self._bake = baked  # worked out on the first replay check: most graphs need it once
        self._baked_addresses: list[_Baked] | None = None
        self._on_failure = on_failure
        self._enabled = enabled
        self._replay_checked = False
        self._probe: OwnersProbe | None = None  # after a clean full replay check

    @property
    def ok(self) -> bool:
        """Whether the capture site passed its checks."""
        return self.report.ok

    @property
    def _baked(self) -> list[_Baked]:
        if self._baked_addresses is None:
            self._baked_addresses = self._bake()
        return self._baked_addresses

    def owned_buffers(self) -> BufferSet:
        """The buffers the owners hold now."""
        return _owned_buffers(self._owners) or BufferSet()

    def check_replay(self, on_failure: str | None = None, *, _stacklevel: int = 3) -> Report:
        """Check that every address baked into the graph is still in a live owned buffer.

        Every address that lay in a buffer of the owners at capture must still lie in
        that same buffer (by its label) and fit in it. A reassigned attribute, a freed
        scratch array or a resized buffer each give a ``stale-pointer`` finding; contents
        changed in place are fine. Addresses the owners did not hold at capture were
        reported then (``foreign-buffer``, ``per-call-allocation``) and are not checked
        again. On CUDA the addresses are read from the graph's nodes.

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
        name, device = self.report.name, self.device
        if not self._enabled:
            return Report(name=name, device=device, skipped=[("replay", "checking disabled by GRAPHCHECK_DISABLE")])
        if self.graph is None:
            raise RuntimeError(f"there is no graph to replay: the capture failed.\n{self.report}")
        if self._owners is None:
            return Report(
                name=name, device=device, skipped=[("replay", "no owners to check the graph's addresses against")]
            )
        owned = self.owned_buffers()
        stale: dict[int, list[Any]] = {}
        for baked in self._baked:
            if baked.label is None:
                continue  # not owned at capture: reported then
            hit = owned.find(baked.ptr, baked.nbytes) or owned.buffer_at(baked.ptr)
            if hit is None:
                problem = f"{baked.ptr:#x} ({baked.label} at capture) is in no buffer the owners hold now"
            elif baked.ptr + baked.nbytes > hit.end:
                problem = (
                    f"{baked.ptr:#x} (+{baked.nbytes} bytes) no longer fits in {hit.label} "
                    f"({hit.nbytes} bytes now): the buffer was resized"
                )
            elif hit.label != baked.label:
                problem = f"{baked.ptr:#x} was {baked.label} at capture and is {hit.label} now"
            else:
                continue
            # One finding per stale address, however many operations use it.
            entry = stale.setdefault(baked.ptr, [baked, hit, problem, 0])
            entry[3] += 1
        findings = []
        for baked, hit, problem, uses in stale.values():
            more = f"; used by {uses - 1} more operation{'s' if uses > 2 else ''}" if uses > 1 else ""
            findings.append(
                make_finding(
                    "stale-pointer",
                    baked.kernel,
                    kernel=baked.kernel,
                    arg=baked.arg,
                    index=baked.index,
                    site=baked.site,
                    reference=baked.label,
                    captured=None if hit is None else hit.label,
                    values=problem + more,
                )
            )
        report = Report(
            findings,
            allow=self._allow,
            name=name,
            device=device,
            operations=self.report.operations,
            checks=["replay"],
        )
        act(report, on_failure or self._on_failure, stacklevel=_stacklevel)
        return report

    def launch(self, stream: Any = None, *, fallback: str | None = None, _stacklevel: int = 4) -> None:
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
        mode = check_fallback(fallback) or self.fallback.mode
        if mode is not None and self._enabled:
            self.fallback.launch(self, mode, stream, _stacklevel - 1)
            return
        if self.graph is None:
            raise RuntimeError(f"there is no graph to launch: the capture failed.\n{self.report}")
        if self._enabled and (
            self.replay_check == "always" or (self.replay_check == "first" and not self._replay_checked)
        ):
            self._replay_report(None, _stacklevel)
            self._replay_checked = True
        _warp.capture_launch(self.graph, stream=stream)

    def _replay_report(self, on_failure: str | None, stacklevel: int) -> Report | None:
        """The replay check before a launch: None when nothing changed since a clean one.

        The full check walks the owners; once it passed, a probe of the very arrays it
        found answers "unchanged" in microseconds, and only a change walks again.
        """
        if self._probe is not None and self._probe.unchanged():
            return None
        report = self.check_replay(on_failure, _stacklevel=stacklevel + 1)
        clean = "replay" in report.checks and not report.findings and not report.suppressed
        self._probe = self._owners_probe() if clean else None
        return report

    def _owners_probe(self) -> OwnersProbe | None:
        owners = self._owners
        if not isinstance(owners, tuple):
            return None  # a BufferSet: its check walks nothing
        labels = [baked.label for baked in self._baked if baked.label is not None]
        try:
            return OwnersProbe(owners, labels, single=len(owners) == 1)
        except Unsupported:
            return None

    def _adopt(self, other: CheckedGraph) -> None:
        """Take over another capture's graph and verdict, keeping this site's settings (``"recapture"``)."""
        fallback, on_failure = self.fallback, self._on_failure
        self.__dict__.update(other.__dict__)
        self.fallback, self._on_failure = fallback, on_failure

    def __repr__(self) -> str:
        return f"<CheckedGraph on {self.device}: {'ok' if self.ok else dict(self.report.kinds())}>"


class GraphGuard:
    """``wp.ScopedCapture`` that proves the captured block is replay-safe.

    Example::

        with gc.GraphGuard(device="cuda:0", reference=sim.step, owners=(sim,)) as guard:
            sim.step()
        for _ in range(1000):
            guard.launch()

    Args:
        device: the capture device (None: Warp's default device).
        reference: a callable doing what the block does, run eagerly before the capture
            and compared with it; None for no reference call (the checks that need none
            still run: allocations, ownership, the graph cross-check, replay checks).
        owners: the objects holding every buffer the block may use (a simulator, an
            environment), or a :class:`BufferSet`; None: the buffers reachable from
            ``reference`` (its closure, or the object a bound method is bound to).
        on_failure: ``"raise"`` (:class:`GraphCheckError`), ``"warn"``
            (:class:`GraphCheckWarning`), ``"log"`` (a warning on the ``graphcheck``
            logger) or ``"ignore"`` (keep the report, do nothing).
        allow: finding kinds, or :class:`Allow` objects, to accept.
        replay_check: when :meth:`launch` checks the baked addresses: ``"always"``
            (default), ``"first"`` or ``"never"``.
        revalidate: validate again a site that passed before in this process (by
            default, a second capture at the same place skips the reference call and
            the comparison).
        allow_foreign_nodes: on CUDA, accept graph nodes no Warp operation made (work
            of other libraries captured in the block).
        strict_ownership: report every buffer made during the block as a
            ``per-call-allocation``, device temporaries included (by default those are
            fine: Warp makes memory allocated during a capture graph-owned).
        stream: passed to ``wp.ScopedCapture``.
        force_module_load: passed to ``wp.ScopedCapture``.
        capture_mode: passed to ``wp.ScopedCapture``.
        name: what to call the site in reports (default: the reference's name).
        fallback: ``"eager"`` or ``"recapture"``: :meth:`launch` calls ``reference``
            (or captures it again) in place of a graph that fails its checks, and findings
            warn instead of raising (see :mod:`graphcheck.fallback`).

    Attributes:
        report: the verdict, once the block has ended.
        graph: the captured ``wp.Graph``.
        checked: the :class:`CheckedGraph`.
    """

    def __init__(
        self,
        device: Any = None,
        reference: Callable[[], Any] | None = None,
        owners: Any = None,
        *,
        on_failure: str = "raise",
        allow: Iterable[Allow | str] | Allow | str | None = None,
        replay_check: str = "always",
        revalidate: bool = False,
        allow_foreign_nodes: bool = False,
        strict_ownership: bool = False,
        stream: Any = None,
        force_module_load: bool | None = None,
        capture_mode: Any = None,
        name: str | None = None,
        fallback: str | None = None,
    ) -> None:
        if reference is not None and not callable(reference):
            raise TypeError(
                f"reference= must be a callable that does what the guarded block does (e.g. reference=sim.step), "
                f"got {reference!r} (a {type(reference).__name__}); pass reference=None for no reference call"
            )
        self.on_failure = check_on_failure(on_failure)
        if replay_check not in _REPLAY_CHECKS:
            raise ValueError(
                f"replay_check must be one of {', '.join(map(repr, _REPLAY_CHECKS))}, got {replay_check!r}"
            )
        self.replay_check = replay_check
        self.fallback = check_fallback(fallback)
        if self.fallback is not None and reference is None:
            raise ValueError(
                f"fallback={fallback!r} needs reference=: the callable to run (or capture again) in place of a "
                "graph that fails its checks"
            )
        self._call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = (
            (reference, (), {}) if reference is not None else None
        )
        self.allow = allowances(allow)
        self.device = _check_device(device)
        self.reference = reference
        self.enabled = checking_enabled()
        self.allow_foreign_nodes = allow_foreign_nodes
        self.strict_ownership = bool(strict_ownership)
        if owners is None:
            self._owners: tuple[Any, ...] | BufferSet | None = (reference,) if reference is not None else None
        else:
            self._owners = _owners_tuple(owners)
        # Owners the user named must hold arrays; that is checked on the one walk of the
        # owners each capture makes, when the block ends (see _owned_after).
        self._explicit_owners = owners is not None and not isinstance(owners, (InferredOwners, BufferSet))
        self.name = name or (_callable_name(reference) if reference is not None else "guarded block")
        options: dict[str, Any] = {"stream": stream, "force_module_load": force_module_load}
        if capture_mode is not None:
            options["capture_mode"] = capture_mode
        self._options = options
        code, lasti = _caller_site(2)
        self._site = site_of(code, lasti) if code is not None else None
        self._key = _site_key(reference, code, lasti, self.device)
        self.revalidate = revalidate
        self.report = Report(name=self.name, device=self.device)
        self.graph: Any = None
        self.checked: CheckedGraph | None = None
        self._reference_trace: LaunchTrace | None = None
        self._trace: LaunchTrace | None = None
        self._capture: Any = None
        self._stacklevel = 3  # act() <- __exit__ <- the user's `with` line
        self._reused: _Validated | None = None
        self._graph_match: GraphMatch | None = None

    # -- the block ----------------------------------------------------------------------

    def __enter__(self) -> GraphGuard:
        self._graph_match = None
        if not self.enabled:
            self._capture = _warp.scoped_capture(self.device, **self._options)
            self._capture.__enter__()
            return self
        validated = None if self.revalidate else _validated_before(self._key)
        if (
            validated is not None
            and validated.graph() is not None
            and validated.buffers is not None
            and validated.buffers == _signature(self._owned())
        ):
            # Validated before, and the owners hold the very same buffers: this capture
            # bakes what the validated one did. Record nothing: a plain capture.
            self._reused = validated
            self._capture = _warp.scoped_capture(self.device, **self._options)
            self._capture.__enter__()
            return self
        if self.reference is not None and validated is None:
            with trace_launches() as reference_trace:
                self.reference()
            self._reference_trace = reference_trace
        if not self.device.startswith("cpu"):
            _prepare_driver()
        # Warp's own operations (the memset inside wp.zeros) are kept in the capture's
        # trace: they made graph nodes the cross-check must recognise. The checks skip them.
        self._trace = trace_launches(include_warp=True)
        self._trace.__enter__()
        try:
            self._capture = _warp.scoped_capture(self.device, **self._options)
            self._capture.__enter__()
        except BaseException:
            self._trace.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        __tracebackhide__ = True  # pytest shows the user's frame, not graphcheck's
        capture, trace = self._capture, self._trace
        capture_error: BaseException | None = None
        try:
            capture.__exit__(exc_type, exc, tb)
        except Exception as error:  # ending the capture failed: the capture was invalid
            capture_error = error
        finally:
            if trace is not None:
                trace.__exit__(None, None, None)
            if _warp.capture_in_progress(self.device):
                _warp.abort_capture(self.device)
        self.graph = capture.graph if capture_error is None else None
        if exc is not None:
            if not (self.enabled and _is_capture_error(exc)):
                note = f"the guarded block raised {type(exc).__name__}: nothing was checked"
                self.report = Report(name=self.name, device=self.device, skipped=[("all checks", note)])
                return False  # the user's own exception propagates unchanged
            capture_error = exc
        if not self.enabled:
            self.report = Report(name=self.name, device=self.device,
                                 skipped=[("all checks", "checking disabled by GRAPHCHECK_DISABLE")])  # fmt: skip
            self.checked = self._checked(list, None)
            return False
        if self._reused is not None and capture_error is None:
            before = self._reused.report
            note = (
                "validated before in this process, and the owners hold the same buffers: nothing was recorded"
                " (revalidate=True checks again)"
            )
            self.report = Report(name=self.name, device=self.device, operations=before.operations,
                                 checks=["validated before"], notes=[note])  # fmt: skip
            earlier = self._reused.graph()
            self.checked = self._checked(lambda: earlier._baked if earlier is not None else [], None)
            return False
        if trace is None:  # a capture error at a site validated before: record it as such
            trace = LaunchTrace()
        owned = self._owned_after()
        user = trace.user_view()
        if capture_error is not None:
            self.graph = None
            self.report = self._capture_error_report(capture_error, user)
        else:
            self.report = self._analyze(trace, user, owned)
        match = self._graph_match
        self.checked = self._checked(lambda: self._baked(trace, user, owned, match), trace)
        if not self.report.findings and self._reference_trace is not None and self._key is not None:
            # While the validated graph lives, a later capture of the same buffers bakes the
            # addresses it baked: its replay check can serve the new graph too.
            entry = _Validated(self._key[1], self.report, _signature(owned), weakref.ref(self.checked))
            _remember(self._key, entry)
        try:
            act(self.report, on_failure_with(self.on_failure, self.fallback), stacklevel=self._stacklevel)
        except Exception as error:
            if capture_error is not None:
                raise error from capture_error
            raise
        return capture_error is not None  # a capture error was turned into a finding

    # -- the checks -----------------------------------------------------------------------

    def _owned(self) -> BufferSet | None:
        return _owned_buffers(self._owners)

    def _owned_after(self) -> BufferSet | None:
        """The owners' buffers once the block ended: the one walk of the owners a capture
        makes, by the names they hold them under now (a swapped buffer has changed names)."""
        owned = self._owned()
        if self._explicit_owners and owned is not None and not len(owned):
            raise ValueError(
                f"owners={self._owners!r} hold no Warp arrays: pass the objects that hold the buffers the captured "
                "call uses (the simulator, the environment), or a graphcheck.BufferSet"
            )
        return owned

    def _analyze(self, trace: LaunchTrace, user: LaunchTrace, owned: BufferSet | None) -> Report:
        """The checks on a capture: ``trace`` has every operation (Warp's own included,
        for the graph cross-check); ``user`` the operations the call itself issued."""
        findings: list[Finding] = []
        ran = []
        notes: list[str] = []
        skipped: list[tuple[str, str]] = []
        validated_before = self._reference_trace is None and self.reference is not None
        strict = self.strict_ownership
        if self._reference_trace is not None:
            uncompared: list[str] = []  # conditional bodies the reference call did not run
            findings += checks.drift(self._reference_trace, user, owned, strict=strict, notes=uncompared)
            ran.append("compare")
            skipped += [("compare", why) for why in uncompared]
        elif validated_before:
            why = "validated before in this process (revalidate=True runs it again)"
            skipped += [("compare", why), ("ownership", why)]
        else:
            skipped.append(("compare", "no reference call (pass reference=, or use graphcheck.capture)"))
        if user.allocations:
            findings += checks.allocations(user, owned, strict=strict)
            temporaries = checks.graph_owned(user, owned, strict=strict)
            if temporaries:
                notes.append(temporaries)
        ran.append("allocations")
        notes += checks.undecoded(user)
        if self.device.startswith("cpu"):
            findings += checks.cuda_rules(user) + checks.cpu_dropped(user)
            notes += checks.cpu_overloads(user)
        if not len(user):
            notes.append("the capture recorded no operation: the graph does nothing when replayed")
        if owned is not None and not validated_before:
            held = checks.held_by_warp(user, self._reference_trace)
            if held:
                nbytes = sum(a.nbytes for a in set(held.values()))
                vias = ", ".join(sorted({f"wp.{a.via}" for a in held.values()}))
                notes.append(
                    f"{len(set(held.values()))} buffer(s) Warp made for itself during the reference call and kept "
                    f"({nbytes} bytes, under {vias}) are used: Warp holds them, the owners need not"
                )
            findings += checks.ownership(user, owned, held)
            ran.append("ownership")
        elif owned is None:
            skipped += [("ownership", "no owners (pass owners=)"), ("replay", "no owners: replays are not checked")]
        if self.graph is not None and _warp.graph_handle(self.graph):
            try:  # read once: the replay check's addresses and the picture use the same match
                self._graph_match = read_match(self.graph, trace)
            except GraphInspectError as error:
                skipped.append(("graph", f"the captured CUDA graph could not be read: {error}"))
            else:
                result = crosscheck.check(self._graph_match, allow_foreign_nodes=self.allow_foreign_nodes)
                findings += result.findings
                if result.complete:
                    ran.append("graph")
                else:
                    skipped.append(("graph", "the cross-check is partial: " + "; ".join(result.notes)))
        elif not self.device.startswith("cpu"):
            skipped.append(("graph", "the captured CUDA graph could not be read: its nodes were not cross-checked"))
        return Report(
            findings,
            allow=self.allow,
            name=self.name,
            device=self.device,
            operations=len(user),
            checks=ran,
            skipped=skipped,
            notes=notes,
        )

    def _capture_error_report(self, error: BaseException, trace: LaunchTrace) -> Report:
        site = _user_site(error.__traceback__) or self._site
        finding = checks.capture_failed(error, site, len(trace))
        return Report(
            [finding],
            allow=self.allow,
            name=self.name,
            device=self.device,
            operations=len(trace),
            checks=["capture"],
        )

    def _baked(
        self, trace: LaunchTrace, user: LaunchTrace, owned: BufferSet | None, match: GraphMatch | None
    ) -> list[_Baked]:
        def baked(start: int, nbytes: int, index: int, record: LaunchRecord, arg: str) -> _Baked:
            # A temporary the capture made is the graph's own (a memory-pool allocation node
            # on CUDA, retained on the CPU): live however the owners hold it later.
            graph_owned = user.allocation_at(start, record.seq) is not None
            return _Baked.at(start, nbytes, None if graph_owned else owned, index, record, arg)

        out = [
            baked(address.start, address.nbytes, index, record, address.arg)
            for index, record in enumerate(user.records)
            for address in record.addresses()
        ]
        if match is not None:
            # On CUDA the addresses come from the graph's nodes, for the operations whose node was read.
            read = match.addresses()
            records = trace.records
            out = [b for b in out if b.index not in read] + [
                baked(a.start, a.nbytes, a.operation, records[a.record], a.arg)
                for addresses in read.values()
                for a in addresses
            ]
        return out + _baked_handles(user, owned)

    def _checked(self, baked: Callable[[], list[_Baked]], trace: LaunchTrace | None) -> CheckedGraph:
        return CheckedGraph(
            self.graph,
            self.report,
            device=self.device,
            owners=self._owners,
            baked=baked,
            on_failure=self.on_failure,
            replay_check=self.replay_check,
            enabled=self.enabled,
            trace=trace,
            allow=self.allow,
            graph_match=self._graph_match if trace is not None else None,
            fallback=Fallback(self.fallback, self._call, self._recapture),
        )

    def _recapture(self) -> CheckedGraph:
        """The same call captured and checked again, its reference call a step (``fallback="recapture"``)."""
        assert self._call is not None
        fn, args, kwargs = self._call
        owners = self._owners if isinstance(self._owners, BufferSet) else InferredOwners(self._owners or ())
        return capture(fn, *args, device=self.device, owners=owners, on_failure="ignore", allow=self.allow,
                       replay_check=self.replay_check, revalidate=True, allow_foreign_nodes=self.allow_foreign_nodes,
                       **self._options, **kwargs)  # fmt: skip

    # -- after the block ------------------------------------------------------------------

    def launch(self, stream: Any = None) -> None:
        """Launch the captured graph (see :meth:`CheckedGraph.launch`)."""
        if self.checked is None:
            raise RuntimeError("the guarded block has not run yet: launch() after the `with GraphGuard(...)` block")
        self.checked.launch(stream, _stacklevel=5)

    def check_replay(self, on_failure: str | None = None) -> Report:
        """Check the baked addresses (see :meth:`CheckedGraph.check_replay`)."""
        if self.checked is None:
            raise RuntimeError("the guarded block has not run yet")
        return self.checked.check_replay(on_failure, _stacklevel=4)


# Warp's own errors when work inside a capture cannot be captured.
_CAPTURE_ERROR_WORDS = ("capture", "capturing")


def _is_capture_error(error: BaseException) -> bool:
    """Whether Warp raised ``error`` because the capture itself failed."""
    if not isinstance(error, (RuntimeError, NotImplementedError)):
        return False
    text = str(error).lower()
    if not any(word in text for word in _CAPTURE_ERROR_WORDS):
        return False
    tb = error.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and _warp.code_kind(last.tb_frame.f_code) == 1


def _prepare_driver() -> None:
    # Load cuda-python's driver bindings before the capture starts: during the capture every
    # operation asks the driver which graph node it made, and first-time set-up does not
    # belong inside a capture. Without cuda-python or a driver the capture still runs; the
    # cross-check then says the graph could not be read.
    from . import _cuda

    try:
        _cuda.driver_version()
    except _cuda.GraphInspectError:
        pass


def _user_site(tb: TracebackType | None) -> Site | None:
    site = None
    while tb is not None:
        if _warp.code_kind(tb.tb_frame.f_code) == 0:
            site = site_of(tb.tb_frame.f_code, tb.tb_lasti)
        tb = tb.tb_next
    return site


def capture(
    fn: Callable[..., Any],
    *args: Any,
    device: Any = None,
    owners: Any = None,
    reference: bool | Callable[[], Any] | None = True,
    on_failure: str = "raise",
    allow: Iterable[Allow | str] | Allow | str | None = None,
    replay_check: str = "always",
    revalidate: bool = False,
    allow_foreign_nodes: bool = False,
    strict_ownership: bool = False,
    stream: Any = None,
    force_module_load: bool | None = None,
    capture_mode: Any = None,
    fallback: str | None = None,
    **kwargs: Any,
) -> CheckedGraph:
    """Validate ``fn(*args, **kwargs)`` as a capture site, capture it, and return the graph.

    ``fn`` runs eagerly once under a trace (the reference call), then is captured
    under a trace with a real ``wp.ScopedCapture``; the two are compared and every
    address checked against the owners and the allocations made during the call.

    Args:
        fn: the call to capture (a simulator's ``step``, an environment's ``reset``...).
        args: its positional arguments.
        device: the capture device (None: Warp's default device).
        owners: the objects holding the call's buffers, or a :class:`BufferSet`; None:
            the buffers reachable from ``fn`` and ``args``.
        reference: True to run ``fn`` itself as the reference call, a callable to run
            instead, or False/None for no reference call.
        on_failure: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"`` (see :class:`GraphGuard`).
        allow: finding kinds, or :class:`Allow` objects, to accept.
        replay_check: when :meth:`CheckedGraph.launch` checks the baked addresses
            (``"always"``, ``"first"`` or ``"never"``).
        revalidate: validate again a site that passed before in this process.
        allow_foreign_nodes: on CUDA, accept graph nodes no Warp operation made.
        strict_ownership: report device temporaries made during the call too (see
            :class:`GraphGuard`).
        stream: passed to ``wp.ScopedCapture``.
        force_module_load: passed to ``wp.ScopedCapture``.
        capture_mode: passed to ``wp.ScopedCapture``.
        fallback: ``"eager"`` or ``"recapture"``: :meth:`CheckedGraph.launch` calls ``fn``
            (or captures it again) in place of a graph that fails its checks, and findings
            warn instead of raising (see :mod:`graphcheck.fallback`).
        kwargs: keyword arguments for ``fn``.

    Returns:
        A :class:`CheckedGraph`: ``.report``, ``.graph``, ``.check_replay()``, ``.launch()``.

    Raises:
        GraphCheckError: with ``on_failure="raise"``, when the site is not replay-safe.
        TypeError: when ``fn`` or ``reference`` is not callable, or ``owners`` is not
            made of objects.
        ValueError: for a device Warp does not have, or owners that hold no arrays.
    """
    __tracebackhide__ = True  # pytest shows the user's frame, not graphcheck's
    if not callable(fn):
        raise TypeError(f"capture() needs a callable to capture, got {fn!r} (a {type(fn).__name__})")
    if reference is True:
        ref: Callable[[], Any] | None = (lambda: fn(*args, **kwargs)) if (args or kwargs) else fn
    elif reference is False or reference is None:
        ref = None
    elif callable(reference):
        ref = reference
    else:
        raise TypeError(f"reference= must be True, False or a callable, got {reference!r}")
    if owners is None:
        owners = InferredOwners(
            o for o in (fn, *args, *kwargs.values()) if not isinstance(o, (str, bytes, int, float, bool))
        )
    guard = GraphGuard(
        device,
        ref,
        owners,
        on_failure=on_failure,
        allow=allow,
        replay_check=replay_check,
        revalidate=revalidate,
        allow_foreign_nodes=allow_foreign_nodes,
        strict_ownership=strict_ownership,
        stream=stream,
        force_module_load=force_module_load,
        capture_mode=capture_mode,
        name=_callable_name(fn),
    )
    guard._stacklevel = 4  # warnings point at the caller of capture()
    guard.fallback, guard._call = check_fallback(fallback), (fn, args, kwargs)
    if guard._key is not None:
        code, lasti = _caller_site(2)
        guard._key = _site_key(fn, code, lasti, guard.device)
    with guard:
        fn(*args, **kwargs)
    assert guard.checked is not None
    return guard.checked

"""The user-facing heart: validate a capture site, then guard its replays.

:class:`GraphGuard` wraps ``wp.ScopedCapture``; :func:`capture` wraps a callable. Both

1. **record**: run the reference call eagerly under a trace (when there is one), then
   capture the call with a real ``wp.ScopedCapture`` under a trace (CUDA or CPU);
2. **judge** (:func:`judge`, the one function to read first): compare the two, check
   every address against the owners' buffers and the allocations made during the call,
   cross-check the graph's nodes (a CUDA graph's, or the operations a CPU graph will
   replay), and write the report;
3. and hand back a :class:`~graphcheck.CheckedGraph` whose
   :meth:`~graphcheck.CheckedGraph.launch` checks, before replaying, that every address
   baked into the graph is still a live owned buffer.

How a site is checked is one :class:`~graphcheck.CaptureOptions`, given as an object or
as keywords. Set the environment variable ``GRAPHCHECK_DISABLE=1`` to turn every check
off: the guard is then a plain ``wp.ScopedCapture`` and ``launch`` a plain
``wp.capture_launch``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from types import CodeType, TracebackType
from typing import Any

from . import _capturing, _warp, checks, crosscheck, settling, validated_sites
from ._capturing import observe, opening_capture
from ._words import article, note_on, step_result_that_ran_nothing, step_that_runs_nothing
from .buffer_set import BufferSet
from .checked import CheckedGraph, owned_buffers
from .checks import between_calls, cuda_rules, escaped_work, foreign_buffers, made_per_call, overloads, undecodable
from .checks.capture_errors import user_site
from .config import DISABLED, disabled_by_environment
from .fallback import Fallback, on_failure_with
from .findings import Report, act, comment_allowances
from .graph import GraphMatch, read_match
from .nodes import GraphReadError
from .operations import BakedValue
from .options import CaptureOptions, check_option_names
from .record import LaunchTrace, keep_hooks, trace_launches
from .replay import baked_addresses, baked_values
from .site import CodeKind, Site, site_of

__all__ = [
    "CheckedGraph", "GraphGuard", "InferredOwners", "capture", "check_device", "checking_enabled", "judge",
    "observe", "opening_capture",
]  # fmt: skip


def judge(
    reference: LaunchTrace | None,
    trace: LaunchTrace,
    owned: BufferSet | None,
    graph: Any,
    options: CaptureOptions,
    *,
    name: str,
    device: str,
    validated_before: bool = False,
    against: str = checks.REFERENCE_CALL,
    site: Site | None = None,
) -> tuple[Report, GraphMatch | None]:
    """The verdict on one recorded capture: the pipeline after recording, stage by stage.

    Args:
        reference: the eager reference call's trace (None: none ran).
        trace: the capture's trace, Warp's own operations included (they made graph nodes).
        owned: the owners' buffers once the call ended (None: no owners).
        graph: the captured ``wp.Graph``.
        options: how the site is checked.
        name: the site's name in the report.
        device: the capture device.
        validated_before: the site passed before and was not compared again.
        against: what ``reference`` is, as findings name it: the reference call, or the
            capture validated before at this site.
        site: the line that opened the capture, whose suppression comment allows kinds in it.

    Returns:
        The report, and the graph's nodes matched to ``trace`` (None when not read).
    """
    user = trace.user_view()  # what the call itself issued: what the host-side checks judge
    strict = options.strict_ownership
    # With warmup=None a drift is settled by later calls (graphcheck.settling), not by advice.
    first_call = between_calls.first_call_fix(options.warmup) if options.warmup is not None else None
    outcome = between_calls.check(reference, user, owned, strict=strict, validated_before=validated_before,
                                  first_call=first_call, against=against)  # fmt: skip
    outcome += made_per_call.check(user, owned, strict=strict, device=device)
    outcome += undecodable.check(user)
    outcome += escaped_work.check(user)
    outcome += cuda_rules.check(user, device=device)
    outcome += overloads.check(user, device=device)
    if not len(user):
        outcome.notes.append("the capture recorded no operation: the graph does nothing when replayed")
    outcome += foreign_buffers.check(user, owned, reference, validated_before=validated_before)
    match = None
    if graph is not None and (_warp.graph_handle(graph) or _warp.cpu_graph_state(graph) is not None):
        try:  # read once: the replay check's addresses and the picture use the same match
            match = read_match(graph, trace)
        except GraphReadError as error:
            which = "CPU" if device.startswith("cpu") else "CUDA"
            outcome.skipped.append(("graph", f"the captured {which} graph could not be read: {error}"))
        else:
            outcome += crosscheck.check(match, allow_foreign_nodes=options.allow_foreign_nodes).outcome()
    else:
        outcome.skipped.append(("graph", "the captured graph could not be read: its nodes were not cross-checked"))
    comments, unknown = comment_allowances(site, (record.site for record in user))
    outcome.notes.extend(unknown)
    return outcome.report(allow=options.allow + comments, name=name, device=device, operations=len(user)), match


def checking_enabled() -> bool:
    """False when the environment variable ``GRAPHCHECK_DISABLE`` is 1, true, yes or on
    (any case); any other value, ``0`` and ``false`` included, leaves checking on."""
    return not disabled_by_environment()


def check_device(device: Any, spell: Callable[[str], str] = "device={!r}".format) -> str:
    """``str`` of Warp's device for ``device``, or a ValueError naming the devices Warp sees and
    suggesting one as the place the device came from writes it (``spell``: ``--device cpu``,
    ``device = "cpu"`` in pyproject.toml; by default the keyword ``device='cpu'``)."""
    try:
        if isinstance(device, str) and device.strip().startswith("cuda") and not _warp.cuda_available():
            # Said before Warp is asked: resolving "cuda" calls into a missing driver, which prints errors.
            raise RuntimeError("Warp finds no CUDA driver or device")
        resolved = _warp.get_device(device)
    except (RuntimeError, ValueError) as error:
        available = ", ".join(str(d) for d in _available_devices())
        hint = (
            f"this machine has no CUDA device; use {spell('cpu')} (graphcheck checks CPU captures too)"
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
                f"arrays) or a graphcheck.BufferSet; got {item!r} ({article(type(item).__name__)}) in owners={owners!r}"
            )
    return items


def _caller_site(depth: int) -> tuple[CodeType | None, int]:
    frame: Any = sys._getframe(depth)
    while frame is not None and _warp.code_kind(frame.f_code) is CodeKind.GRAPHCHECK:
        frame = frame.f_back
    if frame is None:
        return None, -1
    return frame.f_code, frame.f_lasti


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        name = type(fn).__name__
    return str(name)


def _guard_options(reference: Any, options: CaptureOptions | None, keywords: dict[str, Any]) -> CaptureOptions:
    """The options of a guard whose reference call is ``reference``: a TypeError for a
    reference that is no callable, a ValueError for an option that needs one."""
    if reference is not None and not callable(reference):
        raise TypeError(
            f"reference= must be a callable that does what the guarded block does (e.g. reference=sim.step), "
            f"got {reference!r} ({article(type(reference).__name__)}); pass reference=None for no reference call"
        )
    refused = step_that_runs_nothing(reference, f"reference={_callable_name(reference)}") if reference else None
    if refused is not None:
        raise TypeError(refused)
    settings = CaptureOptions.of(options, **keywords)
    if settings.warmup and reference is None:
        raise ValueError(
            f"warmup={settings.warmup} needs reference=: the callable to call eagerly before the reference "
            "call and the capture"
        )
    if settings.fallback is not None and reference is None:
        raise ValueError(
            f"fallback={settings.fallback!r} needs reference=: the callable to run (or capture again) in "
            "place of a graph that fails its checks"
        )
    return settings


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
        options: a :class:`~graphcheck.CaptureOptions` (``on_failure``, ``allow``,
            ``replay_check``, ``revalidate``, ``allow_foreign_nodes``,
            ``strict_ownership``, ``fallback``, and ``stream``, ``force_module_load``,
            ``capture_mode`` for ``wp.ScopedCapture``).
        name: what to call the site in reports (default: the reference's name).
        keywords: capture options as keywords, in place of (or over) ``options``.

    Attributes:
        options: the :class:`~graphcheck.CaptureOptions` in force.
        report: the verdict, once the block has ended.
        graph: the captured ``wp.Graph``.
        checked: the :class:`CheckedGraph`.
    """

    #: What the reference trace is, as the findings name it (a front end that makes its
    #: eager call after the capture, not before, names it so).
    _against = checks.REFERENCE_CALL

    def __init__(
        self,
        device: Any = None,
        reference: Callable[[], Any] | None = None,
        owners: Any = None,
        options: CaptureOptions | None = None,
        *,
        name: str | None = None,
        **keywords: Any,
    ) -> None:
        self.options = _guard_options(reference, options, keywords)
        self._call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = (
            (reference, (), {}) if reference is not None else None
        )
        self.device = check_device(device)
        self.reference = reference
        self.enabled = checking_enabled()
        if owners is None:
            self._owners: tuple[Any, ...] | BufferSet | None = (reference,) if reference is not None else None
        else:
            self._owners = _owners_tuple(owners)
        # Owners the user named must hold arrays; that is checked on the one walk of the
        # owners each capture makes, when the block ends (see _owned_after).
        self._explicit_owners = owners is not None and not isinstance(owners, (InferredOwners, BufferSet))
        self.name = name or (_callable_name(reference) if reference is not None else "guarded block")
        code, lasti = _caller_site(2)
        self._site = site_of(code, lasti) if code is not None else None
        self._key = validated_sites.site_key(reference, code, lasti, self.device)
        self.report = Report(name=self.name, device=self.device)
        self.graph: Any = None
        self.checked: CheckedGraph | None = None
        self._reference_trace: LaunchTrace | None = None
        self._trace: LaunchTrace | None = None
        self._capture: Any = None
        self._reused: validated_sites.Validated | None = None
        #: Steps the producer took before the graph's first replay: warm-up calls, the
        #: reference call, and a retry's replay of the first capture and eager call.
        self.eager_calls = 0
        #: What the guarded block does, as a callable a retry can capture again (gc.capture's
        #: call; a front end's block run again); None for a user's own ``with`` block, for
        #: which a retry captures ``reference`` and compares the block's capture with it.
        self._block: Callable[[], Any] | None = None

    # -- the block: record ----------------------------------------------------------------

    def __enter__(self) -> GraphGuard:
        if not self.enabled:
            self._capture = _capturing.begin(self.device, self.options)
            return self
        validated = None if self.options.revalidate else validated_sites.lookup(self._key)
        if validated is not None and validated_sites.holds_same_buffers(validated, self._owners):
            # Validated before, and the owners hold the very same buffers: the reference
            # call is skipped, never the comparison. The capture is recorded and compared
            # with the capture that was validated (see _judge).
            self._reused = validated
        if self.reference is not None and validated is None:
            warmup = self.options.warmup or 0
            for call in range(warmup):  # work only the first calls do, unrecorded
                try:
                    self.reference()
                except Exception as error:
                    note_on(error, f"graphcheck raised this in its warm-up call {call + 1} of {warmup} of "
                                   f"{self._called()} (warmup={warmup}), before the reference call")  # fmt: skip
                    raise
                self.eager_calls += 1
        release = keep_hooks()  # in once for the reference call and the capture
        try:
            if self.reference is not None and validated is None:
                with LaunchTrace(eager=True) as reference_trace:
                    try:
                        returned = self.reference()
                    except Exception as error:
                        note_on(error, f"graphcheck raised this in its reference call of {self._called()}: an eager "
                                       "call before the capture, to compare the capture with")  # fmt: skip
                        raise
                what = self.name if self._block is not None else f"reference={self.name}"
                # A generator returned by a call that launched nothing is the step's body not
                # run; one returned after the step did its work is only its result.
                refused = None if reference_trace.records else step_result_that_ran_nothing(returned, what)
                if refused is not None:
                    raise TypeError(refused)
                self.eager_calls += 1
                self._reference_trace = reference_trace
            if not self.device.startswith("cpu"):
                _capturing.prepare_driver()
            # Warp's own operations (the memset inside wp.zeros) are kept in the capture's
            # trace: they made graph nodes the cross-check must recognise. The checks skip them.
            self._trace = trace_launches(include_warp=True)
            self._trace.__enter__()
        finally:
            release()  # the capture's trace holds them from here
        try:
            self._capture = _capturing.begin(self.device, self.options)
        except BaseException:
            self._trace.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        __tracebackhide__ = True  # pytest shows the user's frame, not graphcheck's
        capture, trace = self._capture, self._trace
        capture_error: BaseException | None = _capturing.end(self.device, capture, trace, exc_type, exc, tb)
        self.graph = capture.graph if capture_error is None else None
        if exc is not None:
            if not (self.enabled and checks.is_capture_error(exc)):
                self._raised = type(exc).__name__
                note = f"the guarded block raised {type(exc).__name__}: nothing was checked"
                self.report = Report(name=self.name, device=self.device, skipped=[("all checks", note)])
                return False  # the user's own exception propagates unchanged
            capture_error = exc
        if not self.enabled:
            self.report = Report(name=self.name, device=self.device, skipped=[DISABLED])
            self.checked = self._checked(list, None, None)
            _capturing.tell_observers(self)
            return False
        self._judge(trace if trace is not None else LaunchTrace.empty(), capture_error)
        _capturing.tell_observers(self)
        try:
            act(self.report, on_failure_with(self.options.on_failure, self.options.fallback))
        except Exception as error:
            if capture_error is not None:
                raise error from capture_error
            raise
        return capture_error is not None  # a capture error was turned into a finding

    def _called(self) -> str:
        """What graphcheck calls eagerly, for a note: the step (gc.capture's), or ``reference=``."""
        return f"the step {self.name}" if self._block is not None else f"reference={self.name}"

    # -- after recording: judge -----------------------------------------------------------

    def _judge(
        self, trace: LaunchTrace, capture_error: BaseException | None, first: settling.FirstCapture | None = None
    ) -> None:
        """The verdict on the block's capture (:func:`judge`), and the checked graph; ``first``
        is the first capture when this one was made to settle its verdict (:mod:`graphcheck.settling`)."""
        holders: list[tuple[str, Any]] = []
        owned = self._owned_after(holders, trace)
        validated = self._reused.graph() if self._reused is not None else None
        match, reuse = None, None
        if capture_error is not None:
            self.graph = None
            site = user_site(capture_error.__traceback__) or self._site
            finding = checks.capture_failed(capture_error, site, len(trace.user_view()))
            comments, unknown = comment_allowances(self._site, [site])
            self.report = Report([finding], allow=self.options.allow + comments, name=self.name, device=self.device,
                                 operations=len(trace.user_view()), checks=["capture"], notes=unknown)  # fmt: skip
        elif validated is not None and validated.trace is not None:
            # No reference call ran: compared with the capture that was validated, passed
            # only when the two are the same, then checked as any capture is.
            self.report, match = judge(validated.trace, trace, owned, self.graph, self.options, name=self.name,
                                       device=self.device, against=checks.VALIDATED_CAPTURE,
                                       site=self._site)  # fmt: skip
            self.report.notes = (validated_sites.NOTE, *self.report.notes)
            if not (self.report.findings or self.report.suppressed):
                reuse = validated
            elif self._key is not None:
                validated_sites.forget(self._key)  # it no longer issues what was validated: in full next time
        else:
            validated_before = self._reference_trace is None and self.reference is not None
            self.report, match = judge(self._reference_trace, trace, owned, self.graph, self.options, name=self.name,
                                       device=self.device, validated_before=validated_before,
                                       site=self._site, against=self._against)  # fmt: skip
            if first is not None:
                self.report, keep_first = settling.settle(
                    first, self.report, trace, owned, strict=self.options.strict_ownership,
                    allow=self.options.allow, site=self._site, own_block=self._block is None,
                )  # fmt: skip
                if keep_first:  # the user's block, not reference=, is what the graph must hold
                    trace, match, self.graph = first.trace, first.match, first.graph
            elif self.reference is not None and settling.needs_later_calls(
                self.report, warmup=self.options.warmup, reference_ran=self._reference_trace is not None
            ):
                first = settling.FirstCapture(self.report, trace, self.graph, match)
                again, self.graph, trace, error = settling.capture_again(
                    self.graph, self.reference, self._block or self.reference, self.device, self.options
                )
                self.eager_calls += 2  # the replay of the first capture was a step too
                self._reference_trace = again
                self._judge(trace, error, first)  # the new capture, judged in place of this one
                return
        user = trace.user_view()
        values = baked_values(user, holders) if self.graph is not None else []

        def baked() -> list[Any]:
            # The same operations on the same buffers bake the validated graph's addresses.
            return reuse.baked if reuse is not None else baked_addresses(trace, user, owned, match, values)

        self.checked = self._checked(baked, trace, match, values)
        self.checked.eager_calls = self.eager_calls
        if not self.report.findings and self._reference_trace is not None and self._key is not None:
            # While the validated graph lives, a later capture of the same buffers bakes the
            # addresses it baked: its replay check can serve the new graph too.
            validated_sites.remember(self._key, owned, self.checked)

    def _owned_after(
        self, holders: list[tuple[str, Any]] | None = None, trace: LaunchTrace | None = None
    ) -> BufferSet | None:
        """The owners' buffers once the block ended: the one walk of the owners a capture
        makes, by the names they hold them under now (a swapped buffer has changed names);
        the structs and commands they hold go into ``holders`` when given (those the
        capture's ``trace`` re-derived keep nothing built once)."""
        owned = owned_buffers(self._owners, holders, trace.remade if trace is not None else ())
        if self._explicit_owners and owned is not None and not len(owned):
            raise ValueError(
                f"owners={self._owners!r} hold no Warp arrays: pass the objects that hold the buffers the captured "
                "call uses (the simulator, the environment), or a graphcheck.BufferSet"
            )
        return owned

    def _checked(
        self,
        baked: Callable[[], list[Any]],
        trace: LaunchTrace | None,
        match: GraphMatch | None,
        values: list[BakedValue] | None = None,
    ) -> CheckedGraph:
        return CheckedGraph(
            self.graph,
            self.report,
            device=self.device,
            owners=self._owners,
            baked=baked,
            options=self.options,
            enabled=self.enabled,
            trace=trace,
            graph_match=match,
            fallback=Fallback(self.options.fallback, self._call, self._recapture),
            baked_values=values,
        )

    def _recapture(self) -> CheckedGraph:
        """The same call captured and checked again, its reference call a step (``fallback="recapture"``)."""
        assert self._call is not None
        fn, args, kwargs = self._call
        owners = self._owners if isinstance(self._owners, BufferSet) else InferredOwners(self._owners or ())
        again = CaptureOptions.of(self.options, on_failure="ignore", revalidate=True, fallback=None)
        with settling.no_later_calls():
            return capture(fn, args=args, kwargs=kwargs, device=self.device, owners=owners, options=again)

    # -- after the block ------------------------------------------------------------------

    def launch(self, stream: Any = None) -> None:
        """Launch the captured graph (see :meth:`CheckedGraph.launch`)."""
        if self.checked is None:
            raise RuntimeError(self._no_graph("launch()"))
        self.checked.launch(stream)

    def check_replay(self, on_failure: str | None = None) -> Report:
        """Check the baked addresses (see :meth:`CheckedGraph.check_replay`)."""
        if self.checked is None:
            raise RuntimeError(self._no_graph("check_replay()"))
        return self.checked.check_replay(on_failure)

    def _no_graph(self, call: str) -> str:
        """Why there is no graph to ``call``: the block raised, or has not run yet."""
        raised = getattr(self, "_raised", None)
        if raised is not None:
            return f"the guarded block raised {raised}, so there is no graph: {call} needs a block that ran to its end"
        return f"the guarded block has not run yet: {call} after the `with GraphGuard(...)` block"

    # Read-only views of the options, by their familiar names.
    on_failure = property(lambda self: self.options.on_failure)
    allow = property(lambda self: self.options.allow)
    replay_check = property(lambda self: self.options.replay_check)
    strict_ownership = property(lambda self: self.options.strict_ownership)
    fallback = property(lambda self: self.options.fallback)


#: capture()'s own keywords besides the fields of CaptureOptions.
_CAPTURE_KEYWORDS = ("args", "kwargs", "device", "owners", "reference", "options")


def _step_arguments(
    positional: tuple[Any, ...], args: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The step's ``(args, kwargs)``, checked (a TypeError says what to pass)."""
    if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, Sequence):
        raise TypeError(
            f"args= takes the step's positional arguments as a tuple or list, got {args!r} "
            f"({article(type(args).__name__)}); e.g. args=(actions,)"
        )
    if positional and args:
        raise TypeError(
            f"capture() got the step's positional arguments twice: {len(positional)} after the callable and "
            f"args={tuple(args)!r}; pass them as args=(...) only"
        )
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise TypeError(
            f"kwargs= takes the step's keyword arguments as a dict of names to values, got {kwargs!r} "
            f"({article(type(kwargs).__name__)}); e.g. kwargs={{'dt': 0.01}}"
        )
    return tuple(positional or args), dict(kwargs or {})


def capture(
    fn: Callable[..., Any],
    /,
    *positional: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    device: Any = None,
    owners: Any = None,
    reference: bool | Callable[[], Any] | None = True,
    options: CaptureOptions | None = None,
    **option_keywords: Any,
) -> CheckedGraph:
    """Validate ``fn(*args, **kwargs)`` as a capture site, capture it, and return the graph.

    ``fn`` runs eagerly once under a trace (the reference call), then is captured
    under a trace with a real ``wp.ScopedCapture``; the two are compared and every
    address checked against the owners and the allocations made during the call.

    Every keyword is graphcheck's: the step's own arguments travel in ``args=`` and
    ``kwargs=``, so a step may take its own ``device=`` or ``stream=``, and a misspelt
    option is an error naming the closest one, never an argument of the step::

        gc.capture(env.step, args=(actions,), kwargs={"device": "cpu"}, on_failure="warn")

    Args:
        fn: the call to capture (a simulator's ``step``, an environment's ``reset``...).
        positional: the step's positional arguments, as ``args=`` (one or the other).
        args: the step's positional arguments.
        kwargs: the step's keyword arguments.
        device: the capture device (None: Warp's default device).
        owners: the objects holding the call's buffers, or a :class:`BufferSet`; None:
            the buffers reachable from ``fn`` and its arguments.
        reference: True to run ``fn`` itself as the reference call, a callable to run
            instead, or False/None for no reference call.
        options: a :class:`~graphcheck.CaptureOptions`.
        option_keywords: capture options as keywords (``on_failure=``, ``allow=``,
            ``replay_check=``, ``strict_ownership=``, ``fallback=``...: the fields of
            :class:`~graphcheck.CaptureOptions`), in place of (or over) ``options``.

    Returns:
        A :class:`CheckedGraph`: ``.report``, ``.graph``, ``.check_replay()``, ``.launch()``.

    Raises:
        GraphCheckError: with ``on_failure="raise"``, when the site is not replay-safe.
        TypeError: when ``fn`` or ``reference`` is not callable, ``owners`` is not made
            of objects, or a keyword is no option (naming the closest one).
        ValueError: for a device Warp does not have, or owners that hold no arrays.
    """
    __tracebackhide__ = True  # pytest shows the user's frame, not graphcheck's
    if not callable(fn):
        raise TypeError(f"capture() needs a callable to capture, got {fn!r} ({article(type(fn).__name__)})")
    refused = step_that_runs_nothing(fn, _callable_name(fn))
    if refused is not None:
        raise TypeError(refused)
    check_option_names(option_keywords, also=_CAPTURE_KEYWORDS, call="capture()")
    args, kwargs = _step_arguments(positional, args, kwargs)
    settings = CaptureOptions.of(options, **option_keywords)
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
    # The fallback is checked here, where the call to fall back to is known (the guard is made
    # without it; options are rebuilt only when there is one: a rebuild validates every field).
    unchecked = settings if settings.fallback is None else CaptureOptions.of(settings, fallback=None)
    guard = GraphGuard(device, ref, owners, unchecked, name=_callable_name(fn))
    guard.options, guard._call = settings, (fn, args, kwargs)
    guard._block = (lambda: fn(*args, **kwargs)) if (args or kwargs) else fn
    code, lasti = _caller_site(2)
    if code is not None:
        guard._site = site_of(code, lasti)  # the gc.capture(...) line: its suppression comment counts
    if guard._key is not None:
        guard._key = validated_sites.site_key(fn, code, lasti, guard.device)
    with guard:
        try:
            returned = fn(*args, **kwargs)
        except Exception as error:
            if not checks.is_capture_error(error):
                before = guard.eager_calls if reference is True else 0
                warm = "warm-up calls and " if settings.warmup else ""
                again = f" (call {before + 1} of it: graphcheck called it eagerly before, its {warm}reference call)"
                note_on(error, f"graphcheck raised this while capturing the step {guard.name}{again if before else ''}")
            raise
        launched = guard._trace is not None and guard._trace.records
        refused = None if launched else step_result_that_ran_nothing(returned, _callable_name(fn))
        if refused is not None:
            raise TypeError(refused)
    assert guard.checked is not None
    return guard.checked

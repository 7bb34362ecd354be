"""Proof by values: replay a captured step beside an eagerly stepped twin, and compare every buffer.

The structural checks prove that a graph bakes what the eager call did. What goes wrong
below the launches (Warp itself replaying other code than it launched, see the limits
page) only shows in the results. :func:`verify_replay` builds two producers alike, steps
one eagerly and captures the other's step with :func:`graphcheck.capture` (its reference
call is its first step), replays the graph, and compares every array the two producers
hold after each step. A difference is a ``replay-divergence`` finding, reported beside the
structural findings of the capture.

Example::

    report = gc.verify_replay(Simulator, steps=4, device="cpu")   # GraphCheckError if they diverge
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _warp
from ._words import article, step_that_runs_nothing
from .buffers import arrays_of
from .config import DISABLED, disabled_by_environment
from .findings import Finding, Report, act, check_on_failure, make_finding
from .guard import capture, check_device
from .options import check_count, check_method, check_tolerance
from .site import Site

__all__ = ["verify_replay"]

ROOT = "producer"  # the label prefix of a producer's buffers in findings: producer.state.x


def build(make: Callable[..., Any], device: str) -> Any:
    """A fresh producer from ``make`` (a class or a factory), given ``device=`` when it takes one.

    Raises:
        TypeError: when ``make`` is not callable.
    """
    if not callable(make):
        raise TypeError(
            f"make must build a producer (a class or a factory, called with device= when it takes it), "
            f"got {make!r} ({article(type(make).__name__)})"
        )
    try:
        parameters = list(inspect.signature(make).parameters.values())
    except (TypeError, ValueError):
        parameters = []  # a builtin or a C extension: call it as it is
    takes_device = any(p.name == "device" or p.kind is p.VAR_KEYWORD for p in parameters)
    return make(device=device) if takes_device else make()


def step_of(producer: Any, method: str, make: Any) -> Callable[[], Any]:
    """The producer's ``method`` (bound), or the producer itself when ``make`` built a callable step.

    Raises:
        TypeError: when the producer has no such method and is not callable, or the step is a
            generator or a coroutine function (its call runs none of its body).
    """
    step = getattr(producer, method, None)
    if not callable(step):
        step = producer if callable(producer) and not isinstance(producer, type) else None
    if step is not None:
        refused = step_that_runs_nothing(step, getattr(step, "__qualname__", method))
        if refused is not None:
            raise TypeError(refused)
        return step
    name = getattr(make, "__qualname__", repr(make))
    raise TypeError(
        f"{name}() built {article(type(producer).__name__)} with no {method}() method; pass method= to name the "
        f"method to capture, or make a factory that returns the step callable"
    )


def resolve_device(device: Any) -> str:
    """The capture device as Warp names it (a clear ValueError for one Warp does not have)."""
    return check_device(device)


def site_of_step(step: Callable[..., Any]) -> Site | None:
    """Where the step is defined (its ``def`` line), for findings about its results."""
    code = getattr(getattr(step, "__func__", step), "__code__", None)
    if code is None:
        return None
    return Site(code.co_filename, code.co_firstlineno, getattr(step, "__qualname__", code.co_name))


def owners_of(producer: Any, step: Callable[..., Any]) -> tuple[Any, ...] | None:
    """The owners to check a producer's step against: the producer, unless it is the step itself."""
    return None if step is producer else (producer,)


# -- comparing buffers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where one buffer of the replayed producer differs from the eager one.

    Attributes:
        path: the buffer, by owner path (``producer.state.x``).
        index: the first differing element's index in the array (None when the shapes differ).
        eager: that element stepping eagerly (or the eager shape and type).
        replayed: that element replayed.
        count: how many elements differ.
        total: how many elements the buffer has.
        largest: the largest absolute difference over the differing elements (None for non-numbers).
    """

    path: str
    index: tuple[int, ...] | None
    eager: Any
    replayed: Any
    count: int
    total: int
    largest: float | None


def buffers_to_compare(eager: Any, replayed: Any) -> tuple[list[tuple[str, Any, Any]], list[Divergence]]:
    """``(path, eager array, replayed array)`` for every outermost dense array two producers hold at the
    same path (a view inside another array is compared through that array), and a :class:`Divergence`
    for each path at which only one of them holds an array."""
    ours = _dense(arrays_of(eager, root=ROOT))
    theirs = _dense(arrays_of(replayed, root=ROOT))
    missing = [
        Divergence(path, None, _held(ours.get(path)), _held(theirs.get(path)), 1, 1, None)
        for path in sorted(ours.keys() ^ theirs.keys())
    ]
    spans = sorted((_warp.array_range(arr) or (0, 0), path) for path, arr in ours.items())
    spans.sort(key=lambda span: (span[0][0], -span[0][1]))  # an array before the views inside it
    outermost, reach = set(), 0
    for (_, end), path in spans:
        if end <= reach:
            continue  # inside an array already compared
        outermost.add(path)
        reach = max(reach, end)
    return [(path, arr, theirs[path]) for path, arr in ours.items() if path in outermost and path in theirs], missing


def _held(arr: Any) -> str:
    return "no array" if arr is None else _warp.array_label(arr)


def _dense(found: list[tuple[str, Any]]) -> dict[str, Any]:
    return {path: arr for path, arr in found if _warp.is_dense_array(arr) and _warp.array_range(arr) is not None}


def compare(
    path: str, eager: Any, replayed: Any, atol: float = 0.0, rtol: float = 0.0, ignore: np.ndarray | None = None
) -> Divergence | None:
    """How ``replayed`` differs from ``eager``, or None when they are equal.

    Bitwise with ``atol == rtol == 0`` (``-0.0`` differs from ``0.0``; a NaN equals the
    same NaN); else numbers within ``atol + rtol * |eager|`` are equal (NaN equal to NaN).
    ``ignore`` masks elements (flat, in C order) not to compare.
    """
    x, y = eager.numpy(), replayed.numpy()
    differs = differing_elements(x, y, tuple(eager.shape), atol, rtol)
    if differs is None:
        return Divergence(path, None, f"{x.dtype}{list(x.shape)}", f"{y.dtype}{list(y.shape)}", 1, 1, None)
    if ignore is not None and ignore.shape == differs.shape:
        differs = differs & ~ignore
    count = int(differs.sum())
    if not count:
        return None
    total = differs.size
    first = int(np.argmax(differs))
    index = tuple(int(i) for i in np.unravel_index(first, tuple(eager.shape)))
    x, y = np.ascontiguousarray(x).reshape(total, -1), np.ascontiguousarray(y).reshape(total, -1)
    largest = None
    if x.dtype.kind in "fiu":
        gap = np.abs(x[differs].astype(np.float64) - y[differs].astype(np.float64))
        largest = float(np.nanmax(gap)) if not np.isnan(gap).all() else math.nan
    return Divergence(path, index, _element(x[first]), _element(y[first]), count, total, largest)


def differing_elements(
    x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], atol: float = 0.0, rtol: float = 0.0
) -> np.ndarray | None:
    """One flag per element of arrays of ``shape`` (a vector is one element), set where their
    read-backs ``x`` and ``y`` differ; None when the read-backs' shapes or types differ."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return None
    total = math.prod(shape)
    x, y = np.ascontiguousarray(x).reshape(total, -1), np.ascontiguousarray(y).reshape(total, -1)
    if (atol or rtol) and x.dtype.kind in "fiu":
        differs = ~np.isclose(y, x, rtol=rtol, atol=atol, equal_nan=True)
    else:
        differs = x.view(np.uint8).reshape(total, -1) != y.view(np.uint8).reshape(total, -1)
    return np.asarray(differs.any(axis=1))


def _element(row: np.ndarray) -> Any:
    items = [v.item() if hasattr(v, "item") else v for v in row]
    return items[0] if len(items) == 1 else tuple(items)


def divergence_finding(found: Divergence, step: int, site: Site | None) -> Finding:
    """A ``replay-divergence`` finding for one buffer that differed after ``step`` steps."""
    if found.index is None:
        values = f"{found.eager} stepping eagerly, {found.replayed} replayed"
    else:
        where = ", ".join(map(str, found.index))
        values = f"element [{where}] is {found.eager!r} stepping eagerly, {found.replayed!r} replayed"
        values += f"; {found.count} of {found.total} elements differ"
        if found.largest is not None:
            values += f", largest difference {found.largest:.6g}"
    return make_finding(
        "replay-divergence",
        f"{found.path} after step {step}",
        site=site,
        reference=found.eager,
        captured=found.replayed,
        values=values,
        detail={
            "buffer": found.path,
            "step": step,
            "element": list(found.index) if found.index is not None else None,
            "elements differing": found.count,
            "elements": found.total,
            "largest difference": found.largest,
        },
    )


class Twins:
    """Two producers built alike, compared buffer by buffer after each step.

    Memory neither producer has written yet (``wp.empty``, a buffer's spare capacity) holds
    whatever was there: elements that differ before any step are compared only from the
    step at which both producers hold the same value in them.
    """

    def __init__(self, eager: Any, replayed: Any, atol: float, rtol: float) -> None:
        self.eager, self.replayed, self.atol, self.rtol = eager, replayed, atol, rtol
        self.unwritten: dict[str, np.ndarray] = {}  # path -> elements that have not agreed yet
        pairs, missing = buffers_to_compare(eager, replayed)
        if missing:
            held = ", ".join(f"{m.path} ({m.eager} in one, {m.replayed} in the other)" for m in missing[:3])
            raise ValueError(
                f"make() built two producers that hold different arrays: {held}; the value check needs make() to "
                f"build producers alike"
            )
        for path, a, b in pairs:
            differs = differing_elements(a.numpy(), b.numpy(), tuple(a.shape))
            if differs is not None and differs.any():
                self.unwritten[path] = differs

    def divergences(self) -> list[Divergence]:
        """Every buffer in which the two producers differ now, leaving out elements not written alike yet."""
        pairs, out = buffers_to_compare(self.eager, self.replayed)
        for path, a, b in pairs:
            unwritten = self.unwritten.get(path)
            found = compare(path, a, b, self.atol, self.rtol, ignore=unwritten)
            if found is not None:
                out.append(found)
            if unwritten is not None:
                differs = differing_elements(a.numpy(), b.numpy(), tuple(a.shape))
                if differs is not None and differs.shape == unwritten.shape:
                    unwritten &= differs  # an element that agrees now is compared from now on
        return out

    def note(self) -> str | None:
        """What was left out of the comparison: elements never written alike."""
        left = {path: int(mask.sum()) for path, mask in self.unwritten.items() if mask.any()}
        if not left:
            return None
        where = ", ".join(f"{path} ({count})" for path, count in list(left.items())[:4])
        more = f" and {len(left) - 4} more buffers" if len(left) > 4 else ""
        return (
            f"{sum(left.values())} elements differed between the two producers before any step and never held the "
            f"same value since (memory neither wrote, e.g. wp.empty or spare capacity): not compared: {where}{more}"
        )


# -- the check -----------------------------------------------------------------------------


def not_checked(make: Callable[..., Any], method: str, device: str) -> Report | None:
    """With ``GRAPHCHECK_DISABLE`` set, the not-checked report of a value check that then
    builds and runs nothing (a producer built twice and stepped apart would prove nothing);
    else None."""
    if not disabled_by_environment():
        return None
    name = getattr(make, "__qualname__", None) or type(make).__name__
    return Report(name=f"{name}.{method}", device=device, skipped=[DISABLED])


def check_values(make: Callable[..., Any], steps: int, device: str, method: str, atol: float, rtol: float) -> Report:
    """The structural report of the capture, with a ``replay-divergence`` finding per buffer that
    differed at the first step where any did (see :func:`verify_replay`); acts on nothing."""
    eager = build(make, device)
    replayed = build(make, device)
    eager_step, replayed_step = step_of(eager, method, make), step_of(replayed, method, make)
    twins = Twins(eager, replayed, atol, rtol)
    # The captured producer's reference call is its first step (after any eager call graphcheck
    # added: see CheckedGraph.eager_calls); the capture itself runs nothing.
    checked = capture(
        replayed_step,
        device=device,
        owners=owners_of(replayed, replayed_step),
        on_failure="ignore",
        replay_check="never",
        revalidate=True,
    )
    structural = checked.report
    if checked.graph is None:
        note = "the capture failed: there is no graph to replay, so the value check did not run"
        return structural.merged(Report(name=structural.name, device=device, notes=[note]))
    replay = checked.check_replay(on_failure="ignore")
    eager_steps = max(checked.eager_calls, 1)  # the reference call, and any warm-up or retry call
    for _ in range(eager_steps):
        eager_step()
    first = twins.divergences()
    site = site_of_step(replayed_step)
    done = 1
    notes = []
    if first and not structural.findings:
        # The capture's own call may have rebound a buffer the producer keeps to one only the
        # first replay fills (a clone kept on the producer): look again after that replay.
        eager_step()
        checked.launch()
        eager_steps += 1
        done, first = 2, twins.divergences()
    if first and not structural.findings:
        # No structural finding explains it: the step itself is not deterministic only when two
        # more producers, stepped eagerly alike, differ too; else the difference is the replay's.
        unlike = eager_twins_differ(make, device, method, eager_steps, atol, rtol)
        if unlike is not None:
            raise ValueError(
                f"two producers make() built differ after {eager_steps} eager step{'s' if eager_steps != 1 else ''} "
                f"each: {unlike.path} element {list(unlike.index or ())} is {unlike.eager!r} in one and "
                f"{unlike.replayed!r} in the other; the value check needs make() and the step to be deterministic "
                f"(seed random numbers, do not read clocks; for atomics on CUDA, pass atol= and rtol=)"
            )
        notes.append(
            f"the replayed producer differed from the eager one with no structural finding to explain it; two more "
            f"producers stepped eagerly {eager_steps} times each agree, so the difference is the replay's"
        )
    diverged = first
    while not diverged and done < steps:
        eager_step()
        checked.launch()  # reading the arrays back waits for it
        done += 1
        diverged = twins.divergences()
    findings = [divergence_finding(d, done, site) for d in diverged]
    notes += [note for note in [twins.note()] if note]
    if diverged and done < steps:
        notes.append(f"stopped after step {done} of {steps}: later steps compound the first divergence")
    values = Report(
        findings, name=structural.name, device=device, operations=structural.operations, checks=["values"], notes=notes
    )
    return structural.merged(replay).merged(values)


def eager_twins_differ(
    make: Callable[..., Any], device: str, method: str, steps: int, atol: float, rtol: float
) -> Divergence | None:
    """Where two more producers ``make`` builds differ after ``steps`` eager steps each (None
    when they agree): whether the step itself is deterministic, asked only when a replayed
    producer differs from its eager twin and no structural finding says why."""
    one, other = build(make, device), build(make, device)
    twins = Twins(one, other, atol, rtol)
    one_step, other_step = step_of(one, method, make), step_of(other, method, make)
    for _ in range(steps):
        one_step()
        other_step()
    found = twins.divergences()
    return found[0] if found else None


def verify_replay(
    make: Callable[..., Any],
    steps: int = 4,
    device: Any = None,
    method: str = "step",
    atol: float = 0.0,
    rtol: float = 0.0,
    on_failure: str = "raise",
) -> Report:
    """Prove by values that a producer's captured step replays what eager stepping computes.

    Builds two producers with ``make``: one steps eagerly, the other's step goes through
    :func:`graphcheck.capture` (its reference call is its first step) and its graph is
    replayed, so both have taken the same number of steps. After each step every array
    reachable from the two producers is compared; the first step at which any differs
    gives one ``replay-divergence`` finding per differing buffer, naming it by owner path
    (``producer.state.x``), with the first differing element, both values and the largest
    difference. The capture's structural findings are in the same report.

    A difference right after the capture that no structural finding explains is the
    replay's (a ``replay-divergence``) unless two more producers, built and stepped eagerly
    as many times, differ from each other too: then the step is not deterministic and a
    ValueError says so.

    Args:
        make: builds a fresh producer (a class or a factory), called with ``device=``
            when it takes one; it may also return the step callable itself.
        steps: how many steps each producer takes (at least 2: the first is the reference call).
        device: the device (None: Warp's default device).
        method: the producer's method to capture.
        atol: absolute tolerance (0: bitwise, the default).
        rtol: relative tolerance, for kernels whose float order is not fixed (atomics on CUDA).
        on_failure: ``"raise"``, ``"warn"``, ``"log"`` or ``"ignore"``.

    Returns:
        The :class:`Report`: the capture's checks, the replay check and ``"values"``;
        ``"not-checked"``, with nothing built or run, while ``GRAPHCHECK_DISABLE`` is set.

    Raises:
        GraphCheckError: with ``on_failure="raise"``, when the replay diverges or the capture has findings.
        ValueError: for ``steps`` not an integer >= 2, a tolerance not a number >= 0, or a
            ``make`` whose producers, stepped eagerly alike, differ (a step that is not deterministic).
        TypeError: when ``make`` is not callable, ``method`` is not a name, or the producer has no ``method``.
    """
    __tracebackhide__ = True
    check_on_failure(on_failure)
    check_count("steps", steps, 2, "step 1 is the captured producer's reference call, replays start at step 2")
    check_tolerance("atol", atol)
    check_tolerance("rtol", rtol)
    check_method(method)
    device = resolve_device(device)
    report = not_checked(make, method, device)
    if report is None:
        report = check_values(make, steps, device, method, atol, rtol)
    act(report, on_failure)
    return report

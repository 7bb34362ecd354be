"""Replay-versus-eager comparison on twins, and verdict assertions, for the client tests.

A verdict is a claim: a site judged safe must replay exactly as a twin built alike and stepped
eagerly; an unsafe one must be reported with the right kind on the right argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

import graphcheck as gc

# Containers entered when looking for a client's arrays: the clients' own objects and plain containers.
_CLIENT_PACKAGES = ("newton", "mujoco_warp", "warp", "tests_clients")


class WrongVerdict(AssertionError):
    """graphcheck's verdict on a client site is not the right one (a strict xfail names the defect while it lasts)."""


def arrays_of(root: Any) -> dict[str, wp.array]:
    """Every Warp array (and gradient) reachable from ``root``, by attribute path (each array once)."""
    found: dict[str, wp.array] = {}
    seen: set[int] = set()

    def walk(obj: Any, path: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, wp.array):
            if getattr(obj, "ptr", None):  # a wp.fixedarray (a kernel's type annotation) has none
                found[path] = obj
            grad = getattr(obj, "grad", None)  # None too for a wp.fixedarray
            if grad is not None and grad.ptr:
                found[f"{path}.grad"] = grad
        elif isinstance(obj, dict):
            for key, value in obj.items():
                walk(value, f"{path}[{key!r}]")
        elif isinstance(obj, (list, tuple)):
            for i, value in enumerate(obj):
                walk(value, f"{path}[{i}]")
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            if path and type(obj).__module__.split(".")[0] not in _CLIENT_PACKAGES:
                return
            for key, value in vars(obj).items():
                walk(value, f"{path}.{key}")

    walk(root, "")
    return found


def differing(a: Any, b: Any, skip: Iterable[str] = ()) -> list[str]:
    """The paths of the arrays whose bytes differ between ``a`` and ``b``."""
    left, right = arrays_of(a), arrays_of(b)
    assert left.keys() == right.keys(), f"the twins hold different arrays: {sorted(left.keys() ^ right.keys())}"
    skipped = set(skip)
    return [
        path for path in left if path not in skipped and left[path].numpy().tobytes() != right[path].numpy().tobytes()
    ]


class Twins:
    """A client object and its twin built alike.

    Arrays that differ when just built hold uninitialised memory (``wp.empty``): they are zeroed in
    both, as a fresh allocation may hold, so what a step derives from them (a counter advanced from
    an unset value, an unset count or index some of Newton's coupled solvers read on the CPU, which
    crashed the process once) is alike in both, and safe. They are left out of the comparison
    (:attr:`uninitialised`): a step may make them anew, uninitialised again.
    """

    def __init__(self, make: Callable[[], Any]):
        self.subject = make()
        self.twin = make()
        self.uninitialised = differing(self.subject, self.twin)
        left, right = arrays_of(self.subject), arrays_of(self.twin)
        for path in self.uninitialised:
            if (left[path].shape, left[path].dtype) == (right[path].shape, right[path].dtype):
                left[path].zero_()
                right[path].zero_()

    def differing(self) -> list[str]:
        """The arrays whose bytes differ between the two; fails when none is compared (a
        comparison of nothing would pass whatever the replay computed)."""
        compared = arrays_of(self.subject).keys() - set(self.uninitialised)
        assert compared, (
            f"the twins hold no array to compare ({len(self.uninitialised)} uninitialised ones left out): "
            f"a comparison by values would prove nothing"
        )
        return differing(self.subject, self.twin, skip=self.uninitialised)

    def count(self) -> int:
        return len(arrays_of(self.subject))


def replay_against_twin(checked: gc.CheckedGraph, twins: Twins, step: Callable[[Any], None], replays: int) -> list[str]:
    """Step the twin as often as the capture called the step eagerly (``checked.eager_calls``: warm-up
    calls, the reference call, and any extra call graphcheck made), then replay ``replays`` times
    against as many eager steps.

    Returns the arrays that differ afterwards (the uninitialised ones left out).
    """
    for _ in range(checked.eager_calls):
        step(twins.twin)
    for _ in range(replays):
        wp.capture_launch(checked.graph)
        step(twins.twin)
    return twins.differing()


def arguments(finding: gc.Finding) -> list[str]:
    """The argument names a finding reports (one finding may name several: ``"p0, p1"``)."""
    return finding.arg.split(", ") if finding.arg else []


def assert_no_finding(report: gc.Report) -> None:
    """The site replays right (checked before this), so any finding is a false alarm."""
    if report.findings:  # not report.ok: a check that could not run is no false alarm
        raise WrongVerdict(f"false alarms on a site that replays bit-identically:\n{report}")


def assert_caught(report: gc.Report, kind: str, args: Iterable[str]) -> None:
    """Exactly ``kind`` is reported, and on at least each of ``args``."""
    kinds = set(report.kinds())
    named = {arg for f in report.findings if f.kind == kind for arg in arguments(f)}
    missing = set(args) - named
    if kinds != {kind} or missing:
        raise WrongVerdict(
            f"expected only {kind} (on {sorted(args)}); got kinds {sorted(kinds)}, "
            f"{kind} on {sorted(a for a in named if a)}, missing {sorted(missing)}:\n{report}"
        )


def bytes_of(array: wp.array) -> bytes:
    return np.ascontiguousarray(array.numpy()).tobytes()


@dataclass(frozen=True)
class Unsafe:
    """The verdict on a site whose replay goes wrong: ``kind`` reported, on each of ``args``."""

    kind: str
    args: tuple[str, ...] = ()


SAFE = None  # the verdict on a site that replays as eager stepping does: no finding


def judge(make: Callable[[], Any], expected: Unsafe | None, replays: int = 2) -> None:
    """Capture ``make().step`` with graphcheck, replay it against an eager twin, and hold the verdict to the values.

    A site judged safe must replay exactly as eager stepping and have no finding; an unsafe one must
    replay differently (the CPU shows the bug) and be reported with the right kind.
    """
    twins = Twins(make)
    subject = twins.subject
    checked = gc.capture(subject.step, owners=(subject,), on_failure="ignore")
    wrong = replay_against_twin(checked, twins, lambda site: site.step(), replays=replays)
    if expected is SAFE:
        assert wrong == [], f"the site replays differently from eager stepping: {wrong}"
        assert_no_finding(checked.report)
    else:
        assert wrong, "the site replays as eager stepping does: it does not show its bug on the CPU"
        assert_caught(checked.report, expected.kind, expected.args)

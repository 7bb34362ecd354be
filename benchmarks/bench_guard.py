"""Benchmarks of validation (``gc.capture``), of the replay check and of the graph cross-check.

- capture: what ``gc.capture`` adds over a bare ``wp.ScopedCapture`` of the same call,
  as ratios: against the bare capture alone, and against what the check inherently
  repeats (one eager reference call plus the bare capture); and a second capture of a
  site validated before (no reference call: the capture is recorded and compared with
  the validated one);
- replay (the headline of the replay figure): ``launch()`` with ``replay_check="always"``
  against a bare ``wp.capture_launch`` of the same graph: a one-launch graph (the light
  graph an RL loop replays), the same while the owners hold 100 and 500 more buffers, and
  graphs baking 100 and 500 owned buffers;
- replay check: ``CheckedGraph.check_replay`` per baked address (the owners' buffers are
  walked again, then every address is looked up);
- graph (CUDA only): read and cross-check a 10k-node captured graph (bar: 200 ms);
- cpu_graph: read a 10,000-operation CPU graph and match it to its record (bar: 50 ms, on
  the worse of two steps): a step that repeats its launches on the same arguments
  (substeps: a launch's record is read once), and one whose every launch differs (a scalar
  per launch: each is read).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import warp as wp

import graphcheck as gc

from ._timing import paired, seconds


@wp.kernel
def _axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float, n: int):
    i = wp.tid()
    y[i] = y[i] + alpha * x[i] + float(n)


class _Producer:
    """A step of ``launches`` launches over ``buffers`` owned arrays."""

    def __init__(self, device: str, launches: int, buffers: int, size: int = 256) -> None:
        self.device = device
        self.launches = launches
        self.size = size
        self.buffers = [wp.zeros(size, dtype=float, device=device) for _ in range(buffers)]

    def step(self) -> None:
        count = len(self.buffers)
        for i in range(self.launches):
            x, y = self.buffers[i % count], self.buffers[(i + 1) % count]
            wp.launch(_axpy, dim=self.size, inputs=[x, y, 0.5, 1], device=self.device)


class _Attributes:
    """A step of ``buffers`` launches over ``buffers`` arrays held as attributes of one object,
    beside a few numbers (as MuJoCo Warp's ``Data`` holds 161 arrays and 8 ints)."""

    def __init__(self, device: str, buffers: int, size: int = 16) -> None:
        self.device = device
        self.size = size
        self.count = buffers
        self.nworld, self.nconmax = 1, 64
        for i in range(buffers):
            setattr(self, f"a{i}", wp.zeros(size, dtype=float, device=device))

    def step(self) -> None:
        for i in range(self.count):
            x, y = getattr(self, f"a{i}"), getattr(self, f"a{(i + 1) % self.count}")
            wp.launch(_axpy, dim=self.size, inputs=[x, y, 0.5, 1], device=self.device)


def bench_capture(device: str = "cpu", launches: int = 200, rounds: int = 15) -> dict[str, Any]:
    """``gc.capture`` of a ``launches``-launch step against what it inherently repeats (one
    eager call plus a bare capture, bar: at most 1.2x: the median of the ratios of adjacent
    rounds of thread CPU time) and against the bare capture alone (a ratio of medians); and
    a second capture of a site validated before (no reference call; recorded and compared with
    the validated capture)."""
    p = _Producer(device, launches, buffers=16)
    p.step()  # compile and load

    def bare_capture() -> None:
        with wp.ScopedCapture(device=device):
            p.step()

    def eager_then_capture() -> None:
        p.step()
        bare_capture()

    def checked() -> None:
        gc.capture(p.step, device=device, owners=(p,), revalidate=True)

    # Another producer for the validated site: validations of `p` above must not replace it.
    q = _Producer(device, launches, buffers=16)

    def validated_before() -> gc.CheckedGraph:
        return gc.capture(q.step, device=device, owners=(q,))  # the site: this line

    first = validated_before()  # validates the site; kept, as a user would
    # The bar's reference (one eager call plus a bare capture) is the baseline: each round of
    # gc.capture is set against the round of it just before, the drift between rounds cancels.
    figures = paired(
        {"eager_plus_capture": eager_then_capture, "checked": checked, "bare": bare_capture, "again": validated_before},
        rounds=rounds,
        collector=True,
    )
    ours, base, again = (figures[name] for name in ("checked", "bare", "again"))
    return {
        "device": device,
        "launches_per_call": launches,
        "bare_capture_ms": round(base[0] / 1e3, 2),
        "capture_ms": round(ours[0] / 1e3, 2),
        "capture_ratio_vs_bare_capture": round(ours[0] / base[0], 2),
        "capture_ratio_vs_eager_plus_capture": round(ours[1], 2),
        "capture_added_ms": round(ours[2] / 1e3, 2),
        "validated_site_ratio_vs_bare_capture": round(again[0] / base[0], 2),
        # The validated site records its capture and compares it with the validated one.
        "validated_site_ms": round(again[0] / 1e3, 2),
        "validated_site_added_us_per_launch": round((again[0] - base[0]) / launches, 2),
        "first_validation_ok": first.ok,
    }


def bench_replay_check(device: str = "cpu", launches: int = 1000, buffers: int = 500) -> dict[str, Any]:
    """The replay check: alone, and as ``replay_check="always"`` adds it to every launch of
    a graph whose owners hold ``buffers`` buffers and changed nothing (bar: +20 us)."""
    p = _Producer(device, launches, buffers=buffers, size=16)
    checked = gc.capture(p.step, device=device, owners=(p,), replay_check="always")
    addresses = len(checked.baked)
    elapsed = seconds(checked.check_replay, 3)
    figures = paired(
        {"bare": lambda: wp.capture_launch(checked.graph), "always": checked.launch}, rounds=400, collector=True
    )
    return {
        "baked_addresses": addresses,
        "owned_buffers": buffers,
        "check_replay_ms": round(elapsed * 1e3, 2),
        "per_address_us": round(elapsed / addresses * 1e6, 2),
        "bare_replay_us": round(figures["bare"][0], 1),
        "always_added_us": round(figures["always"][2], 1),
        "always_ratio": round(figures["always"][1], 2),
    }


def _each(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    """``fn`` called ``calls`` times: one timed round, whose clock reads weigh little."""

    def rounds() -> None:
        for _ in range(calls):
            fn()

    return rounds


def bench_replay(device: str = "cpu", rounds: int = 150, calls: int = 50, layouts: int = 5) -> dict[str, Any]:
    """What ``replay_check="always"`` (the default) adds to every launch of a graph whose
    owners changed nothing, against a bare ``wp.capture_launch`` of the same graph: thread
    CPU time in interleaved rounds of ``calls`` launches, medians of the adjacent rounds'
    ratios and differences (bars: +0.5 us on the light graph, +3 us at 500 baked buffers).

    - light: a one-launch graph over one owned buffer (the headline);
    - owning_100, owning_500: the same graph while its owners hold 100 and 500 more buffers
      the graph does not use;
    - baked_100, baked_500: a graph of as many launches, baking 100 and 500 owned buffers;
    - attributes_200: a graph of 200 launches baking 200 arrays held as attributes of one
      object (a simulator's state; ``python -m benchmarks.run replay_clients`` measures
      MuJoCo Warp's).

    Each case is measured on ``layouts`` producers made one after another, ``rounds`` rounds
    each, and the median of their figures reported: how a CPU replay of hundreds of launches
    meets the caches depends on where its arrays and graph lie in memory, which moved a
    single producer's difference by a microsecond either way, even below zero.
    """

    def producer(launches: int, baked: int, idle: int) -> Callable[[], Any]:
        def make() -> _Producer:
            p = _Producer(device, launches, buffers=baked, size=16)
            p.idle = [wp.zeros(4, dtype=float, device=device) for _ in range(idle)]  # held, never launched
            return p

        return make

    cases = {"light": producer(1, 1, 0), "owning_100": producer(1, 1, 100), "owning_500": producer(1, 1, 500)}
    cases |= {"baked_100": producer(100, 100, 0), "baked_500": producer(500, 500, 0)}
    cases["attributes_200"] = partial(_Attributes, device, 200)
    out: dict[str, Any] = {}
    for name, make in cases.items():
        kept, figures = [], []
        for _ in range(layouts):
            p = make()
            checked = gc.capture(p.step, device=device, owners=(p,), replay_check="always")
            kept.append(checked)  # the next producer lies elsewhere
            figures.append(replay_figures(checked, rounds, calls))
        bare_us, added_us, ratio = (statistics.median(column) for column in zip(*figures))
        out[f"{name}_bare_us"] = round(bare_us, 2)
        out[f"{name}_added_us"] = round(added_us, 2)
        out[f"{name}_ratio"] = round(ratio, 3)
    return out


def replay_figures(checked: gc.CheckedGraph, rounds: int, calls: int) -> tuple[float, float, float]:
    """``checked.launch()`` against a bare ``wp.capture_launch`` of its graph, after a first
    launch (the full check; later launches are the per-launch probe): the bare replay's
    microseconds, the microseconds added and the ratio (medians of adjacent rounds)."""
    checked.launch()
    bare = partial(wp.capture_launch, checked.graph)
    pair = paired(
        {"bare": _each(bare, calls), "always": _each(checked.launch, calls)},
        rounds=rounds,
        calls=calls,
        collector=True,
    )
    return pair["bare"][0], pair["always"][2], pair["always"][1]


def bench_graph(nodes: int = 10_000) -> dict[str, Any]:
    if not wp.is_cuda_available():
        return {"skipped": "no CUDA device"}
    from graphcheck.crosscheck import check_graph

    device = str(wp.get_cuda_device(0))
    p = _Producer(device, nodes, buffers=64)
    p.step()
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as capture:
        p.step()
    elapsed = seconds(lambda: check_graph(capture.graph, trace), 3)
    findings, notes = check_graph(capture.graph, trace)
    return {
        "graph_nodes": nodes,
        "read_and_crosscheck_ms": round(elapsed * 1e3, 1),
        "findings": len(findings),
        "notes": notes,
    }


def bench_cpu_graph(operations: int = 10_000, repeat: int = 5) -> dict[str, Any]:
    """Read a CPU graph of ``operations`` launches and match and cross-check it against its
    record (the records already read, as the comparison before it leaves them)."""
    import time

    from graphcheck import _warp
    from graphcheck.crosscheck import check
    from graphcheck.graph import match_cpu

    arrays = [wp.zeros(64, dtype=float, device="cpu") for _ in range(20)]
    wp.load_module(device="cpu")
    out: dict[str, Any] = {"graph_operations": operations}
    for name, step in (("repeated", 0.0), ("distinct", 1e-4)):
        with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device="cpu") as capture:
            for i in range(operations):
                x, y = arrays[i % 20], arrays[(i + 1) % 20]
                wp.launch(_axpy, dim=64, inputs=[x, y, 1.0 + i * step, 3], device="cpu")
        trace.records  # noqa: B018 - read as the comparison reads them before the cross-check
        best = float("inf")
        for _ in range(repeat):  # thread CPU time: other processes on the same cores do not count
            start = time.thread_time()
            result = check(match_cpu(_warp.read_cpu_graph(capture.graph), trace))
            best = min(best, time.thread_time() - start)
        out[f"{name}_read_and_crosscheck_ms"] = round(best * 1e3, 1)
        out[f"{name}_findings"] = len(result.findings)
    # The bar's figure: the worse of the two (a step need not repeat its launches).
    out["read_and_crosscheck_cpu_ms"] = max(
        out["repeated_read_and_crosscheck_ms"], out["distinct_read_and_crosscheck_ms"]
    )
    return out

"""Recording benchmarks (issue: launch recorder), as ratios against bare Warp.

- recording: a bare CPU ``wp.launch`` of a 4-argument kernel, against the same launch
  recorded by ``gc.trace_launches``, one trace per 2000 launches whose hooks go in and
  out with it (bar: at most +10%); the same with the trace's records released inside the
  timing too (``with_release``); and against the same launch after a trace has come and
  gone (idle: indistinguishable from bare);
- locate: ``BufferSet.locate`` at 100k buffers with nested ranges, added in random
  order, against a bare ``bisect`` on a sorted list of starts (bar: at most 4x);
- diff: two recorded 100k-operation traces (bar: under 1 s);
- buffers_of: an object graph holding 10k arrays (bar: under 100 ms).
"""

from __future__ import annotations

import bisect
import random
import time
from typing import Any

import warp as wp

import graphcheck as gc

from ._timing import interleaved, seconds

DEVICE = "cpu"


@wp.kernel
def four_args(a: wp.array(dtype=float), b: wp.array(dtype=float), s: float, n: int):
    i = wp.tid()
    a[i] = b[i] * s + float(n)


def bench_recording(rounds: int = 15, calls: int = 2000) -> dict[str, Any]:
    a = wp.zeros(16, dtype=float, device=DEVICE)
    b = wp.ones(16, dtype=float, device=DEVICE)
    kept: list[gc.LaunchTrace] = []

    def bare() -> None:
        for _ in range(calls):
            wp.launch(four_args, 16, inputs=[a, b, 2.0, 3], device=DEVICE)

    def recorded() -> None:
        # One trace per round: its hooks go in and out with it, as in real use. The trace
        # is kept past the timing and released between rounds.
        with gc.trace_launches() as trace:
            bare()
        kept.append(trace)

    def recorded_and_released() -> None:
        with gc.trace_launches():
            bare()

    def idle() -> None:
        # graphcheck imported and used before; no trace active now.
        bare()

    times = interleaved(
        {"bare": bare, "recorded": recorded, "released": recorded_and_released, "idle": idle},
        rounds=rounds,
        calls=1,
        warmup=2,
        between=kept.clear,
    )
    per_launch = {name: t / calls for name, t in times.items()}

    def enter_exit() -> None:
        with gc.trace_launches():
            pass

    enter_exit_us = seconds(lambda: [enter_exit() for _ in range(100)]) / 100 * 1e6
    return {
        "trace_enter_exit_us": round(enter_exit_us, 1),
        "bare_us": round(per_launch["bare"], 2),
        "recorded_us": round(per_launch["recorded"], 2),
        "idle_us": round(per_launch["idle"], 2),
        "recording_ratio": round(per_launch["recorded"] / per_launch["bare"], 3),
        "recording_with_release_ratio": round(per_launch["released"] / per_launch["bare"], 3),
        "idle_ratio": round(per_launch["idle"] / per_launch["bare"], 3),
    }


def bench_locate(n: int = 100_000, lookups: int = 200_000) -> dict[str, Any]:
    rng = random.Random(0)
    ranges = []
    # Top-level buffers with views nested inside every other one.
    address = 1 << 20
    for i in range(n // 2):
        size = rng.randrange(256, 4096)
        ranges.append((address, address + size, f"buf{i}"))
        ranges.append((address + 64, address + 64 + size // 2, f"buf{i}.view"))
        address += size + rng.randrange(0, 512)
    rng.shuffle(ranges)
    buffers = gc.BufferSet()
    build = time.perf_counter()
    for start, end, label in ranges:
        buffers.add_range(start, end, label)
    buffers.locate(0)  # builds the index
    build = time.perf_counter() - build
    starts = sorted(r[0] for r in ranges)
    probes = [rng.randrange(1 << 20, address) for _ in range(lookups)]
    locate = buffers.locate
    bisect_right = bisect.bisect_right

    def with_bisect() -> None:
        for p in probes:
            bisect_right(starts, p)

    def with_locate() -> None:
        for p in probes:
            locate(p)

    bare = seconds(with_bisect)
    ours = seconds(with_locate)
    return {
        "buffers": n,
        "build_s": round(build, 3),
        "bisect_ns": round(bare / lookups * 1e9, 1),
        "locate_ns": round(ours / lookups * 1e9, 1),
        "locate_ratio": round(ours / bare, 2),
    }


def bench_diff(n: int = 100_000) -> dict[str, Any]:
    a = wp.zeros(16, dtype=float, device=DEVICE)
    b = wp.ones(16, dtype=float, device=DEVICE)
    traces = []
    for extra in (False, True):
        with gc.trace_launches() as trace:
            for i in range(n):
                if extra and i == n // 2:
                    wp.launch(four_args, 16, inputs=[b, a, 1.0, 0], device=DEVICE)  # one extra launch
                wp.launch(four_args, 16, inputs=[a, b, 2.0, i % 7], device=DEVICE)
        traces.append(trace)
    same, shifted = traces
    owned = gc.buffers_of({"a": a, "b": b})
    # Fresh copies of the traces for each timing, so no decoded value is cached.
    identical = seconds(lambda: same.diff(same, limit=None), repeat=1)
    with_extra = seconds(lambda: same.diff(shifted, owned, limit=None), repeat=1)
    return {
        "operations": n,
        "diff_identical_s": round(identical, 3),
        "diff_one_extra_with_buffers_s": round(with_extra, 3),
        "differences_found": len(same.diff(shifted, owned, limit=None)),
    }


class _Node:
    def __init__(self, arrays: list[Any], children: list[_Node]) -> None:
        self.arrays = arrays
        self.children = children
        self.meta = {"name": "node", "weights": list(range(8))}


def bench_buffers_of(n: int = 10_000) -> dict[str, Any]:
    arrays = [wp.empty(4, dtype=float, device=DEVICE) for _ in range(n)]
    leaves = [_Node(arrays[i : i + 10], []) for i in range(0, n, 10)]
    root = _Node([], [_Node([], leaves[i : i + 50]) for i in range(0, len(leaves), 50)])
    elapsed = seconds(lambda: gc.buffers_of(root, root="root"))
    found = len(gc.buffers_of(root, root="root"))
    return {"arrays": found, "buffers_of_ms": round(elapsed * 1000, 1)}

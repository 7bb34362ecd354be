"""Timing helpers shared by the benchmarks: ratios measured in one process.

This machine's absolute speed drifts (shared CPUs): a ratio of two medians taken in
interleaved rounds (A, B, A, B, ...) cancels most of that drift, so every benchmark
reports ratios against bare Warp measured alongside. :func:`paired` goes further for
per-launch costs: it times the thread's CPU time (other processes on the same cores do
not count) and takes the median of the ratios of adjacent rounds.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def per_call_us(fn: Callable[[], object], calls: int, collector: bool = False) -> float:
    """Microseconds per call of ``fn`` over ``calls`` calls (garbage collector off unless
    ``collector``)."""
    enabled = gc.isenabled()
    if not collector:
        gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        return (time.perf_counter_ns() - start) / calls / 1000
    finally:
        if enabled:
            gc.enable()


def interleaved(
    variants: dict[str, Callable[[], object]],
    *,
    rounds: int = 30,
    calls: int = 200,
    warmup: int = 500,
    between: Callable[[], object] | None = None,
    collector: bool = False,
) -> dict[str, float]:
    """Median microseconds per call of each variant, measured in alternating rounds.

    Args:
        variants: name -> a zero-argument callable.
        rounds: how many times each variant is measured.
        calls: calls per measurement.
        warmup: calls of each variant before measuring.
        between: called after each measurement (e.g. to drop what a trace recorded).
        collector: keep the garbage collector on while timing, as in a program.
    """
    for fn in variants.values():
        per_call_us(fn, warmup, collector)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(per_call_us(fn, calls, collector))
            if between is not None:
                between()
    return {name: statistics.median(values) for name, values in samples.items()}


def seconds(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall-clock seconds of ``repeat`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def paired(
    variants: dict[str, Callable[[], object]],
    *,
    rounds: int = 200,
    calls: int = 1,
    collector: bool = True,
    between: Callable[[], object] | None = None,
) -> dict[str, tuple[float, float, float]]:
    """Each variant against the first, measured in alternating rounds of thread CPU time.

    Args:
        variants: name -> a zero-argument callable; the first is the baseline.
        rounds: how many times each variant is measured.
        calls: how many calls of the work each callable makes (to report per call).
        collector: keep the garbage collector on while timing, as in a program.
        between: called after each round (e.g. to drop what a trace recorded).

    Returns:
        name -> (median microseconds per call, median of the ratios to the baseline's
        adjacent round, median of the microseconds added to it).
    """
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    enabled = gc.isenabled()
    if not collector:
        gc.disable()
    try:
        for fn in variants.values():
            fn()  # warm
        for _ in range(rounds):
            for name in names:
                start = time.thread_time_ns()
                variants[name]()
                samples[name].append((time.thread_time_ns() - start) / calls / 1000)
            if between is not None:
                between()
    finally:
        if enabled:
            gc.enable()
    base = samples[names[0]]
    return {
        name: (
            statistics.median(values),
            statistics.median(v / b for v, b in zip(values, base)),
            statistics.median(v - b for v, b in zip(values, base)),
        )
        for name, values in samples.items()
    }

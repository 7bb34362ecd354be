"""Timing helpers shared by the benchmarks: ratios measured in one process.

This machine's absolute speed drifts (shared CPUs): a ratio of two medians taken in
interleaved rounds (A, B, A, B, ...) cancels most of that drift, so every benchmark
reports ratios against bare Warp measured alongside.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Microseconds per call of ``fn`` over ``calls`` calls (garbage collector off)."""
    enabled = gc.isenabled()
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
) -> dict[str, float]:
    """Median microseconds per call of each variant, measured in alternating rounds.

    Args:
        variants: name -> a zero-argument callable.
        rounds: how many times each variant is measured.
        calls: calls per measurement.
        warmup: calls of each variant before measuring.
        between: called after each measurement (e.g. to drop what a trace recorded).
    """
    for fn in variants.values():
        per_call_us(fn, warmup)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(per_call_us(fn, calls))
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

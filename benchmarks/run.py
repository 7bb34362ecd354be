"""Run graphcheck's benchmarks and print their figures (``nox -s bench``).

Usage::

    python -m benchmarks.run [--quick] [--json PATH] [NAME ...]

Every figure is a ratio against bare Warp measured in the same process, or a time
against its bar (docs/performance.md lists them); the bars are checked and reported,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

# numpy's BLAS threads spin on the few cores a CI machine has and disturb the timings;
# nothing here does linear algebra. (Set before numpy is imported.)
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import warp as wp  # noqa: E402

wp.config.log_level = wp.LOG_WARNING

from . import bench_clients, bench_guard, bench_record  # noqa: E402

# name -> (function, quick keyword arguments, [(figure, bar: the most it may be)])
BENCHMARKS: dict[str, tuple[Callable[..., dict[str, Any]], dict[str, Any], list[tuple[str, float]]]] = {
    "recording": (
        bench_record.bench_recording,
        {"rounds": 15},
        [("recording_added_us", 2.5), ("idle_ratio", 1.05)],
    ),
    "long_trace": (
        bench_record.bench_long_trace,
        {"lengths": (2_000, 50_000)},
        [("recording_added_us_2k", 2.5), ("recording_added_us_50k", 2.5), ("recording_added_us_1M", 2.5)],
    ),
    "params": (
        bench_record.bench_params,
        {"rounds": 15},
        [("recording_added_us_4p", 2.5)],
    ),
    # No bar: the floor of any recorder in Python at wp.launch, beside graphcheck's recorder.
    "recording_floor": (bench_record.bench_recording_floor, {"rounds": 15}, []),
    "host_copy": (bench_record.bench_host_copy, {"rounds": 10}, []),
    "trace_memory": (bench_record.bench_trace_memory, {"launches": 5_000}, []),
    "locate": (bench_record.bench_locate, {"lookups": 50_000}, [("locate_ratio", 4.0)]),
    "diff": (bench_record.bench_diff, {"n": 20_000}, [("diff_one_extra_with_buffers_s", 1.0)]),
    "buffers_of": (bench_record.bench_buffers_of, {}, [("buffers_of_ms", 100.0)]),
    "capture": (
        bench_guard.bench_capture,
        {"launches": 50, "rounds": 5},
        [("capture_ratio_vs_eager_plus_capture", 1.2)],
    ),
    "replay": (
        bench_guard.bench_replay,
        {"rounds": 50, "layouts": 3},
        [("light_added_us", 0.5), ("baked_500_added_us", 3.0)],
    ),
    # No bar: what the replay check adds on MuJoCo Warp's step (skipped without it).
    "replay_clients": (bench_clients.bench_replay_clients, {"rounds": 50}, []),
    "replay_check": (
        bench_guard.bench_replay_check,
        {"launches": 200, "buffers": 500},
        [("always_added_us", 20.0)],
    ),
    "graph": (bench_guard.bench_graph, {"nodes": 1000}, [("read_and_crosscheck_ms", 200.0)]),
    "cpu_graph": (
        bench_guard.bench_cpu_graph,
        {"operations": 10_000, "repeat": 2},
        [("read_and_crosscheck_cpu_ms", 50.0)],
    ),
    # gc.capture with the graph cross-check against without it, on the CPU (bar: 3% slower).
    # The cross-check timed alone (its _alone_ figures) says where that goes; the bar is on
    # the whole capture, as users feel it.
    "clients_crosscheck": (
        bench_clients.bench_clients_crosscheck,
        {"rounds": 3},
        [(f"{name}_crosscheck_ratio", 1.03) for name in bench_clients.CLIENTS],
    ),
    # The bar on real clients; the aim is 1.2x.
    "clients": (bench_clients.bench_clients, {"rounds": 3}, [(f"{name}_ratio", 1.4) for name in bench_clients.CLIENTS]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    wp.init()
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "warp": wp.__version__,
        "machine": platform.machine(),
    }
    over = []
    for name in args.names or list(BENCHMARKS):
        fn, quick, bars = BENCHMARKS[name]
        figures = fn(**(quick if args.quick else {}))
        results[name] = figures
        print(f"{name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
        for figure, bar in bars:
            if figure not in figures:
                continue  # skipped (e.g. the GPU benchmark without CUDA)
            value = figures[figure]
            status = "ok" if value <= bar else "OVER THE BAR"
            if value > bar:
                over.append(f"{name}.{figure}")
            added = figures.get(figure.replace("ratio", "added_us")) if "ratio" in figure else None
            cost = f", +{added} us per launch" if added is not None else ""
            if "added_us" in figure and figure.replace("added_us", "ratio") in figures:
                # a cost per call: also as the ratio against bare Warp's call beside it
                # (light_added_us -> light_bare_us; recording_added_us_4p -> bare_us_4p)
                bare = figure.replace("added_us", "bare_us")
                base = figures.get(bare, figures.get(bare.replace("recording_", "")))
                cost = f", x{figures[figure.replace('added_us', 'ratio')]}" + (f" on {base} us" if base else "")
            print(f"    {figure} = {value} (bar: {bar}{cost}) {status}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    if over:
        print("over the bar: " + ", ".join(over), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

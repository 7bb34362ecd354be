"""Recording benchmarks, as ratios against bare Warp, with the microseconds added beside them.

- recording (the headline): a bare CPU ``wp.launch`` of a 4-argument kernel over 64
  elements, against the same launch recorded by ``gc.trace_launches``, one trace per
  2000 launches whose hooks go in and out with it, the garbage collector on (bar: at
  most +2.5 µs); and against the same launch after a trace has come and gone (idle:
  indistinguishable from bare);
- long_trace: the same, while the records of a trace growing to 50k and 1M launches are
  kept: the cost per launch must stay flat in the trace's length (and within the headline's bar);
- recording_floor: the headline's launch recorded by graphcheck and by the least any
  recorder in Python woven at the same place could do (no bar: the floor of any recorder in Python);
- params: the same headline for kernels of 4 and of 18 parameters (a real solver's
  kernels pass about 18: Newton's XPBD), arrays, scalars, vectors and a struct;
- host_copy: a ``wp.copy`` from host memory (a numpy-backed CPU array) of 1 KiB, 64 KiB
  and 1 MiB, recorded against bare: the recorder keeps what the source holds (its bytes up
  to 64 KiB, a CRC-32 beyond), since a graph copies whatever is there at replay;
- trace_memory: bytes a trace keeps per recorded launch;
- locate: ``BufferSet.locate`` at 100k buffers with nested ranges, added in random
  order, against a bare ``bisect`` on a sorted list of starts (bar: at most 4x);
- diff: two recorded 100k-operation traces (bar: under 1 s);
- buffers_of: an object graph holding 10k arrays (bar: under 100 ms).
"""

from __future__ import annotations

import bisect
import gc as python_gc
import random
import statistics
import time
import tracemalloc
import types
from typing import Any

import warp as wp

import graphcheck as gc

from ._timing import paired, seconds

DEVICE = "cpu"
SIZE = 64  # elements: a light launch, whose cost is mostly Warp's Python


@wp.kernel
def four_args(a: wp.array(dtype=float), b: wp.array(dtype=float), s: float, n: int):
    i = wp.tid()
    a[i] = b[i] * s + float(n)


@wp.struct
class _Material:
    stiffness: float
    damping: float
    gravity: wp.vec3


@wp.kernel
def eighteen_args(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
    mass: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    force: wp.array(dtype=wp.vec3),
    lam: wp.array(dtype=float),
    index: wp.array2d(dtype=wp.int32),
    rest: wp.array(dtype=float),
    material: _Material,
    gravity: wp.vec3,
    dt: float,
    relaxation: float,
    iterations: int,
    count: int,
    enabled: wp.bool,
):
    i = wp.tid()
    if enabled and flags[i] >= 0 and i < count:
        v = qd[i] + (gravity + force[i] * inv_mass[i]) * dt * material.damping
        qd_out[i] = v * relaxation + wp.vec3(lam[i] * rest[i] * float(iterations + index[i, 0]) * mass[i])
        q_out[i] = q[i] + v * dt * material.stiffness


def _eighteen_launch(calls: int) -> Any:
    vectors = [wp.zeros(SIZE, dtype=wp.vec3, device=DEVICE) for _ in range(5)]
    scalars = [wp.ones(SIZE, dtype=float, device=DEVICE) for _ in range(4)]
    flags = wp.zeros(SIZE, dtype=wp.int32, device=DEVICE)
    index = wp.zeros((SIZE, 2), dtype=wp.int32, device=DEVICE)
    material = _Material()
    material.stiffness, material.damping, material.gravity = 1.0, 0.99, wp.vec3(0.0, -9.8, 0.0)
    inputs = [*vectors[:4], scalars[0], scalars[1], flags, vectors[4], scalars[2], index, scalars[3], material,
              wp.vec3(0.0, -9.8, 0.0), 0.01, 1.0, 4, SIZE, True]  # fmt: skip

    def bare() -> None:
        for _ in range(calls):
            wp.launch(eighteen_args, SIZE, inputs=inputs, device=DEVICE)

    return bare


def _launches(calls: int) -> Any:
    a = wp.zeros(SIZE, dtype=float, device=DEVICE)
    b = wp.ones(SIZE, dtype=float, device=DEVICE)

    def bare() -> None:
        for _ in range(calls):
            wp.launch(four_args, SIZE, inputs=[a, b, 2.0, 3], device=DEVICE)

    return bare


def bench_recording(rounds: int = 40, calls: int = 2000) -> dict[str, Any]:
    """The headline: recording a light launch, one trace per ``calls`` launches (its hooks
    go in and out with it, as in real use), the garbage collector on."""
    bare = _launches(calls)
    kept: list[gc.LaunchTrace] = []

    def recorded() -> None:
        with gc.trace_launches() as trace:
            bare()
        kept.append(trace)  # released after the round, outside the timing

    def idle() -> None:
        bare()  # graphcheck imported and used before; no trace active now

    figures = paired({"bare": bare, "recorded": recorded, "idle": idle}, rounds=rounds, calls=calls,
                     between=kept.clear)  # fmt: skip

    def enter_exit() -> None:
        with gc.trace_launches():
            pass

    enter_exit_us = seconds(lambda: [enter_exit() for _ in range(100)]) / 100 * 1e6
    return {
        "launches_per_trace": calls,
        "bare_us": round(figures["bare"][0], 2),
        "recording_added_us": round(figures["recorded"][2], 2),
        "recording_ratio": round(figures["recorded"][1], 3),
        "idle_added_us": round(figures["idle"][2], 2),
        "idle_ratio": round(figures["idle"][1], 3),
        "trace_enter_exit_us": round(enter_exit_us, 1),
    }


# The least a recorder woven at wp.launch's call of Warp's CPU invoke can do and still keep
# what a record must hold: the session (one ContextVar read), the kernel's block (one
# lookup), the caller (one frame), the parameter block (one join) and the record (one tuple
# handed to the trace). No thread test, no pending call for the other launch paths, no
# check that the caller is user code or that the block has the kernel's size: not a
# recorder graphcheck could ship, only the floor of any recorder made in Python there.
_FLOOR_SITE = """
if _graphcheck_session is not None and (_graphcheck_block := _graphcheck_forward_blocks.get(kernel)) is not None:
    _graphcheck_caller = _graphcheck_getframe(1)
    _graphcheck_session.deliver((_graphcheck_block[0], False, _graphcheck_join(params), max_blocks,
                                 _graphcheck_caller.f_code, _graphcheck_caller.f_lasti,
                                 _graphcheck_latest_allocation[0]))
    _graphcheck_invoke_unwoven(kernel, hooks, params, adjoint)
else:
    invoke(kernel, hooks, params, adjoint)
"""


def bench_recording_floor(rounds: int = 40, calls: int = 2000) -> dict[str, Any]:
    """The headline's launch recorded by graphcheck and by the least a Python recorder at
    the same place can do (``_FLOOR_SITE``), each against bare Warp in interleaved rounds:
    how far graphcheck's recorder is from what any recorder in Python could reach here."""
    from graphcheck._warp import hooks

    bare = _launches(calls)
    kept: list[gc.LaunchTrace] = []
    with gc.trace_launches():  # the hooks in, to find Warp's own launch and graphcheck's woven one
        (patch,) = [p for p in hooks.HOOKS._patches or () if p.label == "wp.launch"]
    launch, woven = patch.owner, patch.replacement
    original = types.FunctionType(patch.original, launch.__globals__, launch.__name__, launch.__defaults__)
    original.__kwdefaults__ = launch.__kwdefaults__
    floor = hooks._weave(original, "_graphcheck_session = _graphcheck_active.get()\n", "", "pass",
                         (hooks._LAUNCH_INVOKE_CALL, _FLOOR_SITE))  # fmt: skip

    def recorded_by(code: types.CodeType) -> Any:
        def run() -> None:
            with gc.trace_launches() as trace:
                launch.__code__ = code
                try:
                    bare()
                finally:
                    launch.__code__ = woven
            assert len(trace) == calls  # both record every launch (counted, not read back)
            kept.append(trace)

        return run

    figures = paired({"bare": bare, "recorded": recorded_by(woven), "floor": recorded_by(floor)}, rounds=rounds,
                     calls=calls, between=kept.clear)  # fmt: skip
    return {
        "bare_us": round(figures["bare"][0], 2),
        "recording_added_us": round(figures["recorded"][2], 2),
        "recording_ratio": round(figures["recorded"][1], 3),
        "floor_added_us": round(figures["floor"][2], 2),
        "floor_ratio": round(figures["floor"][1], 3),
    }


def bench_params(rounds: int = 40, calls: int = 1000) -> dict[str, Any]:
    """Recording against bare Warp for a light kernel of 4 parameters and one of 18 (arrays
    of vectors, scalars and ints, a 2-D array, a struct, a vector, scalars), each launch
    recorded by a trace per ``calls`` launches, as the headline records, the collector on."""
    four, eighteen = _launches(calls), _eighteen_launch(calls)
    kept: list[gc.LaunchTrace] = []

    def recorded(bare: Any) -> Any:
        def run() -> None:
            with gc.trace_launches() as trace:
                bare()
            kept.append(trace)

        return run

    out: dict[str, Any] = {"launches_per_trace": calls}
    for name, bare in (("4p", four), ("18p", eighteen)):
        figures = paired({"bare": bare, "recorded": recorded(bare)}, rounds=rounds, calls=calls, between=kept.clear)
        out[f"bare_us_{name}"] = round(figures["bare"][0], 2)
        out[f"recording_added_us_{name}"] = round(figures["recorded"][2], 2)
        out[f"recording_ratio_{name}"] = round(figures["recorded"][1], 3)
    return out


def bench_host_copy(rounds: int = 30, calls: int = 200) -> dict[str, Any]:
    """Recording a ``wp.copy`` from a numpy-backed host array into a CPU array, against
    the bare copy, for sources of 1 KiB, 64 KiB (the largest kept whole) and 1 MiB (kept
    as a digest)."""
    import numpy as np

    out: dict[str, Any] = {"copies_per_trace": calls}
    kept: list[gc.LaunchTrace] = []
    for name, nbytes in (("1k", 1 << 10), ("64k", 1 << 16), ("1M", 1 << 20)):
        host = np.ones(nbytes // 4, dtype=np.float32)
        src = wp.array(host, dtype=float, device=DEVICE, copy=False)  # aliases the numpy memory
        dest = wp.zeros(nbytes // 4, dtype=float, device=DEVICE)

        def bare(src: Any = src, dest: Any = dest) -> None:
            for _ in range(calls):
                wp.copy(dest, src)

        def recorded(bare: Any = bare) -> None:
            with gc.trace_launches() as trace:
                bare()
            kept.append(trace)

        figures = paired({"bare": bare, "recorded": recorded}, rounds=rounds, calls=calls, between=kept.clear)
        out[f"bare_us_{name}"] = round(figures["bare"][0], 2)
        out[f"recording_added_us_{name}"] = round(figures["recorded"][2], 2)
        out[f"recording_ratio_{name}"] = round(figures["recorded"][1], 3)
    return out


def bench_long_trace(
    lengths: tuple[int, ...] = (2_000, 50_000, 1_000_000), chunk: int = 1000, steady: int = 60
) -> dict[str, Any]:
    """Per-launch cost of recording while the records of ``length`` launches are kept.

    Rounds alternate a chunk of bare launches and a chunk recorded by a trace that is
    kept, so the kept records grow to the length; then ``steady`` more rounds keep them at
    the length (the oldest trace is dropped after each round, outside the timing, as the
    headline drops its traces). The garbage collector is
    on, as in a program. The figures are medians over those steady rounds, each recorded
    chunk against the bare chunk just before it.
    """
    bare = _launches(chunk)
    out: dict[str, Any] = {"chunk": chunk}
    for length in lengths:
        kept: list[gc.LaunchTrace] = []

        def recorded(kept: list[gc.LaunchTrace] = kept) -> None:
            with gc.trace_launches() as trace:
                bare()
            kept.append(trace)

        pairs = []
        for _ in range(max(length // chunk, 1) + steady):
            start = time.thread_time_ns()
            bare()
            middle = time.thread_time_ns()
            recorded()
            end = time.thread_time_ns()
            pairs.append(((end - middle) / chunk / 1000, (middle - start) / chunk / 1000))
            if len(kept) * chunk > max(length, chunk):
                del kept[0]  # between rounds, as the headline drops its traces: freeing is not recording
        pairs = pairs[-steady:]
        assert sum(len(t._items) for t in kept) == max(length, chunk)
        name = f"{length // 1000}k" if length < 1_000_000 else f"{length // 1_000_000}M"
        out[f"bare_us_{name}"] = round(statistics.median(b for _, b in pairs), 2)
        out[f"recording_added_us_{name}"] = round(statistics.median(r - b for r, b in pairs), 2)
        out[f"recording_ratio_{name}"] = round(statistics.median(r / b for r, b in pairs), 3)
        kept.clear()
        python_gc.collect()
    return out


def bench_trace_memory(launches: int = 20_000) -> dict[str, Any]:
    """Bytes a trace keeps per recorded launch (Python allocations, by tracemalloc)."""
    bare = _launches(launches)
    bare()  # warm: Warp's own caches
    with gc.trace_launches():
        bare()
    python_gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with gc.trace_launches() as trace:
            bare()
        python_gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        records = trace.records  # materialised: what a reader of every record holds
        python_gc.collect()
        read = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(records) == launches
    return {
        "launches": launches,
        "bytes_per_launch_kept": round(kept / launches),
        "bytes_per_launch_after_reading": round(read / launches),
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

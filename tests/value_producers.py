"""Producers for the value check and the conformance kit: each is built by calling its class
with ``device=``, as ``gc.verify_replay(make)`` and ``gc.check_producer(make)`` build them.

The module-level cache and the class attribute below are deliberate: they are the shared
buffers the conformance kit must find.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import warp as wp

N = 16


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


@wp.kernel
def accumulate(src: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    total[i] = total[i] + src[i]


@wp.kernel
def copy(src: wp.array(dtype=float), dst: wp.array(dtype=float)):
    i = wp.tid()
    dst[i] = src[i]


@wp.kernel
def add_one(x: wp.array(dtype=Any)):
    """Generic: one overload per dtype."""
    i = wp.tid()
    x[i] = x[i] + x.dtype(1)


@wp.kernel
def cast(src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
    """Generic: one overload per pair of dtypes."""
    i = wp.tid()
    dst[i] = dst.dtype(src[i])


class Plain:
    """Replay-safe: fixed buffers, fixed scalars."""

    def __init__(self, device: str) -> None:
        self.x = wp.zeros(N, dtype=float, device=device)
        self.v = wp.array(np.linspace(0.0, 1.0, N, dtype=np.float32), device=device)

    def step(self) -> None:
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)


class Overloads:
    """Two overloads of one generic kernel (float32 and float64) in one step: Warp 1.19's CPU
    graph replays one overload's code for both launches. Every launch, address and scalar matches;
    Warp's rule for CPU graphs makes it a capture-error."""

    def __init__(self, device: str) -> None:
        self.a = wp.zeros(N, dtype=wp.float32, device=device)
        self.b = wp.zeros(N, dtype=wp.float64, device=device)

    def step(self) -> None:
        wp.launch(add_one, dim=N, inputs=[self.a], device=self.a.device)
        wp.launch(add_one, dim=N, inputs=[self.b], device=self.b.device)


@wp.kernel
def add_one_single(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + wp.float32(1.0)


@wp.kernel
def add_one_double(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[i] + wp.float64(1.0)


class OneKernelPerDtype(Overloads):
    """The cure for :class:`Overloads`: one kernel per dtype, each with its own key."""

    def step(self) -> None:
        wp.launch(add_one_single, dim=N, inputs=[self.a], device=self.a.device)
        wp.launch(add_one_double, dim=N, inputs=[self.b], device=self.b.device)


def _made_add_one() -> Any:
    """A kernel factory, as simulators make kernels per set of options: each call makes a new
    generic kernel, of one key, in one module."""

    @wp.kernel(module="graphcheck_tests_kernel_factory")
    def add_one_made(x: wp.array(dtype=Any)):
        i = wp.tid()
        x[i] = x[i] + x.dtype(1)

    return add_one_made


class FactoryKernels(Overloads):
    """One kernel factory called twice with the same options (as each of Newton's collision
    pipelines makes its narrow phase): two kernel objects of one key in one module, launched on
    one dtype, are the same code, which Warp's CPU graph runs for both. Replay-safe."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.kernels = (_made_add_one(), _made_add_one())

    def step(self) -> None:
        for kernel in self.kernels:
            wp.launch(kernel, dim=N, inputs=[self.a], device=self.a.device)


class FactoryOverloads(FactoryKernels):
    """The same two kernels launched on two dtypes: two codes under one key and module, of
    which Warp's CPU graph replays one for both (as :class:`Overloads`)."""

    def step(self) -> None:
        wp.launch(self.kernels[0], dim=N, inputs=[self.a], device=self.a.device)
        wp.launch(self.kernels[1], dim=N, inputs=[self.b], device=self.b.device)


class HostViewWrite(Plain):
    """On Warp's CPU device, the step writes an array's memory through a numpy view of it
    (no Warp operation): the graph has nothing of the write, and every launch, address and
    scalar matches, so only the values show that replays never write it."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.calls = 0
        self.v_host = self.v.numpy()  # a view on the CPU: writes reach the array itself

    def step(self) -> None:
        self.calls += 1
        self.v_host[:] = 0.1 * self.calls
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)


class CastBothWays:
    """The same Warp behaviour with a cast in both directions (float32 -> float64 -> float32)."""

    def __init__(self, device: str) -> None:
        self.single = wp.array(np.arange(N, dtype=np.float32) + 1.5, device=device)
        self.double = wp.zeros(N, dtype=wp.float64, device=device)
        self.back = wp.zeros(N, dtype=wp.float32, device=device)

    def step(self) -> None:
        device = self.single.device
        wp.launch(add_one, dim=N, inputs=[self.single], device=device)
        wp.launch(cast, dim=N, inputs=[self.single, self.double], device=device)
        wp.launch(cast, dim=N, inputs=[self.double, self.back], device=device)


class Timestamp(Plain):
    """The elapsed time passed as a scalar: frozen at capture (scalar-drift), and the replay diverges."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.calls = 0

    def step(self) -> None:
        self.calls += 1
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1 * self.calls], device=self.x.device)


class Random(Plain):
    """Built with an unseeded random state: two producers built alike differ before any step."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.v = wp.array(np.random.default_rng(time.perf_counter_ns()).random(N, dtype=np.float32), device=device)


_builds = itertools.count()


class Unwritten(Plain):
    """Scratch whose contents differ between producers until the step writes it (like wp.empty), and
    spare memory the step never writes."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        garbage = float(next(_builds))  # what wp.empty may hold: anything, different for each producer
        self.scratch = wp.full(N, garbage, dtype=float, device=device)
        self.spare = wp.full(4, garbage, dtype=float, device=device)

    def step(self) -> None:
        wp.launch(copy, dim=N, inputs=[self.v, self.scratch], device=self.x.device)
        wp.launch(integrate, dim=N, inputs=[self.x, self.scratch, 0.1], device=self.x.device)


_SCRATCH: dict[tuple[str, int], wp.array] = {}


def scratch(device: str, n: int) -> wp.array:
    """A module-level cache: every producer asking for the same size gets the same array."""
    key = (str(device), n)
    if key not in _SCRATCH:
        _SCRATCH[key] = wp.zeros(n, dtype=float, device=device)
    return _SCRATCH[key]


class ModuleCache(Plain):
    """Takes its scratch buffer from a module-level cache: owned, but shared by every producer."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.total = scratch(device, N)

    def step(self) -> None:
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)
        wp.launch(accumulate, dim=N, inputs=[self.x, self.total], device=self.x.device)


class ClassBuffer(Plain):
    """Keeps its scratch buffer in a class attribute: one buffer for every instance."""

    total = None  # made on first use, on the first producer's device

    def __init__(self, device: str) -> None:
        super().__init__(device)
        if type(self).total is None:
            type(self).total = wp.zeros(N, dtype=float, device=device)

    def step(self) -> None:
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)
        wp.launch(accumulate, dim=N, inputs=[self.x, self.total], device=self.x.device)


_DEFAULT_TOTAL = wp.zeros(N, dtype=float, device="cpu")


class DefaultArgument(Plain):
    """Takes its scratch buffer from a default argument, evaluated once for every instance."""

    def __init__(self, device: str, total: wp.array = _DEFAULT_TOTAL) -> None:
        super().__init__(device)
        self.total = total

    def step(self) -> None:
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)
        wp.launch(accumulate, dim=N, inputs=[self.x, self.total], device=self.x.device)


class EveryThirdCall(Plain):
    """An extra launch on every third call, decided by a Python counter."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.calls = 0

    def step(self) -> None:
        self.calls += 1
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)
        if self.calls % 3 == 0:
            wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)


class DeviceTemporaries(Plain):
    """Makes a device temporary on every call (wp.zeros inside step), the same way each time."""

    def step(self) -> None:
        tmp = wp.zeros(N, dtype=float, device=self.x.device)
        wp.launch(accumulate, dim=N, inputs=[self.v, tmp], device=self.x.device)
        wp.launch(integrate, dim=N, inputs=[self.x, tmp, 0.1], device=self.x.device)


class Reassigned(Plain):
    """Safe to capture; replaces ``v`` by a new array after the capture (stale-pointer before replay)."""

    def renew(self) -> None:
        self.v = wp.array(np.linspace(1.0, 2.0, N, dtype=np.float32), device=self.x.device)


class UploadPerCall(Plain):
    """Uploads host data made in the call (per-call-allocation): no host state changes between calls."""

    def step(self) -> None:
        forces = wp.array(np.full(N, 0.5, dtype=np.float32), dtype=float, device=self.x.device)
        wp.launch(accumulate, dim=N, inputs=[forces, self.v], device=self.x.device)
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)


class GrowsOnThirdCall(Plain):
    """Makes a new buffer on its third call, in Python: a replayed graph never does."""

    def __init__(self, device: str) -> None:
        super().__init__(device)
        self.calls = 0

    def step(self) -> None:
        self.calls += 1
        if self.calls == 3:
            self.history = wp.zeros(4, dtype=float, device=self.x.device)
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.1], device=self.x.device)


_TOTALS: dict[str, wp.array] = {}


def shared_closure(device: str):
    """A factory returning the step itself, a closure that reads a module global."""
    if "total" not in _TOTALS:
        _TOTALS["total"] = wp.zeros(N, dtype=float, device=device)
    x = wp.zeros(N, dtype=float, device=device)

    def step() -> None:
        wp.launch(accumulate, dim=N, inputs=[x, _TOTALS["total"]], device=device)

    return step

"""A public corpus of small Warp producers: known unsafe capture patterns, and safe ones.

Each producer owns its buffers and has a ``step()`` that a user would capture. The
class attribute ``expected`` names the one finding kind graphcheck must report when
``step`` is captured (None: nothing). Producers with ``after_capture`` are safe to
capture but made unsafe afterwards (``expected_replay`` names the replay finding).

The corpus runs on any device; ``tests/test_corpus.py`` runs it on the CPU and
``tests_gpu/test_gpu_corpus.py`` on CUDA.
"""

from __future__ import annotations

import collections
import functools
import time
from typing import Any

import numpy as np
import warp as wp

from tests import kernels as K
from tests.releases import WARP_RELEASE

N = 64


class Producer:
    expected: str | None = None
    #: What strict_ownership=True reports in addition (device temporaries made in the call).
    expected_strict: str | None = None
    #: Whether replaying the graph on the CPU visibly differs from stepping eagerly.
    wrong_replay_on_cpu = True
    expected_replay: str | None = None
    #: What a CUDA capture reports where it differs (a readback breaks a CUDA capture).
    expected_cuda: str | None = None
    #: Unsafe on the CPU only: what Warp's CPU graphs leave out, a CUDA graph keeps.
    cpu_only = False

    #: What a CPU capture reports besides: a readback inside the call is a capture-error
    #: on the CPU too (it works there, and would fail in a CUDA capture).
    also_on_cpu: tuple[str, ...] = ()

    @classmethod
    def expected_on(cls, device: str) -> str | None:
        """The finding kind expected when ``step`` is captured on ``device``."""
        if device.startswith("cuda") and cls.cpu_only:
            return None
        if device.startswith("cuda") and cls.expected_cuda is not None:
            return cls.expected_cuda
        return cls.expected

    @classmethod
    def kinds_on(cls, device: str) -> set[str]:
        """Every finding kind expected when ``step`` is captured on ``device``."""
        kinds = {cls.expected_on(device)} - {None}
        return kinds | set(cls.also_on_cpu) if device == "cpu" else kinds  # type: ignore[return-value]

    def __init__(self, device: str) -> None:
        self.device = device
        self.x = wp.zeros(N, dtype=float, device=device)
        self.v = wp.ones(N, dtype=float, device=device)

    def step(self) -> None:
        raise NotImplementedError

    def after_capture(self) -> None:
        """Break the producer after its graph was captured (replay-check producers)."""

    def launch(self, kernel, inputs, dim=N):
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.device)


# -- scalar-drift ------------------------------------------------------------------------


class HostCounter(Producer):
    """A Python step counter passed as a scalar: frozen at its capture-time value."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        self.launch(K.counter_step, [self.x, self.frame])


class Timestamp(Producer):
    """Elapsed wall-clock time as a kernel argument."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        # Time since construction: small values keep float32 resolution at nanoseconds,
        # so two calls always differ once packed.
        self.start = time.perf_counter()

    def step(self):
        self.launch(K.integrate, [self.x, self.v, time.perf_counter() - self.start])


class HostRngSeed(Producer):
    """A host RNG drawn once per call: the graph replays one draw forever."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.rng = np.random.default_rng(0)

    def step(self):
        self.launch(K.damp, [self.v, float(self.rng.uniform(0.9, 1.0))])


class StructFieldCounter(Producer):
    """A struct field updated on the host between calls."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.params = K.Params()
        self.params.scratch = wp.zeros(N, dtype=float, device=device)
        self.params.dt = 0.01

    def step(self):
        self.params.dt = self.params.dt * 1.5
        self.launch(K.add_struct, [self.x, self.params])


class ReplayedCommandParam(Producer):
    """A recorded wp.Launch command whose parameter is set from a host counter."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.cmd = wp.launch(K.counter_step, dim=N, inputs=[self.x, 0], device=device, record_cmd=True)
        self.frame = 0

    def step(self):
        self.frame += 1
        self.cmd.set_param_by_name("step", self.frame)
        self.cmd.launch()


class HashGridRadius(Producer):
    """A hash grid rebuilt every call with a cell size that follows a host value."""

    expected = "scalar-drift"
    wrong_replay_on_cpu = False  # the grid's cells are not a Warp array the twin compares
    # Before Warp 1.16 a CPU graph does not record HashGrid.build: a capture-error besides.
    also_on_cpu = ("capture-error",) if WARP_RELEASE < (1, 16) else ()

    def __init__(self, device):
        super().__init__(device)
        self.grid = wp.HashGrid(4, 4, 4, device=device)
        self.points = wp.array(np.random.default_rng(1).random((N, 3)), dtype=wp.vec3, device=device)
        self.radius = 0.2

    def step(self):
        self.radius *= 1.1
        self.grid.build(self.points, radius=self.radius)


class ConditionalBodyCounter(Producer):
    """A host counter passed to a launch inside a wp.capture_if body."""

    expected = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.flag = wp.ones(1, dtype=int, device=device)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.capture_if(self.flag, on_true=lambda: self.launch(K.counter_step, [self.x, self.frame]))


def _offset_kernel(offset: float):
    """A kernel declared on each call, adding ``offset`` (a closure constant: part of its code)."""

    @wp.kernel
    def add_offset(a: wp.array[float]):
        i = wp.tid()
        a[i] = a[i] + offset

    return add_offset


class KernelClosureConstant(Producer):
    """A kernel declared inside the step whose closure constant follows a host counter:
    each call compiles other code, and the graph replays the captured code."""

    expected = "launch-sequence-drift"

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        self.launch(_offset_kernel(float(self.frame % 2)), [self.x])


# -- buffer-drift ------------------------------------------------------------------------


class WhileBodySwap(Producer):
    """Buffers swapped in Python once per call, used inside a wp.capture_while body."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)
        self.remaining = wp.zeros(1, dtype=int, device=device)

    def body(self):
        self.launch(K.scale, [self.y, self.x, 2.0, 1])
        wp.launch(K.decrement_int, dim=1, inputs=[self.remaining], device=self.device)

    def step(self):
        self.remaining.fill_(2)
        wp.capture_while(self.remaining, self.body)
        self.x, self.y = self.y, self.x


class HashGridPointSwap(Producer):
    """A hash grid built from whichever of two point buffers is current: swapped each call."""

    expected = "buffer-drift"
    wrong_replay_on_cpu = False  # the grid's cells are not a Warp array the twin compares
    also_on_cpu = HashGridRadius.also_on_cpu  # the same capture-error before Warp 1.16

    def __init__(self, device):
        super().__init__(device)
        self.grid = wp.HashGrid(4, 4, 4, device=device)
        rng = np.random.default_rng(2)
        self.points = wp.array(rng.random((N, 3)), dtype=wp.vec3, device=device)
        self.previous = wp.array(rng.random((N, 3)), dtype=wp.vec3, device=device)

    def step(self):
        self.grid.build(self.points, radius=0.25)
        self.points, self.previous = self.previous, self.points


class OddPingPong(Producer):
    """Buffers swapped in Python once per call: every other replay reads the wrong one."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(K.scale, [self.y, self.x, 2.0, 1])
        self.x, self.y = self.y, self.x


class PingPongCarriedOver(Producer):
    """The twin of OverwrittenPingPong whose first pass adds to the buffer instead of
    overwriting it: the swapped buffers carry state from one call to the next."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        _ping_pong_buffers(self, device)

    def step(self):
        self.launch(K.axpy, [self.x, self.a, 1.0])
        _smooth_once(self)


class MirroredStateHalfCopied(Producer):
    """The twin of MirroredStateSwap that copies back only half the new state: the two
    buffers differ after each call, and every other replay reads the stale half."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(K.scale, [self.y, self.x, 0.5, 1])
        wp.copy(self.x, self.y, count=N // 2)
        self.x, self.y = self.y, self.x


class RotatingView(Producer):
    """A window into a ring buffer that advances each call: same buffer, other offset."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.ring = wp.zeros(4 * N, dtype=float, device=device)
        self.head = 0

    def step(self):
        window = self.ring[self.head : self.head + N]
        self.launch(K.add_one, [window])
        self.head = (self.head + N) % (3 * N)


# -- per-call-allocation ------------------------------------------------------------------


class ZerosPerCall(Producer):
    """Scratch allocated with wp.zeros inside the captured call: graph-owned, so safe
    (``strict_ownership=True`` reports it)."""

    expected_strict = "per-call-allocation"

    def step(self):
        scratch = wp.zeros(N, dtype=float, device=self.device)
        self.launch(K.square, [self.x, scratch])
        self.launch(K.blend, [scratch, self.v, self.x])


class ClonePerCall(Producer):
    """A snapshot made with wp.clone inside the captured call: graph-owned, so safe."""

    expected_strict = "per-call-allocation"

    def step(self):
        previous = wp.clone(self.x)
        self.launch(K.integrate, [self.x, self.v, 0.1])
        self.launch(K.blend, [previous, self.x, self.v])


class ArrayFromNumpyPerCall(Producer):
    """Host data turned into a Warp array inside the captured call: a replay never
    uploads the new data."""

    expected = "per-call-allocation"
    # The replay reads freed host memory, which the allocator may hand to the next call's
    # upload of the same size: whether the CPU shows the wrong replay depends on it.
    wrong_replay_on_cpu = False

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        forces = wp.array(np.full(N, 0.5 * self.frame, dtype=np.float32), dtype=float, device=self.device)
        self.launch(K.axpy, [forces, self.v, 1.0])


class CopyFromHostTemporary(Producer):
    """wp.copy from a host array made in the call (a staging buffer that is not kept)."""

    expected = "per-call-allocation"
    # The replay reads freed host memory, which the allocator may hand to the next call's
    # upload of the same size: whether the CPU shows the wrong replay depends on it.
    wrong_replay_on_cpu = False

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        staging = wp.array(np.full(N, float(self.frame), dtype=np.float32), dtype=float, device="cpu")
        wp.copy(self.v, staging)
        self.launch(K.integrate, [self.x, self.v, 0.1])


class AssignFreshNumpy(Producer):
    """assign() from a numpy array made in the call: the graph copies from freed memory."""

    expected = "per-call-allocation"

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        self.v.assign(np.linspace(0.0, float(self.frame), N, dtype=np.float32))
        self.launch(K.integrate, [self.x, self.v, 0.1])


# -- structures as resources: textures, and structures made during the call ----------------


if hasattr(wp, "Texture2D"):  # Warp 1.15 to 1.19 all have it

    @wp.kernel
    def sample_texture(tex: wp.Texture2D, out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = out[i] + wp.texture_sample(tex, wp.vec2(0.5, 0.5), dtype=float)


def _texture(value, device):
    return wp.Texture2D(np.full((4, 4), value, dtype=np.float32), device=device)


class TextureSwap(Producer):
    """Two textures swapped once per call, as ping-pong buffers are: the graph samples the
    capture call's texture on every replay (buffer-drift, like a swapped mesh or volume)."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.front, self.back = _texture(1.0, device), _texture(2.0, device)

    def step(self):
        self.launch(sample_texture, [self.front, self.x])
        self.front, self.back = self.back, self.front


class TextureRemadePerCall(Producer):
    """A texture made from host data in every call: one cause, the upload a replay does not
    run again (the texture itself is matched by order of creation)."""

    expected = "per-call-allocation"
    # The replay copies from freed host memory, which the next upload may reuse.
    wrong_replay_on_cpu = False

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0
        self.tex = _texture(0.0, device)

    def step(self):
        self.frame += 1
        self.tex = _texture(float(self.frame), self.device)
        self.launch(sample_texture, [self.tex, self.x])


class TextureReplacedAfterCapture(Producer):
    """Safe to capture; afterwards the owner replaces the texture: the graph samples the old
    one (stale before replay, as a replaced volume is)."""

    expected_replay = "stale-pointer"

    def __init__(self, device):
        super().__init__(device)
        self.tex = _texture(1.0, device)

    def step(self):
        self.launch(sample_texture, [self.tex, self.x])

    def after_capture(self):
        self.tex = _texture(5.0, self.device)


class HashGridMadeInCall(Producer):
    """A hash grid made inside the step and kept by the owner: on the CPU the graph rebuilds
    it on every replay into the grid the owner keeps; a CUDA capture uploads the grid's
    descriptor from host memory that lives only for the call."""

    expected_cuda = "per-call-allocation"

    def __init__(self, device):
        super().__init__(device)
        self.points = wp.array(np.random.default_rng(3).random((N, 3)), dtype=wp.vec3, device=device)
        self.grid = None

    def step(self):
        self.launch(K.jitter_points, [self.points])
        self.grid = wp.HashGrid(4, 4, 4, device=self.device)
        self.grid.build(self.points, radius=0.25)
        self.launch(K.count_neighbors, [self.grid.id, self.points, self.x])


class HashGridDropped(HashGridMadeInCall):
    """The same grid not kept: Warp frees it when the call ends, and the graph keeps its id."""

    expected = "per-call-allocation"
    # Replaying reads a freed grid: a use after free, not a value to compare.
    wrong_replay_on_cpu = False

    def step(self):
        self.launch(K.jitter_points, [self.points])
        grid = wp.HashGrid(4, 4, 4, device=self.device)
        grid.build(self.points, radius=0.25)
        self.launch(K.count_neighbors, [grid.id, self.points, self.x])


@wp.kernel
def shift_boxes(lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    lower[i] = lower[i] + wp.vec3(0.01, 0.0, 0.0)
    upper[i] = upper[i] + wp.vec3(0.01, 0.0, 0.0)


@wp.kernel
def count_overlaps(bvh: wp.uint64, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                   counts: wp.array(dtype=float)):  # fmt: skip
    i = wp.tid()
    query = wp.bvh_query_aabb(bvh, lower[i], upper[i])
    hit = wp.int32(0)  # dynamic variables: the loop changes them
    n = wp.float32(0.0)
    while wp.bvh_query_next(query, hit):
        n += 1.0
    counts[i] = counts[i] + n


class BvhMadeInCall(Producer):
    """A BVH made inside the step from boxes the step moves: Warp builds it when it is made,
    natively, which a CPU graph does not record; every replay queries the capture call's."""

    expected = "capture-error"
    expected_cuda = "per-call-allocation"

    def __init__(self, device):
        super().__init__(device)
        corners = np.random.default_rng(1).random((N, 3)).astype(np.float32)
        self.lower = wp.array(corners, dtype=wp.vec3, device=device)
        self.upper = wp.array(corners + 0.2, dtype=wp.vec3, device=device)
        self.bvh = None

    def step(self):
        self.launch(shift_boxes, [self.lower, self.upper])
        self.bvh = wp.Bvh(self.lower, self.upper)
        self.launch(count_overlaps, [self.bvh.id, self.lower, self.upper, self.x])


class BvhRefitInCall(BvhMadeInCall):
    """The cure: the BVH made once, refit inside the step (an operation the graph records)."""

    expected = None
    expected_cuda = None

    def __init__(self, device):
        super().__init__(device)
        self.bvh = wp.Bvh(self.lower, self.upper)

    def step(self):
        self.launch(shift_boxes, [self.lower, self.upper])
        self.bvh.refit()
        self.launch(count_overlaps, [self.bvh.id, self.lower, self.upper, self.x])


# -- copy-drift: host memory the call itself writes, then uploads ---------------------------


class StagingWrittenInCall(Producer):
    """Owned (pinned where CUDA is) staging written inside the step, then copied up: a replay
    copies what the capture call left there, never this frame's data."""

    expected = "copy-drift"

    def __init__(self, device):
        super().__init__(device)
        self.staging = wp.zeros(N, dtype=float, device="cpu", pinned=wp.is_cuda_available())
        self.host = self.staging.numpy()  # a view of the staging memory, made once
        self.frame = 0

    def feed(self, frame):
        self.host[:] = 0.25 * frame

    def step(self):
        self.frame += 1
        self.feed(self.frame)
        wp.copy(self.v, self.staging)
        self.launch(K.integrate, [self.x, self.v, 0.1])


class OwnedNumpyWrittenInCall(StagingWrittenInCall):
    """The same with an owned numpy array uploaded by assign()."""

    def __init__(self, device):
        super().__init__(device)
        self.host = np.zeros(N, dtype=np.float32)

    def step(self):
        self.frame += 1
        self.feed(self.frame)
        self.v.assign(self.host)
        self.launch(K.integrate, [self.x, self.v, 0.1])


class StagingSameEveryCall(StagingWrittenInCall):
    """Staging written inside the step with the same bytes every call: the replay uploads
    what eager stepping would."""

    expected = None

    def step(self):
        self.feed(1)
        wp.copy(self.v, self.staging)
        self.launch(K.integrate, [self.x, self.v, 0.1])


class StagingFedBetweenReplays(StagingWrittenInCall):
    """The canonical pattern: the program writes the staging before each replay, outside the
    captured call, which only copies it."""

    expected = None

    def __init__(self, device):
        super().__init__(device)
        self.feed(1)  # the data a program writes before its first call

    def step(self):
        wp.copy(self.v, self.staging)
        self.launch(K.integrate, [self.x, self.v, 0.1])


class SnapshotBeforeStep(Producer):
    """The state copied aside before the step advances it: on Warp's CPU device the state is
    host memory that differs between the calls, written by the call's own launch."""

    def __init__(self, device):
        super().__init__(device)
        self.previous = wp.zeros_like(self.x)

    def step(self):
        wp.copy(self.previous, self.x)
        self.launch(K.integrate, [self.x, self.v, 0.1])


# -- launch-sequence-drift ----------------------------------------------------------------


class ReadbackLoop(Producer):
    """A loop whose iteration count depends on data read back to the host.

    The reference call runs three iterations and later calls none: one more eager call
    matches the capture (first-call work), and the readback inside the capture is what is
    left, on the CPU as on CUDA."""

    expected = "capture-error"
    wrong_replay_on_cpu = False  # after the first call the loop runs no iteration either way

    def __init__(self, device):
        super().__init__(device)
        self.residual = wp.array([3.0], dtype=float, device=device)

    def step(self):
        # The reference call runs three iterations; by the capture the residual is 0
        # (on CUDA the readback itself breaks the capture).
        while self.residual.numpy()[0] > 0.0:
            wp.launch(K.decrement, dim=1, inputs=[self.residual], device=self.device)


class EveryOtherCall(Producer):
    """Extra work every other call (a Python branch on a counter)."""

    expected = "launch-sequence-drift"

    def __init__(self, device):
        super().__init__(device)
        self.calls = 0

    def step(self):
        self.calls += 1
        self.launch(K.integrate, [self.x, self.v, 0.01])
        if self.calls % 2 == 0:
            self.launch(K.damp, [self.v, 0.99])
        self.launch(K.add_one, [self.x])


class SetupEveryOtherCall(Producer):
    """The twin of FirstCallSetup whose "set-up" runs on every odd call: a replay never
    runs it, later eager calls do. One more eager call differs from the capture too."""

    expected = "launch-sequence-drift"

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        if self.frame % 2:
            self.x.fill_(1.0)
        self.launch(K.integrate, [self.x, self.v, 0.01])


class TapeResetOddCalls(Producer):
    """The twin of TapeReused that resets its tape on odd calls only: the tape grows, and
    each eager call runs more backward launches than the graph holds."""

    expected = "launch-sequence-drift"

    def __init__(self, device):
        super().__init__(device)
        _tape_buffers(self, device)
        self.frame = 0

    def step(self):
        self.frame += 1
        if self.frame % 2:
            self.tape.reset()
        _tape_step(self)


class KernelToggle(Producer):
    """Two kernels alternating by a host flag."""

    expected = "launch-sequence-drift"

    def __init__(self, device):
        super().__init__(device)
        self.v.fill_(2.0)
        self.flip = False

    def step(self):
        self.flip = not self.flip
        self.launch(K.square if self.flip else K.copy_kernel, [self.v, self.x])


# -- dim-drift --------------------------------------------------------------------------


class GrowingDim(Producer):
    """The number of active particles grows each call and is the launch dimension."""

    expected = "dim-drift"

    def __init__(self, device):
        super().__init__(device)
        self.active = 8

    def step(self):
        self.active = min(self.active + 4, N)  # still growing at the calls a retry compares
        self.launch(K.add_one, [self.x], dim=self.active)


class DimFromReadback(Producer):
    """The launch dimension read back from a device counter that changes."""

    expected = "dim-drift"
    also_on_cpu = ("capture-error",)
    expected_cuda = "capture-error"

    def __init__(self, device):
        super().__init__(device)
        self.count = wp.array([4], dtype=int, device=device)

    def step(self):
        n = int(self.count.numpy()[0])
        self.launch(K.add_one, [self.x], dim=n)
        wp.launch(K.bump, dim=1, inputs=[self.count], device=self.device)


# -- copy-drift -------------------------------------------------------------------------


class CopyCount(Producer):
    """A copy whose element count follows a host value."""

    expected = "copy-drift"

    def __init__(self, device):
        super().__init__(device)
        self.filled = 4

    def step(self):
        wp.copy(self.x, self.v, count=self.filled)
        self.filled += 4


class FillValue(Producer):
    """A fill whose value is a host variable."""

    expected = "copy-drift"

    def __init__(self, device):
        super().__init__(device)
        self.level = 0.0

    def step(self):
        self.level += 1.0
        self.x.fill_(self.level)


class CopyOffset(Producer):
    """A copy into a history buffer at an offset that advances each call."""

    expected = "copy-drift"

    def __init__(self, device):
        super().__init__(device)
        self.x.fill_(1.0)
        self.history = wp.zeros(8 * N, dtype=float, device=device)
        self.slot = 0

    def step(self):
        wp.copy(self.history, self.x, dest_offset=self.slot * N, count=N)
        self.slot = (self.slot + 1) % 8


class FullValueDrift(Producer):
    """A temporary made with wp.full from a host value: the graph fills with the capture-time value."""

    expected = "copy-drift"

    def __init__(self, device):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        offset = wp.full(N, float(self.frame), dtype=float, device=self.device)
        self.launch(K.axpy, [offset, self.x, 1.0])


class CloneOfSwapped(Producer):
    """A snapshot cloned from whichever buffer is current, swapped each call."""

    expected = "buffer-drift"

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.full(N, 3.0, dtype=float, device=device)

    def step(self):
        snapshot = wp.clone(self.x)
        self.launch(K.axpy, [snapshot, self.v, 1.0])
        self.x, self.y = self.y, self.x


# -- capture-error ----------------------------------------------------------------------


class ReductionReadback(Producer):
    """A reduction read back to the host inside the captured call."""

    expected = "capture-error"
    wrong_replay_on_cpu = False  # there is no graph to replay

    def step(self):
        total = wp.utils.array_sum(self.x)
        self.launch(K.damp, [self.v, 1.0 / (1.0 + abs(total))])


# -- foreign-buffer ----------------------------------------------------------------------

_SHARED_SCRATCH: dict[str, wp.array] = {}


def _scratch(device: str) -> wp.array:
    if device not in _SHARED_SCRATCH:
        _SHARED_SCRATCH[device] = wp.zeros(N, dtype=float, device=device)
    return _SHARED_SCRATCH[device]


class ModuleGlobalScratch(Producer):
    """Scratch shared through a module global: two producers side by side collide."""

    expected = "foreign-buffer"
    wrong_replay_on_cpu = False  # one producer alone replays right; two side by side collide

    def step(self):
        scratch = _scratch(self.device)
        self.launch(K.square, [self.x, scratch])
        self.launch(K.blend, [scratch, self.v, self.x])


# -- stale-pointer (safe to capture; broken before replay) --------------------------------


class ReassignedAfterCapture(Producer):
    """A buffer the graph uses is replaced by a new array after the capture."""

    expected_replay = "stale-pointer"

    def step(self):
        self.launch(K.integrate, [self.x, self.v, 0.01])

    def after_capture(self):
        self.v = wp.full(N, 2.0, dtype=float, device=self.device)


class FreedScratch(Producer):
    """Scratch the graph uses is dropped after the capture."""

    expected_replay = "stale-pointer"
    wrong_replay_on_cpu = False  # an eager twin cannot step without its scratch

    def __init__(self, device):
        super().__init__(device)
        self.scratch = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(K.square, [self.x, self.scratch])
        self.launch(K.blend, [self.scratch, self.v, self.x])

    def after_capture(self):
        self.scratch = None


class ResizedBuffer(Producer):
    """A buffer grown after the capture: the graph holds the old one."""

    expected_replay = "stale-pointer"

    def step(self):
        self.launch(K.add_one, [self.x])

    def after_capture(self):
        self.x = wp.zeros(2 * N, dtype=float, device=self.device)


# -- owned through every way Python holds an array -----------------------------------------
# Each producer holds a buffer it steps only through one way in (a dict key, a deque, a
# functools.partial, a default argument): safe. Its one-line twin puts a new array there after
# the capture: the graph still steps the old one (stale-pointer before replay, and a replay
# that differs from eager stepping).


class KeyedMoments(Producer):
    """A torch-style ``{param: moment}`` map: the parameter is held only as a dict key."""

    def __init__(self, device):
        super().__init__(device)
        self.moments = {wp.full(N, 0.5, dtype=float, device=device): wp.zeros(N, dtype=float, device=device)}

    def step(self):
        for param, moment in self.moments.items():
            self.launch(K.axpy, [param, moment, 0.9])
            self.launch(K.integrate, [param, moment, 0.1])


class KeyedMomentsReplaced(KeyedMoments):
    expected_replay = "stale-pointer"

    def after_capture(self):
        self.moments = {wp.clone(param): moment for param, moment in self.moments.items()}


class DequeHistory(Producer):
    """The last two states in a ``collections.deque`` (no ``__dict__``: its members are walked)."""

    def __init__(self, device):
        super().__init__(device)
        self.history = collections.deque([wp.zeros(N, dtype=float, device=device), self.v], maxlen=2)
        del self.v  # held only by the deque

    def step(self):
        previous, current = self.history
        self.launch(K.blend, [previous, current, self.x])
        self.launch(K.integrate, [current, self.x, 0.1])


class DequeHistoryPushed(DequeHistory):
    expected_replay = "stale-pointer"

    def after_capture(self):
        self.history.append(wp.clone(self.history[-1]))


class DequeRotated(DequeHistory):
    """The deque rotated every call: an odd swap of the two states."""

    expected = "buffer-drift"

    def step(self):
        self.history.rotate(1)
        super().step()


def _advance(device, x, v, dt=0.1):
    wp.launch(K.integrate, dim=N, inputs=[x, v, dt], device=device)


class PartialLauncher(Producer):
    """A step bound with ``functools.partial``: the position its argument, the velocity a keyword."""

    def __init__(self, device):
        super().__init__(device)
        self.advance = functools.partial(_advance, device, wp.zeros(N, dtype=float, device=device), v=self.v)
        del self.x, self.v  # held only by the partial

    def step(self):
        self.advance()


class PartialLauncherRebound(PartialLauncher):
    expected_replay = "stale-pointer"

    def after_capture(self):
        self.advance = functools.partial(_advance, self.device, wp.clone(self.advance.args[1]), **self.advance.keywords)


class DefaultBound(Producer):
    """The usual cure for late binding: a callback takes its arrays as defaults
    (``lambda dt, v=velocity, *, x=position: ...``)."""

    def __init__(self, device):
        super().__init__(device)
        self.update = lambda dt, v=self.v, *, x=self.x: self.launch(K.integrate, [x, v, dt])
        del self.x, self.v  # held only as the callback's defaults

    def step(self):
        self.update(0.1)


class DefaultRebound(DefaultBound):
    expected_replay = "stale-pointer"

    def after_capture(self):
        self.update.__kwdefaults__ = {"x": wp.clone(self.update.__kwdefaults__["x"])}


class CommandRebound(Producer):
    """A recorded wp.Launch command is given another parameter after the capture: the graph
    replays the parameter it baked (safe twin: RecordedCommand)."""

    expected_replay = "scalar-drift"

    def __init__(self, device):
        super().__init__(device)
        self.cmd = wp.launch(K.integrate, dim=N, inputs=[self.x, self.v, 0.01], device=device, record_cmd=True)

    def step(self):
        self.cmd.launch()

    def after_capture(self):
        self.cmd.set_param_by_name("dt", 0.02)


# -- safe ---------------------------------------------------------------------------------


class DeviceCounter(Producer):
    """The step counter lives on the device and is advanced by a kernel."""

    def __init__(self, device):
        super().__init__(device)
        self.counter = wp.zeros(1, dtype=int, device=device)

    def step(self):
        self.launch(K.device_counter, [self.counter, self.x])


class KernelDeclaredInStep(Producer):
    """A kernel declared inside the step: a new wp.Kernel each call, the same compiled code."""

    def step(self):
        self.launch(_offset_kernel(1.0), [self.x])


class FirstCallSetup(Producer):
    """Set-up only the first call does (state initialised lazily): the reference call issues
    a fill the capture does not, and every replay does what later eager calls do."""

    def __init__(self, device):
        super().__init__(device)
        self.ready = False

    def step(self):
        if not self.ready:
            self.x.fill_(1.0)
            self.ready = True
        self.launch(K.integrate, [self.x, self.v, 0.01])


def _tape_buffers(producer, device):
    producer.x = wp.full(N, 0.5, dtype=float, device=device, requires_grad=True)
    producer.y = wp.zeros(N, dtype=float, device=device, requires_grad=True)
    producer.seed = wp.ones(N, dtype=float, device=device)
    producer.tape = wp.Tape()


def _tape_step(producer):
    with producer.tape:
        producer.launch(K.square, [producer.x, producer.y])
    producer.tape.backward(grads={producer.y: producer.seed})
    producer.launch(K.axpy, [producer.x.grad, producer.v, -0.1])


class TapeReused(Producer):
    """A wp.Tape reused with reset(): the first call zeroes no gradient (the tape has none
    yet), later calls zero them all; the capture is a later call."""

    def __init__(self, device):
        super().__init__(device)
        _tape_buffers(self, device)

    def step(self):
        self.tape.reset()
        _tape_step(self)


def _ping_pong_buffers(producer, device):
    producer.a = wp.zeros(N, dtype=float, device=device)
    producer.b = wp.zeros(N, dtype=float, device=device)
    producer.out = wp.zeros(N, dtype=float, device=device)


def _smooth_once(producer):
    # One pass from a into b, then the names swap: an odd number of swaps per call.
    producer.launch(K.scale, [producer.b, producer.a, 0.5, 1])
    producer.a, producer.b = producer.b, producer.a
    wp.copy(producer.out, producer.a)


class OverwrittenPingPong(Producer):
    """A ping-pong pair swapped an odd number of times per call, whose first pass
    overwrites the buffer it writes (a surface extraction's smoothing passes): the swap
    carries no state, and every replay computes what eager stepping does."""

    def __init__(self, device):
        super().__init__(device)
        _ping_pong_buffers(self, device)

    def step(self):
        self.launch(K.scale, [self.a, self.x, 1.0, 0])
        _smooth_once(self)
        self.launch(K.add_one, [self.x])


class MirroredStateSwap(Producer):
    """States swapped an odd number of times per call, by a solver that leaves both
    identical after each step (Newton's VBD): whichever a replay reads holds the same values
    until the program updates one of them in place between replays (a reset); the replay
    then reads the other (tests/test_swaps.py shows it by values)."""

    expected = "buffer-drift"
    wrong_replay_on_cpu = False  # equal at every call boundary: only an update between replays shows it

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(K.scale, [self.y, self.x, 0.5, 1])
        wp.copy(self.x, self.y)
        self.x, self.y = self.y, self.x


class ConstantNaN(Producer):
    """A constant NaN scalar (NaN compares equal to itself here)."""

    def step(self):
        self.launch(K.nan_scale, [self.x, float("nan")])
        self.launch(K.add_one, [self.x])


class EvenPingPong(Producer):
    """Buffers swapped twice per call: the same buffers at the same places every call (they
    hold different values, so a replay that swapped them would show)."""

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)

    def step(self):
        for _ in range(2):
            self.launch(K.scale, [self.y, self.x, 1.0, 1])  # y = x + 1
            self.x, self.y = self.y, self.x


class SubarrayViews(Producer):
    """Views (slices) taken in the call at fixed offsets: views are not allocations."""

    def __init__(self, device):
        super().__init__(device)
        self.ring = wp.zeros(4 * N, dtype=float, device=device)

    def step(self):
        self.launch(K.add_one, [self.ring[N : 2 * N]])
        self.launch(K.copy_kernel, [self.ring[2 * N : 3 * N], self.x])


class ReshapedView(Producer):
    """A reshaped view of an owned buffer, made in each call."""

    def __init__(self, device):
        super().__init__(device)
        self.grid = wp.zeros((8, 8), dtype=float, device=device)

    def step(self):
        flat = self.grid.reshape(N)
        self.launch(K.add_one, [flat])


class RecordedCommand(Producer):
    """A wp.Launch command recorded once and replayed with fixed parameters."""

    def __init__(self, device):
        super().__init__(device)
        self.cmd = wp.launch(K.integrate, dim=N, inputs=[self.x, self.v, 0.01], device=device, record_cmd=True)

    def step(self):
        self.cmd.launch()


class InPlaceUpdates(Producer):
    """Copies and fills between owned buffers with fixed arguments."""

    def __init__(self, device):
        super().__init__(device)
        self.previous = wp.zeros(N, dtype=float, device=device)

    def step(self):
        wp.copy(self.previous, self.x)
        self.launch(K.integrate, [self.x, self.v, 0.01])
        self.v.fill_(1.0)


class LazyScratch(Producer):
    """Scratch allocated on the first call and kept: later calls reuse it."""

    def __init__(self, device):
        super().__init__(device)
        self.scratch = None

    def step(self):
        if self.scratch is None:
            self.scratch = wp.zeros(N, dtype=float, device=self.device)
        self.launch(K.integrate, [self.x, self.v, 0.1])
        self.launch(K.square, [self.x, self.scratch])


class ConstantStruct(Producer):
    """A struct with fixed fields."""

    def __init__(self, device):
        super().__init__(device)
        self.params = K.Params()
        self.params.scratch = wp.zeros(N, dtype=float, device=device)
        self.params.dt = 0.01
        self.params.gravity = wp.vec3(0.0, -9.8, 0.0)

    def step(self):
        self.launch(K.add_struct, [self.x, self.params])


class StructFieldSetAfterCapture(ConstantStruct):
    """A field of a struct the producer holds and passes is set after the capture: the graph
    keeps the value it baked (safe twin: ConstantStruct)."""

    expected_replay = "scalar-drift"

    def after_capture(self):
        self.params.dt = 0.02


class ConditionalLoop(Producer):
    """A data-dependent loop written with wp.capture_while: the graph loops on the device."""

    def __init__(self, device):
        super().__init__(device)
        self.remaining = wp.zeros(1, dtype=int, device=device)

    def body(self):
        self.launch(K.add_one, [self.x])
        wp.launch(K.decrement_int, dim=1, inputs=[self.remaining], device=self.device)

    def step(self):
        self.remaining.fill_(3)
        wp.capture_while(self.remaining, self.body)


class ConditionalBranch(Producer):
    """A data-dependent branch written with wp.capture_if."""

    def __init__(self, device):
        super().__init__(device)
        self.flag = wp.ones(1, dtype=int, device=device)

    def step(self):
        wp.capture_if(self.flag, on_true=lambda: self.launch(K.add_one, [self.x]))


class HashGridRebuild(Producer):
    """A hash grid rebuilt every call from owned points, with a fixed cell size."""

    def __init__(self, device):
        super().__init__(device)
        self.grid = wp.HashGrid(4, 4, 4, device=device)
        self.points = wp.array(np.random.default_rng(3).random((N, 3)), dtype=wp.vec3, device=device)

    def step(self):
        self.launch(K.jitter_points, [self.points])
        self.grid.build(self.points, radius=0.25)
        self.launch(K.count_neighbors, [self.grid.id, self.points, self.x])


class CloneKeptByOwner(Producer):
    """A snapshot cloned every call and kept on the producer: the owner holds the last
    call's temporary (Newton's XPBD keeps particle_q_init this way)."""

    def __init__(self, device):
        super().__init__(device)
        self.snapshot = wp.clone(self.x)

    def step(self):
        self.launch(K.integrate, [self.x, self.v, 0.1])
        self.snapshot = wp.clone(self.x)
        self.launch(K.blend, [self.snapshot, self.v, self.x])


class FirstCallSetupKeepsClone(Producer):
    """First-call set-up, and a snapshot cloned every call and kept on the producer: the
    verdict needs a call after the first capture, and the snapshot the owner keeps must be
    the one the returned graph's replays write (graphcheck captures again after that call)."""

    def __init__(self, device):
        super().__init__(device)
        self.ready = False
        self.snapshot = wp.clone(self.x)

    def step(self):
        if not self.ready:
            self.x.fill_(1.0)
            self.ready = True
        self.launch(K.integrate, [self.x, self.v, 0.1])
        self.snapshot = wp.clone(self.x)
        self.launch(K.blend, [self.snapshot, self.v, self.x])


class MirroredSwapKeepsClone(Producer):
    """States swapped and left identical after each step, and a snapshot cloned every call
    and kept on the producer, as Newton's XPBD keeps particle_q_init: the swap stays a
    finding after the later calls (an update between replays would be lost, see
    MirroredStateSwap), and the snapshot the owner keeps is the one replays write."""

    expected = "buffer-drift"
    wrong_replay_on_cpu = False  # equal at every call boundary: only an update between replays shows it

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)
        self.snapshot = wp.clone(self.x)

    def step(self):
        self.snapshot = wp.clone(self.x)
        self.launch(K.scale, [self.y, self.x, 0.5, 1])
        self.launch(K.blend, [self.snapshot, self.v, self.y])
        wp.copy(self.x, self.y)
        self.x, self.y = self.y, self.x


class ContentsChangedInPlace(Producer):
    """Safe to capture, and after it the buffers' contents change in place: still safe."""

    def step(self):
        self.launch(K.integrate, [self.x, self.v, 0.01])

    def after_capture(self):
        self.v.fill_(3.0)
        self.x.assign(np.zeros(N, dtype=np.float32))


# -- what Warp's CPU graphs leave out or replay wrongly (capture-error on the CPU) -----------
#
# Kernels of their own module: a generic kernel's overloads change its module's hash, which
# would rebuild the module every other test launches from.


@wp.kernel
def add_one_any(x: wp.array(dtype=Any)):
    i = wp.tid()
    x[i] = x[i] + x.dtype(1)


@wp.kernel
def add_one_f32(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + wp.float32(1.0)


@wp.kernel
def add_one_f64(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[i] + wp.float64(1.0)


class NestedGraphLaunch(Producer):
    """A graph captured beforehand, launched inside the step: Warp's CPU capture (1.15 to 1.19) does
    not record a wp.capture_launch, so the outer graph replays without the inner work. A
    CUDA capture records it as a child graph."""

    expected = "capture-error"
    cpu_only = True

    def __init__(self, device):
        super().__init__(device)
        with wp.ScopedCapture(device=device) as capture:
            self.launch(K.integrate, [self.x, self.v, 0.1])
        self.inner = capture.graph

    def step(self):
        wp.capture_launch(self.inner)
        self.launch(K.damp, [self.v, 0.5])


class LazySelfCapture(Producer):
    """A solver that captures its own step on its first call and launches that graph after:
    the same cause as NestedGraphLaunch, met in the reference call first."""

    expected = "capture-error"
    cpu_only = True

    def __init__(self, device):
        super().__init__(device)
        self.graph = None

    def step(self):
        if self.graph is None:
            with wp.ScopedCapture(device=self.device) as capture:
                self.launch(K.integrate, [self.x, self.v, 0.1])
            self.graph = capture.graph
        wp.capture_launch(self.graph)
        self.launch(K.damp, [self.v, 0.5])


class InlineInnerStep(Producer):
    """The cure for both: the inner step's launches made directly in the captured call."""

    def step(self):
        self.launch(K.integrate, [self.x, self.v, 0.1])
        self.launch(K.damp, [self.v, 0.5])


class GenericOverloads(Producer):
    """Two overloads of one generic kernel in one step (float32, float64): Warp's CPU
    graph registers a kernel's code by module hash and key, which both share, and replays the
    last launched overload's code for both."""

    expected = "capture-error"
    cpu_only = True

    def __init__(self, device):
        super().__init__(device)
        self.single = wp.zeros(N, dtype=wp.float32, device=device)
        self.double = wp.zeros(N, dtype=wp.float64, device=device)

    def step(self):
        # The larger dtype first: the replay runs the float32 code on both, inside both arrays
        # (the other way round it writes past the float32 array's end).
        self.launch(add_one_any, [self.double])
        self.launch(add_one_any, [self.single])


class OneKernelPerDtype(GenericOverloads):
    """The cure: one kernel per dtype, each with a key of its own."""

    expected = None

    def step(self):
        self.launch(add_one_f64, [self.double])
        self.launch(add_one_f32, [self.single])


class NumpyArgument(Producer):
    """A numpy array passed straight to wp.launch: Warp uploads it into a temporary on every
    eager call; its CPU capture fails inside Warp (AttributeError in warp._src.apic)."""

    expected = "capture-error"
    expected_cuda = "per-call-allocation"
    wrong_replay_on_cpu = False  # there is no graph to replay

    def __init__(self, device):
        super().__init__(device)
        self.forces = np.full(N, 0.5, dtype=np.float32)

    def step(self):
        self.launch(K.axpy, [self.forces, self.v, 1.0])


class DeviceArgument(NumpyArgument):
    """The cure: the host data kept as a device array, updated outside the captured call."""

    expected = None
    expected_cuda = None

    def __init__(self, device):
        super().__init__(device)
        self.forces_device = wp.array(self.forces, dtype=float, device=device)

    def step(self):
        self.launch(K.axpy, [self.forces_device, self.v, 1.0])


UNSAFE = [
    HostCounter,
    Timestamp,
    HostRngSeed,
    StructFieldCounter,
    ReplayedCommandParam,
    HashGridRadius,
    ConditionalBodyCounter,
    KernelClosureConstant,
    OddPingPong,
    PingPongCarriedOver,
    MirroredStateHalfCopied,
    MirroredStateSwap,
    MirroredSwapKeepsClone,
    WhileBodySwap,
    HashGridPointSwap,
    RotatingView,
    ArrayFromNumpyPerCall,
    CopyFromHostTemporary,
    AssignFreshNumpy,
    ReadbackLoop,
    EveryOtherCall,
    SetupEveryOtherCall,
    TapeResetOddCalls,
    KernelToggle,
    GrowingDim,
    DimFromReadback,
    CopyCount,
    FillValue,
    CopyOffset,
    FullValueDrift,
    CloneOfSwapped,
    ReductionReadback,
    ModuleGlobalScratch,
    DequeRotated,
    NestedGraphLaunch,
    LazySelfCapture,
    GenericOverloads,
    NumpyArgument,
    StagingWrittenInCall,
    OwnedNumpyWrittenInCall,
    TextureSwap,
    TextureRemadePerCall,
    HashGridDropped,
    BvhMadeInCall,
]
#: What needs a newer Warp than the oldest supported (see tests/releases.py).
NEEDS_TEXTURES = {TextureSwap, TextureRemadePerCall, TextureReplacedAfterCapture}
NEEDS_HASH_GRID_RECORDS = {HashGridRebuild, HashGridMadeInCall, HashGridDropped, BvhRefitInCall}
STALE = [
    ReassignedAfterCapture,
    FreedScratch,
    ResizedBuffer,
    KeyedMomentsReplaced,
    DequeHistoryPushed,
    PartialLauncherRebound,
    DefaultRebound,
    TextureReplacedAfterCapture,
    StructFieldSetAfterCapture,
    CommandRebound,
]
SAFE = [
    ZerosPerCall,
    ClonePerCall,
    DeviceCounter,
    KernelDeclaredInStep,
    FirstCallSetup,
    TapeReused,
    OverwrittenPingPong,
    ConstantNaN,
    EvenPingPong,
    SubarrayViews,
    ReshapedView,
    RecordedCommand,
    InPlaceUpdates,
    LazyScratch,
    ConstantStruct,
    ConditionalLoop,
    ConditionalBranch,
    HashGridRebuild,
    CloneKeptByOwner,
    FirstCallSetupKeepsClone,
    ContentsChangedInPlace,
    KeyedMoments,
    DequeHistory,
    PartialLauncher,
    DefaultBound,
    InlineInnerStep,
    OneKernelPerDtype,
    DeviceArgument,
    StagingSameEveryCall,
    StagingFedBetweenReplays,
    SnapshotBeforeStep,
    HashGridMadeInCall,
    BvhRefitInCall,
]
ALL = UNSAFE + STALE + SAFE

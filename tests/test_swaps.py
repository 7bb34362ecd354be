"""Buffer swaps that carry no state: each call overwrites the pair first (tests/test_matrix.py
has every way to). A pair that holds the same values at every call boundary (Newton's VBD)
is no such swap: updated in place between replays, the replay reads the other buffer.

The corpus producer OverwrittenPingPong (safe) and its twin PingPongCarriedOver (unsafe) are
proven by values in tests/test_corpus.py; MirroredStateSwap here.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck import _warp
from tests import kernels as K, producers as P

DEVICE = "cpu"


@wp.kernel
def _two_writes(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 1.0
    b[i] = a[i]
    if i > 0:
        c[i] = 2.0


@wp.kernel
def _early_return(a: wp.array(dtype=float)):
    i = wp.tid()
    if i > 3:
        return
    a[i] = 1.0


@wp.kernel
def _reindexed(a: wp.array(dtype=float)):
    i = wp.tid()
    i = i + 1
    a[i] = 1.0


def test_which_parameters_a_kernel_overwrites_is_read_from_its_source():
    assert _warp.overwritten_params(K.scale) == {"a"}
    assert _warp.overwritten_params(K.copy_kernel) == {"dst"}
    assert _warp.overwritten_params(K.add_one) == frozenset()  # read and written
    assert _warp.overwritten_params(K.axpy) == frozenset()
    assert _warp.overwritten_params(_two_writes) == {"b"}  # a read back; c written under an if
    assert _warp.overwritten_params(_early_return) == frozenset()
    assert _warp.overwritten_params(_reindexed) == frozenset()


def test_a_swap_of_buffers_the_call_overwrites_first_is_noted_not_reported():
    producer = P.OverwrittenPingPong(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and checked.eager_calls == 1, str(checked.report)
    (note,) = [n for n in checked.report.notes if "carries no state" in n]
    assert "owner.a" in note and "owner.b" in note


def test_a_swap_of_buffers_identical_after_each_call_stays_reported():
    """Equal at every call boundary is no rule: an update between replays would be dropped."""
    producer = P.MirroredStateSwap(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
    assert checked.eager_calls == 3 and any("differ too" in n for n in checked.report.notes)


def _reset(producer):
    producer.x.assign(np.full(P.N, 5.0, dtype=np.float32))  # the state the next step reads, updated in place


@pytest.mark.parametrize("cls", [P.MirroredStateSwap, P.MirroredSwapKeepsClone], ids=lambda c: c.__name__)
def test_identical_swapped_buffers_replay_wrong_once_one_is_updated_in_place(cls):
    # The claim, by values: the eager twin reads the update, the replay reads the other buffer.
    eager, replayed = cls(DEVICE), cls(DEVICE)
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), on_failure="ignore", replay_check="never")
    for _ in range(checked.eager_calls):
        eager.step()
    for _ in range(2):
        checked.launch()
        eager.step()
    assert np.array_equal(eager.x.numpy(), replayed.x.numpy())  # alike while nothing is updated
    _reset(eager)
    _reset(replayed)
    checked.launch()
    eager.step()
    assert not np.array_equal(eager.x.numpy(), replayed.x.numpy())


def test_a_swap_that_carries_state_is_not_settled_by_later_calls():
    producer = P.MirroredStateHalfCopied(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"} and checked.eager_calls == 3
    assert all(f.detail["swapped buffers"] for f in checked.report.findings)


class UnchangedMirror(P.Producer):
    """Identical buffers the step leaves unchanged (a copy of zeros into zeros): equal, but a
    fixed point proves nothing about later states; the swap stays reported."""

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(P.N, dtype=float, device=device)

    def step(self):
        self.launch(K.copy_kernel, [self.x, self.y])
        self.x, self.y = self.y, self.x


def test_identical_buffers_the_call_leaves_unchanged_stay_reported():
    producer = UnchangedMirror(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
    assert checked.eager_calls == 3 and any("differ too" in n for n in checked.report.notes)


# -- a surface extraction's ping-pong pairs (Newton's mpm_water_dam_break _extract_surface) ----
# A field filled for the active nodes in a grid-stride loop, splatted from the particles,
# blurred into its twin (the names swap); then vertices appended at slots a counter hands out,
# smoothed into their twin (the names swap), and summed. Each call writes every element it reads
# of the four buffers before reading it: nothing crosses from one call to the next through them.

THREADS, NODES, SLOTS, PARTICLES = 4, 16, 32, 16


@wp.kernel
def _fill_active(field: wp.array(dtype=float), value: float, active: wp.array(dtype=int), stride: int):
    node = wp.tid()
    count = active[0]
    while node < count:
        field[node] = value
        node += stride


@wp.kernel
def _splat(particles: wp.array(dtype=float), field: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(field, int(particles[i]), 1.0)


@wp.kernel
def _blur(source: wp.array(dtype=float), destination: wp.array(dtype=float), active: wp.array(dtype=int), stride: int):
    node = wp.tid()
    count = active[0]
    while node < count:
        if node + 1 < count:
            destination[node] = 0.5 * (source[node] + source[node + 1])
        else:
            destination[node] = source[node]
        node += stride


@wp.kernel
def _extract(
    field: wp.array(dtype=float),
    active: wp.array(dtype=int),
    counts: wp.array(dtype=int),
    vertices: wp.array(dtype=float),
    stride: int,
):
    node = wp.tid()
    count = active[0]
    while node < count:
        if field[node] > 0.25:
            slot = wp.atomic_add(counts, 0, 1)
            vertices[slot] = float(node) + field[node]
        node += stride


@wp.kernel
def _smooth_vertices(
    vertices: wp.array(dtype=float), smoothed: wp.array(dtype=float), counts: wp.array(dtype=int), stride: int
):
    vertex = wp.tid()
    count = counts[0]
    while vertex < count:
        smoothed[vertex] = 0.5 * (vertices[vertex] + vertices[wp.max(vertex - 1, 0)])
        vertex += stride


@wp.kernel
def _sum_vertices(vertices: wp.array(dtype=float), counts: wp.array(dtype=int), total: wp.array(dtype=float)):
    s = float(0.0)  # noqa: UP018 (Warp needs a dynamic variable to add to in a loop)
    for i in range(counts[0]):
        s += vertices[i]
    total[0] = total[0] + s


@wp.kernel
def _move(particles: wp.array(dtype=float)):
    i = wp.tid()
    particles[i] = wp.mod(particles[i] + 1.3, 12.0)


class SurfaceExtraction:
    """The pattern, on the CPU; ``carried`` leaves out the fill, so the splat adds to what the
    field held after the previous call (its twin's values, after the swap)."""

    carried = False

    def __init__(self, device=DEVICE):
        self.device = device
        self.particles = wp.array(np.linspace(0.0, 11.0, PARTICLES, dtype=np.float32), device=device)
        self.active = wp.array([12], dtype=int, device=device)
        self.field, self.field_temp = (wp.zeros(NODES, dtype=float, device=device) for _ in range(2))
        self.vertices, self.vertices_temp = (wp.zeros(SLOTS, dtype=float, device=device) for _ in range(2))
        self.counts = wp.zeros(1, dtype=int, device=device)
        self.total = wp.zeros(1, dtype=float, device=device)

    def launch(self, kernel, inputs, dim=THREADS):
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.device)

    def step(self):
        self.counts.zero_()
        if not self.carried:
            self.launch(_fill_active, [self.field, 0.0, self.active, THREADS])
        self.launch(_splat, [self.particles, self.field], dim=PARTICLES)
        self.launch(_blur, [self.field, self.field_temp, self.active, THREADS])
        self.field, self.field_temp = self.field_temp, self.field
        self.launch(_extract, [self.field, self.active, self.counts, self.vertices, THREADS])
        self.launch(_smooth_vertices, [self.vertices, self.vertices_temp, self.counts, THREADS])
        self.vertices, self.vertices_temp = self.vertices_temp, self.vertices
        self.launch(_sum_vertices, [self.vertices, self.counts, self.total], dim=1)
        self.launch(_move, [self.particles], dim=PARTICLES)


class CarriedSurfaceExtraction(SurfaceExtraction):
    carried = True


def test_what_a_kernel_writes_before_it_reads_is_read_from_grid_stride_loops_and_counted_slots():
    assert _warp.first_writes(_fill_active) == {"field": (_warp.IN_STRIDE_LOOP, "stride")}
    assert _warp.first_writes(_blur) == {"destination": (_warp.IN_STRIDE_LOOP, "stride")}  # both branches store
    assert _warp.first_writes(_extract) == {"vertices": (_warp.AT_COUNTED_SLOTS, None)}
    assert _warp.first_writes(_smooth_vertices) == {"smoothed": (_warp.IN_STRIDE_LOOP, "stride")}
    assert _warp.first_writes(_splat) == {}  # an atomic reads
    assert _warp.first_writes(_sum_vertices) == {}  # total[0] read back


def test_a_surface_extraction_s_ping_pong_pairs_carry_no_state():
    producer = SurfaceExtraction()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and checked.eager_calls == 1, str(checked.report)
    (note,) = [n for n in checked.report.notes if "carries no state" in n and "field" in n]
    assert any("vertices" in n for n in checked.report.notes if "carries no state" in n)
    report = gc.verify_replay(SurfaceExtraction, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


def test_a_surface_extraction_without_its_fill_carries_state_and_replays_wrong():
    producer = CarriedSurfaceExtraction()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
    assert all("field" in f.message for f in checked.report.findings)  # the vertices still carry none
    report = gc.verify_replay(CarriedSurfaceExtraction, steps=4, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)


@wp.kernel
def _fill_some(field: wp.array(dtype=float), active: wp.array(dtype=int), stride: int):
    node = wp.tid()
    while node < active[0]:
        if node % 2 == 0:
            field[node] = 1.0  # every other node only: a masked store in a grid-stride loop
        node += stride


def test_a_masked_store_in_a_grid_stride_loop_does_not_write_every_element():
    assert _warp.first_writes(_fill_some) == {}

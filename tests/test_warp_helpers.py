"""What Warp's own helpers do inside a captured call, judged as any code is: a host upload a
native helper reads (``warp.sparse``'s topology from triplets), and the scratch pools Warp
bypasses while it captures (``warp.fem``'s ``TemporaryStore``).

Each verdict is proven by values: a safe producer replays like an eager twin, an unsafe one
replays otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K

sparse = pytest.importorskip("warp.sparse")

DEVICE = "cpu"
ROWS = 4


@wp.kernel
def _gather(columns: wp.array(dtype=int), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] + float(columns[i])


class Triplets:
    """A 4x4 block-sparse matrix set from triplets each call, then multiplied into a state.

    ``how`` says where the column indices come from: ``"list"`` a ``wp.array`` made from a
    Python list each call (read by the native helper), ``"list_kernel"`` the same upload read
    by a kernel, ``"owned"`` an array the producer keeps and rewrites on the device.
    """

    how = "list"

    def __init__(self, device=DEVICE):
        self.device = device
        self.matrix = sparse.bsr_zeros(ROWS, ROWS, block_type=float, device=device)
        self.rows = wp.array(np.arange(ROWS, dtype=np.int32), device=device)
        self.columns = wp.array(np.arange(ROWS, dtype=np.int32), device=device)
        self.values = wp.array(np.arange(1, ROWS + 1, dtype=np.float32), device=device)
        self.x = wp.array(np.linspace(1.0, 2.0, ROWS, dtype=np.float32), device=device)
        self.y = wp.zeros(ROWS, dtype=float, device=device)
        self.calls = 0

    def step(self):
        self.calls += 1
        shifted = [(i + self.calls) % ROWS for i in range(ROWS)]  # the pattern moves every call
        if self.how == "list_kernel":
            columns = wp.array(shifted, dtype=int, device=self.device)
            wp.launch(_gather, dim=ROWS, inputs=[columns, self.x], device=self.device)
            return
        if self.how == "list":
            columns = wp.array(shifted, dtype=int, device=self.device)
        else:
            wp.launch(K.bump, dim=ROWS, inputs=[self.columns], device=self.device)  # columns += 1 on the device
            wp.launch(_wrap, dim=ROWS, inputs=[self.columns], device=self.device)
            columns = self.columns
        sparse.bsr_set_from_triplets(self.matrix, self.rows, columns, self.values)
        sparse.bsr_mv(self.matrix, self.x, self.y)
        wp.launch(K.axpy, dim=ROWS, inputs=[self.y, self.x, 0.1], device=self.device)


@wp.kernel
def _wrap(columns: wp.array(dtype=int)):
    i = wp.tid()
    columns[i] = columns[i] % 4


def _triplets(how):
    return type(f"Triplets_{how}", (Triplets,), {"how": how})


@pytest.mark.parametrize("how", ["list", "list_kernel"])
def test_a_per_call_upload_is_a_per_call_allocation_whoever_reads_it(how):
    producer = _triplets(how)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    (finding,) = [f for f in checked.report.findings]
    assert finding.kind == "per-call-allocation" and finding.arg == "columns", str(checked.report)
    assert _replays_differ(_triplets(how))


def _replays_differ(cls, replays=4):
    """Whether replaying the graph differs from stepping an eager twin. The twin steps first,
    then the graph replays with no call in between: a replay reads the host memory its
    capture uploaded from, freed since, which an eager call in between could have refilled
    with its own upload (gc.verify_replay interleaves them)."""
    eager, replayed = cls(), cls()
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), on_failure="ignore", replay_check="never")
    for _ in range(checked.eager_calls + replays):
        eager.step()
    for _ in range(replays):
        checked.launch()
    return not np.array_equal(eager.x.numpy(), replayed.x.numpy())


def test_triplets_the_producer_keeps_and_updates_on_the_device_replay_right():
    producer = _triplets("owned")()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)
    assert [r.kernel for r in checked.trace if r.kind == "native"] == ["bsr_matrix_from_triplets_host"]
    report = gc.verify_replay(_triplets("owned"), steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)
    assert not _replays_differ(_triplets("owned"))


# -- warp.fem's TemporaryStore -----------------------------------------------------------------
# fem.integrate borrows its scratch from a TemporaryStore: pooled memory, reused from call to
# call, eagerly; while Warp captures on the CPU it bypasses the pool (so no later borrow is
# handed what the graph bakes) and makes fresh memory the graph keeps.

fem = pytest.importorskip("warp.fem")


@fem.integrand
def _squared(s: fem.Sample, u: fem.Field):
    return u(s) * u(s)


@wp.kernel
def _grow(u: wp.array(dtype=float), by: wp.array(dtype=float)):
    i = wp.tid()
    u[i] = u[i] * 1.01 + by[0]


class PooledEnergy:
    """Grows a field and integrates its square with scratch from a TemporaryStore the producer
    keeps: passed to fem.integrate, or (``default``) set as the default store for the step."""

    default = False

    def __init__(self, device=DEVICE):
        self.device = device
        with wp.ScopedDevice(device):
            geometry = fem.Grid2D(res=wp.vec2i(4))
            self.u = fem.make_polynomial_space(geometry, degree=1).make_field()
            self.u.dof_values.fill_(1.0)
            self.cells = fem.Cells(geometry)
            self.energy = wp.zeros(1, dtype=float)
            self.total = wp.zeros(1, dtype=float)
            self.by = wp.full(1, 0.5, dtype=float)
        self.store = fem.TemporaryStore()

    def step(self):
        wp.launch(_grow, dim=self.u.dof_values.shape[0], inputs=[self.u.dof_values, self.by], device=self.device)
        if self.default:
            fem.set_default_temporary_store(self.store)
            try:
                fem.integrate(_squared, domain=self.cells, fields={"u": self.u}, output=self.energy)
            finally:
                fem.set_default_temporary_store(None)
        else:
            fem.integrate(
                _squared, domain=self.cells, fields={"u": self.u}, output=self.energy, temporary_store=self.store
            )
        wp.launch(K.axpy, dim=1, inputs=[self.energy, self.total, 1.0], device=self.device)


class DefaultStoreEnergy(PooledEnergy):
    default = True


@pytest.mark.parametrize("cls", [PooledEnergy, DefaultStoreEnergy], ids=lambda c: c.__name__)
def test_warp_fem_s_pooled_scratch_is_warp_s_and_replays_right(cls):
    producer = cls()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and not checked.report.findings, str(checked.report)
    assert any("Warp's own scratch" in note for note in checked.report.notes), str(checked.report)
    report = gc.verify_replay(cls, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


_SHARED_SCRATCH: dict[str, wp.array] = {}


class OwnScratchWhileCapturing(PooledEnergy):
    """The user's own version of it: a module-global scratch eagerly, a fresh one while capturing.
    Not Warp's: the difference stays a buffer-drift."""

    def step(self):
        if wp.get_device(self.device).is_capturing:
            scratch = wp.zeros(1, dtype=float, device=self.device)
        else:
            scratch = _SHARED_SCRATCH.setdefault("s", wp.zeros(1, dtype=float, device=self.device))
        wp.launch(K.axpy, dim=1, inputs=[self.by, scratch, 1.0], device=self.device)
        wp.launch(K.axpy, dim=1, inputs=[scratch, self.total, 1.0], device=self.device)


def test_a_user_s_own_scratch_swapped_while_capturing_is_still_reported():
    producer = OwnScratchWhileCapturing()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert "buffer-drift" in checked.report.kinds(), str(checked.report)


# -- strict ownership: Warp's pools are Warp's --------------------------------------------------


class UserTemporaryToo(PooledEnergy):
    """PooledEnergy's step, and a temporary of the user's own made in the step (graph-owned)."""

    def step(self):
        super().step()
        mine = wp.zeros(1, dtype=float, device=self.device)
        wp.launch(K.axpy, dim=1, inputs=[self.by, mine, 1.0], device=self.device)
        wp.launch(K.axpy, dim=1, inputs=[mine, self.total, 1.0], device=self.device)


@pytest.mark.parametrize("cls", [PooledEnergy, DefaultStoreEnergy], ids=lambda c: c.__name__)
def test_strict_ownership_leaves_warp_s_pooled_scratch_to_warp(cls):
    producer = cls()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), strict_ownership=True)
    assert checked.report.ok and not checked.report.findings, str(checked.report)
    assert any("Warp's own scratch" in note for note in checked.report.notes), str(checked.report)
    assert any("strict_ownership=True leaves them to Warp" in note for note in checked.report.notes), str(
        checked.report
    )


def test_strict_ownership_reports_the_user_s_graph_owned_temporary_only():
    producer = UserTemporaryToo()
    assert gc.capture(producer.step, device=DEVICE, owners=(producer,)).ok  # graph-owned: fine by default
    producer = UserTemporaryToo()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), strict_ownership=True, on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "per-call-allocation", str(checked.report)
    assert "made by wp.zeros" in finding.message and "strict_ownership" in finding.message, finding.message
    # The verdict strict ownership adds is a rule, not a wrong replay: the values agree.
    assert gc.verify_replay(UserTemporaryToo, steps=4, device=DEVICE).ok

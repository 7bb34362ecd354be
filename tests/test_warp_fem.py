"""warp.fem's process-wide quadrature cache, with real warp.fem on the CPU (its kernels take
about 20 s to build the first time, then come from Warp's kernel cache).

``fem.integrate`` without a quadrature makes a ``RegularQuadrature`` whose points and weights
come from a class-level cache (``RegularQuadrature.CachedFormula._cache``): device arrays made
by the first call that needs them, and kept for the process. A step that integrates uses them,
though its owners do not hold them. Made during the reference call, graphcheck sees Warp make and
keep them; made by an earlier call (the cache is warm), Warp's cache holds them: either way they
are Warp's, not foreign, and the replay is right. A buffer only a module global holds stays foreign.
"""

import numpy as np
import pytest
import warp as wp

import graphcheck as gc

fem = pytest.importorskip("warp.fem")

DEVICE = "cpu"


@fem.integrand
def squared(s: fem.Sample, u: fem.Field):
    return u(s) * u(s)


@wp.kernel
def grow(u: wp.array(dtype=float), by: wp.array(dtype=float)):
    i = wp.tid()
    u[i] = u[i] * 1.01 + by[0]


_SHARED = {}


class Energy:
    """Grows a field on a small grid and integrates its square over the cells."""

    shared = False

    def __init__(self, device=DEVICE):
        with wp.ScopedDevice(device):
            geometry = fem.Grid2D(res=wp.vec2i(4))
            self.u = fem.make_polynomial_space(geometry, degree=1).make_field()
            self.u.dof_values.fill_(1.0)
            self.cells = fem.Cells(geometry)
            self.energy = wp.zeros(1, dtype=float)
            self.by = wp.full(1, 0.5, dtype=float)

    def step(self):
        by = _SHARED["by"] if self.shared else self.by
        wp.launch(grow, dim=self.u.dof_values.shape[0], inputs=[self.u.dof_values, by], device=DEVICE)
        fem.integrate(squared, domain=self.cells, fields={"u": self.u}, output=self.energy)


class EnergyWithSharedScratch(Energy):
    shared = True


def quadrature_cache():
    return fem.RegularQuadrature.CachedFormula._cache


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_quadrature_formulas_warp_fem_keeps_are_not_foreign_and_replay_right(cache):
    quadrature_cache().clear()
    if cache == "warm":
        Energy().step()  # an earlier call made the formulas: Warp's cache holds them
    energy = Energy()
    checked = gc.capture(energy.step, device=DEVICE, owners=(energy,))
    assert checked.report.ok and not checked.report.findings, str(checked.report)
    assert any("Warp" in note and "the owners need not" in note for note in checked.report.notes), str(checked.report)
    if cache == "cold":  # made during the reference call: held by Warp from then on
        assert any("made for itself during the reference call" in note for note in checked.report.notes)
    report = gc.verify_replay(Energy, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)
    twin = Energy()
    twin.step()  # as the capture's reference call did
    for _ in range(3):
        twin.step()
        checked.launch()
    np.testing.assert_array_equal(energy.energy.numpy(), twin.energy.numpy())


def test_a_buffer_only_a_module_global_holds_stays_foreign_beside_warps_cache():
    Energy().step()  # the formulas are cached
    _SHARED["by"] = wp.full(1, 0.5, dtype=float, device=DEVICE)
    energy = EnergyWithSharedScratch()
    checked = gc.capture(energy.step, device=DEVICE, owners=(energy,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("foreign-buffer", "by")}, str(checked.report)

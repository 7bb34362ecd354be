"""Newton's hanging-cloth example (``newton.examples.cloth.example_cloth_hanging``) with each solver.

Its capture site is ``Example.simulate``: substeps of clear_forces, collision, a solver step and a
state swap (an even count). The example skips the capture for SolverStyle3D on the CPU ("host calls
(PCG dot products, BVH refit) that CPU graph capture cannot record"); on Warp 1.19 those native calls
are recorded and the graph replays bit-identically, which graphcheck and the twin agree on.
"""

import types

import pytest

import graphcheck as gc

from .twins import Twins, assert_caught, assert_no_finding, replay_against_twin

pytest.importorskip("newton", reason="needs newton: nox -s clients installs it")
import newton.viewer
from newton.examples.cloth.example_cloth_hanging import Example


class Cloth(Example):
    """The example on an 8 x 4 cloth, headless, without the graph it would capture itself."""

    def __init__(self, solver: str, substeps: int | None = None):
        super().__init__(newton.viewer.ViewerNull(), types.SimpleNamespace(solver=solver, width=8, height=4))
        if substeps is not None:
            self.sim_substeps = substeps

    def capture(self):
        self.graph = None


def step(example):
    example.simulate()


@pytest.mark.parametrize("solver", ["semi_implicit", "xpbd", "vbd", "style3d"])
def test_simulate_replays_right_and_has_no_finding(solver):
    twins = Twins(lambda: Cloth(solver))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=3) == []
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


def test_an_odd_substep_count_is_buffer_drift():
    twins = Twins(lambda: Cloth("semi_implicit", substeps=31))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []
    assert_caught(checked.report, "buffer-drift", ["particle_q"])

"""Newton's pendulum example (``newton.examples.basic.example_basic_pendulum``) with SolverXPBD.

Its capture site is ``Example.simulate``: ten substeps of clear_forces, collision, an XPBD step
and a swap of ``state_0``/``state_1`` (ten swaps: every call starts from the same buffers).
SolverXPBD allocates device scratch (``wp.empty_like``, ``wp.zeros``, ``wp.clone``) inside the
step; Warp makes it graph-owned, and the graph replays bit-identically to eager stepping.
"""

import numpy as np
import pytest
import warp as wp

import graphcheck as gc

from .twins import Twins, arguments, assert_caught, assert_no_finding, bytes_of, replay_against_twin

pytest.importorskip("newton", reason="needs newton: nox -s clients installs it")
import newton.viewer
from newton.examples.basic.example_basic_pendulum import Example


class Pendulum(Example):
    """The example, headless, with the graph it captured itself dropped (graphcheck captures ``simulate``)."""

    def __init__(self, substeps: int = 10):
        self.calls = 0
        super().__init__(newton.viewer.ViewerNull(), None)  # captures simulate once, on its own
        self.graph = None
        self.sim_substeps = substeps


class CountedPendulum(Pendulum):
    """Break: the substep length comes from a Python call counter (the example's simulate, one line changed)."""

    def simulate(self):
        self.calls += 1
        for _ in range(self.sim_substeps):
            self.state_0.clear_forces()
            self.viewer.apply_forces(self.state_0)
            self.collision_pipeline.collide(self.state_0, self.contacts)
            dt = self.sim_dt * (1.0 + 0.01 * self.calls)  # the break
            self.solver.step(self.state_0, self.state_1, self.control, self.contacts, dt)
            self.state_0, self.state_1 = self.state_1, self.state_0


class UploadingPendulum(Pendulum):
    """Break: joint forces uploaded from a host temporary inside the captured call."""

    def simulate(self):
        self.calls += 1
        wp.copy(self.control.joint_f, wp.array(np.full(self.model.joint_dof_count, 0.5 * self.calls, np.float32)))
        super().simulate()


def step(example):
    example.simulate()


def test_simulate_replays_right_and_has_no_finding():
    twins = Twins(Pendulum)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=5) == []
    assert twins.count() > 150
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


def test_a_counter_in_the_substep_length_is_scalar_drift():
    twins = Twins(CountedPendulum)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []  # the graph froze the first dt
    assert_caught(checked.report, "scalar-drift", ["dt"])
    assert {arg for f in checked.report.findings for arg in arguments(f)} <= {"dt"}


def test_an_odd_substep_count_swaps_the_states_buffer_drift():
    twins = Twins(lambda: Pendulum(substeps=9))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []
    assert_caught(checked.report, "buffer-drift", ["body_q", "body_qd"])


def test_a_host_uploaded_temporary_is_per_call_allocation():
    example = UploadingPendulum()
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    assert_caught(checked.report, "per-call-allocation", ["src"])


def test_a_state_reallocated_after_capture_is_a_stale_pointer():
    twins = Twins(Pendulum)
    example = twins.subject
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    example.state_0.body_q = wp.clone(example.state_0.body_q)  # the break: a reset that reallocates
    before = bytes_of(example.state_0.body_q)
    wp.capture_launch(checked.graph)
    assert bytes_of(example.state_0.body_q) == before  # the replay wrote the old buffer
    assert_caught(checked.check_replay(on_failure="ignore"), "stale-pointer", ["body_q"])

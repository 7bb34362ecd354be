"""Newton's cartpole example (``newton.examples.robot.example_robot_cartpole``) with SolverMuJoCo.

The example reads ``cartpole.usda``; without a USD reader the same robot is loaded from the
shipped ``cartpole.urdf`` with the example's settings. Its capture site is ``simulate``: ten
substeps of clear_forces, a MuJoCo Warp step and a swap (an odd count ends with an assign,
so every call starts from the same buffers). MuJoCo Warp allocates its solver context and
scratch on the device inside each step, and runs its solver loop with ``wp.capture_while``.
"""

import numpy as np
import pytest
import warp as wp

import graphcheck as gc

from .twins import Twins, assert_caught, assert_no_finding, bytes_of, replay_against_twin

pytest.importorskip("newton", reason="needs newton: nox -s clients installs it")
import newton
import newton.examples


class Cartpole:
    """The example's model, solver and ``simulate``, built from the URDF, headless."""

    def __init__(self, substeps: int = 10, assign_odd: bool = True, worlds: int = 2):
        self.sim_substeps = substeps
        self.sim_dt = 1.0 / 60.0 / substeps
        self.assign_odd = assign_odd
        self.calls = 0
        cartpole = newton.ModelBuilder()
        newton.solvers.SolverMuJoCo.register_custom_attributes(cartpole)
        cartpole.default_shape_cfg.density = 100.0
        cartpole.default_joint_cfg.armature = 0.1
        cartpole.add_urdf(
            newton.examples.get_asset("cartpole.urdf"),
            floating=False,
            enable_self_collisions=False,
            collapse_fixed_joints=True,
        )
        for shape in range(cartpole.shape_count):
            cartpole.shape_flags[shape] &= ~newton.ShapeFlags.COLLIDE_SHAPES
        cartpole.joint_q[-2:] = [0.0, 0.3]
        builder = newton.ModelBuilder()
        builder.replicate(cartpole, worlds, spacing=(1.0, 2.0, 0.0))
        self.model = builder.finalize()
        self.solver = newton.solvers.SolverMuJoCo(self.model)
        self.state_0 = self.model.state()
        self.state_1 = self.model.state()
        self.control = self.model.control()
        self.contacts = None
        newton.eval_fk(self.model, self.model.joint_q, self.model.joint_qd, self.state_0)

    def substep_dt(self) -> float:
        return self.sim_dt

    def simulate(self):
        self.calls += 1
        for substep in range(self.sim_substeps):
            self.state_0.clear_forces()
            self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.substep_dt())
            if self.assign_odd and self.sim_substeps % 2 == 1 and substep == self.sim_substeps - 1:
                self.state_0.assign(self.state_1)
            else:
                self.state_0, self.state_1 = self.state_1, self.state_0


class CountedCartpole(Cartpole):
    """Break: the substep length comes from a Python call counter."""

    def substep_dt(self) -> float:
        return self.sim_dt * (1.0 + 0.01 * self.calls)


class UploadingCartpole(Cartpole):
    """Break: joint forces uploaded from a host temporary inside the captured call."""

    def simulate(self):
        wp.copy(self.control.joint_f, wp.array(np.full(self.model.joint_dof_count, 0.1 * self.calls, np.float32)))
        super().simulate()


def step(example):
    example.simulate()


def test_simulate_replays_right_and_has_no_finding():
    twins = Twins(Cartpole)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=5) == []
    assert twins.count() > 400
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


def test_a_counter_in_the_substep_length_is_copy_drift():
    # SolverMuJoCo hands dt to MuJoCo Warp by `mjw_model.opt.timestep.fill_(dt)`: a fill, not a kernel argument.
    twins = Twins(CountedCartpole)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []  # the graph froze the first dt
    assert_caught(checked.report, "copy-drift", ["value"])


def test_an_odd_substep_count_without_the_assign_is_buffer_drift():
    twins = Twins(lambda: Cartpole(substeps=9, assign_odd=False))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []
    assert_caught(checked.report, "buffer-drift", ["joint_q"])


def test_a_host_uploaded_temporary_is_per_call_allocation():
    example = UploadingCartpole()
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    assert_caught(checked.report, "per-call-allocation", ["src"])


def test_a_state_reallocated_after_capture_is_a_stale_pointer():
    example = Cartpole()
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    example.state_0.joint_q = wp.clone(example.state_0.joint_q)  # the break: a reset that reallocates
    before = bytes_of(example.state_0.joint_q)
    wp.capture_launch(checked.graph)
    assert bytes_of(example.state_0.joint_q) == before  # the replay read and wrote the old buffer
    assert_caught(checked.check_replay(on_failure="ignore"), "stale-pointer", ["joint_q"])

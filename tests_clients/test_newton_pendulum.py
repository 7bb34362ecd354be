"""Newton's pendulum example (``newton.examples.basic.example_basic_pendulum``) with SolverXPBD.

Its capture site is ``Example.simulate``: ten substeps of clear_forces, collision, an XPBD step
and a swap of ``state_0``/``state_1`` (ten swaps: every call starts from the same buffers).
SolverXPBD allocates device scratch (``wp.empty_like``, ``wp.zeros``, ``wp.clone``) inside the
step; Warp makes it graph-owned, and the graph replays bit-identically to eager stepping.
"""

import os
import subprocess
import sys
from pathlib import Path

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


class OtherSolverPendulum(Pendulum):
    """The example with another of Newton's solvers for articulated rigid bodies."""

    def __init__(self, solver: str):
        super().__init__()
        self.solver = getattr(newton.solvers, solver)(self.model)


def step(example):
    example.simulate()


# SolverFeatherstone adds wp.empty_like(body_q) to a state on its first step and writes it only when
# stepping in place: uninitialised in both twins, not a result.
NEVER_WRITTEN = ("._featherstone_body_q_prev",)


@pytest.mark.parametrize("solver", ["SolverFeatherstone", "SolverSemiImplicit"])
def test_other_solvers_replay_right_and_have_no_finding(solver):
    twins = Twins(lambda: OtherSolverPendulum(solver))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    differing = replay_against_twin(checked, twins, step, replays=3)
    assert [path for path in differing if not path.endswith(NEVER_WRITTEN)] == []
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


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


def test_graphcheck_run_guards_the_unmodified_example():
    import newton.examples.basic.example_basic_pendulum as module

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]), NO_COLOR="1")
    result = subprocess.run(
        [sys.executable, "-m", "graphcheck", "run", module.__file__, "--viewer", "null", "--num-frames", "3"],
        capture_output=True, text=True, cwd=root, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "graphcheck: 1 capture guarded, no findings" in result.stdout

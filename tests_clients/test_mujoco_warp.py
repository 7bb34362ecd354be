"""MuJoCo Warp's ``mujoco_warp.step`` on a small MJCF cartpole (two worlds).

Its capture site is ``mjw.step(m, d)`` (what ``mujoco_warp/viewer.py`` and the ``mjwarp-testspeed``
unroll capture). Each step allocates its constraint counters, solver context and scratch on the
device and runs the solver loop with ``wp.capture_while``; the graph replays bit-identically to
eager stepping. The breaks are lines of MuJoCo Warp's own drivers moved inside the captured call:
the control-noise launch with the step index (``_src/cli.py``) and the control upload from a host
temporary (``viewer.py``). ``mjwarp-testspeed --function=<name>`` captures any other function of
MuJoCo Warp that takes ``(m, d)`` the same way: each is judged on a model with contacts.
"""

import inspect
import re

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from benchmarks.bench_clients import CARTPOLE  # the model the clients benchmark times too

from .twins import Twins, arguments, assert_caught, assert_no_finding, bytes_of, replay_against_twin

pytest.importorskip("mujoco_warp", reason="needs mujoco_warp: nox -s clients installs it")
import mujoco
import mujoco_warp as mjw
from mujoco_warp._src.cli import _ctrl_noise


class Sim:
    """A MuJoCo model and batched data on Warp's device, stepped by ``mjw.step``."""

    def __init__(self, worlds: int = 2):
        self.mjm = mujoco.MjModel.from_xml_string(CARTPOLE)
        mjd = mujoco.MjData(self.mjm)
        mjd.qpos[1] = 0.3
        mjd.ctrl[0] = 0.5
        mujoco.mj_forward(self.mjm, mjd)
        self.m = mjw.put_model(self.mjm)
        self.d = mjw.put_data(self.mjm, mjd, nworld=worlds)
        self.spare = mjw.put_data(self.mjm, mjd, nworld=worlds)  # for the ping-pong break
        self.no_center = wp.empty(0, dtype=float)
        self.calls = 0

    def step(self):
        mjw.step(self.m, self.d)


FALLING = """
<mujoco model="falling">
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
    <body pos="0.05 0 0.6"><freejoint/><geom type="sphere" size="0.08" mass="0.5"/></body>
    <body pos="-0.1 0 0.9" euler="30 20 0"><freejoint/><geom type="capsule" size="0.05 0.1" mass="0.5"/></body>
  </worldbody>
</mujoco>
"""


class FallingSim(Sim):
    """Three free bodies landed on a plane: collision detection and contact constraints every step."""

    def __init__(self):
        self.mjm = mujoco.MjModel.from_xml_string(FALLING)
        mjd = mujoco.MjData(self.mjm)
        mujoco.mj_forward(self.mjm, mjd)
        self.m = mjw.put_model(self.mjm)
        self.d = mjw.put_data(self.mjm, mjd, nworld=2, nconmax=64, njmax=256)
        for _ in range(60):
            mjw.step(self.m, self.d)


class NoisySim(Sim):
    """Break: cli.py's control-noise launch moved into the step, with the Python step counter."""

    def step(self):
        self.calls += 1
        m, d = self.m, self.d
        wp.launch(
            _ctrl_noise,
            dim=(d.nworld, m.nu),
            inputs=[m.opt.timestep, m.actuator_ctrllimited, m.actuator_ctrlrange, d.ctrl, self.no_center,
                    self.calls, 0.1, 0.5],  # the break: the step index
            outputs=[d.ctrl],
        )  # fmt: skip
        mjw.step(m, d)


class UploadingSim(Sim):
    """Break: viewer.py's control upload from a host temporary moved into the step."""

    def step(self):
        self.calls += 1
        ctrl = np.full((self.d.nworld, self.m.nu), 0.1 * self.calls, np.float32)
        wp.copy(self.d.ctrl, wp.array(ctrl))
        mjw.step(self.m, self.d)


class PingPongSim(Sim):
    """Break: two Data swapped in Python after every step (an odd count per call)."""

    def step(self):
        mjw.step(self.m, self.d)
        self.d, self.spare = self.spare, self.d


def step(sim):
    sim.step()


def test_step_replays_right_and_has_no_finding():
    twins = Twins(Sim)
    sim = twins.subject
    checked = gc.capture(mjw.step, sim.m, sim.d, owners=(sim.m, sim.d), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=5) == []
    assert twins.count() > 250
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


def test_step_with_contacts_replays_right_and_has_no_finding():
    twins = Twins(FallingSim)
    sim = twins.subject
    assert sim.d.nacon.numpy()[0] > 0
    checked = gc.capture(mjw.step, sim.m, sim.d, owners=(sim.m, sim.d), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=3) == []
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


# What `mjwarp-testspeed --function=<name>` captures (`_src/cli.py`'s unroll): each function of
# mujoco_warp that takes (m, d). render and refit_bvh take a render context too, left out here.
TESTSPEED_FUNCTIONS = sorted(
    name
    for name, fn in inspect.getmembers(mjw, inspect.isfunction)
    if list(inspect.signature(fn).parameters) == ["m", "d"]  # called with them in that order
)


@pytest.mark.parametrize("name", TESTSPEED_FUNCTIONS)
def test_every_function_testspeed_captures_replays_right_and_has_no_finding(name):
    function = getattr(mjw, name)
    twins = Twins(FallingSim)
    sim = twins.subject
    checked = gc.capture(function, sim.m, sim.d, owners=(sim.m, sim.d), on_failure="ignore")
    assert replay_against_twin(checked, twins, lambda twin: function(twin.m, twin.d), replays=2) == []
    assert_no_finding(checked.report)


def test_strict_ownership_reports_the_step_temporaries():
    sim = Sim()
    checked = gc.capture(mjw.step, sim.m, sim.d, owners=(sim.m, sim.d), on_failure="ignore", strict_ownership=True)
    assert set(checked.report.kinds()) == {"per-call-allocation"}


def test_the_step_counter_passed_to_a_kernel_is_scalar_drift():
    twins = Twins(NoisySim)
    checked = gc.capture(twins.subject.step, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []  # the graph froze the first index
    assert_caught(checked.report, "scalar-drift", ["step"])
    assert {arg for f in checked.report.findings for arg in arguments(f)} == {"step"}


def test_swapping_two_data_is_buffer_drift():
    twins = Twins(PingPongSim)
    checked = gc.capture(twins.subject.step, owners=(twins.subject,), on_failure="ignore")
    # Two replays happen to match (each Data stepped as often as the twin's); the third does not.
    assert replay_against_twin(checked, twins, step, replays=3) != []
    assert_caught(checked.report, "buffer-drift", ["qpos_in"])


def test_a_host_uploaded_control_is_per_call_allocation():
    sim = UploadingSim()
    checked = gc.capture(sim.step, owners=(sim,), on_failure="ignore")
    assert_caught(checked.report, "per-call-allocation", ["src"])


def test_data_reallocated_after_capture_is_a_stale_pointer():
    sim = Sim()
    checked = gc.capture(mjw.step, sim.m, sim.d, owners=(sim.m, sim.d), on_failure="ignore")
    sim.d.qpos = wp.clone(sim.d.qpos)  # the break: a reset that reallocates
    before = bytes_of(sim.d.qpos)
    wp.capture_launch(checked.graph)
    assert bytes_of(sim.d.qpos) == before  # the replay advanced the old buffer
    assert_caught(checked.check_replay(on_failure="ignore"), "stale-pointer", ["qpos_in"])


def test_launch_probes_data_and_model_by_their_dicts_replays_right_and_finds_a_reallocated_array():
    # launch()'s check before every replay compares Data's and Model's attributes by their
    # __dict__s read in place (Data: 161 arrays and a few ints; Model: hundreds of both).
    twins = Twins(Sim)
    sim = twins.subject
    checked = gc.capture(sim.step, owners=(sim,), on_failure="warn")
    for _ in range(checked.eager_calls):
        step(twins.twin)
    for _ in range(4):
        checked.launch()
        step(twins.twin)
    assert twins.differing() == []
    probe = checked._probe.source.split("def replayed")[0]
    assert probe.count("_same_entries(") >= 2
    assert not re.search(r"= v\d+\.qpos$", probe, re.MULTILINE)  # Data's arrays are not loaded one by one
    sim.d.qpos = wp.clone(sim.d.qpos)  # the break: a reset that reallocates
    before = bytes_of(sim.d.qpos)
    with pytest.warns(gc.GraphCheckWarning, match="stale-pointer"):
        checked.launch()
    assert bytes_of(sim.d.qpos) == before  # the replay advanced the old buffer

"""Warp's own shipped examples that capture graphs, validated on the CPU.

A careful engineer's verdict on each capture site, which graphcheck must reach:

- ``example_fdtd_3d.Example.step``: clean. Its timestep counter lives on the device
  and is advanced by a kernel.
- ``example_fluid.Example.pressure_iterations``: clean. It swaps ``p0``/``p1`` in Python,
  but 100 times, so every call starts from the same buffers.
- ``example_graph_capture.Example.fbm``: depends on Python state it changes: it doubles
  ``self.frequency`` and halves ``self.amplitude`` on every launch, so a second call is
  not what the graph replays (the example works only because ``step`` resets both
  before each replay). graphcheck reports scalar-drift on both arguments.
- ``example_fluid.Example.step`` (the whole frame, which the example does not capture):
  its emitter direction is computed from ``self.sim_time`` on the host, so capturing it
  would freeze the emitter: scalar-drift on ``init``'s ``dir``.
"""

import pytest
import warp as wp

import graphcheck as gc
from tests.releases import WARP_RELEASE, needs_warp

DEVICE = "cpu"


FDTD_RELEASE = (1, 17)  # the first Warp that ships example_fdtd_3d


@pytest.fixture(scope="module")
def examples():
    from warp.examples.core import example_fluid, example_graph_capture

    with wp.ScopedDevice(DEVICE):
        built = {"fluid": example_fluid.Example(), "graph_capture": example_graph_capture.Example()}
        if WARP_RELEASE >= FDTD_RELEASE:
            from warp.examples.core import example_fdtd_3d

            built["fdtd"] = example_fdtd_3d.Example()
        return built


@needs_warp(FDTD_RELEASE, "warp.examples.core.example_fdtd_3d")
def test_fdtd_step_is_replay_safe(examples):
    example = examples["fdtd"]
    checked = gc.capture(example.step, device=DEVICE, owners=(example,))
    assert checked.ok, str(checked.report)
    assert checked.report.operations == 3
    checked.launch()


def test_fluid_pressure_iterations_are_replay_safe(examples):
    example = examples["fluid"]
    checked = gc.capture(example.pressure_iterations, device=DEVICE, owners=(example,))
    assert checked.ok, str(checked.report)
    assert checked.report.operations == example.iterations


def test_graph_capture_fbm_depends_on_state_it_changes(examples):
    example = examples["graph_capture"]
    checked = gc.capture(example.fbm, device=DEVICE, owners=(example,), on_failure="log")
    assert set(checked.report.kinds()) == {"scalar-drift"}
    assert {f.arg for f in checked.report.findings} == {"frequency", "amplitude"}
    assert all(f.site.filename.endswith("example_graph_capture.py") for f in checked.report.findings)


def test_fluid_whole_step_would_freeze_its_emitter(examples):
    example = examples["fluid"]
    example.use_graph_capture = False  # the step launches the pressure graph itself otherwise
    try:
        checked = gc.capture(example.step, device=DEVICE, owners=(example,), on_failure="log")
    finally:
        example.use_graph_capture = True
    assert set(checked.report.kinds()) == {"scalar-drift"}
    (finding,) = checked.report.findings
    assert (finding.kernel, finding.arg) == ("warp.examples.core.example_fluid.init", "dir")

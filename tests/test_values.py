"""Proof by values (``gc.verify_replay``) on real Warp kernels on the CPU."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck.values import compare
from tests import producers as corpus, value_producers as P
from tests.replay_mutations import replays_doing_nothing

DEVICE = "cpu"


@wp.kernel
def _add_one(x: wp.array(dtype=Any)):
    i = wp.tid()
    x[i] = x[i] + x.dtype(1)


def test_warp_replays_one_overload_for_both():
    """The Warp behaviour itself (1.15 to 1.19), with no graphcheck: two overloads of one generic kernel,
    both built before the capture, launched in one CPU capture. Replay differs from eager stepping."""
    a = wp.zeros(3, dtype=wp.float32, device=DEVICE)
    b = wp.zeros(3, dtype=wp.float64, device=DEVICE)

    def step():
        wp.launch(_add_one, dim=3, inputs=[a], device=DEVICE)
        wp.launch(_add_one, dim=3, inputs=[b], device=DEVICE)

    step()  # builds both overloads into one module
    with wp.ScopedCapture(device=DEVICE) as capture:
        step()
    a.zero_()
    b.zero_()
    wp.capture_launch(capture.graph)
    assert b.numpy().tolist() == [1.0, 1.0, 1.0]
    assert a.numpy().tolist() != [1.0, 1.0, 1.0]  # eager stepping gives [1, 1, 1]


def test_overloads_are_a_capture_error_and_a_replay_divergence():
    report = gc.verify_replay(P.Overloads, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"capture-error", "replay-divergence"}, str(report)
    (divergence,) = report.of_kind("replay-divergence")
    assert divergence.detail["buffer"] == "producer.a"
    assert divergence.detail["step"] == 2  # the first replay
    assert divergence.detail["element"] == [0]
    assert divergence.reference == 2.0 and divergence.captured != 2.0
    assert divergence.detail["elements differing"] == P.N
    assert divergence.site is not None and divergence.site.function == "Overloads.step"
    assert "producer.a after step 2" in divergence.message
    assert set(report.checks) >= {"compare", "ownership", "replay", "values"}
    # Every launch, address and scalar matches: Warp's rule for CPU graphs names it at capture.
    checked = gc.capture(P.Overloads(DEVICE).step, device=DEVICE, on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "capture-error" and finding.kernel.endswith("add_one")
    assert "2 overloads of the generic kernel" in finding.message and "own" in finding.fix
    assert finding.detail["overloads"] == 2 and finding.index == 0


def test_one_kernel_per_dtype_is_clean_and_replays_as_eager():
    assert gc.capture(P.OneKernelPerDtype(DEVICE).step, device=DEVICE).ok
    assert gc.verify_replay(P.OneKernelPerDtype, steps=4, device=DEVICE).ok


def test_a_kernel_factory_called_twice_is_one_code_clean_and_replays_as_eager():
    # Two kernel objects of one key and module, the same code: the CPU graph's one entry runs it for both.
    producer = P.FactoryKernels(DEVICE)
    assert producer.kernels[0] is not producer.kernels[1]
    assert gc.capture(producer.step, device=DEVICE).ok
    assert gc.verify_replay(P.FactoryKernels, steps=4, device=DEVICE).ok


def test_a_kernel_factory_on_two_dtypes_is_two_overloads_and_diverges():
    report = gc.verify_replay(P.FactoryOverloads, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"capture-error", "replay-divergence"}, str(report)
    (finding,) = report.of_kind("capture-error")
    assert finding.detail["overloads"] == 2 and finding.kernel.endswith("add_one_made")


def test_cast_in_both_directions_diverges():
    report = gc.verify_replay(P.CastBothWays, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"capture-error", "replay-divergence"}, str(report)
    assert {f.detail["step"] for f in report.of_kind("replay-divergence")} == {2}


def test_plain_producer_replays_what_eager_stepping_computes():
    report = gc.verify_replay(P.Plain, steps=5, device=DEVICE)
    assert report.ok, str(report)
    assert "values" in report.checks
    # The claim, checked by hand: five eager steps equal a reference step and four replays.
    eager, replayed = P.Plain(DEVICE), P.Plain(DEVICE)
    for _ in range(5):
        eager.step()
    checked = gc.capture(replayed.step, device=DEVICE)
    for _ in range(4):
        checked.launch()
    np.testing.assert_array_equal(eager.x.numpy(), replayed.x.numpy())


def test_divergence_raises_by_default_with_the_report():
    with pytest.raises(gc.GraphCheckError) as error:
        gc.verify_replay(P.Overloads, device=DEVICE)
    assert error.value.report.of_kind("replay-divergence")


def test_a_frozen_scalar_shows_in_the_structure_and_in_the_values():
    report = gc.verify_replay(P.Timestamp, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"scalar-drift", "replay-divergence"}, str(report)
    (diverged,) = report.of_kind("replay-divergence")
    assert diverged.detail["buffer"] == "producer.x"
    # Captured on its second call, the graph replays dt=0.2: equal to eager stepping at step 2, not after.
    assert diverged.detail["step"] == 3


def test_a_factory_and_a_step_closure():
    def make(device):
        x = wp.zeros(4, dtype=float, device=device)
        v = wp.ones(4, dtype=float, device=device)

        def step():
            wp.launch(P.integrate, dim=4, inputs=[x, v, 0.5], device=device)

        return step

    report = gc.verify_replay(make, device=DEVICE)
    assert report.ok, str(report)
    assert report.name.endswith("step")


def test_a_factory_without_device_and_another_method():
    class Sim(P.Plain):
        def advance(self):
            self.step()

    report = gc.verify_replay(lambda: Sim(DEVICE), method="advance", device=DEVICE)
    assert report.ok, str(report)


def test_producers_that_differ_after_one_eager_step_are_refused():
    # Unseeded: two more producers stepped eagerly differ too, so the step is blamed, not the replay.
    with pytest.raises(ValueError, match=r"differ after 2 eager steps each: producer\.x .*seed random numbers"):
        gc.verify_replay(P.Random, device=DEVICE)


class FreshScratch(P.Plain):
    """A scratch made and filled in the step, read into the state: graph-owned, replay-safe."""

    def step(self) -> None:
        self.scratch = wp.zeros(P.N, dtype=float, device=self.x.device)
        wp.launch(P.add_one, dim=P.N, inputs=[self.scratch], device=self.x.device)
        wp.launch(P.integrate, dim=P.N, inputs=[self.x, self.scratch, 0.1], device=self.x.device)


def test_a_difference_right_after_the_capture_is_the_replays_when_eager_twins_agree():
    # With every replay doing nothing, the captured producer's scratch is the graph's, never
    # filled: it differs from the eager twin's at the first comparison, with no structural
    # finding. Two more producers stepped eagerly agree, so it is the replay's difference.
    assert gc.verify_replay(FreshScratch, device=DEVICE).ok
    with replays_doing_nothing():
        report = gc.verify_replay(FreshScratch, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"replay-divergence"}, str(report)
    assert any(f.detail["buffer"] == "producer.scratch" for f in report.findings), str(report)
    assert any("two more producers stepped eagerly" in n and "agree" in n for n in report.notes), str(report)


@pytest.mark.parametrize("steps", ["3", 0, -1, True, False, 1, 2.5, None])
def test_steps_is_checked_up_front_with_one_line_naming_it(steps):
    built = []

    def make(device):
        built.append(device)
        return P.Plain(device)

    with pytest.raises(ValueError) as error:
        gc.verify_replay(make, steps=steps, device=DEVICE)
    message = str(error.value)
    assert "\n" not in message and message.startswith("steps must be an integer >= 2"), message
    assert message.endswith(f"got {steps!r}"), message
    assert not built  # nothing built or run


@pytest.mark.parametrize("method", [3, None, ""])
def test_method_is_checked_up_front(method):
    with pytest.raises(TypeError, match=f"^method must be the name of the producer's step method .*got {method!r}"):
        gc.verify_replay(P.Plain, method=method, device=DEVICE)


def test_memory_not_written_yet_is_compared_once_written_alike():
    report = gc.verify_replay(P.Unwritten, device=DEVICE)
    assert report.ok, str(report)
    (note,) = [n for n in report.notes if "before any step" in n]
    assert "not compared: producer.spare (4)" in note and "producer.scratch" not in note


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": 0}, ValueError, "steps must be an integer >= 2 .*, got 0$"),
        ({"steps": 1}, ValueError, r"steps must be an integer >= 2 \(step 1 is the captured producer's reference call"),
        ({"atol": -1.0}, ValueError, "atol must be a number >= 0"),
        ({"rtol": float("nan")}, ValueError, "rtol must be a number >= 0"),
        ({"on_failure": "explode"}, ValueError, "on_failure must be one of"),
        ({"method": "run"}, TypeError, r"no run\(\) method; pass method="),
        ({"device": "cuda:7"}, ValueError, "cannot capture on device 'cuda:7'"),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs, error, match):
    with pytest.raises(error, match=match):
        gc.verify_replay(P.Plain, **{"device": DEVICE, **kwargs})


def test_make_must_be_callable():
    with pytest.raises(TypeError, match="make must build a producer"):
        gc.verify_replay(P.Plain(DEVICE), device=DEVICE)


def test_the_users_own_exception_propagates():
    class Broken(P.Plain):
        def step(self):
            raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        gc.verify_replay(Broken, device=DEVICE)


# -- comparing buffers ---------------------------------------------------------------------


def _pair(a, b, dtype=float):
    return wp.array(np.asarray(a), dtype=dtype, device=DEVICE), wp.array(np.asarray(b), dtype=dtype, device=DEVICE)


def test_compare_is_bitwise_by_default():
    assert compare("x", *_pair([1.0, 0.0], [1.0, 0.0])) is None
    found = compare("x", *_pair([1.0, 0.0], [1.0, -0.0]))
    assert found is not None and found.index == (1,) and found.count == 1
    nan = np.float32("nan")
    assert compare("x", *_pair([nan], [nan])) is None


def test_compare_with_tolerances():
    eager, replayed = _pair([1.0, 100.0, 3.0], [1.0 + 1e-6, 100.001, 3.5])
    assert compare("x", eager, replayed, atol=0.0, rtol=0.0).count == 3
    found = compare("x", eager, replayed, atol=1e-5, rtol=1e-4)
    assert found is not None and found.count == 1 and found.index == (2,)
    assert found.largest == pytest.approx(0.5)
    assert compare("x", eager, replayed, atol=0.6) is None


def test_compare_vectors_and_2d_arrays():
    a = wp.array(np.zeros((2, 3, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
    b = wp.array(np.zeros((2, 3, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
    b_host = b.numpy()
    b_host[1, 2, 0] = 4.0
    b.assign(b_host)
    found = compare("v", a, b)
    assert found is not None and found.index == (1, 2) and found.replayed == (4.0, 0.0, 0.0)
    assert found.total == 6 and found.count == 1


def test_buffers_swapped_by_the_captures_own_call_diverge_at_once():
    """The capture's call runs the step's Python (here, an odd number of swaps) without its kernels:
    the replayed producer differs from the first step on, and the structure says why."""
    from examples import cloth

    make = functools.partial(cloth.NaiveOddSubstepCloth, size=8, iterations=4, substeps=3)
    report = gc.verify_replay(make, device=DEVICE, on_failure="ignore")
    assert {"buffer-drift", "replay-divergence"} <= set(report.kinds()), str(report)
    assert {f.detail["step"] for f in report.of_kind("replay-divergence")} == {1}


def test_an_array_only_eager_stepping_makes_is_a_divergence():
    report = gc.verify_replay(P.GrowsOnThirdCall, device=DEVICE, on_failure="ignore")
    assert set(report.kinds()) == {"replay-divergence"}, str(report)
    (finding,) = report.findings
    assert finding.detail["step"] == 3 and finding.detail["buffer"] == "producer.history"
    assert "float32[4] on cpu stepping eagerly, no array replayed" in finding.message


@pytest.mark.parametrize("check", ["verify_replay", "check_producer"])
def test_with_checking_disabled_a_value_check_builds_nothing_and_says_not_checked(check, monkeypatch):
    built = []

    def make(device=None):
        built.append(1)
        return corpus.DeviceCounter(device or DEVICE)

    monkeypatch.setenv("GRAPHCHECK_DISABLE", "1")
    report = getattr(gc, check)(make, device=DEVICE)  # on_failure="raise": nothing to raise
    assert report.status == "not-checked" and not report.ok and not built
    assert report.skipped == (("all checks", "checking disabled by GRAPHCHECK_DISABLE"),)
    assert "NOT checked" in report.headline() and "make.step" in report.headline()
    # Checking on again, the same producer passes by values: replay equals eager stepping.
    monkeypatch.delenv("GRAPHCHECK_DISABLE")
    assert getattr(gc, check)(make, device=DEVICE).ok

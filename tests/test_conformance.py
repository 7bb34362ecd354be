"""The producer conformance kit (``gc.check_producer``) on real Warp kernels on the CPU."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import graphcheck as gc
from examples import cloth, particles, rl_env
from tests import value_producers as P
from tests.internals import function_name

DEVICE = "cpu"


def _check(make, **kwargs):
    return gc.check_producer(make, device=DEVICE, on_failure="ignore", **kwargs)


def test_a_plain_producer_conforms():
    report = gc.check_producer(P.Plain, device=DEVICE)
    assert report.ok, str(report)
    assert set(report.checks) >= {"topology", "disjoint buffers", "compare", "ownership", "replay", "values"}


def test_a_module_level_cache_is_a_shared_buffer():
    report = _check(P.ModuleCache)
    assert set(report.kinds()) == {"shared-buffer"}, str(report)
    (finding,) = report.findings
    assert finding.kernel.endswith(".accumulate") and finding.arg == "total"
    held = finding.detail["held by"]
    assert "first producer.total" in held and "second producer.total" in held
    assert any(h.startswith("module global tests.value_producers._SCRATCH") for h in held), held
    assert finding.site.function == function_name("ModuleCache.step")


def test_a_class_attribute_is_a_shared_buffer_and_nothing_else():
    report = _check(P.ClassBuffer)
    # The class attribute is also outside the buffers the instance holds: one cause, one finding.
    assert set(report.kinds()) == {"shared-buffer"}, str(report)
    (finding,) = report.findings
    assert finding.detail["held by"] == ["class attribute ClassBuffer.total"]
    assert "held by class attribute ClassBuffer.total" in finding.message


def test_a_shared_default_argument_is_a_shared_buffer():
    report = _check(P.DefaultArgument)
    assert set(report.kinds()) == {"shared-buffer"}, str(report)
    held = report.findings[0].detail["held by"]
    assert "default argument DefaultArgument.__init__(total=...)" in held, held


def test_the_shared_buffer_corrupts_a_second_producer():
    """The claim behind shared-buffer: stepping one producer changes the other's results."""
    first, second = P.ModuleCache(DEVICE), P.ModuleCache(DEVICE)
    first.total.zero_()
    first.step()
    after_its_own_step = first.total.numpy().copy()
    second.step()
    assert not np.array_equal(first.total.numpy(), after_its_own_step)  # the second producer wrote into it


def test_an_extra_launch_every_third_call_is_launch_sequence_drift():
    report = _check(P.EveryThirdCall, calls=3)
    assert set(report.kinds()) == {"launch-sequence-drift"}, str(report)
    (finding,) = report.findings
    assert "issued only by call 3" in finding.message
    assert finding.detail["calls"] == (1, 3)
    # The capture compares calls 1 and 2 only: without the kit's third call nothing is found.
    assert gc.capture(P.EveryThirdCall(DEVICE).step, device=DEVICE).ok
    # The replay diverges too, and the report says so once, in a note.
    assert any("the replay diverged too" in note for note in report.notes)


def test_a_value_that_changes_every_call_is_one_finding():
    """Calls 1 and 2, calls 1 and 3, and the capture all see the same drifting scalar: one cause."""
    report = _check(P.Timestamp)
    (finding,) = report.findings
    assert (finding.kind, finding.arg) == ("scalar-drift", "dt")
    assert "0.1 in call 1, 0.2 in call 2" in finding.message


def test_two_calls_miss_what_the_third_does():
    assert _check(P.EveryThirdCall, calls=2).ok


def test_device_temporaries_are_matched_between_calls():
    """wp.zeros inside the step: a new address on every call, the same temporary by allocation order;
    graph-owned, so the capture, the replay and the values all pass."""
    report = gc.check_producer(P.DeviceTemporaries, calls=3, device=DEVICE)
    assert report.ok, str(report)


def test_overloads_fail_the_kit_at_capture_and_by_their_values():
    report = _check(P.Overloads)
    assert set(report.kinds()) == {"capture-error"}, str(report)
    assert any("the replay diverged too" in note for note in report.notes), str(report)


def test_the_kit_raises_by_default():
    with pytest.raises(gc.GraphCheckError) as error:
        gc.check_producer(P.ModuleCache, device=DEVICE)
    assert error.value.report.of_kind("shared-buffer")


@pytest.mark.parametrize("calls", [0, 1, 2.5])
def test_calls_must_compare_at_least_two(calls):
    with pytest.raises(ValueError, match="calls must be"):
        gc.check_producer(P.Plain, calls=calls, device=DEVICE)


# -- the project's own examples: no alarm on safe producers, the planted bugs found ----------


@pytest.mark.parametrize(
    "make",
    [
        functools.partial(particles.Particles, count=128),
        functools.partial(cloth.Cloth, size=8, iterations=4),
        functools.partial(cloth.Cloth, size=8, iterations=4, substeps=3),
        functools.partial(rl_env.ReachEnv, num_envs=64),
    ],
    ids=["particles", "cloth", "cloth-odd-substeps", "rl-env"],
)
def test_the_examples_conform(make):
    report = gc.check_producer(make, calls=4, device=DEVICE)
    assert report.ok, str(report)
    assert "values" in report.checks


def test_the_examples_planted_bugs_are_found_and_shown():
    report = _check(functools.partial(particles.HostTimeParticles, count=64))
    assert set(report.kinds()) == {"scalar-drift"}, str(report)
    assert any("the replay diverged too" in note for note in report.notes)  # the wrong replay, shown
    report = _check(functools.partial(cloth.NaiveOddSubstepCloth, size=8, iterations=4, substeps=3))
    assert "buffer-drift" in report.kinds(), str(report)


def test_a_closure_factory_sharing_a_module_global():
    report = _check(P.shared_closure)
    assert set(report.kinds()) == {"shared-buffer"}, str(report)
    assert report.findings[0].detail["held by"] == ["module global tests.value_producers._TOTALS['total']"]

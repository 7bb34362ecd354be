"""``CaptureOptions``: one frozen, validated set of options, taken as an object or as keywords."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import graphcheck as gc
from tests import producers as P, value_producers as V

DEVICE = "cpu"


def test_an_object_and_keywords_are_the_same_options():
    assert gc.CaptureOptions.of(None, strict_ownership=True, allow="scalar-drift") == gc.CaptureOptions(
        strict_ownership=True, allow=(gc.Allow("scalar-drift"),)
    )
    base = gc.CaptureOptions(replay_check="first")
    assert gc.CaptureOptions.of(base) is base
    assert gc.CaptureOptions.of(base, on_failure="warn") == gc.CaptureOptions(on_failure="warn", replay_check="first")


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        gc.CaptureOptions().on_failure = "warn"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("keywords", "error", "words"),
    [
        ({"replay_check": "sometimes"}, ValueError, "replay_check must be one of 'first', 'always', 'never'"),
        ({"on_failure": "explode"}, ValueError, "on_failure must be one of"),
        ({"fallback": "retry"}, ValueError, "'eager'"),
        ({"strict_ownership": "yes"}, TypeError, "strict_ownership must be True or False, got 'yes'"),
        ({"stric_ownership": True}, TypeError, "did you mean 'strict_ownership'?"),
        ({"allow": [3]}, TypeError, "3"),
        ({"capture_mode": "x"}, ValueError, "capture_mode must be None (Warp's default) or a wp.CaptureMode"),
        ({"capture_mode": 7}, ValueError, "got 7"),
        (
            {"stream": "x"},
            TypeError,
            "stream must be None (the device's current stream) or a wp.Stream, got 'x' (a str)",
        ),
        ({"force_module_load": "yes"}, TypeError, "force_module_load must be None, True or False, got 'yes'"),
    ],
)
def test_a_bad_option_is_one_clear_error_naming_its_value(keywords, error, words):
    with pytest.raises(error, match=None) as raised:
        gc.CaptureOptions.of(None, **keywords)
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)


def test_options_must_be_capture_options():
    with pytest.raises(TypeError, match="options= takes a graphcheck.CaptureOptions"):
        gc.CaptureOptions.of({"on_failure": "warn"})  # type: ignore[arg-type]


def test_capture_takes_the_options_as_an_object_or_as_keywords():
    by_object = gc.capture(P.HostCounter(DEVICE).step, device=DEVICE,
                           options=gc.CaptureOptions(on_failure="ignore", revalidate=True))  # fmt: skip
    by_keywords = gc.capture(P.HostCounter(DEVICE).step, device=DEVICE, on_failure="ignore", revalidate=True)
    assert set(by_object.report.kinds()) == set(by_keywords.report.kinds()) == {"scalar-drift"}
    # Keywords go over the object.
    allowed = gc.capture(P.HostCounter(DEVICE).step, device=DEVICE, options=by_object.options,
                         allow="scalar-drift")  # fmt: skip
    assert allowed.ok and allowed.options.on_failure == "ignore"


def test_the_guard_and_the_autoguard_take_the_same_options():
    options = gc.CaptureOptions(on_failure="ignore", strict_ownership=True, revalidate=True)
    producer = P.ZerosPerCall(DEVICE)
    with gc.GraphGuard(DEVICE, producer.step, (producer,), options) as guard:
        producer.step()
    assert "per-call-allocation" in guard.report.kinds()
    assert guard.options == options and guard.strict_ownership
    auto = gc.AutoGuard(options, allow_foreign_nodes=True)
    assert auto.options.strict_ownership and auto.options.allow_foreign_nodes
    assert auto.options.on_failure == "ignore" and auto.options.replay_check == "always"


def test_a_safe_site_checked_with_options_replays_what_eager_computes():
    # The verdict is a claim: the site passes with strict options, and its replay equals an eager twin's steps.
    options = gc.CaptureOptions(strict_ownership=True, replay_check="always", revalidate=True)
    producer, twin = V.Plain(DEVICE), V.Plain(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), options=options)
    assert checked.ok, str(checked.report)
    twin.step()  # the capture's reference call stepped the producer once
    for _ in range(3):
        checked.launch()
        twin.step()
    np.testing.assert_array_equal(producer.x.numpy(), twin.x.numpy())


class StepWithItsOwnDevice:
    """A step that takes its own ``device=`` and ``stream=``: names graphcheck's options share."""

    def __init__(self):
        self.inner = P.DeviceCounter(DEVICE)
        self.seen = []

    def step(self, scale, device=None, stream=None):
        self.seen.append((scale, device, stream))
        self.inner.step()


def test_the_steps_own_arguments_travel_in_args_and_kwargs():
    producer, twin = StepWithItsOwnDevice(), P.DeviceCounter(DEVICE)
    checked = gc.capture(producer.step, args=(2,), kwargs={"device": "its own", "stream": "its own"}, device=DEVICE,
                         owners=(producer,), replay_check="first")  # fmt: skip
    assert checked.ok, str(checked.report)
    assert producer.seen == [(2, "its own", "its own")] * 2, "the reference call and the capture"
    assert checked.options.replay_check == "first" and checked.device == "cpu"
    # The verdict is a claim: the replay computes what eager stepping does.
    twin.step()
    for _ in range(2):
        checked.launch()
        twin.step()
    np.testing.assert_array_equal(producer.inner.x.numpy(), twin.x.numpy())
    # Positional arguments after the callable still work (they were never ambiguous).
    assert gc.capture(producer.step, 3, device=DEVICE, owners=(producer,)).ok and producer.seen[-1] == (3, None, None)


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        (
            {"on_faliure": "warn"},
            "unknown option 'on_faliure' (did you mean 'on_failure'?); pass the step's own "
            "keyword arguments as kwargs={'on_faliure': ...}",
        ),
        ({"owner": ()}, "(did you mean 'owners'?)"),
        ({"scale": 2}, "unknown option 'scale'; pass the step's own keyword arguments as kwargs={'scale': ...}"),
        ({"args": 2}, "args= takes the step's positional arguments as a tuple or list, got 2"),
        ({"kwargs": [("scale", 2)]}, "kwargs= takes the step's keyword arguments as a dict"),
    ],
)
def test_a_capture_keyword_that_is_no_option_never_reaches_the_step(keywords, words):
    producer = StepWithItsOwnDevice()
    with pytest.raises(TypeError) as raised:
        gc.capture(producer.step, device=DEVICE, **keywords)
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert producer.seen == [], "nothing ran"


def test_the_steps_positional_arguments_are_given_once():
    producer = StepWithItsOwnDevice()
    with pytest.raises(TypeError, match=r"positional arguments twice: 1 after the callable and args=\(2,\); pass"):
        gc.capture(producer.step, 1, args=(2,), device=DEVICE)
    assert producer.seen == []


def test_every_option_is_checked_where_it_enters_before_anything_runs(cpu):
    sim = P.DeviceCounter(DEVICE)
    before = sim.x.numpy().copy()
    for keywords in ({"capture_mode": "x"}, {"stream": "x"}, {"force_module_load": 1}):
        with pytest.raises((TypeError, ValueError)) as caught:
            gc.capture(sim.step, device=DEVICE, **keywords)
        assert repr(next(iter(keywords.values()))) in str(caught.value) and "\n" not in str(caught.value)
    np.testing.assert_array_equal(sim.x.numpy(), before)  # refused before the step ran
    checked = gc.capture(sim.step, device=DEVICE)
    with pytest.raises(
        TypeError, match=r"stream must be None \(the device's current stream\) or a wp.Stream, got 42 \(an int\)"
    ):
        checked.launch(42)
    checked.launch()  # a good launch afterwards replays


def test_a_guard_whose_block_raised_says_it_raised_when_launched(cpu):
    sim = P.DeviceCounter(DEVICE)
    guard = gc.GraphGuard(DEVICE, sim.step, (sim,))
    with pytest.raises(KeyError):
        with guard:
            raise KeyError("the block's own error")
    for call in (guard.launch, guard.check_replay):
        with pytest.raises(RuntimeError, match=r"the guarded block raised KeyError, so there is no graph"):
            call()
    fresh = gc.GraphGuard(DEVICE, sim.step, (sim,))
    with pytest.raises(RuntimeError, match="has not run yet"):
        fresh.launch()

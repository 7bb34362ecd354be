"""``fallback=``: a site whose graph fails its checks keeps computing what eager stepping computes."""

from __future__ import annotations

import inspect
import logging
import warnings

import numpy as np
import pytest

import graphcheck as gc
from tests import value_producers as P

DEVICE = "cpu"


def _twin_stepped(producer_class, steps, renew=False):
    twin = producer_class(DEVICE)
    twin.step()  # the reference call of the capture
    if renew:
        twin.renew()
    for _ in range(steps):
        twin.step()
    return twin


def _launch(checked, times, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(times):
            checked.launch(**kwargs)
    return [w for w in caught if issubclass(w.category, gc.GraphCheckWarning)]


def test_without_a_fallback_the_stale_graph_replays_wrong():
    producer = P.Reassigned(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, replay_check="never")
    producer.renew()
    for _ in range(3):
        checked.launch()
    assert not np.array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 3, renew=True).x.numpy())


def test_eager_fallback_after_a_failed_replay_check_keeps_results_right():
    producer = P.Reassigned(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, fallback="eager")
    producer.renew()  # the graph now holds a buffer the producer no longer owns
    with pytest.warns(gc.GraphCheckWarning, match="runs eagerly instead of replaying its graph") as warned:
        checked.launch()
    here = inspect.currentframe().f_lineno
    assert (warned[0].filename, warned[0].lineno) == (__file__, here - 1)  # the launch() line
    assert _launch(checked, 2) == []  # said once
    assert checked.fallback.report is not None and checked.fallback.report.of_kind("stale-pointer")
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 3, renew=True).x.numpy())


def test_a_fallback_says_why_as_on_failure_says(caplog):
    for on_failure in ("log", "ignore"):
        producer = P.Reassigned(DEVICE)
        checked = gc.capture(producer.step, device=DEVICE, fallback="eager", on_failure=on_failure)
        producer.renew()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="graphcheck"):
            assert _launch(checked, 2) == []
        logged = [r for r in caplog.records if "runs eagerly" in r.getMessage()]
        assert len(logged) == (1 if on_failure == "log" else 0)
        np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 2, renew=True).x.numpy())


def test_recapture_fallback_replays_a_new_graph():
    producer = P.Reassigned(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, fallback="recapture")
    old_graph = checked.graph
    producer.renew()
    warned = _launch(checked, 4)
    assert len(warned) == 1 and "was captured again" in str(warned[0].message)
    assert checked.fallback.recaptures == 1 and checked.fallback.report is None
    assert checked.graph is not old_graph and checked.ok
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 4, renew=True).x.numpy())


def test_a_capture_with_findings_warns_instead_of_raising_and_steps_eagerly():
    producer = P.UploadPerCall(DEVICE)
    with pytest.warns(gc.GraphCheckWarning, match="per-call-allocation"):
        checked = gc.capture(producer.step, device=DEVICE, fallback="eager")
    assert not checked.ok
    warned = _launch(checked, 3)
    assert len(warned) == 1
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.UploadPerCall, 3).x.numpy())


def test_recapture_that_fails_again_steps_eagerly_from_then_on():
    producer = P.UploadPerCall(DEVICE)
    with pytest.warns(gc.GraphCheckWarning):
        checked = gc.capture(producer.step, device=DEVICE, fallback="recapture")
    warned = _launch(checked, 3)
    assert len(warned) == 1 and "captured again, and runs eagerly" in str(warned[0].message)
    assert checked.fallback.recaptures == 1
    assert checked.fallback.report.of_kind("per-call-allocation")
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.UploadPerCall, 3).x.numpy())


def test_a_fallback_chosen_at_launch():
    producer = P.Reassigned(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE)
    producer.renew()
    with pytest.raises(gc.GraphCheckError):
        checked.launch()  # no fallback: the replay check raises, nothing runs
    warned = _launch(checked, 2, fallback="eager")
    assert len(warned) == 1
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 2, renew=True).x.numpy())


def test_a_safe_site_with_a_fallback_replays_its_graph():
    producer = P.Plain(DEVICE)
    calls = []

    def step():
        calls.append(1)
        producer.step()

    checked = gc.capture(step, device=DEVICE, owners=(producer,), fallback="eager")
    assert _launch(checked, 3) == []
    assert len(calls) == 2  # the reference call and the capture: every launch replayed the graph
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Plain, 3).x.numpy())


def test_graph_guard_falls_back_to_its_reference():
    producer = P.Reassigned(DEVICE)
    with gc.GraphGuard(DEVICE, reference=producer.step, owners=(producer,), fallback="eager") as guard:
        producer.step()
    producer.renew()
    warned = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            guard.launch()
        warned += caught
    assert len(warned) == 1
    np.testing.assert_array_equal(producer.x.numpy(), _twin_stepped(P.Reassigned, 2, renew=True).x.numpy())


def test_a_fallback_needs_something_to_run():
    with pytest.raises(ValueError, match="fallback='eager' needs reference="):
        gc.GraphGuard(DEVICE, fallback="eager")
    with pytest.raises(ValueError, match="fallback must be None, 'eager' .* or 'recapture'"):
        gc.capture(P.Plain(DEVICE).step, device=DEVICE, fallback="sometimes")
    producer = P.Reassigned(DEVICE)
    with gc.GraphGuard(DEVICE, owners=(producer,), on_failure="ignore") as guard:
        producer.step()
    producer.renew()
    with pytest.raises(ValueError, match="needs the callable the graph captures"):
        guard.checked.launch(fallback="eager")


def test_with_checking_disabled_a_fallback_does_nothing(monkeypatch):
    monkeypatch.setenv("GRAPHCHECK_DISABLE", "1")
    producer = P.Plain(DEVICE)
    calls = []

    def step():
        calls.append(1)
        producer.step()

    checked = gc.capture(step, device=DEVICE, owners=(producer,), fallback="eager")
    checked.launch()
    assert len(calls) == 1  # captured once, no reference call; the launch replayed the graph

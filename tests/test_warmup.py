"""Work only the first call does, and ``warmup``: on gc.capture, GraphGuard, the command line
and the pytest marker.

The producers are tests/producers.py's FirstCallSetup and TapeReused (safe: every replay does
what later eager calls do) and their twins SetupEveryOtherCall and TapeResetOddCalls (unsafe);
tests/test_corpus.py proves each by values.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import graphcheck as gc
from graphcheck import _warp
from tests import kernels as K, producers as P
from tests.test_cli import graphcheck
from tests.test_pytest_plugin import inner, run_inner  # noqa: F401 (inner is a fixture)

pytest_plugins = ["pytester"]

DEVICE = "cpu"
FIRST_CALL = [P.FirstCallSetup, P.TapeReused]
EVERY_OTHER = [P.SetupEveryOtherCall, P.TapeResetOddCalls, P.EveryOtherCall]


def _capture(cls, **options):
    producer = cls(DEVICE)
    return gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore", **options)


@pytest.mark.parametrize("cls", FIRST_CALL, ids=lambda c: c.__name__)
def test_first_call_work_is_settled_by_one_more_eager_call_and_a_new_capture(cls):
    checked = _capture(cls)
    assert checked.report.ok, str(checked.report)
    assert checked.eager_calls == 3  # the reference call, the first capture's replay, one more eager call
    (note,) = [n for n in checked.report.notes if "once more" in n]
    assert "matched" in note and "two extra steps" in note and "warmup=1" in note
    assert "the graph returned is the new capture" in note


@pytest.mark.parametrize("cls", FIRST_CALL, ids=lambda c: c.__name__)
def test_warmup_calls_the_step_before_the_reference_call(cls):
    checked = _capture(cls, warmup=1)
    assert checked.report.ok, str(checked.report)
    assert checked.eager_calls == 2 and not any("once more" in n for n in checked.report.notes)
    assert _capture(cls, warmup=3).eager_calls == 4


@pytest.mark.parametrize("cls", FIRST_CALL, ids=lambda c: c.__name__)
def test_without_warmup_or_retry_the_finding_says_it_looks_like_first_call_work(cls):
    checked = _capture(cls, warmup=0)
    (finding,) = checked.report.findings
    assert finding.kind == "launch-sequence-drift" and finding.detail["first call"]
    assert "looks like first-call work" in finding.message and "warmup=1" in finding.message
    assert checked.eager_calls == 1


@pytest.mark.parametrize("cls", EVERY_OTHER, ids=lambda c: c.__name__)
def test_work_every_other_call_is_still_drift_after_one_more_call(cls):
    checked = _capture(cls)
    assert set(checked.report.kinds()) == {"launch-sequence-drift"}, str(checked.report)
    assert checked.eager_calls == 3
    assert any("not work only the first call does" in n for n in checked.report.notes)
    assert all("first-call" not in f.message for f in checked.report.findings)


def test_a_drift_of_another_kernel_is_not_called_first_call_work():
    checked = _capture(P.KernelToggle, warmup=0)
    assert all("first-call" not in f.message for f in checked.report.findings), str(checked.report)


def test_graph_guard_takes_warmup():
    producer = P.FirstCallSetup(DEVICE)
    with gc.GraphGuard(DEVICE, producer.step, (producer,), warmup=1, on_failure="ignore") as guard:
        producer.step()
    assert guard.report.ok and guard.eager_calls == 2, str(guard.report)
    producer = P.FirstCallSetup(DEVICE)
    with gc.GraphGuard(DEVICE, producer.step, (producer,), on_failure="ignore") as guard:
        producer.step()
    assert guard.report.ok and guard.eager_calls == 3, str(guard.report)


def test_a_guarded_block_unlike_its_reference_stays_reported_and_keeps_its_own_graph():
    """The retry captures the reference again; a guarded block is the user's own code, so
    it must still issue what that capture issues, and the graph handed back is the block's."""
    producer = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(DEVICE, producer.step, (producer,), on_failure="ignore") as guard:
        producer.frame = 0
        P.HostCounter.step(producer)  # another kernel than the reference's
    assert guard.eager_calls == 3 and "launch-sequence-drift" in guard.report.kinds(), str(guard.report)
    assert any("the reference's later capture" in f.message for f in guard.report.findings), str(guard.report)
    assert any("a guarded block must issue what reference= issues" in n for n in guard.report.notes), str(guard.report)
    assert [r.kernel for r in guard.checked.trace] == ["tests.kernels.counter_step"]  # the block's, not the reference's
    assert any("the graph returned is the guarded block's own capture" in n for n in guard.report.notes)


class Lighter(P.FirstCallSetup):
    """A step of two launches, and a lighter reference= of one (every other call's set-up makes the retry run)."""

    def lighter(self):
        if not self.ready:
            self.x.fill_(1.0)
            self.ready = True

    def step(self):
        super().step()
        self.launch(K.add_one, [self.x])


def test_a_retry_captures_the_call_not_a_different_reference():
    producer = Lighter(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), reference=producer.lighter,
                         on_failure="ignore")  # fmt: skip
    assert "launch-sequence-drift" in checked.report.kinds(), str(checked.report)  # the reference does less
    assert [r.kernel for r in checked.trace] == ["tests.kernels.integrate", "tests.kernels.add_one"]  # step's graph


class DriftEveryOtherCall(P.Producer):
    """x += 1 a step; every other call one more launch: a real drift, retried."""

    def __init__(self, device):
        super().__init__(device)
        self.calls = 0

    def step(self):
        self.calls += 1
        if self.calls % 2 == 0:
            self.launch(K.add_one, [self.v])
        self.launch(K.add_one, [self.x])


def test_a_fallback_recapture_takes_one_step_per_launch():
    """A recapture's reference call is that launch's one step: no retry adds more."""
    producer = DriftEveryOtherCall(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), fallback="recapture", on_failure="ignore")
    before = producer.x.numpy()[0]
    checked.launch()
    assert producer.x.numpy()[0] - before == 1.0 and checked.fallback.recaptures == 1


class RaisesOnTheThirdCall(P.FirstCallSetup):
    def step(self):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 3:
            raise KeyError("user error on the third call")
        super().step()


def test_an_error_in_a_retry_call_propagates_and_says_it_came_from_the_retry():
    producer = RaisesOnTheThirdCall(DEVICE)
    with pytest.raises(KeyError, match="third call") as raised:
        gc.capture(producer.step, device=DEVICE, owners=(producer,))
    if sys.version_info >= (3, 11):
        assert any("calling the step again to settle its verdict" in n for n in raised.value.__notes__)
    assert not _warp.hooks_installed() and not _warp.capture_in_progress(DEVICE)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_warmup_is_checked(bad):
    with pytest.raises(ValueError, match="warmup must be None"):
        gc.CaptureOptions(warmup=bad)


def test_warmup_needs_a_reference():
    producer = P.FirstCallSetup(DEVICE)
    with pytest.raises(ValueError, match="warmup=2 needs reference="):
        gc.GraphGuard(DEVICE, None, (producer,), warmup=2)
    with pytest.raises(ValueError, match="warmup=1 needs reference="):
        gc.capture(producer.step, device=DEVICE, owners=(producer,), reference=False, warmup=1)


def test_verify_replay_steps_the_twin_as_often_as_the_capture_called_the_step():
    report = gc.verify_replay(P.FirstCallSetup, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


# -- the command line and the marker ------------------------------------------------------

FACTORY = """
from tests.producers import FirstCallSetup

def make():
    return FirstCallSetup("cpu")
"""

SCRIPT = """
import warp as wp
from tests.producers import FirstCallSetup

sim = FirstCallSetup("cpu")
with wp.ScopedCapture(device="cpu") as capture:
    sim.step()
wp.capture_launch(capture.graph)
"""


def test_check_takes_warmup(tmp_path):
    (tmp_path / "firstcall.py").write_text(FACTORY)
    result = graphcheck("check", "firstcall:make", "--device", "cpu", "--warmup", "1", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = [r for r in json.loads(result.stdout)["reports"] if r["source"] == "validate"]
    assert report["status"] == "passed" and not any("once more" in n for n in report["notes"])
    strict = graphcheck("check", "firstcall:make", "--device", "cpu", "--warmup", "0", cwd=tmp_path)
    assert strict.returncode == 1 and "warmup=1" in strict.stdout, strict.stdout
    bad = graphcheck("check", "firstcall:make", "--warmup", "-1", cwd=tmp_path)
    assert bad.returncode == 2 and "argument --warmup: must be at least 0, got -1" in bad.stderr, bad.stderr
    values = graphcheck("check", "firstcall:make", "--values", "--warmup", "1", cwd=tmp_path)
    assert values.returncode == 2 and "--warmup applies to the capture check" in values.stderr, values.stderr


def test_run_refuses_warmup_and_reports_the_first_call_the_program_captured(tmp_path):
    script = tmp_path / "firstcall_run.py"
    script.write_text(SCRIPT)
    refused = graphcheck("run", "--warmup", "1", str(script))
    assert refused.returncode == 2 and "--warmup 1 does not apply to run" in refused.stderr, refused.stderr
    assert "graphcheck check MODULE:FACTORY --warmup N" in refused.stderr
    # The program captures its first call, set-up included: every replay repeats the fill, which
    # later eager calls do not. The capture is the program's own, so that is what is reported.
    result = graphcheck("run", "--reference-call", "--json", "--output", str(tmp_path / "r.json"), str(script))
    assert result.returncode == 1, result.stdout + result.stderr
    (report,) = [r for r in json.loads((tmp_path / "r.json").read_text())["reports"] if r["source"] == "capture"]
    (finding,) = report["findings"]
    assert finding["kind"] == "launch-sequence-drift" and finding["kernel"] == "array.fill_", finding
    assert "issued only by the capture" in finding["message"], finding["message"]


def test_the_marker_refuses_warmup(inner):  # noqa: F811 (the fixture)
    inner.makepyfile(
        test_marked=textwrap.dedent(
            """
            import pytest

            @pytest.mark.graphcheck(device="cpu", warmup=1)
            def test_warmed_up():
                pass
            """
        )
    )
    result = run_inner(inner, "--strict-markers", "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*graphcheck(warmup=1): the marker takes no warm-up calls*"])

"""A difference only the first call has, of every kind, is settled by later calls.

Each producer below differs on its first call only (``mode="first"``: a warm start, a first step
size, a lazy fill, an initial swap...) or on every other call (``mode="every_other"``, the one-line
twin). graphcheck compares the reference call with the capture; where they differ and no
``warmup`` is given, it replays the capture, calls the step once more and captures it again, and
compares that call with the new capture. The first-call twin then passes, its graph holds the
steady state and replays like an eagerly stepped twin; the every-other-call twin stays reported,
and its replay differs from eager stepping. Each kernel changes the state every step, so a replay
that did nothing would differ too.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K, producers as P

DEVICE = "cpu"
N = P.N


class Differs(P.Producer):
    """A step whose ``special`` value is used on its first call only, or on every other call."""

    mode = "first"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.calls = 0

    @property
    def special(self) -> bool:
        return self.calls == 1 if self.mode == "first" else self.calls % 2 == 1

    def step(self):
        self.calls += 1
        self.work()

    def work(self):
        raise NotImplementedError


class Scalar(Differs):
    """A warm start: a smaller step size on the first call."""

    def work(self):
        self.launch(K.integrate, [self.x, self.v, 0.5 if self.special else 0.01])


class Dim(Differs):
    """Half the particles on the first call (a warm-up on the first batch)."""

    def work(self):
        self.launch(K.integrate, [self.x, self.v, 0.01], dim=N // 2 if self.special else N)


class FillValue(Differs):
    """An accumulator filled with a first value on the first call, reset to zero after."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.acc = wp.zeros(N, dtype=float, device=device)

    def work(self):
        self.acc.fill_(3.0 if self.special else 0.0)
        self.launch(K.add_one, [self.acc])
        self.launch(K.axpy, [self.acc, self.x, 1.0])


class CopyRange(Differs):
    """Half the state copied out on the first call, all of it after."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.out = wp.zeros(N, dtype=float, device=device)

    def work(self):
        self.launch(K.add_one, [self.x])
        wp.copy(self.out, self.x, count=N // 2 if self.special else N)
        self.launch(K.axpy, [self.out, self.v, 0.5])


class Swap(Differs):
    """The pair put in order once, after the first call (an initial swap)."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.y = wp.zeros(N, dtype=float, device=device)

    def work(self):
        self.launch(K.add_one, [self.x])
        self.launch(K.axpy, [self.x, self.y, 1.0])
        if self.special:
            self.x, self.y = self.y, self.x


class StructField(Differs):
    """A struct's step size set on every call: a first value, then the steady one."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.params = K.Params()
        self.params.scratch = wp.zeros(N, dtype=float, device=device)

    def work(self):
        self.params.dt = 0.5 if self.special else 0.01
        self.launch(K.add_one, [self.params.scratch])
        self.launch(K.with_struct, [self.x, self.params])


class CommandParam(Differs):
    """A recorded wp.Launch command whose step size is set on every call."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.cmd = wp.launch(K.integrate, dim=N, inputs=[self.x, self.v, 0.0], device=device, record_cmd=True)

    def work(self):
        self.cmd.set_param_at_index(2, 0.5 if self.special else 0.01)
        self.cmd.launch()


KINDS = {
    Scalar: "scalar-drift",
    Dim: "dim-drift",
    FillValue: "copy-drift",
    CopyRange: "copy-drift",
    Swap: "buffer-drift",
    StructField: "scalar-drift",
    CommandParam: "scalar-drift",
}


def _twin(cls, mode):
    return type(f"{cls.__name__}_{mode}", (cls,), {"mode": mode})


@pytest.mark.parametrize("cls", list(KINDS), ids=lambda c: c.__name__)
def test_a_difference_on_the_first_call_only_is_settled_by_later_calls(cls):
    make = _twin(cls, "first")
    producer = make()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)
    assert checked.eager_calls == 3  # the reference call, the first capture's replay, one more eager call
    (note,) = [n for n in checked.report.notes if "once more" in n]
    assert "matched" in note and "two extra steps" in note and "the graph returned is the new capture" in note
    assert KINDS[cls] in note  # says what differed
    # The graph holds the steady state: its replays equal eager stepping, step for step.
    report = gc.verify_replay(make, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


@pytest.mark.parametrize("cls", list(KINDS), ids=lambda c: c.__name__)
def test_a_difference_on_every_other_call_stays_reported_and_replays_wrong(cls):
    make = _twin(cls, "every_other")
    producer = make()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {KINDS[cls]}, str(checked.report)
    assert checked.eager_calls == 3 and any("differ too" in n for n in checked.report.notes)
    report = gc.verify_replay(make, steps=4, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)


@pytest.mark.parametrize("cls", [Scalar, FillValue], ids=lambda c: c.__name__)
def test_with_warmup_given_there_is_no_retry(cls):
    producer = _twin(cls, "first")()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore", warmup=0)
    assert set(checked.report.kinds()) == {KINDS[cls]} and checked.eager_calls == 1, str(checked.report)
    producer = _twin(cls, "first")()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), warmup=1)
    assert checked.report.ok and checked.eager_calls == 2, str(checked.report)


def test_a_counter_is_still_reported_after_the_later_calls():
    producer = P.HostCounter(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "scalar-drift" and checked.eager_calls == 3
    assert "3 in the reference call, 4 captured" in finding.message  # the later calls, compared


def test_a_growing_list_is_still_reported_after_the_later_calls():
    producer = P.GrowingDim(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"dim-drift"} and checked.eager_calls == 3, str(checked.report)


def test_graph_guard_settles_a_first_call_scalar_and_hands_back_the_new_capture():
    producer = _twin(Scalar, "first")()
    with gc.GraphGuard(DEVICE, producer.step, (producer,)) as guard:
        producer.step()  # the block: the second call, steady already
    assert guard.report.ok and guard.eager_calls == 3, str(guard.report)
    assert any("the graph returned is the new capture" in n for n in guard.report.notes)


def test_checking_disabled_takes_no_later_call(monkeypatch):
    monkeypatch.setenv("GRAPHCHECK_DISABLE", "1")
    producer = _twin(Scalar, "first")()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.eager_calls == 0 and producer.calls == 1  # the capture only, as wp.ScopedCapture
    assert not checked.report.ok and "GRAPHCHECK_DISABLE" in str(checked.report)


def test_a_site_settled_before_is_compared_with_its_validated_capture_without_a_retry():
    producer = _twin(Scalar, "first")()
    reports = []
    for _ in range(2):  # one capture site, validated on the first pass
        checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
        reports.append(checked)
    first, second = reports
    assert first.eager_calls == 3 and first.report.ok
    assert second.eager_calls == 0 and second.report.ok, str(second.report)
    assert any("validated before" in n for n in second.report.notes)
    assert producer.calls == 5  # four for the first verdict, the capture for the second
    x = producer.x.numpy().copy()
    second.launch()
    np.testing.assert_allclose(producer.x.numpy(), x + 0.01, rtol=1e-6)  # the steady step size


# -- one cause, one finding, in the GraphGuard form -------------------------------------------
# A guarded block is the user's own code: after the later calls graphcheck compares its capture
# with the reference's new capture too, which sees again the drift the later calls showed.


class TapeWithoutReset(P.Producer):
    """A wp.Tape reused without reset(): each call's backward runs the adjoint of every call so far."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        P._tape_buffers(self, device)

    def step(self):
        with self.tape:
            self.launch(K.axpy, [self.x, self.y, 1.0])  # y += x: each adjoint adds y's gradient to x's
        self.tape.backward(grads={self.y: self.seed})
        self.launch(K.axpy, [self.x.grad, self.v, -0.1])


class AdaptiveSubsteps(P.Producer):
    """A substep count the host picks each call: one to three launches."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.calls = 0

    def step(self):
        self.calls += 1
        for _ in range(1 + self.calls % 3):
            self.launch(K.integrate, [self.x, self.v, 0.01])


class ClosureOverTheFrame(P.Producer):
    """A kernel declared in the step, closing over the frame number: other code every call."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.frame = 0

    def step(self):
        self.frame += 1
        self.launch(P._offset_kernel(float(self.frame)), [self.x])


@pytest.mark.parametrize("cls", [TapeWithoutReset, AdaptiveSubsteps, ClosureOverTheFrame], ids=lambda c: c.__name__)
def test_a_guarded_block_reports_one_cause_once(cls):
    producer = cls()
    with gc.GraphGuard(DEVICE, producer.step, (producer,), on_failure="ignore") as guard:
        producer.step()
    assert [f.kind for f in guard.report.findings] == ["launch-sequence-drift"], str(guard.report)
    assert guard.eager_calls == 3 and any("differ too" in n for n in guard.report.notes)
    checked = gc.capture(cls().step, device=DEVICE, on_failure="ignore")  # the same verdict
    assert [f.kind for f in checked.report.findings] == ["launch-sequence-drift"], str(checked.report)
    report = gc.verify_replay(cls, steps=4, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)


def test_a_guarded_block_unlike_its_reference_is_still_reported():
    producer = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(DEVICE, producer.step, (producer,), on_failure="ignore") as guard:
        producer.frame = 0
        P.HostCounter.step(producer)  # another kernel than the reference's: the later calls match
    (finding,) = guard.report.findings
    assert finding.kind == "launch-sequence-drift" and "the reference's later capture" in finding.message


def test_work_on_the_second_call_only_is_reported_as_the_first_capture_differs():
    # Over four calls it looks like work every third call from the second: not settled.
    producer = _twin(Scalar, "first")()
    producer.calls = -1  # the special value falls on the second call
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"scalar-drift"}, str(checked.report)
    assert any("the first capture differs from the new one" in n for n in checked.report.notes)
    assert any("the first capture" in f.message for f in checked.report.findings)


# -- drift that begins after the captured call (docs/limits.md) -------------------------------


class StepSizeCut(P.Producer):
    """The step size is cut at the sixth call: every call graphcheck compares is alike."""

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.calls = 0

    def step(self):
        self.calls += 1
        self.launch(K.integrate, [self.x, self.v, 0.01 if self.calls < 6 else 0.005])


def test_drift_that_begins_after_the_captured_call_is_seen_only_by_stepping_longer():
    producer = StepSizeCut()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and checked.eager_calls == 1  # the two calls compared are alike
    assert gc.verify_replay(StepSizeCut, steps=3, device=DEVICE).ok  # not reached yet
    report = gc.verify_replay(StepSizeCut, steps=8, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)  # the remedy: step past it


# -- the conformance kit settles alike -------------------------------------------------------


@pytest.mark.parametrize("calls", [2, 3, 5])
@pytest.mark.parametrize("cls", list(KINDS), ids=lambda c: c.__name__)
def test_the_conformance_kit_settles_a_first_call_difference_as_capture_does(cls, calls):
    report = gc.check_producer(_twin(cls, "first"), calls=calls, device=DEVICE, on_failure="ignore")
    assert report.ok, str(report)
    extra = max(4 - calls, 0)
    (note,) = [n for n in report.notes if "calls 1 and 2 differed" in n]
    assert KINDS[cls] in note and "matched" in note, note
    assert (f"{extra} extra step" in note) if extra else ("no extra step" in note), note


@pytest.mark.parametrize("cls", list(KINDS), ids=lambda c: c.__name__)
def test_the_conformance_kit_still_reports_a_difference_on_every_other_call(cls):
    report = gc.check_producer(_twin(cls, "every_other"), calls=3, device=DEVICE, on_failure="ignore")
    assert KINDS[cls] in report.kinds(), str(report)
    assert any("differ too" in n for n in report.notes), str(report)


def test_the_conformance_kit_reports_work_on_the_second_call_only():
    def make(device=DEVICE):
        producer = _twin(Scalar, "first")(device)
        producer.calls = -1  # the special value falls on the second call
        return producer

    report = gc.check_producer(make, calls=3, device=DEVICE, on_failure="ignore")
    assert "scalar-drift" in report.kinds(), str(report)

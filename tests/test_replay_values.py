"""The replay check sees bytes a graph baked by value from objects its owners hold: a
field of a struct the owner passes, set after capture; a recorded ``wp.Launch`` rebound
with ``set_param_by_name`` or ``set_dim``. The graph replays what it baked; the check says
what changed, and the replays show it by values."""

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K, producers as P
from tests.replay_mutations import fails_when_replays_do_nothing

DEVICE = "cpu"
CHANGED_AFTER_CAPTURE = [P.StructFieldSetAfterCapture, P.CommandRebound]


def replayed_and_eager(producer, change, launches=3):
    """``producer``'s x after ``launches`` replays of its graph, and an eager twin's after as
    many steps, ``change`` applied to both after the capture."""
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    twin = producer(DEVICE)
    twin.step()  # the reference call stepped once more
    change(p)
    change(twin)
    for _ in range(launches):
        wp.capture_launch(checked.graph)
        twin.step()
    return checked, p.x.numpy(), twin.x.numpy()


@pytest.mark.parametrize("producer", CHANGED_AFTER_CAPTURE, ids=lambda p: p.__name__)
def test_a_value_changed_after_capture_is_reported_and_replays_wrong(producer):
    checked, replayed, eager = replayed_and_eager(producer, producer.after_capture)
    assert not np.allclose(replayed, eager)  # the graph kept the value it baked
    report = checked.check_replay(on_failure="ignore")
    (finding,) = report.findings
    assert finding.kind == "scalar-drift"
    assert (finding.reference, finding.captured) == (pytest.approx(0.01), pytest.approx(0.02))
    label = "owner.params" if producer is P.StructFieldSetAfterCapture else "owner.cmd"
    assert f"in {label} now" in finding.message and finding.arg in ("p.dt", "dt")


@pytest.mark.parametrize("producer", CHANGED_AFTER_CAPTURE, ids=lambda p: p.__name__)
def test_a_value_set_back_before_the_launch_is_fine_and_replays_right(producer):
    def set_and_back(p):
        p.after_capture()
        if producer is P.StructFieldSetAfterCapture:
            p.params.dt = 0.01
        else:
            p.cmd.set_param_by_name("dt", 0.01)

    checked, replayed, eager = replayed_and_eager(producer, set_and_back)
    np.testing.assert_array_equal(replayed, eager)
    assert checked.check_replay().ok


@pytest.mark.parametrize("producer", CHANGED_AFTER_CAPTURE, ids=lambda p: p.__name__)
def test_a_replay_that_does_nothing_fails_the_value_check(producer):
    # Both producers' state changes each step (the struct's kernel adds to its output).
    fails_when_replays_do_nothing(test_a_value_set_back_before_the_launch_is_fine_and_replays_right, producer)


@pytest.mark.parametrize("producer", CHANGED_AFTER_CAPTURE, ids=lambda p: p.__name__)
def test_the_probe_sees_the_change_at_the_next_launch(producer):
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    checked.launch()
    checked.launch()
    assert checked._probe is not None and checked._probe.unchanged()
    p.after_capture()
    with pytest.raises(gc.GraphCheckError, match="scalar-drift"):
        checked.launch()


def test_a_command_given_other_dimensions_is_dim_drift():
    p = P.RecordedCommand(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    p.cmd.set_dim(P.N // 2)
    assert checked._probe is None or not checked._probe.unchanged()
    (finding,) = checked.check_replay(on_failure="ignore").findings
    assert finding.kind == "dim-drift" and (finding.reference, finding.captured) == ((P.N,), (P.N // 2,))


def test_a_command_given_another_owned_buffer_is_buffer_drift():
    p = P.RecordedCommand(DEVICE)
    p.other = wp.ones(P.N, dtype=float, device=DEVICE)  # owned: no stale address, the graph writes the old one
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    p.cmd.set_param_by_name("v", p.other)
    (finding,) = checked.check_replay(on_failure="ignore").findings
    assert finding.kind == "buffer-drift" and finding.arg == "v" and "owner.cmd now" in finding.message


def test_a_struct_array_field_set_to_another_buffer_is_reported_once():
    p = P.StructFieldSetAfterCapture(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    p.params.scratch = wp.zeros(P.N, dtype=float, device=DEVICE)
    kinds = checked.check_replay(on_failure="ignore").kinds()
    assert dict(kinds) == {"stale-pointer": 1}  # the address is stale; not said again as buffer-drift


def test_two_owned_structs_with_the_same_bytes_are_not_told_apart():
    class Twins:
        def __init__(self):
            self.x = wp.zeros(P.N, dtype=float, device=DEVICE)
            self.scratch = wp.zeros(P.N, dtype=float, device=DEVICE)
            self.a, self.b = K.Params(), K.Params()
            for params in (self.a, self.b):
                params.scratch, params.dt = self.scratch, 0.01

        def step(self):
            wp.launch(K.with_struct, dim=P.N, inputs=[self.x, self.a], device=DEVICE)

    t = Twins()
    checked = gc.capture(t.step, device=DEVICE, owners=(t,))
    assert checked.baked_values == []  # which one was passed cannot be told by its bytes
    t.b.dt = 0.5  # not passed: no alarm
    assert checked.check_replay().ok


def test_the_probe_keeps_no_struct_or_command_alive():
    import gc as collector
    import weakref

    p = P.CommandRebound(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    checked.launch()
    ref = weakref.ref(p.cmd)
    p.cmd = wp.launch(K.integrate, dim=P.N, inputs=[p.x, p.v, 0.01], device=DEVICE, record_cmd=True)
    collector.collect()
    assert ref() is None
    assert not checked._probe.unchanged()


def test_a_site_validated_before_checks_what_its_own_capture_baked():
    p = P.StructFieldSetAfterCapture(DEVICE)
    graphs = []
    for dt in (0.01, 0.02):
        p.params.dt = dt
        # The second capture is compared with the validated one (which baked 0.01): scalar-drift there.
        graphs.append(gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore"))
    assert graphs[1].check_replay().ok  # it baked 0.02, which the owner holds
    p.params.dt = 0.03
    (finding,) = graphs[1].check_replay(on_failure="ignore").findings
    assert (finding.reference, finding.captured) == (pytest.approx(0.02), pytest.approx(0.03))

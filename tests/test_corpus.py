"""The public corpus on the CPU: every unsafe pattern caught with its kind, safe ones pass."""

import functools

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck.buffers import arrays_of
from tests import kernels as K, producers as P
from tests.internals import function_name
from tests.releases import CAPTURE_ERROR_ON_READBACK, CPU_GRAPH_RECORDS_HASH_GRID, TEXTURES
from tests.replay_mutations import fails_when_replays_do_nothing

DEVICE = "cpu"


def _marked(producer):
    """The producer, skipped on a Warp that lacks what it needs."""
    marks = [
        mark
        for mark, needs in (
            (CAPTURE_ERROR_ON_READBACK, {P.ReductionReadback}),
            (CPU_GRAPH_RECORDS_HASH_GRID, P.NEEDS_HASH_GRID_RECORDS),
            (TEXTURES, P.NEEDS_TEXTURES),
        )
        if producer in needs
    ]  # fmt: skip
    return pytest.param(producer, marks=marks) if marks else producer


def _name(producer):
    return producer.__name__


UNSAFE = [_marked(p) for p in P.UNSAFE]
SAFE = [_marked(p) for p in P.SAFE]
STALE = [_marked(p) for p in P.STALE]


@pytest.mark.parametrize("producer", UNSAFE, ids=_name)
def test_unsafe_producer_is_caught_with_its_kind(producer):
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="log")
    assert set(checked.report.kinds()) == producer.kinds_on(DEVICE), str(checked.report)
    for finding in checked.report.findings:
        assert finding.site is not None and finding.site.filename.endswith("producers.py"), finding
        assert finding.fix and finding.fix in finding.message


@pytest.mark.parametrize("producer", UNSAFE, ids=_name)
def test_unsafe_producer_raises_by_default(producer):
    p = producer(DEVICE)
    with pytest.raises(gc.GraphCheckError) as error:
        gc.capture(p.step, device=DEVICE, owners=(p,))
    assert isinstance(error.value, AssertionError)
    assert producer.expected_on(DEVICE) in str(error.value)
    assert not error.value.report.ok


@pytest.mark.parametrize("producer", SAFE + STALE, ids=_name)
def test_safe_producer_passes_and_replays(producer):
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    assert checked.report.ok, str(checked.report)
    checked.launch()
    checked.launch()
    assert checked.check_replay().ok


@pytest.mark.parametrize("producer", [*STALE, P.ContentsChangedInPlace], ids=_name)
def test_replay_check_after_the_producer_changed(producer):
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    p.after_capture()
    replay = checked.check_replay(on_failure="log")
    expected = {producer.expected_replay} if producer.expected_replay else set()
    assert set(replay.kinds()) == expected, str(replay)
    if expected:
        with pytest.raises(gc.GraphCheckError, match=producer.expected_replay):
            checked.launch()


@pytest.mark.parametrize("producer", [p for p in P.STALE if p.wrong_replay_on_cpu], ids=lambda p: p.__name__)
def test_a_producer_broken_after_capture_replays_wrong(producer):
    # The replay check's claim, shown by values: after the break, replaying differs from stepping.
    eager, replayed = producer(DEVICE), producer(DEVICE)
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), replay_check="never")
    eager.step()  # as the capture's reference call did
    kept = [array for _, array in arrays_of(eager, replayed)]  # what the graph steps stays alive
    eager.after_capture()
    replayed.after_capture()
    for _ in range(3):
        eager.step()
        checked.launch()
    ours, theirs = dict(arrays_of(eager, root="p")), dict(arrays_of(replayed, root="p"))
    assert ours.keys() == theirs.keys()
    assert any(not np.array_equal(ours[path].numpy(), theirs[path].numpy()) for path in ours), "replayed alike"
    del kept


def test_owners_default_to_the_bound_method_s_object():
    p = P.ModuleGlobalScratch(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, on_failure="log")
    assert set(checked.report.kinds()) == {"foreign-buffer"}
    (finding,) = checked.report.findings
    assert "none of the 2 owned buffers" in finding.message


@pytest.mark.parametrize("bind", ["default", "partial"])
def test_owners_default_to_a_function_s_defaults_and_a_partial_s_arguments(bind):
    def steps():
        x, v = wp.zeros(P.N, dtype=float, device=DEVICE), wp.ones(P.N, dtype=float, device=DEVICE)
        if bind == "default":
            return x, lambda x=x, v=v: wp.launch(K.integrate, dim=P.N, inputs=[x, v, 0.1], device=DEVICE)
        return x, functools.partial(wp.launch, K.integrate, dim=P.N, inputs=[x, v, 0.1], device=DEVICE)

    x, step = steps()
    checked = gc.capture(step)  # owners: the function (its defaults) or the partial (its arguments)
    assert checked.report.ok, str(checked.report)
    twin_x, twin_step = steps()
    for _ in range(3):
        twin_step()
        checked.launch()
    twin_step()  # as the reference call did
    np.testing.assert_array_equal(x.numpy(), twin_x.numpy())


def test_the_corpus_is_large_enough():
    assert len(P.UNSAFE) + len(P.STALE) + len(P.SAFE) >= 25
    kinds = {p.expected for p in P.UNSAFE} | {p.expected_replay for p in P.STALE}
    assert kinds >= {
        "scalar-drift", "buffer-drift", "per-call-allocation", "launch-sequence-drift", "dim-drift",
        "copy-drift", "foreign-buffer", "stale-pointer",
    }  # fmt: skip


@pytest.mark.parametrize("producer", SAFE, ids=_name)
def test_safe_producer_replays_like_an_eager_twin(producer):
    report = gc.verify_replay(producer, steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


@pytest.mark.parametrize("producer", [_marked(p) for p in P.UNSAFE if p.wrong_replay_on_cpu], ids=_name)
def test_unsafe_producer_replays_wrong(producer):
    # The verdict is a claim: where the CPU can show it, replaying differs from stepping.
    report = gc.verify_replay(producer, steps=4, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)


@pytest.mark.parametrize("producer", [p for p in P.ALL if p.expected_strict], ids=_name)
def test_strict_ownership_reports_device_temporaries(producer):
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="log", strict_ownership=True)
    assert set(checked.report.kinds()) == {producer.expected_strict}, str(checked.report)
    assert "strict_ownership" in checked.report.findings[0].message


def test_graph_owned_temporaries_are_noted_with_their_bytes():
    p = P.ZerosPerCall(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    assert checked.report.ok
    assert any("1 graph-owned allocation made during the call (256 bytes)" in n for n in checked.report.notes)


def test_staging_fed_between_replays_replays_like_an_eager_twin():
    """The canonical pattern stays clean, and its replays upload each frame's data."""
    eager, captured = P.StagingFedBetweenReplays(DEVICE), P.StagingFedBetweenReplays(DEVICE)
    eager.feed(1)
    eager.step()
    captured.feed(1)
    checked = gc.capture(captured.step, device=DEVICE, owners=(captured,))
    assert checked.report.ok, str(checked.report)
    for frame in range(2, 6):
        eager.feed(frame)
        eager.step()
        captured.feed(frame)
        checked.launch()
        np.testing.assert_array_equal(eager.x.numpy(), captured.x.numpy())


def test_staging_written_in_the_call_names_the_buffer_and_the_values():
    p = P.StagingWrittenInCall(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.arg) == ("copy-drift", "src"), str(checked.report)
    # The values of the later calls a retry compares (the third and the fourth).
    assert "owner.staging" in finding.message and "element [0]: 0.75 in the reference call, 1.0 captured" in (
        finding.message
    )
    assert "outside the captured call" in finding.fix


class LargeStaging:
    """Staging of 1 MiB (compared by checksum, not by its bytes) uploaded by the call."""

    def __init__(self, written_in_call):
        self.written_in_call = written_in_call
        self.staging = wp.zeros(1 << 18, dtype=float, device=DEVICE)
        self.host = self.staging.numpy()
        self.v = wp.zeros(1 << 18, dtype=float, device=DEVICE)
        self.x = wp.zeros(1 << 18, dtype=float, device=DEVICE)
        self.frame = 0

    def step(self):
        if self.written_in_call:
            self.frame += 1
            self.host[12345] = 0.25 * self.frame  # one element of a megabyte, this frame's data
        wp.copy(self.v, self.staging)
        wp.launch(K.integrate, dim=self.x.size, inputs=[self.x, self.v, 0.1], device=DEVICE)


def test_large_staging_written_in_the_call_is_copy_drift_and_fed_between_replays_is_clean():
    p = LargeStaging(written_in_call=True)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    assert [(f.kind, f.arg) for f in checked.report.findings] == [("copy-drift", "src")], str(checked.report)
    eager, captured = LargeStaging(True), LargeStaging(True)
    checked = gc.capture(captured.step, device=DEVICE, owners=(captured,), on_failure="ignore")
    for _ in range(checked.eager_calls + 1):
        eager.step()
    checked.launch()  # the first replay uploads the capture call's frame: right
    np.testing.assert_array_equal(eager.x.numpy(), captured.x.numpy())
    eager.step()
    checked.launch()  # the next uploads it again, not this frame's data
    assert not np.array_equal(eager.x.numpy(), captured.x.numpy())
    p = LargeStaging(written_in_call=False)
    assert gc.capture(p.step, device=DEVICE, owners=(p,)).report.ok


@pytest.mark.parametrize("producer", [P.NestedGraphLaunch, P.LazySelfCapture], ids=_name)
def test_a_graph_launched_in_a_cpu_capture_is_one_capture_error(producer):
    # A solver that captures itself lazily is the same cause, not a sequence drift. Found by
    # the graph cross-check on every supported release.
    p = producer(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "capture-error" and finding.kernel == "wp.capture_launch", str(checked.report)
    # Found by the graph cross-check: the outer graph holds none of the inner graph's work.
    expected = "will not replay the launched graph's work: it holds 0 of that graph's 1 operation(s): not the launch of"
    assert f"{expected} integrate" in finding.message, finding.message
    assert finding.site is not None and finding.site.function == function_name(f"{producer.__name__}.step")


def test_a_numpy_argument_is_a_capture_error_at_the_launch_not_a_traceback():
    p = P.NumpyArgument(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "capture-error" and checked.graph is None
    assert finding.message.startswith("a numpy array passed to wp.launch: the capture failed with AttributeError")
    assert "keep a device array" in finding.fix
    assert finding.site is not None and finding.site.function == function_name("Producer.launch")


@TEXTURES
def test_a_texture_remade_per_call_is_one_finding_naming_the_texture():
    p = P.TextureRemadePerCall(DEVICE)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "per-call-allocation" and "wp.Texture2D" in finding.message, str(checked.report)


def _guarded(check, producer):
    marks = getattr(_marked(producer), "marks", ())
    return pytest.param(check, (producer,), id=producer.__name__, marks=marks)


@pytest.mark.parametrize(
    "check, args",
    [
        *[_guarded(test_safe_producer_replays_like_an_eager_twin, p) for p in P.SAFE],
        *[
            pytest.param(test_owners_default_to_a_function_s_defaults_and_a_partial_s_arguments, (bind,), id=bind)
            for bind in ("default", "partial")
        ],
        pytest.param(test_staging_fed_between_replays_replays_like_an_eager_twin, (), id="staging_fed"),
    ],
)
def test_a_replay_that_does_nothing_fails_every_value_check(check, args):
    # Every safe producer's state changes each step, so the proof by values can fail.
    fails_when_replays_do_nothing(check, *args)

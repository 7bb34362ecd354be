"""GraphGuard and capture(): the user-facing verdict, its options and its errors."""

import json
import logging
import re
import warnings

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K, producers as P
from tests.internals import _warp
from tests.releases import CAPTURE_ERROR_ON_READBACK, CPU_GRAPH_RECORDS_NATIVES

DEVICE = "cpu"


def test_graph_guard_validates_a_block_against_its_reference():
    sim = P.HostCounter(DEVICE)
    with pytest.raises(gc.GraphCheckError) as error:
        with gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,)):
            sim.step()
    assert set(error.value.report.kinds()) == {"scalar-drift"}


def test_graph_guard_on_a_safe_block_launches_its_graph():
    sim = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,)) as guard:
        sim.step()
    assert guard.report.ok and guard.graph is not None
    before = sim.x.numpy().copy()
    guard.launch()
    guard.launch()
    # The reference call advanced the counter to 1; the replays read 1, then 2.
    assert sim.x.numpy()[0] == before[0] + 1 + 2
    assert sim.counter.numpy()[0] == 3


def test_graph_guard_without_a_reference_still_finds_allocations_and_foreign_buffers():
    sim = P.ArrayFromNumpyPerCall(DEVICE)
    with gc.GraphGuard(device=DEVICE, owners=(sim,), on_failure="log") as guard:
        sim.step()
    assert set(guard.report.kinds()) == {"per-call-allocation"}
    assert "compare" not in guard.report.checks


def test_the_users_exception_propagates_unchanged_and_nothing_is_left_behind():
    sim = P.DeviceCounter(DEVICE)

    class Boom(Exception):
        pass

    boom = Boom("from the user")
    with pytest.raises(Boom) as error, gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,)):
        sim.step()
        raise boom
    assert error.value is boom
    assert not _warp.hooks_installed()
    assert not _warp.capture_in_progress(DEVICE)


def test_after_the_block_raised_the_guards_report_is_a_not_checked_one_saying_so():
    sim = P.DeviceCounter(DEVICE)
    with pytest.raises(KeyError), gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,)) as guard:
        sim.step()
        raise KeyError("in block")
    assert guard.report is not None and guard.report.status == "not-checked"
    assert not guard.report  # a report is true only when it passed
    assert guard.report.not_run == (("all checks", "the guarded block raised KeyError: nothing was checked"),)
    # Warp is usable again: a new capture works.
    with wp.ScopedCapture(device=DEVICE):
        sim.step()


def test_an_exception_in_the_reference_call_propagates():
    def reference():
        raise KeyError("reference")

    with pytest.raises(KeyError, match="reference"):
        with gc.GraphGuard(device=DEVICE, reference=reference, owners=(P.DeviceCounter(DEVICE),)):
            pass
    assert not _warp.capture_in_progress(DEVICE) and not _warp.hooks_installed()


@CAPTURE_ERROR_ON_READBACK
def test_a_capture_error_becomes_a_finding_with_its_site():
    sim = P.ReductionReadback(DEVICE)
    with pytest.raises(gc.GraphCheckError) as error:
        gc.capture(sim.step, device=DEVICE, owners=(sim,))
    (finding,) = error.value.report.findings
    assert finding.kind == "capture-error"
    assert finding.site.filename.endswith("producers.py")
    assert "array_sum" in finding.message
    assert isinstance(error.value.__cause__, NotImplementedError)
    assert not _warp.capture_in_progress(DEVICE)


@CAPTURE_ERROR_ON_READBACK
def test_a_capture_error_with_on_failure_log_gives_no_graph(caplog):
    sim = P.ReductionReadback(DEVICE)
    with caplog.at_level(logging.WARNING, logger="graphcheck"):
        checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="log")
    assert checked.graph is None and not checked.ok
    assert "capture-error" in caplog.text
    with pytest.raises(RuntimeError, match="the capture failed"):
        checked.launch()


def test_on_failure_warn_keeps_running():
    sim = P.HostCounter(DEVICE)
    with pytest.warns(gc.GraphCheckWarning, match="scalar-drift"):
        checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="warn")
    checked.launch()


def test_clear_errors_for_bad_input():
    sim = P.DeviceCounter(DEVICE)
    with pytest.raises(TypeError, match="reference= must be a callable.*got 42"):
        gc.GraphGuard(device=DEVICE, reference=42)
    with pytest.raises(TypeError, match="capture\\(\\) needs a callable"):
        gc.capture("sim.step", device=DEVICE)
    with pytest.raises(TypeError, match="owners= takes the objects.*got 'sim'"):
        gc.capture(sim.step, device=DEVICE, owners=("sim",))
    with pytest.raises(ValueError, match="hold no Warp arrays"):
        gc.capture(sim.step, device=DEVICE, owners=(object(),))
    with pytest.raises(ValueError, match="on_failure must be one of"):
        gc.capture(sim.step, device=DEVICE, on_failure="explode")
    with pytest.raises(ValueError, match="unknown finding kind 'scalar-drfit'"):
        gc.capture(sim.step, device=DEVICE, allow=["scalar-drfit"])
    with pytest.raises(ValueError, match="replay_check must be one of"):
        gc.capture(sim.step, device=DEVICE, replay_check="sometimes")
    assert not _warp.hooks_installed()


@pytest.mark.skipif(_warp.cuda_available(), reason="needs a machine without CUDA")
def test_a_cuda_device_without_cuda_is_a_clear_error(capfd):
    sim = P.DeviceCounter(DEVICE)
    capfd.readouterr()
    with pytest.raises(ValueError, match="no CUDA device; use device='cpu'"):
        gc.capture(sim.step, device="cuda")
    with pytest.raises(ValueError, match="cannot capture on device 'cuda:0'"):
        gc.GraphGuard(device="cuda:0")
    assert "Warp CUDA error" not in capfd.readouterr().err, "graphcheck said it before Warp called into CUDA"


def test_allow_suppresses_a_named_kind_at_a_named_kernel_and_argument():
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), allow=[gc.Allow("scalar-drift", "counter_step")])
    assert checked.ok and len(checked.report.suppressed) == 1
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), allow="scalar-drift")
    assert checked.ok
    sim = P.HostCounter(DEVICE)
    with pytest.raises(gc.GraphCheckError):
        gc.capture(sim.step, device=DEVICE, owners=(sim,), allow=[gc.Allow("scalar-drift", arg="other")])


def test_report_text_groups_findings_and_to_dict_is_json_ready():
    class TwoBugs(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.frame = 0

        def step(self):
            self.frame += 1
            wp.launch(K.counter_step, dim=P.N, inputs=[self.x, self.frame], device=self.device)
            upload = wp.array(np.full(P.N, self.frame, dtype=np.float32), device=self.device)
            wp.launch(K.square, dim=P.N, inputs=[upload, self.x], device=self.device)

    sim = TwoBugs(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="log")
    text = str(checked.report)
    name = "test_report_text_groups_findings_and_to_dict_is_json_ready.<locals>.TwoBugs.step"
    assert text.splitlines()[0] == f"graphcheck: 2 findings in {name} on cpu (2 operations)"
    assert "scalar-drift (1):" in text and "per-call-allocation (1):" in text
    data = json.loads(json.dumps(checked.report.to_dict()))
    assert data["ok"] is False
    assert [f["kind"] for f in data["findings"]] == ["scalar-drift", "per-call-allocation"]
    assert data["findings"][0]["reference"] == 3 and data["findings"][0]["captured"] == 4  # the later calls compared
    assert data["findings"][0]["site"]["file"].endswith("test_guard.py")
    assert json.loads(checked.report.to_json())["checks"] == ["compare", "allocations", "ownership", "graph"]


def test_every_finding_names_kernel_argument_index_site_values_and_fix():
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="log")
    (f,) = checked.report.findings
    assert (f.kind, f.kernel, f.arg, f.index) == ("scalar-drift", "tests.kernels.counter_step", "step", 0)
    assert (f.reference, f.captured) == (3, 4)  # the later calls a retry compares
    for part in ("tests.kernels.counter_step", "'step'", "operation #0", "producers.py:", "3 in the reference call",
                 "4 captured", "(Δ +1)", "fix: pass a value"):  # fmt: skip
        assert part in f.message


def test_replay_check_modes():
    sim = P.ReassignedAfterCapture(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), replay_check="never")
    sim.after_capture()
    checked.launch()  # not checked
    sim = P.ReassignedAfterCapture(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), replay_check="first")
    checked.launch()
    sim.after_capture()
    checked.launch()  # checked the first time only
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), replay_check="always")
    checked.launch()
    sim.after_capture()
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()


def test_the_environment_switch_turns_checking_off(monkeypatch):
    monkeypatch.setenv("GRAPHCHECK_DISABLE", "1")
    assert not gc.checking_enabled()
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert checked.report.status == "not-checked" and not checked.ok
    assert "disabled" in checked.report.skipped[0][1]
    assert "NOT checked" in checked.report.headline()
    assert sim.frame == 1, "no reference call"
    sim.after_capture()
    checked.launch()
    assert not _warp.hooks_installed()


def test_a_site_validated_before_skips_the_reference_call():
    sim = P.DeviceCounter(DEVICE)
    calls = []

    def step():
        calls.append(1)
        sim.step()

    def validate():
        return gc.capture(step, device=DEVICE, owners=(sim,))

    first = validate()
    assert len(calls) == 2 and "compare" in first.report.checks
    second = validate()
    assert len(calls) == 3, "only the capture ran"
    # The reference call is skipped, never the comparison: with the capture that was validated.
    assert "compare" in second.report.checks and second.ok
    assert "compared with the capture that was validated" in second.report.notes[0]
    third = gc.capture(step, device=DEVICE, owners=(sim,), revalidate=True)
    assert len(calls) == 5 and "compare" in third.report.checks


def test_a_new_producer_at_the_same_line_is_validated_again():
    def validate(sim):
        return gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="log")

    assert validate(P.DeviceCounter(DEVICE)).ok
    assert not validate(P.HostCounter(DEVICE)).ok


def test_capture_passes_arguments_and_infers_owners_from_them():
    state = {"x": wp.zeros(8, dtype=float, device=DEVICE)}

    def step(state, alpha):
        wp.launch(K.damp, dim=8, inputs=[state["x"], alpha], device=DEVICE)

    checked = gc.capture(step, state, 0.5, device=DEVICE)
    assert checked.ok and checked.report.checks == ("compare", "allocations", "ownership", "graph")


def test_capture_options_pass_through_to_scoped_capture():
    sim = P.DeviceCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), force_module_load=False)
    assert checked.ok


def test_warp_examples_style_step_with_substeps_passes():
    class Sim:
        def __init__(self):
            self.x = wp.zeros(32, dtype=float, device=DEVICE)
            self.v = wp.ones(32, dtype=float, device=DEVICE)
            self.x_next = wp.zeros(32, dtype=float, device=DEVICE)
            self.substeps = 4

        def step(self):
            for _ in range(self.substeps):
                wp.launch(K.integrate, dim=32, inputs=[self.x, self.v, 0.01], device=DEVICE)
                wp.launch(K.copy_kernel, dim=32, inputs=[self.x, self.x_next], device=DEVICE)
                self.x, self.x_next = self.x_next, self.x

    sim = Sim()
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert checked.ok, str(checked.report)


def test_no_warning_or_log_when_the_site_is_safe(caplog):
    sim = P.DeviceCounter(DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.DEBUG, logger="graphcheck"):
            gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="warn")
    assert caplog.text == ""


def test_allowing_one_of_several_swapped_arguments_allows_the_finding():
    sim = P.OddPingPong(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), allow=[gc.Allow("buffer-drift", arg="b")])
    assert checked.ok and checked.report.suppressed[0].arg == "a, b"


def test_an_autoguard_reads_a_cpu_graph_once_and_checks_its_owners_before_each_replay(monkeypatch):
    """Before each wp.capture_launch an AutoGuard makes the check CheckedGraph.launch() makes:
    the owners' buffers, not the graph read again (it was read once, at capture)."""
    from graphcheck import _warp as graphcheck_warp
    from graphcheck.autoguard import AutoGuard

    reads = []
    read, unchanged = graphcheck_warp.read_cpu_graph, graphcheck_warp.unchanged
    monkeypatch.setattr(graphcheck_warp, "read_cpu_graph", lambda *a, **k: reads.append("read") or read(*a, **k))
    monkeypatch.setattr(graphcheck_warp, "unchanged", lambda *a, **k: reads.append("compared") or unchanged(*a, **k))
    sim = P.ReassignedAfterCapture(DEVICE)
    with AutoGuard(None) as guard:
        with wp.ScopedCapture(device=DEVICE) as capture:
            sim.step()
        assert reads == ["read"] and "graph" in guard.reports[0].checks
        for _ in range(3):
            wp.capture_launch(capture.graph)
        assert reads == ["read"]  # read once, at capture
        assert not guard.replay_reports
        sim.after_capture()
        wp.capture_launch(capture.graph)
    assert [f.kind for r in guard.replay_reports for f in r.findings] == ["stale-pointer"]
    assert reads == ["read"]


def test_allow_applies_to_replay_checks():
    sim = P.ReassignedAfterCapture(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), allow="stale-pointer")
    sim.after_capture()
    report = checked.check_replay()
    assert report.ok and len(report.suppressed) == 1


def test_replay_check_without_owners_says_so():
    sim = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(device=DEVICE) as guard:
        sim.step()
    report = guard.check_replay()
    # The graph is read again and held against the record; its addresses, without owners, are not checked.
    assert report.status == "partial" and not report.ok and report.checks == ("graph",)
    assert "NOT checked" in report.headline() and "no owners" in dict(report.skipped)["replay"]


def test_warnings_point_at_the_users_line():
    sim = P.HostCounter(DEVICE)
    with pytest.warns(gc.GraphCheckWarning) as warned:
        gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="warn")
    assert warned[0].filename == __file__
    sim = P.DeviceCounter(DEVICE)
    with pytest.warns(gc.GraphCheckWarning) as warned:
        with gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,), on_failure="warn") as guard:
            sim.frame = 0
            P.HostCounter.step(sim)  # a block that drifts
    assert warned[0].filename == __file__
    del guard


def test_differences_are_objects():
    sim = P.HostCounter(DEVICE)
    with gc.trace_launches() as first:
        sim.step()
    with gc.trace_launches() as second:
        sim.step()
    (difference,) = first.differences(second)
    assert isinstance(difference, gc.Difference)
    assert (difference.what, difference.arg, difference.value_a, difference.value_b) == ("arg", "step", 1, 2)


def test_warps_internal_operations_are_kept_for_the_graph_but_not_checked():
    sim = P.ZerosPerCall(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore", strict_ownership=True)
    internal = [r for r in checked.full_trace if r.internal]
    assert [(r.kernel, r.via) for r in internal] == [("array.zero_", "zeros")]
    assert len(checked.trace) == checked.report.operations == 2
    assert not any(r.internal for r in checked.trace)
    (finding,) = checked.report.findings
    assert finding.kind == "per-call-allocation" and "used by 1 more operation" in finding.message
    assert finding.index == 0, "operations are numbered as the user issued them"


def test_guard_launch_and_check_replay_warn_at_the_users_line():
    sim = P.ReassignedAfterCapture(DEVICE)
    with gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,), on_failure="warn") as guard:
        sim.step()
    sim.after_capture()
    with pytest.warns(gc.GraphCheckWarning) as warned:
        guard.launch()
    assert warned[0].filename == __file__
    with pytest.warns(gc.GraphCheckWarning) as warned:
        guard.check_replay()
    assert warned[0].filename == __file__


def test_a_guard_without_reference_or_owners_says_what_it_did_not_check():
    sim = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(device=DEVICE) as guard:
        sim.step()
    skipped = dict(guard.report.skipped)
    assert "no reference call" in skipped["compare"] and "no owners" in skipped["ownership"]
    assert guard.report.checks == ("allocations", "graph")
    assert guard.report.status == "partial" and not guard.report.ok
    assert "NOT checked: compare, ownership, replay" in guard.report.headline()


def test_two_foreign_buffers_are_a_buffer_drift():
    owned_array = wp.zeros(8, dtype=float, device=DEVICE)
    strangers = [wp.zeros(8, dtype=float, device=DEVICE) for _ in range(2)]
    owned = gc.BufferSet().add(owned_array, "x")
    traces = []
    for stranger in strangers:
        with gc.trace_launches() as trace:
            wp.launch(K.axpy, dim=8, inputs=[owned_array, stranger, 1.0], device=DEVICE)
        traces.append(trace)
    (difference,) = traces[0].differences(traces[1], owned)
    assert difference.arg == "y" and "foreign" in (difference.where_a or "")


def test_a_validated_site_with_the_same_buffers_compares_with_the_validated_capture_and_checks_replays():
    sim = P.ReassignedAfterCapture(DEVICE)

    def validate():
        return gc.capture(sim.step, device=DEVICE, owners=(sim,))

    first = validate()
    again = validate()
    assert again.trace is not None and "compare" in again.report.checks and again.ok
    assert "the owners hold the same buffers" in again.report.notes[0]
    again.launch()
    sim.after_capture()  # the producer reassigns a buffer the new graph uses
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        again.check_replay()
    third = validate()  # the buffers changed since the validation: record the capture again
    assert third.trace is not None and "allocations" in third.report.checks
    del first


@pytest.mark.parametrize("sync", ["synchronize", "print", "list"])
def test_on_the_cpu_what_breaks_a_cuda_capture_is_a_capture_error(sync, capsys):
    class Syncing(P.Producer):
        def step(self):
            self.launch(K.add_one, [self.x])
            if sync == "synchronize":
                wp.synchronize()
            elif sync == "print":
                print(self.x)
            else:
                self.x.list()

    sim = Syncing(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "capture-error"
    assert "works on the CPU, fails in a CUDA capture" in finding.message
    assert finding.site.filename.endswith("test_guard.py")


def test_a_capture_that_records_nothing_is_noted():
    class Idle(P.Producer):
        def step(self):
            pass

    sim = Idle(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert any("recorded no operation" in note for note in checked.report.notes)


def test_a_replaced_gradient_is_a_stale_pointer():
    class WithGrad(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.x = wp.zeros(P.N, dtype=float, device=device, requires_grad=True)

        def step(self):
            self.launch(K.add_one, [self.x])

    sim = WithGrad(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    sim.x.grad = wp.zeros(P.N, dtype=float, device=DEVICE)
    replay = checked.check_replay(on_failure="ignore")
    assert {(f.kind, f.arg) for f in replay.findings} == {("stale-pointer", "a.grad")}, str(replay)


def test_assert_pointers_within_agrees_with_the_ownership_check():
    class Overrun(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.base = wp.zeros(2 * P.N, dtype=float, device=device)
            self.head = self.base[: P.N // 2]  # owned: a short view of base...

        def step(self):
            # ...and a launch that runs past it, into memory no owned buffer holds whole.
            self.launch(K.add_one, [self.tail])

    sim = Overrun(DEVICE)
    sim.tail = wp.array(ptr=sim.head.ptr, shape=(4 * P.N,), dtype=float, device=DEVICE)
    owned = gc.buffers_of(sim.head, sim.base, root=["head", "base"])
    with gc.trace_launches() as trace:
        sim.step()
    with pytest.raises(AssertionError, match="outside the 2 allowed buffers"):
        gc.assert_pointers_within(trace, owned)


def test_an_allocation_without_a_memory_pool_is_a_capture_error_with_the_mempool_fix():
    from graphcheck import checks

    # Warp's own message when a CUDA device allocates inside a capture with its pool off.
    error = RuntimeError(
        "Failed to allocate 256 bytes on device 'cuda:0':  Failed to allocate memory during graph capture because "
        "memory pools are not enabled on device 'cuda:0'.  Try calling wp.set_mempool_enabled('cuda:0', True) "
        "before capture begins."
    )
    finding = checks.capture_failed(error, None, 2)
    assert finding.kind == "capture-error" and finding.index == 2
    assert "wp.set_mempool_enabled(device, True)" in finding.fix
    assert "memory pools are not enabled" in finding.message
    other = checks.capture_failed(RuntimeError("Cannot synchronize device while graph capture is active"), None, 0)
    assert "readbacks" in other.fix


@CPU_GRAPH_RECORDS_NATIVES
def test_a_hash_grid_rebuilt_after_capture_is_a_stale_handle():
    sim = P.HashGridRebuild(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert checked.check_replay().ok
    sim.grid = wp.HashGrid(4, 4, 4, device=DEVICE)
    replay = checked.check_replay(on_failure="ignore")
    assert {(f.kind, f.arg) for f in replay.findings} == {("stale-pointer", "grid")}, str(replay)
    assert "owner.grid.id" in replay.findings[0].message


def test_an_operation_warp_cannot_capture_is_a_capture_error_with_warps_reason():
    class StridedFill(P.Producer):
        def step(self):
            self.x[::2].fill_(1.0)

    sim = StridedFill(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "capture-error"
    assert "readbacks" not in finding.fix and "outside the captured call" in finding.fix


def test_a_body_the_reference_call_did_not_run_is_noted_not_passed():
    class Branch(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.flag = wp.zeros(1, dtype=int, device=device)  # the reference call takes on_false

        def step(self):
            wp.capture_if(
                self.flag,
                on_true=lambda: self.launch(K.add_one, [self.x]),
                on_false=lambda: self.launch(K.add_one, [self.v]),
            )

    sim = Branch(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert not checked.report.findings and checked.report.status == "partial"
    assert any(check == "compare" and "on_true body of wp.capture_if" in why and "could not be compared" in why
               for check, why in checked.report.skipped), checked.report.skipped  # fmt: skip


def test_a_swapped_structure_id_is_buffer_drift():
    class TwoGrids(P.HashGridRebuild):
        def __init__(self, device):
            super().__init__(device)
            self.other = wp.HashGrid(4, 4, 4, device=device)
            self.other.build(self.points, radius=0.25)
            self.grid.build(self.points, radius=0.25)

        def step(self):
            self.launch(K.count_neighbors, [self.grid.id, self.points, self.x])
            self.grid, self.other = self.other, self.grid

    sim = TwoGrids(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.arg) == ("buffer-drift", "grid"), str(checked.report)
    assert "owner.grid.id in the reference call, owner.other.id captured" in finding.message


def test_a_temporary_the_owner_drops_after_capture_is_still_the_graphs():
    class KeptTemp(P.Producer):
        def step(self):
            self.scratch = wp.zeros(P.N, dtype=float, device=self.device)
            self.launch(K.square, [self.x, self.scratch])
            self.launch(K.axpy, [self.scratch, self.v, 1.0])

    sim = KeptTemp(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    sim.scratch = None
    assert checked.check_replay().ok


def test_scratch_sized_by_a_host_count_is_the_same_temporary():
    class Growing(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.frame = 0

        def step(self):
            self.frame += 1
            scratch = wp.zeros(P.N + self.frame, dtype=float, device=self.device)[: P.N]
            self.launch(K.square, [self.x, scratch])
            self.launch(K.axpy, [scratch, self.v, 1.0])

    sim = Growing(DEVICE)
    assert gc.capture(sim.step, device=DEVICE, owners=(sim,)).report.ok


def test_a_mesh_refit_a_cpu_graph_does_not_replay_is_a_capture_error():
    points = wp.array(np.random.default_rng(0).random((4, 3)), dtype=wp.vec3, device=DEVICE)
    indices = wp.array(np.array([0, 1, 2, 1, 2, 3], dtype=np.int32), dtype=int, device=DEVICE)

    class Refit(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.points = points
            self.mesh = wp.Mesh(points=points, indices=indices)

        def step(self):
            self.launch(K.jitter_points, [self.points], dim=4)
            self.mesh.refit()

    sim = Refit(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    assert {(f.kind, f.kernel) for f in checked.report.findings} == {("capture-error", "mesh_refit_host")}
    # Found by the graph cross-check: the graph holds no operation for the refit.
    assert "the CPU graph will not replay it: Warp's CPU graphs have no operation for it" in (
        checked.report.findings[0].message
    )
    assert "graph" in checked.report.checks


def test_launch_tiled_compares_the_block_size_asked_for():
    class Tiled(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.calls = 0

        def step(self):
            self.calls += 1
            # On the CPU Warp runs both with one thread per block; a CUDA graph bakes 32 or 64.
            wp.launch_tiled(K.add_one_tiled, dim=[P.N], inputs=[self.x], block_dim=32 * self.calls, device=DEVICE)

    sim = Tiled(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.arg, finding.reference, finding.captured) == ("dim-drift", "block_dim", 96, 128)
    steady = P.Producer(DEVICE)
    steady.step = lambda: wp.launch_tiled(K.add_one_tiled, dim=[P.N], inputs=[steady.x], block_dim=32, device=DEVICE)
    assert gc.capture(steady.step, device=DEVICE, owners=(steady,)).report.ok


def test_a_copy_of_a_view_whose_length_drifts_is_one_copy_drift():
    class ViewCopy(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.big = wp.zeros(4 * P.N, dtype=float, device=device)
            self.frame = 0

        def step(self):
            self.frame += 1
            wp.copy(self.big, self.v[: 4 + self.frame])

    sim = ViewCopy(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    assert [(f.kind, f.arg) for f in checked.report.findings] == [("copy-drift", "count")], str(checked.report)


def test_an_array_whose_shape_drifts_names_both_shapes():
    class Reshaped(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.frame = 0

        def step(self):
            self.frame += 1
            self.launch(K.add_one, [self.x[: P.N // 2 + self.frame]])

    sim = Reshaped(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "buffer-drift"
    assert "shape (35,)" in finding.message and "shape (36,)" in finding.message, finding.message  # calls 3 and 4


def test_an_unused_extra_temporary_does_not_shift_the_one_used():
    keep = []  # keeps every scratch array alive, so none lands at another's address

    class Extra(P.Producer):
        def __init__(self, device):
            super().__init__(device)
            self.frame = 0

        def step(self):
            self.frame += 1
            for _ in range(1 + self.frame % 2):  # two arrays on odd calls, one on even calls
                scratch = wp.zeros(P.N, dtype=float, device=self.device)
                keep.append(scratch)
            self.launch(K.square, [self.v, scratch])
            self.launch(K.axpy, [scratch, self.x, 1.0])

    sim = Extra(DEVICE)
    assert gc.capture(sim.step, device=DEVICE, owners=(sim,)).report.ok


def test_on_the_cpu_the_graph_is_cross_checked_and_the_verdict_stays_passed():
    sim = P.DeviceCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    report = checked.report
    assert report.status == "passed" and report.ok, str(report)
    assert report.checks == ("compare", "allocations", "ownership", "graph") and not report.skipped
    assert "checked: compare, allocations, ownership, graph" in report.text().splitlines()
    assert json.loads(report.to_json())["skipped"] == []
    assert [(n.type, n.role) for n in checked.graph_match.nodes] == [("KERNEL", "recorded")]
    assert "replay-safe" in report.headline()
    # The verdict is a claim: replayed, the graph computes what eager stepping does.
    assert gc.verify_replay(P.DeviceCounter, steps=3, device=DEVICE).ok


class FollowsHostGain(P.Producer):
    """A scalar that follows host state the step itself leaves alone (a gain the user sets)."""

    def __init__(self, device):
        super().__init__(device)
        self.gain = 1

    def step(self):
        self.launch(K.counter_step, [self.x, self.gain])


class FollowsHostSubsteps(P.Producer):
    """A launch count that follows host state the step itself leaves alone."""

    def __init__(self, device):
        super().__init__(device)
        self.substeps = 1

    def step(self):
        for _ in range(self.substeps):
            self.launch(K.counter_step, [self.x, 1])


def test_a_validated_site_whose_new_capture_bakes_another_scalar_is_not_passed():
    sim, twin = FollowsHostGain(DEVICE), FollowsHostGain(DEVICE)

    def validate():  # one site: this line
        return gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")

    first = validate()  # kept: the shortcut needs the validated graph alive
    assert first.ok
    twin.step()
    sim.gain = twin.gain = 2
    again = validate()  # no reference call: compared with the capture that was validated
    twin.step()
    assert again.report.status == "failed" and set(again.report.kinds()) == {"scalar-drift"}, str(again.report)
    (finding,) = again.report.findings
    assert finding.values.startswith("1 in the validated capture, 2 captured")
    assert "compared with the capture that was validated" in again.report.notes[0]
    # The claim: the graph follows host state. Once the host changes it again, replay and eager differ.
    sim.gain = twin.gain = 3
    again.launch()
    twin.step()
    assert not np.array_equal(sim.x.numpy(), twin.x.numpy())
    # The site is forgotten: the next capture is validated in full, reference call and all.
    third = validate()
    assert third.ok and not any("validated capture" in n for n in third.report.notes), str(third.report)


def test_a_validated_site_reports_the_new_captures_operation_count():
    sim = FollowsHostSubsteps(DEVICE)

    def validate():
        return gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")

    first = validate()  # kept: the shortcut needs the validated graph alive
    assert first.report.operations == 1
    sim.substeps = 3
    again = validate()
    assert again.report.operations == 3 and set(again.report.kinds()) == {"launch-sequence-drift"}, str(again.report)
    assert "issued only by the captured call" in again.report.findings[0].message


def test_a_validated_site_that_captures_the_same_replays_like_an_eager_twin():
    sim, twin = P.DeviceCounter(DEVICE), P.DeviceCounter(DEVICE)

    def validate():
        return gc.capture(sim.step, device=DEVICE, owners=(sim,))

    first = validate()  # kept: the shortcut needs the validated graph alive
    twin.step()
    again = validate()
    assert again.ok and "compare" in again.report.checks and again.report.operations == 1
    assert "compared with the capture that was validated" in again.report.notes[0] and first.ok
    for _ in range(3):
        again.launch()
        twin.step()
    np.testing.assert_array_equal(sim.x.numpy(), twin.x.numpy())


class _GeneratorStep:
    """A step written as a generator: calling it returns a generator and launches nothing."""

    def __init__(self, device=DEVICE):
        self.x = wp.zeros(4, dtype=float, device=device)

    def step(self):
        wp.launch(K.add_one, dim=4, inputs=[self.x], device=self.x.device)
        yield


class _AsyncStep(_GeneratorStep):
    async def step(self):
        wp.launch(K.add_one, dim=4, inputs=[self.x], device=self.x.device)


_RUNS_NOTHING = "runs none of its body, so it launches nothing to capture: check a step that does its work when called"


@pytest.mark.parametrize("producer", [_GeneratorStep, _AsyncStep])
def test_a_step_whose_call_runs_none_of_its_body_is_refused_as_check_refuses_it(producer):
    sim = producer()
    kind = re.escape("a generator function" if producer is _GeneratorStep else "a coroutine function (async def)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" either
        with pytest.raises(TypeError, match=rf"^{producer.__qualname__}\.step is {kind}: .* {_RUNS_NOTHING}$"):
            gc.capture(sim.step, device=DEVICE, owners=(sim,))
        with pytest.raises(TypeError, match=rf"^reference={producer.__qualname__}\.step is {kind}"):
            gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,))
        with pytest.raises(TypeError, match=rf"{kind}: .* {_RUNS_NOTHING}$"):
            gc.verify_replay(producer, device=DEVICE)
        with pytest.raises(TypeError, match=rf"{kind}: .* {_RUNS_NOTHING}$"):
            gc.check_producer(producer, device=DEVICE)
    assert sim.x.numpy().tolist() == [0.0] * 4
    assert not _warp.hooks_installed()
    assert not _warp.capture_in_progress(DEVICE)


@pytest.mark.parametrize("reference", [True, False])
@pytest.mark.parametrize("producer", [_GeneratorStep, _AsyncStep])
def test_a_step_that_returns_a_generator_or_a_coroutine_is_refused(producer, reference):
    sim = producer()
    returned = "a generator" if producer is _GeneratorStep else "a coroutine"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=rf"<lambda> returned {returned}: its body has not run"):
            gc.capture(lambda: sim.step(), device=DEVICE, owners=(sim,), reference=reference)  # noqa: PLW0108
    assert not _warp.hooks_installed()
    assert not _warp.capture_in_progress(DEVICE)


def test_a_step_that_does_its_work_and_returns_a_generator_is_captured():
    x = wp.zeros(4, dtype=float, device=DEVICE)

    def step():
        wp.launch(K.add_one, dim=4, inputs=[x], device=DEVICE)
        return (value for value in range(3))  # its result, after the work is done

    checked = gc.capture(step, device=DEVICE, owners=(x,))
    assert checked.report.status == "passed"
    eager = x.numpy().copy()
    checked.launch()
    step()
    twin = x.numpy().copy()
    assert (twin == eager + 2).all()  # one replay and one eager call, each adding one


def test_a_step_that_issues_no_operation_on_purpose_is_still_captured():
    checked = gc.capture(lambda: None, device=DEVICE)
    assert checked.report.status == "passed"


class _RaisesOnCall:
    """A step that raises on its ``nth`` call (the user's own exception)."""

    def __init__(self, nth, device=DEVICE):
        self.x = wp.zeros(4, dtype=float, device=device)
        self.calls, self.nth = 0, nth
        self.boom = ValueError(f"boom on call {nth}")

    def step(self):
        self.calls += 1
        if self.calls == self.nth:
            raise self.boom
        wp.launch(K.add_one, dim=4, inputs=[self.x], device=self.x.device)


@pytest.mark.skipif(not hasattr(BaseException, "add_note"), reason="exception notes are Python 3.11+")
@pytest.mark.parametrize(
    ("nth", "warmup", "note"),
    [
        (1, 0, "graphcheck raised this in its reference call of the step _RaisesOnCall.step: an eager call before "
               "the capture, to compare the capture with"),
        (2, 0, "graphcheck raised this while capturing the step _RaisesOnCall.step (call 2 of it: graphcheck called "
               "it eagerly before, its reference call)"),
        (1, 1, "graphcheck raised this in its warm-up call 1 of 1 of the step _RaisesOnCall.step (warmup=1), before "
               "the reference call"),
        (3, 1, "graphcheck raised this while capturing the step _RaisesOnCall.step (call 3 of it: graphcheck called "
               "it eagerly before, its warm-up calls and reference call)"),
    ],
)  # fmt: skip
def test_a_step_raising_in_one_of_graphchecks_calls_propagates_unchanged_with_a_note_saying_which(nth, warmup, note):
    sim = _RaisesOnCall(nth)
    with pytest.raises(ValueError) as error:
        gc.capture(sim.step, device=DEVICE, owners=(sim,), warmup=warmup)
    assert error.value is sim.boom and str(error.value) == f"boom on call {nth}"
    assert error.value.__notes__ == [note]
    assert not _warp.hooks_installed()
    assert not _warp.capture_in_progress(DEVICE)


_GLOBAL_STATE = None  # a module-level buffer a module-level step reads: no owner holds it


def _step_on_a_global():
    wp.launch(K.add_one, dim=4, inputs=[_GLOBAL_STATE], device=DEVICE)


def test_a_buffer_no_owner_holds_when_no_owners_were_found_says_so():
    global _GLOBAL_STATE
    _GLOBAL_STATE = wp.zeros(4, dtype=float, device=DEVICE)
    checked = gc.capture(_step_on_a_global, device=DEVICE, on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "foreign-buffer"
    assert "is in no owned buffer: no owners were given or found (pass owners=)" in str(checked.report)

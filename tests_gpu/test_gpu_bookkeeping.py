"""Real captures of what the CPU suite can only script (tests/scripted_capture.py): where
the capture stands before and after each operation, the memset and memcpy fields the
driver gives Warp's operations, copies to pinned memory, conditional bodies learnt through
graphcheck's hook on Warp's ``capture_resume``, and a deterministic step through
``graphcheck.capture`` with its host checks.

Written without a GPU at hand: the first run on one is their first run.
"""

import pytest
import warp as wp

import graphcheck as gc
from graphcheck import _cuda, _warp
from graphcheck.checks.escaped_work import uncaptured
from graphcheck.crosscheck import check
from graphcheck.graph import read_match
from tests import kernels as K


def capture(device, work, stream=None):
    """``(trace, graph, match)`` of ``work`` captured (Warp's own operations in the trace),
    after one eager call that loads its modules."""
    work()
    wp.synchronize_device(device)
    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=device, stream=stream) as cap:
        work()
    return trace, cap.graph, read_match(cap.graph, trace)


def owned(match, index):
    return [n for n in match.nodes if n.record == index]


def test_each_span_holds_nodes_and_starts_where_the_last_ended(device):
    """"before" is asked before Warp enqueues and "after" after it: in a row of operations on
    one stream, every span holds its nodes and starts where the one before it ended."""
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)

    def work():
        wp.launch(K.scale, dim=1000, inputs=[a, b, 2.5, 3], device=device)
        a.zero_()
        a.fill_(1.0)
        wp.copy(a, b)

    trace, graph, match = capture(device, work)
    spans = [r.capture for r in trace]
    assert None not in spans
    assert [i for i, s in enumerate(spans) if not s.after or s.after == s.before] == []
    assert [i for i in range(1, len(spans)) if spans[i].before != spans[i - 1].after] == []
    assert check(match).findings == []


def test_memset_fields_of_zero_and_a_uint8_fill(device):
    a = wp.ones(1000, dtype=float, device=device)
    u8 = wp.zeros(1000, dtype=wp.uint8, device=device)

    def work():
        a.zero_()
        u8.fill_(7)

    trace, graph, match = capture(device, work)
    reader = _cuda.Reader()
    for index, (dst, value, nbytes) in ((0, (a.ptr, 0, 4000)), (1, (u8.ptr, 7, 1000))):
        (node,) = [n for n in owned(match, index) if n.type == "MEMSET"]
        raw = reader.call("cuGraphMemsetNodeGetParams", reader.driver.CUgraphNode(node.handle))
        assert (node.fields["dst"], node.fields["value"], node.fields["nbytes"]) == (dst, value, nbytes)
        assert int(raw.elementSize) * int(raw.width) * max(int(raw.height), 1) == nbytes
        assert node.fields["element_size"] == int(raw.elementSize)
    findings, notes = check(match)
    assert findings == [] and notes == []


def test_pinned_copies_their_memory_types_and_the_copy_to_the_host_on_the_sources_stream(device):
    up = wp.array([float(i) for i in range(64)], dtype=float, device="cpu", pinned=True)
    down = wp.zeros(64, dtype=float, device="cpu", pinned=True)
    on_device = wp.ones(64, dtype=float, device=device)

    def work():
        wp.copy(on_device, up)
        wp.copy(down, on_device)

    trace, graph, match = capture(device, work)
    (h2d,) = [n.fields for n in owned(match, 0) if n.type == "MEMCPY"]
    (d2h,) = [n.fields for n in owned(match, 1) if n.type == "MEMCPY"]
    assert (h2d["dst"], h2d["src"], h2d["nbytes"]) == (on_device.ptr, up.ptr, 256)
    assert (d2h["dst"], d2h["src"], d2h["nbytes"]) == (down.ptr, on_device.ptr, 256)
    assert h2d["src_kind"] in ("host", "unified") and h2d["dst_kind"] in ("device", "unified")
    assert d2h["dst_kind"] in ("host", "unified") and d2h["src_kind"] in ("device", "unified")
    to_host = trace[1]
    assert (to_host.device, to_host.stream) == (device, _warp.stream_handle(wp.get_stream(device)))
    findings, notes = check(match)
    assert findings == [] and notes == []


def test_work_sent_to_the_current_stream_off_the_capture_stream_is_a_stream_drift(device):
    """Under wp.ScopedCapture(stream=s), which does not make s current, a zero_() and a copy
    to pinned memory go to the current stream: each ran once, at capture time."""
    s = wp.Stream(device)
    x, y = wp.zeros(16, dtype=float, device=device), wp.ones(16, dtype=float, device=device)
    pinned = wp.zeros(16, dtype=float, device="cpu", pinned=True)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
    wp.synchronize_device(device)
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device, stream=s):
        wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
        y.zero_()
        wp.copy(pinned, y)
    drifts = [(f.kind, f.kernel) for f in uncaptured(trace)]
    assert drifts == [("stream-drift", "array.zero_"), ("stream-drift", "wp.copy")]


@pytest.mark.skipif(not wp.is_conditional_graph_supported(), reason="needs conditional graph nodes (CUDA 12.4+)")
def test_conditional_bodies_are_learnt_through_warps_capture_resume(device):
    counter = wp.array([3], dtype=int, device=device)
    x = wp.zeros(16, dtype=float, device=device)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)

    def body():
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
        wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)

    hooked = []
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as cap:
        hooked.append("capture_resume" in _warp.HOOKS.left_behind())
        wp.capture_while(counter, body)
    assert hooked == [True], "graphcheck's hook stands where Warp's conditionals call capture_resume"
    conditional, *inside = trace
    assert len(conditional.capture.bodies) == 1 and {r.capture.graph for r in inside} == set(conditional.capture.bodies)
    match = read_match(cap.graph, trace)
    assert [n.index for n in match.nodes if n.fields.get("bodies_unknown")] == []
    findings, notes = check(match)
    assert findings == [] and notes == []


def test_a_deterministic_step_passes_graphcheck_capture_with_its_host_checks(device):
    """Warp sets its deterministic buffers up on an uncaptured stream of its own, and adds
    resets only while capturing: graphcheck.capture of a safe deterministic step finds
    nothing (no stream-drift, no sequence difference from its reference call)."""
    mode = getattr(getattr(wp.config, "DeterministicMode", None), "RUN_TO_RUN", None)
    if mode is None:
        pytest.skip(f"Warp {wp.__version__} has no deterministic mode")
    from tests_gpu import deterministic_kernels as D

    class Totals:
        def __init__(self):
            self.x = wp.ones(256, dtype=float, device=device)
            self.total = wp.zeros(1, dtype=float, device=device)

        def step(self):
            wp.launch(D.atomic_total, dim=256, inputs=[self.x, self.total], device=device)

    saved = wp.config.deterministic
    wp.config.deterministic = mode
    try:
        totals = Totals()
        checked = gc.capture(totals.step, device=device, owners=(totals,), on_failure="ignore")
        assert [(f.kind, f.message) for f in checked.report.findings] == []
        assert checked.report.status == "passed" and "compare" in checked.report.checks, checked.report
        before = float(totals.total.numpy()[0])
        checked.launch()
        wp.synchronize_device(device)
        assert float(totals.total.numpy()[0]) - before == 256.0
    finally:
        wp.config.deterministic = saved

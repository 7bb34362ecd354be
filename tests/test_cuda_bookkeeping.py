"""The session's CUDA bookkeeping, driven on Warp's CPU device for every kind of operation.

No driver runs in these tests. Each operation is Warp's own, run on the CPU with
graphcheck's hooks in place; the CUDA devices, their streams and captures, and the
driver's answers about them come from a script of real ``cuda.bindings`` values
(:mod:`tests.scripted_capture`), and the capture moves only when Warp really enqueues.
Each test checks where the capture stood before and after each operation as graphcheck
learnt it, and that a graph built by hand from real ``cuda.bindings`` structs, filled from
Warp's side of each operation, matches one node per record with nothing left over and
nothing flagged.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import warp as wp

import graphcheck as gc
from graphcheck.checks import between_calls
from graphcheck.checks.escaped_work import uncaptured
from graphcheck.crosscheck import check
from graphcheck.graph import match_nodes, walk
from graphcheck.guard import judge
from graphcheck.options import CaptureOptions
from tests import kernels as K
from tests.internals import _cuda, _warp, deterministic_hook
from tests.recorded_driver import Keep, kernel_struct, memcpy_struct, memset_struct
from tests.scripted_capture import (
    ADJOINT_FUNC,
    ALLOC_STREAM,
    BODY,
    FUNC,
    GRAPH,
    OTHER_STREAM,
    SECOND_STREAM,
    STREAM,
    ScriptedCapture,
    install,
    packed_bytes,
)

N = 64
IS_CAPTURING = f"cuStreamIsCapturing({STREAM:#x})"
CAPTURE_INFO = f"cuStreamGetCaptureInfo({STREAM:#x})"


def _cuda_visible() -> bool:
    return _warp.cuda_available()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """The hardware's side of a CUDA capture, scripted by each test (no driver runs)."""
    script = install(monkeypatch)
    yield script
    script.close()


def floats(value: float = 0.0, requires_grad: bool = False) -> wp.array:
    """An array of N floats on Warp's CPU device (which the script plays as cuda:0)."""
    return wp.full(N, value, dtype=float, device="cpu", requires_grad=requires_grad)


def layout(param_bytes: list[bytes]) -> list[tuple[int, int]]:
    out, offset = [], 0
    for b in param_bytes:
        out.append((offset, len(b)))
        offset += len(b)
    return out


def read(script: ScriptedCapture, trace: gc.LaunchTrace):
    return match_nodes(walk(_cuda.Reader(script, script.version), GRAPH, trace.records), trace)


def matched(script: ScriptedCapture, trace: gc.LaunchTrace) -> dict[int, list[tuple[int, str]]]:
    """Check what every test checks, and return record index -> its nodes and their roles."""
    script.done()
    missing = [f"#{i} {r.kernel}" for i, r in enumerate(trace.records) if r.capture is None]
    assert not missing, f"records without a capture span: {missing}"
    assert {r.device for r in trace.records} <= {"cuda:0", "cuda:1"}, "every record names the CUDA device it ran on"
    match = read(script, trace)
    result = check(match)
    assert result.findings == [], [f.message for f in result.findings]
    assert result.complete, result.notes
    # Warp's own nodes no operation makes (allocations of arrays recorded during the capture) stay unclaimed.
    left = [(hex(n.handle), n.type, n.role) for n in match.nodes if n.record is None and n.role != "allocation"]
    assert not left, f"nodes no record claimed: {left}"
    owned: dict[int, list[tuple[int, str]]] = {}
    for node in match.nodes:
        if node.record is not None:
            owned.setdefault(node.record, []).append((node.handle, node.role))
    return owned


# -- kernel launches: wp.launch, wp.Launch replays, launch_tiled, adjoint --------------------------


@pytest.mark.parametrize("how", ["launch", "replay", "tiled", "adjoint"])
def test_a_cuda_launch_learns_its_span_and_matches_its_kernel_node(scripted, how):
    keep = Keep()
    a, b, ga, gb = floats(), floats(1.0), floats(), floats()
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        if how == "adjoint":
            cmd = scripted.launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
        elif how == "tiled":
            cmd = scripted.launch(K.add_one_tiled, (N, 32), [a], block_dim=32, tiled=32)
        else:
            cmd = scripted.launch(K.scale, N, [a, b, 2.5, 3], replay=how == "replay")
    params = packed_bytes(cmd)
    block = 32 if how == "tiled" else 256
    grid = ((N * 32 + block - 1) // block if how == "tiled" else 1, 1, 1)
    func = ADJOINT_FUNC if how == "adjoint" else FUNC
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, grid=grid, block=(block, 1, 1), func=func), layout(params))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}
    (record,) = trace
    assert record.capture == (GRAPH, (), (0x1,), ())
    assert (record.replay, record.adjoint, record.tile_block_dim) == (
        how == "replay", how == "adjoint", 32 if how == "tiled" else None
    )  # fmt: skip
    # Every byte the driver copies into the node, the adjoint arguments' too.
    assert record.param_bytes == tuple(params)


def test_a_launch_warp_refuses_is_taken_back(scripted):
    """Warp's native launch fails (it raises its own error): nothing was enqueued, so
    the record is retracted and graphcheck asks nothing after it."""
    a = floats()
    scripted.begin()
    with gc.trace_launches() as trace:
        scripted.launch(K.add_one, N, [a], fails=True)
    scripted.done()
    assert len(trace) == 0
    assert scripted.asked == [IS_CAPTURING, CAPTURE_INFO]


def test_a_launch_is_on_the_device_whose_context_warp_launched_in(scripted):
    """Warp passes the launch's context to its native launch: the record names that device
    (graphcheck asked every CUDA device for its streams, acquiring a context on each)."""
    keep = Keep()
    a = floats()
    scripted.begin(SECOND_STREAM)
    scripted.adds(0x1, stream=SECOND_STREAM)
    with gc.trace_launches() as trace:
        cmd = scripted.launch(K.add_one, N, [a], device="cuda:1")
    params = packed_bytes(cmd)
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=FUNC), layout(params))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}
    assert (trace[0].device, trace[0].stream) == ("cuda:1", SECOND_STREAM)


def test_warps_context_table_names_no_device_for_an_unknown_context():
    """The adapter reads Warp's table of the contexts it holds: a context Warp does not know,
    and the CPU's (none), name no CUDA device. (That it acquires no context on a device
    the program never used follows from asking no device; a GPU run shows the rest.)"""
    assert _warp.device_of_context(0xC7A1) is None
    assert _warp.device_of_context(None) is None


# -- copies, memsets, fills, native helpers -----------------------------------------------------------


def test_a_copy_learns_its_span_and_matches_its_memcpy_node(scripted):
    a, b = floats(), floats(1.0)
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        wp.copy(a, b, dest_offset=4, src_offset=2, count=10)
    scripted.node(GRAPH, 0x1, "MEMCPY", memcpy_struct(a.ptr + 16, b.ptr + 8, 40))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}


def test_a_copy_with_gradients_gives_each_copy_its_node(scripted):
    """Warp copies the data, then the gradients in a second wp.copy nested in the first."""
    a, b = floats(requires_grad=True), floats(1.0, requires_grad=True)
    scripted.begin()
    scripted.adds(0x1)  # the data
    scripted.adds(0x2)  # the gradients
    with gc.trace_launches() as trace:
        wp.copy(a, b)
    scripted.node(GRAPH, 0x1, "MEMCPY", memcpy_struct(a.ptr, b.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMCPY", memcpy_struct(a.grad.ptr, b.grad.ptr, 4 * N), deps=(0x1,))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")], 1: [(0x2, "recorded")]}
    assert [r.capture for r in trace] == [(GRAPH, (), (0x2,), ()), (GRAPH, (0x1,), (0x2,), ())]


def test_a_clone_allocates_in_the_graph_and_copies(scripted):
    b = floats(1.0)
    scripted.begin()
    scripted.allocates(0x1)  # the allocation's node is no operation's
    scripted.adds(0x2)
    with gc.trace_launches() as trace:
        c = wp.clone(b)
    scripted.node(GRAPH, 0x1, "MEM_ALLOC", _alloc(c.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMCPY", memcpy_struct(c.ptr, b.ptr, 4 * N), deps=(0x1,))
    assert matched(scripted, trace) == {0: [(0x2, "recorded")]}
    assert trace[0].capture == (GRAPH, (0x1,), (0x2,), ())


def _alloc(ptr: int, nbytes: int):
    from tests.recorded_driver import driver

    params = driver.CUDA_MEM_ALLOC_NODE_PARAMS()
    params.dptr, params.bytesize = driver.CUdeviceptr(ptr), nbytes
    return params


def test_a_copy_to_the_host_goes_to_the_sources_stream(scripted):
    """A copy to pinned host memory, as Warp sends it without stream=: to the source's
    current stream, captured there, on the source's device."""
    pinned, on_device = floats(), floats(1.0)
    scripted.host(pinned)
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        wp.copy(pinned, on_device)
    scripted.node(GRAPH, 0x1, "MEMCPY", memcpy_struct(pinned.ptr, on_device.ptr, 4 * N, dst_type="HOST"))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}
    assert (trace[0].device, trace[0].stream) == ("cuda:0", STREAM)


@pytest.mark.parametrize("direction", ["device to host", "host to device"])
def test_a_copy_to_or_from_the_host_that_escapes_the_capture_is_a_stream_drift(scripted, direction):
    """Under wp.ScopedCapture(stream=s), which does not make s current, wp.copy(pinned, dev)
    goes to the source's current stream (the destination's, from the host): it runs once,
    at capture time, and is missing from the graph."""
    keep = Keep()
    pinned, on_device = floats(), floats(1.0)
    scripted.host(pinned)
    dest, src = (pinned, on_device) if direction == "device to host" else (on_device, pinned)
    scripted.begin(OTHER_STREAM)
    scripted.adds(0x1, stream=OTHER_STREAM)
    scripted.escapes()
    with gc.trace_launches() as trace:
        cmd = scripted.launch(K.add_one, N, [on_device], stream=OTHER_STREAM)
        wp.copy(dest, src)
    params = packed_bytes(cmd)
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=FUNC), layout(params))
    scripted.done()
    escaped = trace[1]
    assert (escaped.device, escaped.stream) == ("cuda:0", STREAM)
    assert (escaped.capture, escaped.uncaptured) == (None, OTHER_STREAM)
    (finding,) = uncaptured(trace)
    assert (finding.kind, finding.kernel, finding.index) == ("stream-drift", "wp.copy", 1)
    assert read(scripted, trace).gaps == [], "the finding says it; the cross-check itself is complete"


def test_zero_learns_its_span_and_matches_its_memset_node(scripted):
    a = floats(3.0)
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        a.zero_()
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 4 * N, element_size=4))  # as cuMemsetD32 captures it
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}
    assert trace[0].capture == (GRAPH, (), (0x1,), ())


def test_a_fill_owns_the_kernel_warp_launches_for_it(scripted):
    keep = Keep()
    a = floats()
    u8 = wp.zeros(N, dtype=wp.uint8, device="cpu")
    scripted.begin()
    scripted.adds(0x1)
    scripted.adds(0x2)
    with gc.trace_launches() as trace:
        a.fill_(3.0)  # on CUDA: memtile_value_kernel
        u8.fill_(7)  # on CUDA: a memset of one-byte elements
    tile = kernel_struct([b"\x00" * 8] * 4, keep, func=0x5151)
    scripted.kernel(GRAPH, 0x1, tile, [(0, 8)] * 4, name=b"memtile_value_kernel")
    scripted.node(GRAPH, 0x2, "MEMSET", memset_struct(u8.ptr, N, value=7), deps=(0x1,))
    assert matched(scripted, trace) == {0: [(0x1, "warp-native")], 1: [(0x2, "recorded")]}
    assert [r.capture for r in trace] == [(GRAPH, (), (0x1,), ()), (GRAPH, (0x1,), (0x2,), ())]


def test_a_device_helper_owns_the_nodes_it_enqueues_on_the_current_contexts_stream(scripted):
    """Warp's device helpers enqueue on the current CUDA context's current stream (here
    cuda:1's), not the default device's; a host helper on the CPU asks nothing."""
    keep = Keep()
    values = wp.array(range(N), dtype=int, device="cpu")
    out = wp.zeros(N, dtype=int, device="cpu")
    keys = wp.array(list(range(N, 0, -1)) * 2, dtype=int, device="cpu")
    items = wp.zeros(2 * N, dtype=int, device="cpu")
    scan, sort = scripted.device_helper("array_scan_int"), scripted.device_helper("radix_sort_pairs_int")
    scripted.current = scripted.devices["cuda:1"]
    scripted.begin(SECOND_STREAM)
    scripted.adds(0x2, stream=SECOND_STREAM)
    scripted.adds(0x4, stream=SECOND_STREAM)
    with gc.trace_launches() as trace:
        scan(values.ptr, out.ptr, N, 4, 4, 1, False)  # as wp.utils.array_scan calls it
        sort(keys.ptr, items.ptr, N, 0, 32, 4)  # as wp.utils.radix_sort_pairs calls it
    with gc.trace_launches() as host:
        wp.utils.array_scan(values, out)
    for handle, deps in ((0x1, ()), (0x2, (0x1,)), (0x3, (0x2,)), (0x4, (0x3,))):
        struct = kernel_struct([b"\x00" * 8], keep, func=0x6000 + handle)
        scripted.kernel(GRAPH, handle, struct, [(0, 8)], name=b"cub_kernel", deps=deps)
    assert matched(scripted, trace) == {
        0: [(0x1, "warp-native"), (0x2, "warp-native")], 1: [(0x3, "warp-native"), (0x4, "warp-native")]
    }  # fmt: skip
    assert [(r.device, r.stream) for r in trace] == [("cuda:1", SECOND_STREAM)] * 2
    # Asked nothing of the driver; on the CPU, out of every capture, it ran at once (uncaptured 0).
    assert [(r.device, r.stream, r.capture, r.uncaptured) for r in host] == [("cpu", None, None, 0)]


def test_a_captured_operation_learns_where_the_capture_stood_when_warp_enqueued_it(scripted):
    """Each span is non-empty and starts where the one before it ended: "before" is asked
    before Warp enqueues and "after" after it, for a launch, a memset and a copy."""
    a, b = floats(), floats(1.0)
    scripted.begin()
    for node in (0x1, 0x2, 0x3, 0x4):
        scripted.adds(node)
    with gc.trace_launches() as trace:
        scripted.launch(K.add_one, N, [a])
        a.zero_()
        b.fill_(2.0)
        wp.copy(a, b)
    scripted.done()
    spans = [r.capture for r in trace]
    assert [(s.before, s.after) for s in spans] == [((), (0x1,)), ((0x1,), (0x2,)), ((0x2,), (0x3,)), ((0x3,), (0x4,))]


def test_an_operation_that_ends_in_another_graph_has_no_place_in_the_capture(scripted):
    """The stream went on capturing into another graph than the one the operation started
    in: the two answers delimit nothing, and the cross-check says it could not match it."""
    a = floats()
    scripted.begin()
    scripted.adds(0xB1, graph=BODY)
    with gc.trace_launches() as trace:
        scripted.launch(K.add_one, N, [a])
    scripted.done()
    assert trace[0].capture is None
    scripted.graphs[GRAPH] = []
    assert "could not be matched to a graph node" in " ".join(read(scripted, trace).gaps)


# -- conditionals, pauses -----------------------------------------------------------------------------


def test_a_conditional_and_its_body_learn_their_spans(scripted):
    """Warp captures the body of wp.capture_if into a body graph it resumes the capture
    into (through graphcheck's hook on Warp's capture_resume); the conditional's span
    covers the kernel that sets its handle and its node."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    condition = wp.array([1], dtype=int, device="cpu")
    scripted.begin()
    scripted.adds(0xB1)  # the body's memset
    scripted.adds(0xB2)  # the body's launch
    cmds = []

    def body():
        scripted.resume(BODY, inserted=(0x2,))
        a.zero_()
        cmds.append(scripted.launch(K.scale, N, [a, b, 2.5, 3]))
        scripted.resume(GRAPH)  # back to the parent graph: not a body

    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=body)
    setter = kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D)
    scripted.kernel(GRAPH, 0x1, setter, [(0, 8)] * 2, name=b"set_conditional_if_handle_kernel")
    scripted.node(GRAPH, 0x2, "CONDITIONAL", deps=(0x1,))
    scripted.graphs[BODY] = []
    scripted.node(BODY, 0xB1, "MEMSET", memset_struct(a.ptr, 4 * N))
    params = packed_bytes(cmds[0])
    scripted.kernel(BODY, 0xB2, kernel_struct(params, keep, func=FUNC), layout(params), deps=(0xB1,))
    assert matched(scripted, trace) == {
        0: [(0x1, "warp-conditional"), (0x2, "recorded")], 1: [(0xB1, "recorded")], 2: [(0xB2, "recorded")]
    }  # fmt: skip
    conditional, zero, launch = trace
    assert conditional.capture == (GRAPH, (), (0x2,), (BODY,))
    assert zero.nested == launch.nested == (conditional.seq, "on_true", 0)


def _stream_given(how: str, condition: wp.array, body):
    """A conditional on OTHER_STREAM, its stream= passed as each form of the call takes it."""
    if how == "capture_if, keyword":
        wp.capture_if(condition, on_true=body, stream=OTHER_STREAM)
    elif how == "capture_if, positional":
        wp.capture_if(condition, body, None, OTHER_STREAM)
    elif how == "capture_while, keyword":
        wp.capture_while(condition, body, stream=OTHER_STREAM)
    else:
        wp.capture_while(condition, body, OTHER_STREAM)


@pytest.mark.parametrize(
    "how", ["capture_if, keyword", "capture_if, positional", "capture_while, keyword", "capture_while, positional"]
)
def test_a_conditional_is_asked_about_the_stream_it_is_given(scripted, how):
    """wp.capture_if(..., stream=s) inserts the conditional on s, which need not be the
    device's current stream: graphcheck asks where s's capture stands, whichever way the
    stream is passed."""
    a = floats()
    condition = wp.array([1], dtype=int, device="cpu")
    scripted.begin(OTHER_STREAM)
    scripted.adds(0xB1, stream=OTHER_STREAM)

    def body():
        scripted.resume(BODY, stream=OTHER_STREAM, inserted=(0x1,))
        scripted.launch(K.add_one, N, [a], stream=OTHER_STREAM)
        ctypes.c_int32.from_address(condition.ptr).value = 0  # the body ends a while loop, as a kernel would
        scripted.resume(GRAPH, stream=OTHER_STREAM)

    with gc.trace_launches() as trace:
        _stream_given(how, condition, body)  # on the CPU Warp runs the body eagerly and ignores the stream
    scripted.done()
    conditional, launch = trace
    assert (conditional.stream, conditional.capture) == (OTHER_STREAM, (GRAPH, (), (0x1,), (BODY,)))
    assert launch.capture == (BODY, (), (0xB1,), ())


def test_a_conditional_warp_refuses_is_taken_back(scripted):
    """Warp raises for a branch that is neither a callable nor a graph: no conditional was
    inserted, so the record is retracted (as a launch Warp refuses is)."""
    condition = wp.array([1], dtype=int, device="cpu")
    scripted.begin()
    with gc.trace_launches() as trace, pytest.raises(TypeError, match="on_true must be a Callable or a Graph"):
        wp.capture_if(condition, on_true=42)
    scripted.done()
    assert len(trace) == 0


def test_work_while_the_capture_is_paused_is_neither_in_the_graph_nor_a_gap(scripted):
    """Between wp.capture_pause() and wp.capture_resume() the stream does not capture and
    Warp holds no capture for the device: the operation runs once, eagerly, on purpose."""
    a = floats()
    scripted.begin()
    scripted.adds(0x1)
    scripted.escapes()
    scripted.adds(0x2)
    with gc.trace_launches() as trace:
        a.zero_()
        scripted.pause()
        a.zero_()
        scripted.begin()
        a.zero_()
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMSET", memset_struct(a.ptr, 4 * N), deps=(0x1,))
    scripted.done()
    assert [r.capture for r in trace] == [(GRAPH, (), (0x1,), ()), None, (GRAPH, (0x1,), (0x2,), ())]
    assert [r.uncaptured for r in trace] == [None, 0, None]
    result = check(read(scripted, trace))
    assert result.findings == [] and result.complete, result.notes
    assert uncaptured(trace) == []


def test_eager_work_with_no_capture_open_asks_no_device_for_its_capturing_streams(scripted):
    """Outside every capture (a reference call) Warp holds none open: graphcheck asks the
    stream and Warp's runtime, never the device's captures. While another device captures,
    the device is asked."""
    a = floats()
    with gc.trace_launches() as trace:
        a.zero_()
        scripted.elsewhere = True  # a capture open on a device the script does not play
        a.zero_()
    scripted.done()
    assert scripted.asked == [IS_CAPTURING, "runtime.captures", IS_CAPTURING, "runtime.captures", "cuda:0.captures"]
    assert [(r.capture, r.uncaptured) for r in trace] == [(None, 0), (None, 0)]
    assert uncaptured(trace) == []


def test_a_reference_call_asks_the_driver_once_per_operation(scripted):
    """An eager call asks whether each operation's stream captures once: that one answer
    says both whether it runs now and whether the call captures it into a graph of its
    own (a solver capturing its own step), where it is nested and learns its span."""
    a, b = floats(), floats(1.0)
    with gc.LaunchTrace(eager=True) as reference:
        scripted.launch(K.add_one, N, [a])
        a.zero_()
        wp.copy(a, b)
    assert scripted.asked.count(IS_CAPTURING) == 3
    assert [r.nested for r in reference] == [False] * 3
    scripted.asked.clear()
    scripted.begin()
    for node in (0x1, 0x2, 0x3):
        scripted.adds(node)
    with gc.LaunchTrace(eager=True) as own:
        scripted.launch(K.add_one, N, [a])
        a.zero_()
        wp.copy(a, b)
    scripted.done()
    assert scripted.asked == [IS_CAPTURING, CAPTURE_INFO, CAPTURE_INFO] * 3
    assert [(r.nested, r.capture.after) for r in own] == [(True, (0x1,)), (True, (0x2,)), (True, (0x3,))]


def test_warp_registers_no_cpu_capture_as_open():
    """The adapter reads Warp's own bookkeeping (its runtime's captures): a CPU capture,
    which no CUDA device records, is never one of them."""
    assert not _warp.capture_open_anywhere()
    with wp.ScopedCapture(device="cpu"):
        assert not _warp.capture_open_anywhere()
    assert not _warp.capture_open_anywhere()


def test_work_on_a_stream_the_capture_does_not_record_is_a_stream_drift(scripted):
    """Under wp.ScopedCapture(stream=s), which does not make s current, Warp sends zero_()
    to the device's current stream: it runs once, at capture time, and is missing from the
    graph. That is a finding, not a note."""
    keep = Keep()
    a = floats()
    scripted.begin(OTHER_STREAM)
    scripted.adds(0x1, stream=OTHER_STREAM)
    scripted.escapes()
    with gc.trace_launches() as trace:
        cmd = scripted.launch(K.add_one, N, [a], stream=OTHER_STREAM)
        a.zero_()
    scripted.done()
    captured, escaped = trace
    assert (captured.capture, escaped.capture, escaped.uncaptured) == ((GRAPH, (), (0x1,), ()), None, OTHER_STREAM)
    (finding,) = uncaptured(trace)
    assert finding.kind == "stream-drift" and finding.index == 1
    assert f"went to stream {STREAM:#x} while the capture records stream {OTHER_STREAM:#x}" in finding.message
    assert "wp.ScopedStream" in finding.message
    report, _ = judge(None, trace, None, None, CaptureOptions(), name="escaped", device="cuda:0")
    assert [f.kind for f in report.findings] == ["stream-drift"]
    params = packed_bytes(cmd)
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=FUNC), layout(params))
    assert read(scripted, trace).gaps == [], "a finding already says it; the cross-check itself is complete"


# -- one step of every kind --------------------------------------------------------------------------


def test_a_step_of_every_kind_matches_one_node_per_record(scripted):
    """The kinds above in one capture, each starting where the one before it left the stream."""
    keep = Keep()
    a, b = floats(requires_grad=True), floats(1.0, requires_grad=True)
    values, out = wp.array(range(N), dtype=int, device="cpu"), wp.zeros(N, dtype=int, device="cpu")
    condition = wp.array([1], dtype=int, device="cpu")
    ga, gb = floats(), floats()
    scan = scripted.device_helper("array_scan_int")
    scripted.begin()
    for node in (0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7):  # launch, replay, the copy and its gradients', zero_, fill_, scan
        scripted.adds(node)
    scripted.adds(0xB1)  # the body's zero_
    scripted.adds(0xA)  # the adjoint launch

    def body():
        scripted.resume(BODY, inserted=(0x9,))
        a.zero_()
        scripted.resume(GRAPH)

    with gc.trace_launches() as trace:
        launch = scripted.launch(K.scale, N, [a, b, 2.5, 3])
        replay = scripted.launch(K.scale, N, [a, b, 2.5, 3], replay=True)
        wp.copy(a, b)
        a.zero_()
        b.fill_(2.0)
        scan(values.ptr, out.ptr, N, 4, 4, 1, False)
        wp.capture_if(condition, on_true=body)
        adjoint = scripted.launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
    chain = iter([(), (0x1,), (0x2,), (0x3,), (0x4,), (0x5,), (0x6,), (0x7,), (0x8,)])
    for handle, cmd in ((0x1, launch), (0x2, replay)):
        params = packed_bytes(cmd)
        scripted.kernel(GRAPH, handle, kernel_struct(params, keep, func=FUNC), layout(params), deps=next(chain))
    scripted.node(GRAPH, 0x3, "MEMCPY", memcpy_struct(a.ptr, b.ptr, 4 * N), deps=next(chain))
    scripted.node(GRAPH, 0x4, "MEMCPY", memcpy_struct(a.grad.ptr, b.grad.ptr, 4 * N), deps=next(chain))
    scripted.node(GRAPH, 0x5, "MEMSET", memset_struct(a.ptr, 4 * N, element_size=4), deps=next(chain))
    filler = kernel_struct([b"\x00" * 8], keep, func=0x5151)
    scripted.kernel(GRAPH, 0x6, filler, [(0, 8)], name=b"memtile_value_kernel", deps=next(chain))
    scanner = kernel_struct([b"\x00" * 8], keep, func=0x6001)
    scripted.kernel(GRAPH, 0x7, scanner, [(0, 8)], name=b"scan_kernel", deps=next(chain))
    setter = kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D)
    scripted.kernel(GRAPH, 0x8, setter, [(0, 8)] * 2, name=b"set_conditional_if_handle_kernel", deps=next(chain))
    scripted.node(GRAPH, 0x9, "CONDITIONAL", deps=next(chain))
    scripted.graphs[BODY] = []
    scripted.node(BODY, 0xB1, "MEMSET", memset_struct(a.ptr, 4 * N, element_size=4))
    params = packed_bytes(adjoint)
    scripted.kernel(GRAPH, 0xA, kernel_struct(params, keep, func=ADJOINT_FUNC), layout(params), deps=(0x9,))
    owned = matched(scripted, trace)
    assert [r.kernel for r in trace] == [
        "tests.kernels.scale", "tests.kernels.scale", "wp.copy", "wp.copy", "array.zero_", "array.fill_",
        "array_scan_int_device", "wp.capture_if", "array.zero_", "tests.kernels.scale",
    ]  # fmt: skip
    assert owned == {
        0: [(0x1, "recorded")], 1: [(0x2, "recorded")], 2: [(0x3, "recorded")], 3: [(0x4, "recorded")],
        4: [(0x5, "recorded")], 5: [(0x6, "warp-native")], 6: [(0x7, "warp-native")],
        7: [(0x8, "warp-conditional"), (0x9, "recorded")], 8: [(0xB1, "recorded")], 9: [(0xA, "recorded")],
    }  # fmt: skip


# -- the cross-check's claims on nodes ----------------------------------------------------------------


def test_the_function_check_holds_the_node_against_what_warp_launched(scripted, monkeypatch):
    """The cross-check does not ask Warp again for the kernel's CUfunction: after a module
    rebuild during the capture (a generic kernel's new overload) that is another module's
    function, and every earlier node would be a false node-mismatch. What Warp launched,
    as recorded, is the truth."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    monkeypatch.setattr(_warp, "kernel_function", lambda *args, **kwargs: FUNC + 0x100)  # the rebuilt module's
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        cmd = scripted.launch(K.scale, N, [a, b, 2.5, 3])
    params = packed_bytes(cmd)
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=FUNC), layout(params))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}


def test_a_node_running_another_function_is_never_decoded_as_the_launch(scripted):
    """The launch's only node, running another function, is held against the launch (a
    node-mismatch says so) but its bytes, in another layout, are not decoded as the
    launch's for the replay check; among several such nodes none is taken for the launch's."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    scripted.begin()
    scripted.adds(0x1)
    scripted.adds(0x3)
    with gc.trace_launches() as trace:
        scripted.launch(K.scale, N, [a, b, 2.5, 3])
        scripted.launch(K.scale, N, [a, b, 2.5, 3])
    scripted.kernel(GRAPH, 0x1, kernel_struct([b"\x01" * 8] * 5, keep, func=0xBEEF), [(0, 8)] * 5)
    scripted.kernel(GRAPH, 0x2, kernel_struct([b"\x02" * 8], keep, func=0xCAFE), [(0, 8)], deps=(0x1,))
    scripted.kernel(GRAPH, 0x3, kernel_struct([b"\x03" * 8], keep, func=0xF00D), [(0, 8)], deps=(0x2,))
    scripted.done()
    match = read(scripted, trace)
    assert [(n.record, n.role) for n in match.nodes] == [(0, "recorded"), (None, "foreign"), (None, "foreign")]
    assert match.addresses() == {}, "no node's bytes are the launch's: the recorded addresses stand"
    findings = check(match).findings
    assert [f.kind for f in findings] == ["node-mismatch", "unrecorded-node", "unrecorded-node"]
    assert "function 0xbeef" in findings[0].message


def test_an_adjoint_argument_the_node_holds_otherwise_is_a_node_mismatch(scripted):
    """An adjoint launch's node holds the adjoint arguments after the forward ones: each is
    compared with the bytes Warp passed, and one that differs is named."""
    keep = Keep()
    a, b, ga, gb = floats(), floats(1.0), floats(), floats()
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        cmd = scripted.launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
    params = packed_bytes(cmd)
    node = list(params)
    node[5] = bytes(8) + params[5][8:]  # adj_a's data pointer, zeroed
    scripted.kernel(GRAPH, 0x1, kernel_struct(node, keep, func=ADJOINT_FUNC), layout(params))
    scripted.done()
    (finding,) = check(read(scripted, trace)).findings
    assert finding.kind == "node-mismatch" and "parameter adj_a.data" in finding.message, finding.message


def test_a_parameter_recorded_without_its_bytes_is_compared_not_skipped(scripted, monkeypatch):
    """Only a parameter whose size graphcheck does not know (past the kernel's layout:
    Warp's hidden extras of a deterministic launch) goes uncompared. An adjoint launch
    recorded without its adjoint bytes (graphcheck reading it with the forward layout,
    as a fault injected here) is a node-mismatch, never a silent pass."""
    keep = Keep()
    a, b, ga, gb = floats(), floats(1.0), floats(), floats()
    scripted.begin()
    scripted.adds(0x1)
    forward_only = _warp.kernel_layout
    with monkeypatch.context() as fault:
        fault.setattr(_warp, "kernel_layout", lambda kernel, adjoint=False: forward_only(kernel, False))
        with gc.trace_launches() as trace:
            cmd = scripted.launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
    params = packed_bytes(cmd)
    assert trace[0].param_bytes[5:] == (b"",) * 4, "the fault left the adjoint arguments unrecorded"
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=ADJOINT_FUNC), layout(params))
    scripted.done()
    (finding,) = check(read(scripted, trace)).findings
    assert finding.kind == "node-mismatch" and "parameter adj_a" in finding.message, finding.message


def test_a_memset_node_is_read_in_its_elements(scripted):
    """A memset node sets width elements of elementSize bytes (cuMemsetD32: 4): read as
    bytes, a zero_() of N floats set through N four-byte elements is the whole array."""
    a = floats(3.0)
    scripted.begin()
    scripted.adds(0x1)
    with gc.trace_launches() as trace:
        a.zero_()
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 2 * N, element_size=4))  # half the array
    scripted.done()
    (finding,) = check(read(scripted, trace)).findings
    assert finding.kind == "node-mismatch" and f"{2 * N} bytes where zero_() sets {4 * N}" in finding.message


# -- graphcheck's own failures ------------------------------------------------------------------------


def test_a_failure_of_graphchecks_launch_hook_never_stops_the_launch(scripted, monkeypatch):
    """The CUDA launch hook builds the parameter layout before the launch; an exception
    there must not stop the user's launch. The launch runs, and a warning says the checks
    do not cover it."""

    def broken(kernel, adjoint):
        raise RuntimeError("an argument type graphcheck does not know")

    a = floats()
    monkeypatch.setattr(_warp, "kernel_layout", broken)
    launched = []
    native = scripted.launch_native()
    monkeypatch.setattr(scripted, "launch_native", lambda fails=False: lambda *args: launched.append(args) or native())
    with gc.trace_launches() as trace, pytest.warns(gc.GraphCheckWarning, match="could not record a CUDA launch"):
        scripted.launch(K.add_one, N, [a])
    scripted.done()
    assert len(launched) == 1 and len(trace) == 0


def test_a_driver_describing_endless_parameters_is_cut_short():
    """The parameter layout is read one cuFuncGetParamInfo at a time until the driver says
    there is no more; a driver that never says so does not loop for ever (no driver runs:
    the answers are recorded)."""
    from tests.recorded_driver import RecordedDriver, driver

    class Endless(RecordedDriver):
        def cuFuncGetParamInfo(self, func, index):
            assert index < 40_000, "asked past any kernel's parameters"
            return driver.CUresult.CUDA_SUCCESS, 8 * index, 8

    layout, why = _cuda.Reader(Endless(), 13000).layout(FUNC)
    assert layout is None and "answered past 32768 parameters" in why


# -- child graphs ---------------------------------------------------------------------------------------


def test_the_addresses_a_graph_branch_bakes_reach_the_replay_check(scripted):
    """wp.capture_if(on_true=graph) copies the branch graph into the capture; its nodes bake
    addresses too, and the replay check sees them (as the conditional's), beside the
    condition's own address."""
    keep = Keep()
    x, y = floats(), floats(1.0)
    condition = wp.array([1], dtype=int, device="cpu")
    scripted.begin(graph=0xC000)
    scripted.adds(0xC1)
    with gc.trace_launches() as branch_trace:  # the branch graph, captured before: its launch's bytes
        branch = scripted.launch(K.add_one, N, [x])
    scripted.pause()
    scripted.begin()

    def enter_the_branch():  # on CUDA: the Graph branch, inserted as a child graph node into the body
        scripted.resume(BODY, inserted=(0x2,))
        scripted.resume(GRAPH)

    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=enter_the_branch)
    scripted.done()
    setter = kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D)
    scripted.kernel(GRAPH, 0x1, setter, [(0, 8)] * 2, name=b"set_conditional_if_handle_kernel")
    scripted.node(GRAPH, 0x2, "CONDITIONAL", deps=(0x1,))
    scripted.graphs[BODY] = []
    scripted.child(BODY, 0xB1, 0xC000)
    params = packed_bytes(branch)
    scripted.kernel(0xC000, 0xC1, kernel_struct(params, keep, func=0xF00), layout(params), name=b"add_one")
    scripted.node(0xC000, 0xC2, "MEMCPY", memcpy_struct(y.ptr, x.ptr, 4 * N), deps=(0xC1,))
    nodes = walk(_cuda.Reader(scripted, scripted.version), GRAPH, trace.records)
    match = match_nodes(nodes, trace, child_kernels={0xF00: (K.add_one, False)})
    assert [n.role for n in nodes] == ["warp-conditional", "recorded", "structure", "embedded", "embedded"]
    assert match.complete and check(match).findings == []
    (addresses,) = match.addresses().values()
    assert sorted((a.arg, a.start) for a in addresses) == [
        ("a (child graph node 3)", x.ptr), ("condition", condition.ptr), ("dest (child graph node 4)", y.ptr),
        ("src (child graph node 4)", x.ptr),
    ]  # fmt: skip
    unknown = match_nodes(nodes, trace)  # no Warp kernel known for the branch's function
    assert unknown.gaps == [
        "the addresses 1 kernel node(s) of child graphs bake cannot be read for the replay check (not a Warp "
        "kernel loaded now): node 3 (add_one)"
    ]
    assert len(branch_trace) == 1


# -- deterministic mode ---------------------------------------------------------------------------------


def test_a_deterministic_launch_owns_the_native_work_around_its_phases(scripted):
    """In deterministic mode Warp's launcher enqueues native work of its own around the
    kernel's phase launches (a sort-reduce kernel, a device copy of counters): one internal
    operation holds those nodes. Warp's launcher runs on CUDA only: it is stood in for by
    the phases it enqueues, a phase launch through graphcheck's hook and the native work
    as Warp's own enqueues, behind graphcheck's real hook on Warp's launcher."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    cuda0 = scripted.devices["cuda:0"]
    scripted.begin()
    scripted.adds(0x1)  # Warp's sort-reduce
    scripted.adds(0x2)  # the phase launch
    scripted.adds(0x3)  # Warp's copy of the counters
    phases = []

    def launcher(kernel, hooks, params, bounds, device, stream, *rest, **kwargs):
        scripted.native_work()
        phases.append(scripted.launch(K.scale, N, [a, b, 2.5, 3]))
        scripted.native_work()

    hook = deterministic_hook(launcher)
    with gc.trace_launches(include_warp=True) as trace:
        assert "launch_deterministic" in _warp.HOOKS.left_behind(), "graphcheck's hook is in Warp's launcher's place"
        hook(K.scale, None, [], None, cuda0, STREAM, 0, 256, None, [])
    scripted.done()
    assert [(r.kind, r.kernel, r.internal, r.device) for r in trace] == [
        ("native", "launch_deterministic", True, "cuda:0"), ("launch", "tests.kernels.scale", False, "cuda:0")
    ]  # fmt: skip
    sort_reduce = kernel_struct([b"\x00" * 8] * 3, keep, func=0x5EED)
    scripted.kernel(GRAPH, 0x1, sort_reduce, [(0, 8)] * 3, name=b"deterministic_sort_reduce")
    params = packed_bytes(phases[0])
    scripted.kernel(GRAPH, 0x2, kernel_struct(params, keep, func=FUNC), layout(params), deps=(0x1,))
    scripted.node(GRAPH, 0x3, "MEMCPY", memcpy_struct(0x7000, 0x8000, 64), deps=(0x2,))
    assert matched(scripted, trace) == {0: [(0x1, "warp-native"), (0x3, "warp-native")], 1: [(0x2, "recorded")]}
    scripted.adds(0x4)  # the next call's phase launch

    def phase_only(kernel, hooks, params, bounds, device, stream, *rest, **kwargs):
        scripted.launch(K.scale, N, [a, b, 2.5, 3])

    with gc.trace_launches() as user:
        deterministic_hook(phase_only)(K.scale, None, [], None, cuda0, None, 0, 256, None, [])
    scripted.done()
    assert [r.kernel for r in user] == ["tests.kernels.scale"], "Warp's own operation stays out of the user's trace"


def _deterministic_launcher(scripted: ScriptedCapture, a: wp.array, b: wp.array, made: dict[str, Any]):
    """Stands in for Warp 1.19's launch_deterministic for a kernel with one scatter target
    (warp/_src/deterministic.py), with Warp's own calls: its buffers made and set up on a
    non-capturing allocation stream while capturing (det_buffer_allocation_scope), the
    resets it adds only while capturing, the phase launch (through graphcheck's CUDA
    launch hook), the readback of its counter outside captures, the sort-reduce."""

    def launch_deterministic(kernel, hooks, params, bounds, device, stream, *rest, **kwargs):
        capturing = scripted.stream_is_capturing(stream)
        with scripted.current_stream(ALLOC_STREAM if capturing else STREAM):
            keys = wp.full(1024, -1, dtype=wp.int64, device="cpu")
            values = wp.zeros(1024, dtype=float, device="cpu")
            counter = wp.zeros(1, dtype=wp.int32, device="cpu")
        if capturing:
            keys.fill_(-1)
            values.zero_()
            counter.zero_()
        phase = scripted.launch(K.scale, N, [a, b, 2.5, 3])
        if not capturing:
            counter.numpy()
        scripted.native_work()
        made.update(keys=keys, values=values, counter=counter, phase=phase)

    return launch_deterministic


def test_warps_deterministic_machinery_is_internal_to_the_call(scripted):
    """Inside a capture Warp sets its deterministic buffers up on a stream of its own that
    does not capture (once, on purpose) and adds resets to the capture that an eager call
    does not make: none of it is the user's work, so a safe deterministic step has no
    stream-drift and no sequence difference from its reference call."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    cuda0 = scripted.devices["cuda:0"]
    made: dict[str, Any] = {}
    hook = deterministic_hook(_deterministic_launcher(scripted, a, b, made))
    with gc.LaunchTrace(eager=True, include_warp=True) as reference:
        hook(K.scale, None, [], None, cuda0, STREAM, 0, 256, None, [])
    scripted.begin()
    for _ in range(3):  # the buffers' set-up, on the allocation stream
        scripted.escapes()
    for node in (0x1, 0x2, 0x3, 0x4, 0x5):  # three resets, the phase launch, the sort-reduce
        scripted.adds(node)
    with gc.LaunchTrace(include_warp=True) as captured:
        hook(K.scale, None, [], None, cuda0, STREAM, 0, 256, None, [])
    scripted.done()
    assert [r.kernel for r in captured if not r.internal] == ["tests.kernels.scale"]
    assert [r.kernel for r in reference if not r.internal] == ["tests.kernels.scale"]
    assert reference.host_syncs == [], "Warp's readback of its own counter is not the user's"
    assert uncaptured(captured) == []
    assert judge(None, captured, None, None, CaptureOptions(), name="sort", device="cuda:0")[0].findings == ()
    assert between_calls.check(reference, captured, None, strict=False, validated_before=False).findings == []
    keys, values, counter = made["keys"], made["values"], made["counter"]
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(keys.ptr, 8 * 1024, value=0xFF))
    scripted.node(GRAPH, 0x2, "MEMSET", memset_struct(values.ptr, 4 * 1024), deps=(0x1,))
    scripted.node(GRAPH, 0x3, "MEMSET", memset_struct(counter.ptr, 4), deps=(0x2,))
    params = packed_bytes(made["phase"])
    scripted.kernel(GRAPH, 0x4, kernel_struct(params, keep, func=FUNC), layout(params), deps=(0x3,))
    sort_reduce = kernel_struct([b"\x00" * 8] * 3, keep, func=0x5EED)
    scripted.kernel(GRAPH, 0x5, sort_reduce, [(0, 8)] * 3, name=b"deterministic_sort_reduce", deps=(0x4,))
    match = read(scripted, captured)
    assert [n.role for n in match.nodes] == ["recorded"] * 4 + ["warp-native"]
    result = check(match)
    assert result.findings == [] and result.complete, ([f.message for f in result.findings], result.notes)


# -- the GPU run's own tools ------------------------------------------------------------------------------


@pytest.mark.skipif(_cuda_visible(), reason="checks the probe on a machine without CUDA")
def test_the_driver_probe_skips_cleanly_without_cuda():
    """tests_gpu/probe.py imports, registers its sections, and exits 0 saying why it skipped."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "tests_gpu" / "probe.py")], capture_output=True, text=True, cwd=root, check=False
    )
    assert done.returncode == 0 and "probe: skipped, Warp sees no CUDA device" in done.stdout, done.stdout + done.stderr

"""The session's CUDA bookkeeping, driven on Warp's CPU device for every kind of operation.

No driver runs in these tests. Each operation is Warp's own, run on the CPU with
graphcheck's hooks in place; the stream it goes to and the driver's answers about that
stream's capture come from a script of real ``cuda.bindings`` values
(:mod:`tests.scripted_capture`). Each test checks that graphcheck asked the driver
exactly what the script holds (where the capture stood before and after each
operation), that every record learnt its capture span, and that a graph built by hand
from real ``cuda.bindings`` structs, filled from Warp's side of each operation, matches
one node per record with nothing left over and nothing flagged.
"""

from __future__ import annotations

import pytest
import warp as wp

import graphcheck as gc
from graphcheck.checks import host_rules, uncaptured
from graphcheck.crosscheck import check
from graphcheck.graph import match_nodes, walk
from tests import kernels as K
from tests.internals import _cuda, _warp
from tests.recorded_driver import Keep, kernel_struct, memcpy_struct, memset_struct
from tests.scripted_capture import (
    ADJOINT_FUNC,
    BODY,
    FUNC,
    GRAPH,
    OTHER_STREAM,
    STREAM,
    ScriptedCapture,
    cuda_launch,
    install,
    packed_bytes,
    resumed,
)

DEVICE = "cpu"
N = 64


def _cuda_visible() -> bool:
    from tests.internals import _warp

    return _warp.cuda_available()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedCapture:
    """The driver's answers, scripted by each test (no driver runs)."""
    return install(monkeypatch)


def floats(value: float = 0.0, requires_grad: bool = False) -> wp.array:
    return wp.full(N, value, dtype=float, device=DEVICE, requires_grad=requires_grad)


def layout(param_bytes: list[bytes]) -> list[tuple[int, int]]:
    out, offset = [], 0
    for b in param_bytes:
        out.append((offset, len(b)))
        offset += len(b)
    return out


def matched(script: ScriptedCapture, trace: gc.LaunchTrace) -> dict[int, list[tuple[int, str]]]:
    """Check what every test checks, and return record index -> its nodes and their roles."""
    script.done()
    missing = [f"#{i} {r.kernel}" for i, r in enumerate(trace.records) if r.capture is None]
    assert not missing, f"records without a capture span: {missing}"
    nodes = walk(_cuda.Reader(script, script.version), GRAPH, trace.records)
    match = match_nodes(nodes, trace)
    result = check(match)
    assert result.findings == [], [f.message for f in result.findings]
    assert result.complete, result.notes
    # Warp's own nodes no operation makes (allocations of arrays recorded during the capture) stay unclaimed.
    left = [(hex(n.handle), n.type, n.role) for n in nodes if n.record is None and n.role != "allocation"]
    assert not left, f"nodes no record claimed: {left}"
    owned: dict[int, list[tuple[int, str]]] = {}
    for node in nodes:
        if node.record is not None:
            owned.setdefault(node.record, []).append((node.handle, node.role))
    return owned


# -- kernel launches: wp.launch, wp.Launch replays, launch_tiled, adjoint --------------------------


@pytest.mark.parametrize("how", ["launch", "replay", "tiled", "adjoint"])
def test_a_cuda_launch_learns_its_span_and_matches_its_kernel_node(scripted, how):
    keep = Keep()
    a, b, ga, gb = floats(), floats(1.0), floats(), floats()
    scripted.op(GRAPH, (), (0x1,))
    with gc.trace_launches() as trace:
        if how == "adjoint":
            cmd = cuda_launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
        elif how == "tiled":
            cmd = cuda_launch(K.add_one_tiled, (N, 32), [a], block_dim=32, tiled=32)
        else:
            cmd = cuda_launch(K.scale, N, [a, b, 2.5, 3], replay=how == "replay")
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
    assert len(record.param_bytes) == len(params)


def test_a_launch_warp_refuses_is_taken_back(scripted):
    """Warp's native launch fails (it raises its own error): nothing was enqueued, so
    the record is retracted and graphcheck asks nothing after it."""
    a = floats()
    scripted.before(GRAPH, ())
    with gc.trace_launches() as trace:
        cuda_launch(K.add_one, N, [a], native=lambda *args: 1)
    scripted.done()
    assert len(trace) == 0


# -- copies, memsets, fills, native helpers -----------------------------------------------------------


def test_a_copy_learns_its_span_and_matches_its_memcpy_node(scripted):
    """wp.copy asked where the capture stood after it, never before."""
    a, b = floats(), floats(1.0)
    scripted.op(GRAPH, (), (0x1,))
    with gc.trace_launches() as trace:
        wp.copy(a, b, dest_offset=4, src_offset=2, count=10)
    scripted.node(GRAPH, 0x1, "MEMCPY", memcpy_struct(a.ptr + 16, b.ptr + 8, 40))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}


def test_a_copy_with_gradients_gives_each_copy_its_node(scripted):
    """Warp copies the data, then the gradients in a second wp.copy nested in the first."""
    a, b = floats(requires_grad=True), floats(1.0, requires_grad=True)
    scripted.before(GRAPH, ())  # the outer copy
    scripted.op(GRAPH, (0x1,), (0x2,))  # the gradients' copy, after the data's node 0x1
    scripted.after(GRAPH, (0x2,))
    with gc.trace_launches() as trace:
        wp.copy(a, b)
    scripted.node(GRAPH, 0x1, "MEMCPY", memcpy_struct(a.ptr, b.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMCPY", memcpy_struct(a.grad.ptr, b.grad.ptr, 4 * N), deps=(0x1,))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")], 1: [(0x2, "recorded")]}


def test_a_clone_allocates_in_the_graph_and_copies(scripted):
    b = floats(1.0)
    scripted.op(GRAPH, (0x1,), (0x2,))  # the allocation (node 0x1) is no operation
    with gc.trace_launches() as trace:
        c = wp.clone(b)
    scripted.node(GRAPH, 0x1, "MEM_ALLOC", _alloc(c.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMCPY", memcpy_struct(c.ptr, b.ptr, 4 * N), deps=(0x1,))
    nodes = matched(scripted, trace)
    assert nodes == {0: [(0x2, "recorded")]}


def _alloc(ptr: int, nbytes: int):
    from tests.recorded_driver import driver

    params = driver.CUDA_MEM_ALLOC_NODE_PARAMS()
    params.dptr, params.bytesize = driver.CUdeviceptr(ptr), nbytes
    return params


def test_zero_learns_its_span_and_matches_its_memset_node(scripted):
    a = floats(3.0)
    scripted.op(GRAPH, (), (0x1,))
    with gc.trace_launches() as trace:
        a.zero_()
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 4 * N))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}


def test_a_fill_owns_the_kernel_warp_launches_for_it(scripted):
    keep = Keep()
    a = floats()
    u8 = wp.zeros(N, dtype=wp.uint8, device=DEVICE)
    scripted.op(GRAPH, (), (0x1,))
    scripted.op(GRAPH, (0x1,), (0x2,))
    with gc.trace_launches() as trace:
        a.fill_(3.0)  # on CUDA: memtile_value_kernel
        u8.fill_(7)  # on CUDA: a memset of one-byte elements
    tile = kernel_struct([b"\x00" * 8] * 4, keep, func=0x5151)
    scripted.kernel(GRAPH, 0x1, tile, [(0, 8)] * 4, name=b"memtile_value_kernel")
    scripted.node(GRAPH, 0x2, "MEMSET", memset_struct(u8.ptr, N, value=7), deps=(0x1,))
    assert matched(scripted, trace) == {0: [(0x1, "warp-native")], 1: [(0x2, "recorded")]}


def test_a_native_helper_owns_the_nodes_it_enqueues(scripted):
    keep = Keep()
    values = wp.array(range(N), dtype=int, device=DEVICE)
    out = wp.zeros(N, dtype=int, device=DEVICE)
    keys = wp.array(list(range(N, 0, -1)) * 2, dtype=int, device=DEVICE)
    items = wp.zeros(2 * N, dtype=int, device=DEVICE)
    scripted.op(GRAPH, (), (0x2,))
    scripted.op(GRAPH, (0x2,), (0x4,))
    with gc.trace_launches() as trace:
        wp.utils.array_scan(values, out)
        wp.utils.radix_sort_pairs(keys, items, N)
    for handle, deps in ((0x1, ()), (0x2, (0x1,)), (0x3, (0x2,)), (0x4, (0x3,))):
        struct = kernel_struct([b"\x00" * 8], keep, func=0x6000 + handle)
        scripted.kernel(GRAPH, handle, struct, [(0, 8)], name=b"cub_kernel", deps=deps)
    assert matched(scripted, trace) == {
        0: [(0x1, "warp-native"), (0x2, "warp-native")], 1: [(0x3, "warp-native"), (0x4, "warp-native")]
    }  # fmt: skip


# -- conditionals, pauses -----------------------------------------------------------------------------


def test_a_conditional_and_its_body_learn_their_spans(scripted):
    """Warp captures the body of wp.capture_if into a body graph it resumes the capture
    into; the conditional's span covers the kernel that sets its handle and its node."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    condition = wp.array([1], dtype=int, device=DEVICE)
    scripted.before(GRAPH, ())  # wp.capture_if
    scripted.op(BODY, (), (0xB1,))  # the body's memset
    scripted.op(BODY, (0xB1,), (0xB2,))  # the body's launch
    scripted.after(GRAPH, (0x2,))
    cmds = []

    def body():
        resumed(BODY)
        a.zero_()
        cmds.append(cuda_launch(K.scale, N, [a, b, 2.5, 3]))
        resumed(GRAPH)  # back to the parent graph: not a body

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
    assert conditional.capture.bodies == (BODY,)
    assert zero.nested == launch.nested == (conditional.seq, "on_true", 0)


def test_work_while_the_capture_is_paused_is_neither_in_the_graph_nor_a_gap(scripted):
    """Between wp.capture_pause() and wp.capture_resume() the stream does not capture and
    Warp holds no capture for the device: the operation runs once, eagerly, on purpose."""
    a = floats()
    scripted.op(GRAPH, (), (0x1,))
    scripted.uncaptured()  # paused: the device holds no capture
    scripted.op(GRAPH, (0x1,), (0x2,))
    with gc.trace_launches() as trace:
        a.zero_()
        a.zero_()
        a.zero_()
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 4 * N))
    scripted.node(GRAPH, 0x2, "MEMSET", memset_struct(a.ptr, 4 * N), deps=(0x1,))
    scripted.done()
    assert [r.capture for r in trace] == [(GRAPH, (), (0x1,), ()), None, (GRAPH, (0x1,), (0x2,), ())]
    assert [r.uncaptured for r in trace] == [None, 0, None]
    for record in trace:
        record.device = "cuda:0"  # as recorded on CUDA: an operation that escaped would be a gap
    result = check(match_nodes(walk(_cuda.Reader(scripted, scripted.version), GRAPH, trace.records), trace))
    assert result.findings == [] and result.complete, result.notes
    assert uncaptured(trace) == []


def test_eager_work_with_no_capture_open_asks_no_device_for_its_capturing_streams(scripted):
    """Outside every capture (a reference call) Warp holds none open: graphcheck asks the
    stream and Warp's runtime, never the device's captures (the script holds no such
    question; one asked would fail). While another device captures, the device is asked."""
    a = floats()
    scripted.uncaptured()  # no capture open anywhere
    scripted.uncaptured(elsewhere=True)  # one open on another device: this one holds none
    with gc.trace_launches() as trace:
        a.zero_()
        a.zero_()
    scripted.done()
    assert [(r.capture, r.uncaptured) for r in trace] == [(None, 0), (None, 0)]
    assert uncaptured(trace) == []


def test_warp_registers_no_cpu_capture_as_open():
    """The adapter reads Warp's own bookkeeping (its runtime's captures): a CPU capture,
    which no CUDA device records, is never one of them."""
    assert not _warp.capture_open_anywhere()
    with wp.ScopedCapture(device=DEVICE):
        assert not _warp.capture_open_anywhere()
    assert not _warp.capture_open_anywhere()


def test_a_conditional_is_asked_about_the_stream_it_is_given(scripted):
    """wp.capture_if(..., stream=s) inserts the conditional on s, so
    graphcheck asks where s's capture stands (it asked the device's current stream)."""
    a = floats()
    condition = wp.array([1], dtype=int, device=DEVICE)
    scripted.before(GRAPH, (), stream=OTHER_STREAM)  # wp.capture_if on OTHER_STREAM
    scripted.op(BODY, (), (0xB1,))  # its body's zero_ (on the current stream, as the test's device has it)
    scripted.after(GRAPH, (0x1,), stream=OTHER_STREAM)

    def body():
        resumed(BODY)
        a.zero_()

    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=body, stream=OTHER_STREAM)  # on the CPU Warp ignores the stream
    scripted.done()
    conditional, zero = trace
    assert (conditional.stream, conditional.capture) == (OTHER_STREAM, (GRAPH, (), (0x1,), (BODY,)))
    assert zero.capture == (BODY, (), (0xB1,), ())


def test_work_on_a_stream_the_capture_does_not_record_is_a_stream_drift(scripted):
    """under wp.ScopedCapture(stream=s), which does not make s current,
    Warp sends zero_() to the device's current stream: it runs once, at capture time, and
    is missing from the graph. That is a finding, not a note."""
    a = floats()
    scripted.op(GRAPH, (), (0x1,), stream=STREAM)
    scripted.uncaptured(STREAM, capturing=(OTHER_STREAM,))
    with gc.trace_launches() as trace:
        a.zero_()
        a.zero_()
    scripted.done()
    captured, escaped = trace
    assert (escaped.capture, escaped.uncaptured) == (None, OTHER_STREAM)
    (finding,) = uncaptured(trace)
    assert finding.kind == "stream-drift" and finding.index == 1
    assert f"went to stream {STREAM:#x} while the capture records stream {OTHER_STREAM:#x}" in finding.message
    assert "wp.ScopedStream" in finding.message
    outcome = host_rules(trace, None, strict=False, device="cuda:0")
    assert [f.kind for f in outcome.findings] == ["stream-drift"]
    escaped.device = captured.device = "cuda:0"
    scripted.node(GRAPH, 0x1, "MEMSET", memset_struct(a.ptr, 4 * N))
    match = match_nodes(walk(_cuda.Reader(scripted, scripted.version), GRAPH, trace.records), trace)
    assert match.gaps == [], "a finding already says it; the cross-check itself is complete"


def test_a_native_device_helper_runs_on_the_current_cuda_context(scripted, monkeypatch):
    """Warp's device helpers enqueue on the current CUDA context's
    current stream; graphcheck took the default device's."""
    from tests.internals import _warp

    monkeypatch.setattr(_warp, "current_cuda_device", lambda: _Named("cuda:1"))
    streams = {}
    monkeypatch.setattr(_warp, "device_stream_handle", lambda device: streams.setdefault(str(device), STREAM))
    scripted.op(GRAPH, (), (0x1,))
    with gc.trace_launches() as trace:
        session = _warp.current_session()
        session.on_native(lambda *args: None, "array_scan_int_device", True, (0, 0, 4, 1, 1, 1, False))
    scripted.done()
    assert trace[0].device == "cuda:1" and list(streams) == ["cuda:1"]


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


# -- one step of every kind --------------------------------------------------------------------------


def test_a_step_of_every_kind_matches_one_node_per_record(scripted):
    """The kinds above in one capture, each starting where the one before it left the stream."""
    keep = Keep()
    a, b = floats(requires_grad=True), floats(1.0, requires_grad=True)
    values, out = wp.array(range(N), dtype=int, device=DEVICE), wp.zeros(N, dtype=int, device=DEVICE)
    condition = wp.array([1], dtype=int, device=DEVICE)
    scripted.op(GRAPH, (), (0x1,))  # launch
    scripted.op(GRAPH, (0x1,), (0x2,))  # replay
    scripted.before(GRAPH, (0x2,))  # copy with gradients
    scripted.op(GRAPH, (0x3,), (0x4,))
    scripted.after(GRAPH, (0x4,))
    scripted.op(GRAPH, (0x4,), (0x5,))  # zero_
    scripted.op(GRAPH, (0x5,), (0x6,))  # fill_
    scripted.op(GRAPH, (0x6,), (0x7,))  # array_scan
    scripted.before(GRAPH, (0x7,))  # capture_if
    scripted.op(BODY, (), (0xB1,))
    scripted.after(GRAPH, (0x9,))
    scripted.op(GRAPH, (0x9,), (0xA,))  # adjoint launch
    ga, gb = floats(), floats()
    with gc.trace_launches() as trace:
        launch = cuda_launch(K.scale, N, [a, b, 2.5, 3])
        replay = cuda_launch(K.scale, N, [a, b, 2.5, 3], replay=True)
        wp.copy(a, b)
        a.zero_()
        b.fill_(2.0)
        wp.utils.array_scan(values, out)
        wp.capture_if(condition, on_true=lambda: (resumed(BODY), a.zero_()))
        adjoint = cuda_launch(K.scale, N, [a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0])
    chain = iter([(), (0x1,), (0x2,), (0x3,), (0x4,), (0x5,), (0x6,), (0x7,), (0x8,)])
    for handle, cmd in ((0x1, launch), (0x2, replay)):
        params = packed_bytes(cmd)
        scripted.kernel(GRAPH, handle, kernel_struct(params, keep, func=FUNC), layout(params), deps=next(chain))
    scripted.node(GRAPH, 0x3, "MEMCPY", memcpy_struct(a.ptr, b.ptr, 4 * N), deps=next(chain))
    scripted.node(GRAPH, 0x4, "MEMCPY", memcpy_struct(a.grad.ptr, b.grad.ptr, 4 * N), deps=next(chain))
    scripted.node(GRAPH, 0x5, "MEMSET", memset_struct(a.ptr, 4 * N), deps=next(chain))
    filler = kernel_struct([b"\x00" * 8], keep, func=0x5151)
    scripted.kernel(GRAPH, 0x6, filler, [(0, 8)], name=b"memtile_value_kernel", deps=next(chain))
    scan = kernel_struct([b"\x00" * 8], keep, func=0x6001)
    scripted.kernel(GRAPH, 0x7, scan, [(0, 8)], name=b"scan_kernel", deps=next(chain))
    setter = kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D)
    scripted.kernel(GRAPH, 0x8, setter, [(0, 8)] * 2, name=b"set_conditional_if_handle_kernel", deps=next(chain))
    scripted.node(GRAPH, 0x9, "CONDITIONAL", deps=next(chain))
    scripted.graphs[BODY] = []
    scripted.node(BODY, 0xB1, "MEMSET", memset_struct(a.ptr, 4 * N))
    params = packed_bytes(adjoint)
    scripted.kernel(GRAPH, 0xA, kernel_struct(params, keep, func=ADJOINT_FUNC), layout(params), deps=(0x9,))
    owned = matched(scripted, trace)
    assert [r.kernel for r in trace] == [
        "tests.kernels.scale", "tests.kernels.scale", "wp.copy", "wp.copy", "array.zero_", "array.fill_",
        "array_scan_int_host", "wp.capture_if", "array.zero_", "tests.kernels.scale",
    ]  # fmt: skip
    assert owned == {
        0: [(0x1, "recorded")], 1: [(0x2, "recorded")], 2: [(0x3, "recorded")], 3: [(0x4, "recorded")],
        4: [(0x5, "recorded")], 5: [(0x6, "warp-native")], 6: [(0x7, "warp-native")],
        7: [(0x8, "warp-conditional"), (0x9, "recorded")], 8: [(0xB1, "recorded")], 9: [(0xA, "recorded")],
    }  # fmt: skip


# -- the cross-check's claims on kernel nodes ---------------------------------------------------------


def test_the_function_check_holds_the_node_against_what_warp_launched(scripted, monkeypatch):
    """the cross-check asked Warp again for the kernel's CUfunction;
    after a module rebuild during the capture (a generic kernel's new overload) that is
    another module's function, and every earlier node was a false node-mismatch. What
    Warp launched, as recorded, is the truth."""
    from tests.internals import _warp

    keep = Keep()
    a, b = floats(), floats(1.0)
    monkeypatch.setattr(_warp, "kernel_function", lambda *args, **kwargs: FUNC + 0x100)  # the rebuilt module's
    scripted.op(GRAPH, (), (0x1,))
    with gc.trace_launches() as trace:
        cmd = cuda_launch(K.scale, N, [a, b, 2.5, 3])
    trace[0].device = "cuda:0"  # as recorded on CUDA
    params = packed_bytes(cmd)
    scripted.kernel(GRAPH, 0x1, kernel_struct(params, keep, func=FUNC), layout(params))
    assert matched(scripted, trace) == {0: [(0x1, "recorded")]}


def test_a_node_running_another_function_is_never_decoded_as_the_launch(scripted):
    """the launch's only node, running another function, is held
    against the launch (a node-mismatch says so) but its bytes, in another layout, are not
    decoded as the launch's for the replay check (they raised ValueError); among several
    such nodes none is taken for the launch's."""
    keep = Keep()
    a, b = floats(), floats(1.0)
    scripted.op(GRAPH, (), (0x1,))
    scripted.op(GRAPH, (0x1,), (0x3,))
    with gc.trace_launches() as trace:
        cuda_launch(K.scale, N, [a, b, 2.5, 3])
        cuda_launch(K.scale, N, [a, b, 2.5, 3])
    scripted.kernel(GRAPH, 0x1, kernel_struct([b"\x01" * 8] * 5, keep, func=0xBEEF), [(0, 8)] * 5)
    scripted.kernel(GRAPH, 0x2, kernel_struct([b"\x02" * 8], keep, func=0xCAFE), [(0, 8)], deps=(0x1,))
    scripted.kernel(GRAPH, 0x3, kernel_struct([b"\x03" * 8], keep, func=0xF00D), [(0, 8)], deps=(0x2,))
    scripted.done()
    match = match_nodes(walk(_cuda.Reader(scripted, scripted.version), GRAPH, trace.records), trace)
    assert [(n.record, n.role) for n in match.nodes] == [(0, "recorded"), (None, "foreign"), (None, "foreign")]
    assert match.addresses() == {}, "no node's bytes are the launch's: the recorded addresses stand"
    findings = check(match).findings
    assert [f.kind for f in findings] == ["node-mismatch", "unrecorded-node", "unrecorded-node"]
    assert "function 0xbeef" in findings[0].message


# -- graphcheck's own failures ------------------------------------------------------------------------


def test_a_failure_of_graphchecks_launch_hook_never_stops_the_launch(scripted, monkeypatch):
    """the CUDA launch hook builds the parameter layout before the
    launch; an exception there stopped the user's launch. The launch runs, and a warning
    says the checks do not cover it."""
    from tests.internals import _warp

    def broken(kernel, adjoint):
        raise RuntimeError("an argument type graphcheck does not know")

    a = floats()
    monkeypatch.setattr(_warp, "kernel_layout", broken)
    launched = []
    with gc.trace_launches() as trace, pytest.warns(gc.GraphCheckWarning, match="could not record a CUDA launch"):
        cuda_launch(K.add_one, N, [a], native=lambda *args: launched.append(args) or 0)
    scripted.done()
    assert len(launched) == 1 and len(trace) == 0


def test_a_driver_describing_endless_parameters_is_cut_short():
    """the parameter layout is read one cuFuncGetParamInfo at a time
    until the driver says there is no more; a driver that never says so no longer loops
    for ever (no driver runs: the answers are recorded)."""
    from tests.recorded_driver import RecordedDriver, driver

    class Endless(RecordedDriver):
        def cuFuncGetParamInfo(self, func, index):
            assert index < 40_000, "asked past any kernel's parameters"
            return driver.CUresult.CUDA_SUCCESS, 8 * index, 8

    layout, why = _cuda.Reader(Endless(), 13000).layout(FUNC)
    assert layout is None and "answered past 32768 parameters" in why


# -- child graphs ---------------------------------------------------------------------------------------


def test_the_addresses_a_graph_branch_bakes_reach_the_replay_check(scripted):
    """wp.capture_if(on_true=graph) copies the branch graph into the
    capture; its nodes bake addresses too, and the replay check now sees them (as the
    conditional's), beside the condition's own address."""
    keep = Keep()
    x, y = floats(), floats(1.0)
    condition = wp.array([1], dtype=int, device=DEVICE)
    scripted.op(0xC000, (), (0xC1,))
    with gc.trace_launches() as branch_trace:  # the branch graph, captured before: its launch's bytes
        branch = cuda_launch(K.add_one, N, [x])
    scripted.before(GRAPH, ())
    scripted.after(GRAPH, (0x2,))
    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=lambda: resumed(BODY))  # on CUDA: the Graph branch, inserted
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
    """in deterministic mode Warp's launcher enqueues native work of its
    own around the kernel's phase launches (a sort-reduce kernel, a device copy of counters);
    those nodes were "from outside Warp". One internal operation now holds them. Warp's
    launcher is stood in for by the phases it enqueues (it runs on CUDA only): a phase
    launch through graphcheck's hook, and the native work as scripted nodes."""
    from tests.internals import _warp, deterministic_hook

    keep = Keep()
    a, b = floats(), floats(1.0)
    scripted.before(GRAPH, ())  # launch_deterministic
    scripted.op(GRAPH, (0x1,), (0x2,))  # its phase launch, after Warp's sort-reduce (node 0x1)
    scripted.after(GRAPH, (0x3,))  # then Warp's copy of the counters (node 0x3)
    phases = []

    def launcher(kernel, hooks, params, bounds, device, stream, *rest, **kwargs):
        phases.append(cuda_launch(K.scale, N, [a, b, 2.5, 3]))

    hook = deterministic_hook(launcher)
    with gc.trace_launches(include_warp=True) as trace:
        assert "launch_deterministic" in _warp.HOOKS.left_behind(), "graphcheck's hook is in Warp's launcher's place"
        hook(K.scale, None, [], None, "cpu", STREAM, 0, 256, None, [])
    scripted.done()
    assert [(r.kind, r.kernel, r.internal) for r in trace] == [
        ("native", "launch_deterministic", True), ("launch", "tests.kernels.scale", False)
    ]  # fmt: skip
    sort_reduce = kernel_struct([b"\x00" * 8] * 3, keep, func=0x5EED)
    scripted.kernel(GRAPH, 0x1, sort_reduce, [(0, 8)] * 3, name=b"deterministic_sort_reduce")
    params = packed_bytes(phases[0])
    scripted.kernel(GRAPH, 0x2, kernel_struct(params, keep, func=FUNC), layout(params), deps=(0x1,))
    scripted.node(GRAPH, 0x3, "MEMCPY", memcpy_struct(0x7000, 0x8000, 64), deps=(0x2,))
    assert matched(scripted, trace) == {0: [(0x1, "warp-native"), (0x3, "warp-native")], 1: [(0x2, "recorded")]}
    scripted.op(GRAPH, (0x3,), (0x4,))  # the next call's phase launch
    with gc.trace_launches() as user:
        hook(K.scale, None, [], None, "cpu", None, 0, 256, None, [])  # no stream: the launcher asks nothing
    scripted.done()
    assert [r.kernel for r in user] == ["tests.kernels.scale"], "Warp's own operation stays out of the user's trace"


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

"""The CUDA graph cross-check, without a driver.

No driver runs in these tests. They build REAL cuda.bindings structs
(CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS) in host memory, filled
the way the driver fills them, and feed them through graphcheck's node readers; where a
sequence of driver answers matters (the walk, attribution by capture dependencies,
conditional bodies, failures), a recorded driver (tests/recorded_driver.py) replays real
cuda.bindings return values through the walker and the attribution. The operations are
recorded for real on Warp's CPU device; their capture spans are the ones a CUDA capture
gives them (``cuStreamGetCaptureInfo`` before and after each). The same code paths run
against real captured graphs in tests_gpu/.
"""

import ctypes

import pytest
import warp as wp

import graphcheck as gc
from graphcheck.crosscheck import check
from graphcheck.graph import CaptureSpan, GraphNode, match_nodes, read_match, span_nodes, walk
from graphcheck.nodes import CudaLaunch
from graphcheck.params import expected_cuda_config, field_at
from tests import kernels as K
from tests.internals import _cuda, _warp
from tests.recorded_driver import (
    INVALID_VALUE,
    Keep,
    RecordedDriver,
    driver,
    kernel_struct,
    memcpy_struct,
    memset_struct,
)

DEVICE = "cpu"
FUNC = 0x7F00_1000
GRAPH = 0xA000
BODY = 0xB000


def layout_of(record):
    offsets, out = 0, []
    for b in record.param_bytes:
        out.append((offsets, len(b)))
        offsets += len(b)
    return out


def span(before=(), after=(), graph=GRAPH, bodies=()):
    return CaptureSpan(graph, tuple(before), tuple(after), tuple(bodies))


def recorded_launch(s=2.5, n=3, dim=64):
    a, b = wp.zeros(dim, dtype=float, device=DEVICE), wp.ones(dim, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=dim, inputs=[a, b, s, n], device=DEVICE)
    record = trace[0]
    # What the CUDA hook records: the function Warp launched and its native arguments
    # (function, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem bytes),
    # and where the capture stood around the launch (it added node 0x1).
    record.cuda = CudaLaunch(FUNC, dim, 0, 256, 1, 1, 0)
    record.capture = span((), (0x1,))
    return trace, record, (a, b)


def kernel_node(struct, layout, handle=0x1, index=0, graph=GRAPH, deps=(), name=""):
    fields = _cuda.kernel_from_params(struct, layout)
    fields["name"] = name
    return GraphNode(index, handle, graph, 0, "KERNEL", tuple(deps), fields)


def findings_of(nodes, trace, **kwargs):
    return check(match_nodes(nodes, trace), **kwargs).findings


# -- the struct readers -------------------------------------------------------------------------


def test_kernel_reader_splits_parameters_by_the_layout():
    keep = Keep()
    trace, record, _ = recorded_launch()
    struct = kernel_struct(record.param_bytes, keep, grid=(1, 1, 1))
    fields = _cuda.kernel_from_params(struct, layout_of(record))
    assert fields["params"] == record.param_bytes
    assert (fields["func"], fields["grid"], fields["block"], fields["smem"]) == (FUNC, (1, 1, 1), (256, 1, 1), 0)
    assert fields["source"] == "kernelParams"


def test_kernel_reader_never_reads_past_the_reported_sizes():
    keep = Keep()
    struct = kernel_struct([b"\x01\x02\x03\x04", b"\x05\x06"], keep)
    fields = _cuda.kernel_from_params(struct, [(0, 2), (8, 1)])
    assert fields["params"] == (b"\x01\x02", b"\x05")


def test_kernel_reader_reads_the_extra_buffer():
    keep = Keep()
    packed = keep(ctypes.create_string_buffer(b"\xaa" * 8 + b"\xbb" * 4, 12))
    size = keep(ctypes.c_size_t(12))
    extra = keep((ctypes.c_void_p * 5)(1, ctypes.addressof(packed), 2, ctypes.addressof(size), 0))
    p = driver.CUDA_KERNEL_NODE_PARAMS()
    p.func = driver.CUfunction(FUNC)
    p.extra = ctypes.addressof(extra)
    fields = _cuda.kernel_from_params(p, [(0, 8), (8, 4)])
    assert fields["params"] == (b"\xaa" * 8, b"\xbb" * 4) and fields["source"] == "extra"


def test_memcpy_and_memset_readers():
    m = memcpy_struct(0x1000, 0x2000, 256)
    assert _cuda.memcpy_from_params(m) == {
        "dst": 0x1000, "src": 0x2000, "nbytes": 256, "dst_extent": 256, "src_extent": 256,
        "dst_kind": "device", "src_kind": "device",
    }  # fmt: skip
    fields = _cuda.memset_from_params(memset_struct(0x3000, 512))
    assert fields == {"dst": 0x3000, "value": 0, "element_size": 1, "nbytes": 512, "extent": 512}


def test_memcpy_addresses_come_from_every_field():
    """Defect 6: the offsets in srcXInBytes/dstXInBytes, Y, Z and the pitch count."""
    m = memcpy_struct(0x1000, 0x2000, 64, dstXInBytes=16, srcXInBytes=8, srcY=2, srcPitch=128, srcZ=1, srcHeight=4)
    fields = _cuda.memcpy_from_params(m)
    assert fields["dst"] == 0x1000 + 16
    assert fields["src"] == 0x2000 + 8 + 2 * 128 + 1 * 128 * 4
    pitched = memcpy_struct(0x1000, 0x2000, 64, Height=3, dstPitch=256, srcPitch=256)
    fields = _cuda.memcpy_from_params(pitched)
    assert fields["nbytes"] == 64 * 3 and fields["dst_extent"] == 2 * 256 + 64


def test_a_pinned_host_to_device_copy_reads_the_host_pointer():
    """Defect 6: the address is taken by the memory type (srcHost for pinned host memory)."""
    m = memcpy_struct(0x1000, 0x7FFF_0000, 32, src_type="HOST")
    fields = _cuda.memcpy_from_params(m)
    assert (fields["src"], fields["src_kind"], fields["dst_kind"]) == (0x7FFF_0000, "host", "device")
    unset = driver.CUDA_MEMCPY3D()  # memory types 0: the bindings' getters raise ValueError
    unset.dstDevice, unset.WidthInBytes = driver.CUdeviceptr(0x40), 4
    assert _cuda.memcpy_from_params(unset)["dst_kind"] == "unknown"
    assert _cuda.memcpy_from_params(unset)["dst"] == 0x40


# -- kernel nodes against their record -----------------------------------------------------------


def test_a_faithful_kernel_node_passes():
    keep = Keep()
    trace, record, _ = recorded_launch()
    node = kernel_node(kernel_struct(record.param_bytes, keep), layout_of(record))
    result = check(match_nodes([node], trace))
    assert result.findings == [] and result.complete
    assert (node.record, node.role) == (0, "recorded")


def test_a_changed_scalar_in_a_node_is_a_node_mismatch_naming_the_argument():
    keep = Keep()
    trace, record, _ = recorded_launch(s=2.5)
    corrupted = list(record.param_bytes)
    corrupted[3] = bytes(ctypes.c_float(9.0))  # the scalar `s`
    node = kernel_node(kernel_struct(corrupted, keep), layout_of(record))
    (finding,) = findings_of([node], trace)
    assert finding.kind == "node-mismatch"
    assert "parameter s is" in finding.message and finding.kernel == "tests.kernels.scale"


def test_a_changed_array_shape_names_the_descriptor_field():
    keep = Keep()
    trace, record, _ = recorded_launch()
    corrupted = list(record.param_bytes)
    descriptor = bytearray(corrupted[1])
    descriptor[16] ^= 0xFF  # array_t.shape[0] of `a`
    corrupted[1] = bytes(descriptor)
    (finding,) = findings_of([kernel_node(kernel_struct(corrupted, keep), layout_of(record))], trace)
    assert "parameter a.shape[0]" in finding.message


def test_grid_block_shared_memory_and_function_follow_warps_formula():
    keep = Keep()
    trace, record, _ = recorded_launch(dim=1000)
    record.cuda = CudaLaunch(FUNC, 1000, 0, 256, 1, 1, 0)
    good = kernel_node(kernel_struct(record.param_bytes, keep, grid=(4, 1, 1)), layout_of(record))
    assert findings_of([good], trace) == []
    bad = kernel_node(
        kernel_struct(record.param_bytes, keep, grid=(3, 1, 1), block=(128, 1, 1), smem=64, func=FUNC + 8),
        layout_of(record),
    )
    (finding,) = findings_of([bad], trace)
    for part in ("grid (3, 1, 1) where Warp's configuration is (4, 1, 1)", "block (128, 1, 1)", "64 bytes of shared",
                 "function"):  # fmt: skip
        assert part in finding.message


# -- attribution by capture dependencies -----------------------------------------------------------


def test_span_nodes_are_the_paths_between_before_and_after():
    nodes = [
        GraphNode(0, 1, GRAPH, 0, "KERNEL"),
        GraphNode(1, 2, GRAPH, 0, "KERNEL", (1,)),
        GraphNode(2, 3, GRAPH, 0, "KERNEL", (2,)),
        GraphNode(3, 4, GRAPH, 0, "KERNEL", (1,)),  # a fork off node 1 that nothing joins
        GraphNode(4, 5, GRAPH, 0, "KERNEL", (3, 4)),
    ]
    assert [n.handle for n in span_nodes(nodes, span((), (2,)))] == [1, 2]
    assert [n.handle for n in span_nodes(nodes, span((2,), (3,)))] == [3]
    assert [n.handle for n in span_nodes(nodes, span((3,), (5,)))] == [5]  # node 4 does not descend from 3
    assert span_nodes(nodes, span((3,), (3,))) == []


def test_an_unrecorded_foreign_kernel_is_flagged_unless_allowed():
    keep = Keep()
    trace, record, _ = recorded_launch()
    record.capture = span((0x2,), (0x1,))
    theirs = kernel_node(kernel_struct([b"\x00" * 8], keep, func=0xBEEF), [(0, 8)], handle=0x2, index=0)
    theirs.fields["name"] = "ampere_sgemm_128x64_nn"
    ours = kernel_node(kernel_struct(record.param_bytes, keep), layout_of(record), index=1, deps=(0x2,))
    (finding,) = findings_of([theirs, ours], trace)
    assert finding.kind == "unrecorded-node" and "ampere_sgemm_128x64_nn from outside Warp" in finding.message
    assert theirs.role == "foreign"
    assert findings_of([theirs, ours], trace, allow_foreign_nodes=True) == []


@pytest.mark.parametrize("operation", ["copy", "zero_"])
@pytest.mark.parametrize("kind", ["KERNEL", "HOST", "MEM_ALLOC"])
def test_foreign_work_before_a_copy_or_memset_is_not_absorbed(operation, kind):
    """Defect 2: a foreign kernel, a host node or an allocation Warp did not make, just
    before a wp.copy or zero_(), is flagged, not taken as the copy's own."""
    keep = Keep()
    a, b = wp.zeros(16, dtype=float, device=DEVICE), wp.ones(16, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        if operation == "copy":
            wp.copy(a, b)
        else:
            a.zero_()
    # The foreign node 0x31 came first; the operation's capture span starts after it.
    trace[0].capture = span((0x31,), (0x32,))
    params = {"KERNEL": kernel_struct([b"\x00" * 8], keep, func=0xBEEF)}.get(kind)
    foreign = GraphNode(0, 0x31, GRAPH, 0, kind, fields={"func": 0xBEEF, "name": "", "params": None}
                        if kind == "KERNEL" else {"dst": 0xDEAD000, "nbytes": 64})  # fmt: skip
    assert params is None or int(params.func) == foreign.fields["func"]
    own = (
        GraphNode(1, 0x32, GRAPH, 0, "MEMCPY", (0x31,), {"dst": a.ptr, "src": b.ptr, "nbytes": 64})
        if operation == "copy"
        else GraphNode(1, 0x32, GRAPH, 0, "MEMSET", (0x31,), {"dst": a.ptr, "value": 0, "nbytes": 64})
    )
    (finding,) = findings_of([foreign, own], trace)
    assert finding.kind == "unrecorded-node" and "from outside Warp" in finding.message
    assert (foreign.role, foreign.record) == ("foreign", None) and own.role == "recorded"


def test_an_allocation_of_an_array_recorded_during_the_capture_is_warps():
    a = wp.zeros(16, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        scratch = wp.empty(16, dtype=float, device=DEVICE)
        wp.copy(a, scratch)
    trace[0].capture = span((0x41,), (0x42,))
    alloc = GraphNode(0, 0x41, GRAPH, 0, "MEM_ALLOC", fields={"dst": scratch.ptr, "nbytes": 64})
    copy = GraphNode(1, 0x42, GRAPH, 0, "MEMCPY", (0x41,), {"dst": a.ptr, "src": scratch.ptr, "nbytes": 64})
    assert findings_of([alloc, copy], trace) == []
    assert alloc.role == "allocation"


def test_a_copy_of_arrays_with_gradients_checks_the_data_copy():
    """Defect 3: wp.copy of arrays with .grad records the data copy, then the gradient
    copy nested in it; each keeps its own node, so the data copy is checked."""
    a = wp.zeros(16, dtype=float, device=DEVICE, requires_grad=True)
    b = wp.ones(16, dtype=float, device=DEVICE, requires_grad=True)
    with gc.trace_launches() as trace:
        wp.copy(a, b)
    outer, inner = trace
    assert inner.args["dest"].ptr == a.grad.ptr
    outer.capture = span((), (0x52,))  # the outer call spans both copies
    inner.capture = span((0x51,), (0x52,))
    data = GraphNode(0, 0x51, GRAPH, 0, "MEMCPY", (), {"dst": a.ptr + 4, "src": b.ptr, "nbytes": 64})  # wrong dst
    grad = GraphNode(1, 0x52, GRAPH, 0, "MEMCPY", (0x51,), {"dst": a.grad.ptr, "src": b.grad.ptr, "nbytes": 64})
    (finding,) = findings_of([data, grad], trace)
    assert (data.record, grad.record) == (0, 1)
    assert finding.kind == "node-mismatch" and finding.index == 0 and "dst" in finding.message


def test_an_operation_that_adds_no_node_has_none():
    """Defect 4: a launch of dimension 0 adds no node (Warp skips cuLaunchKernel): the
    capture did not move, so it inherits nothing and is not a node-mismatch."""
    keep = Keep()
    a = wp.zeros(8, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.launch(K.add_one, dim=8, inputs=[a], device=DEVICE)
        wp.launch(K.add_one, dim=4, inputs=[a], device=DEVICE)  # on CUDA: a set_dim(0) replay, say
    first, empty = trace
    first.cuda, empty.cuda = CudaLaunch(FUNC, 8, 0, 256, 1, 1, 0), CudaLaunch(FUNC, 0, 0, 256, 1, 1, 0)
    first.capture, empty.capture = span((), (0x61,)), span((0x61,), (0x61,))
    node = kernel_node(kernel_struct(first.param_bytes, keep), layout_of(first), handle=0x61)
    result = check(match_nodes([node], trace))
    assert result.findings == [] and result.complete
    assert node.record == 0


def test_nodes_of_an_opaque_warp_operation_belong_to_it():
    values = wp.zeros(8, dtype=int, device=DEVICE)
    out = wp.zeros(8, dtype=int, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.utils.array_scan(values, out)
    trace[0].capture = span((), (0x12,))
    keep = Keep()
    first = kernel_node(kernel_struct([b"\x00" * 8], keep, func=0x77), [(0, 8)], handle=0x11, index=0)
    last = kernel_node(kernel_struct([b"\x00" * 8], keep, func=0x78), [(0, 8)], handle=0x12, index=1, deps=(0x11,))
    host = GraphNode(2, 0x13, GRAPH, 0, "HOST", (0x11,))
    last.deps = (0x11, 0x13)
    match_nodes([first, host, last], trace)
    assert [(n.role, n.record) for n in (first, last)] == [("warp-native", 0), ("warp-native", 0)]
    assert host.role == "foreign", "a node type Warp never makes is never claimed"


def test_an_unrecorded_warp_kernel_is_named():
    keep = Keep()
    trace, record, _ = recorded_launch()
    record.capture = span((), ())
    stray = kernel_node(kernel_struct([b"\x00" * 8], keep, func=0xCAFE), [(0, 8)], handle=0x9)
    (finding,) = check(match_nodes([stray], trace, warp_functions={0xCAFE: ("integrate_1234abcd", False)})).findings
    assert "Warp kernel integrate_1234abcd that no recorded launch made" in finding.message


def test_warps_own_nodes_are_classified_not_flagged():
    keep = Keep()
    a, b = wp.zeros(64, dtype=float, device=DEVICE), wp.ones(64, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        scratch = wp.empty(4, dtype=float, device=DEVICE)  # on CUDA in a capture: a MEM_ALLOC node
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=DEVICE)
    (record,) = trace
    record.cuda, record.capture = CudaLaunch(FUNC, 64, 0, 256, 1, 1, 0), span((0x5,), (0x1,))
    helper = kernel_node(kernel_struct([b"\x00" * 8, b"\x00" * 8], keep, func=0xD00D), [(0, 8), (8, 8)], handle=0x3)
    helper.fields["name"] = "set_conditional_if_handle_kernel"
    sync = GraphNode(2, 0x4, GRAPH, 0, "EMPTY", (0x3,))
    alloc = GraphNode(3, 0x5, GRAPH, 0, "MEM_ALLOC", (0x4,), {"dst": scratch.ptr, "nbytes": 16})
    ours = kernel_node(kernel_struct(record.param_bytes, keep), layout_of(record), deps=(0x5,))
    nodes = [helper, sync, alloc, ours]
    assert findings_of(nodes, trace) == []
    assert [n.role for n in nodes] == ["warp-conditional", "synchronization", "allocation", "recorded"]


def test_memcpy_and_memset_nodes_are_checked_against_their_record():
    a, b = wp.zeros(16, dtype=float, device=DEVICE), wp.ones(16, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.copy(a, b, dest_offset=2, count=4)
        a.zero_()
    copy, zero = trace
    copy.capture, zero.capture = span((), (0x21,)), span((0x21,), (0x22,))
    good_copy = GraphNode(0, 0x21, GRAPH, 0, "MEMCPY", fields={"dst": a.ptr + 8, "src": b.ptr, "nbytes": 16})
    good_zero = GraphNode(1, 0x22, GRAPH, 0, "MEMSET", (0x21,), {"dst": a.ptr, "value": 0, "element_size": 1,
                                                                "nbytes": 64})  # fmt: skip
    assert findings_of([good_copy, good_zero], trace) == []
    bad_copy = GraphNode(0, 0x21, GRAPH, 0, "MEMCPY", fields={"dst": a.ptr, "src": b.ptr, "nbytes": 16})
    (finding,) = findings_of([bad_copy, good_zero], trace)
    assert finding.kind == "node-mismatch" and "dst" in finding.message


# -- conditional graphs ------------------------------------------------------------------------------


def conditional_trace():
    """wp.capture_if with a callable branch, recorded on the CPU: the conditional record,
    then the launch of its body (nested)."""
    x = wp.zeros(4, dtype=float, device=DEVICE)
    condition = wp.array([1], dtype=int, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=lambda: wp.launch(K.add_one, dim=4, inputs=[x], device=DEVICE))
    conditional, body_launch = trace
    assert conditional.kind == "conditional" and body_launch.nested
    return trace, conditional, body_launch


def test_conditional_records_are_matched_to_their_conditional_node():
    """Defect 10: a wp.capture_if is matched to its conditional node (and the kernel that
    sets its handle), so it no longer counts as an operation that escaped the capture."""
    keep = Keep()
    trace, conditional, body_launch = conditional_trace()
    conditional.device = body_launch.device = "cuda:0"  # as recorded on CUDA
    conditional.capture = span((), (0x72,), bodies=(BODY,))
    body_launch.cuda = CudaLaunch(FUNC, 4, 0, 256, 1, 1, 0)
    body_launch.capture = span((), (0x73,), graph=BODY)
    setter = kernel_node(kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D), [(0, 8)] * 2, handle=0x71,
                         name="set_conditional_if_handle_kernel")  # fmt: skip
    node = GraphNode(1, 0x72, GRAPH, 0, "CONDITIONAL", (0x71,), {"graphs": (BODY,)})
    inner = kernel_node(kernel_struct(body_launch.param_bytes, keep), layout_of(body_launch), handle=0x73, graph=BODY)
    result = check(match_nodes([setter, node, inner], trace))
    assert result.findings == [] and result.notes == []
    assert [(n.role, n.record) for n in (setter, node, inner)] == [
        ("warp-conditional", 0), ("recorded", 0), ("recorded", 1)
    ]  # fmt: skip


def test_the_session_learns_the_bodies_warp_resumes_a_capture_into():
    """Defect 1, capture side (no driver runs): inside wp.capture_if Warp resumes the
    capture into each body graph (its capture_resume, which graphcheck hooks); the
    conditional record learns those bodies, and not the parent graph resumed after."""
    from types import SimpleNamespace

    condition = wp.array([1], dtype=int, device=DEVICE)

    def branch():
        session = _warp.ACTIVE.get()
        conditional = session.conditionals[-1]
        conditional.capture = span((), ())  # where a CUDA capture stood before wp.capture_if
        for resumed in (BODY, BODY, GRAPH):  # the body (twice: ignored), then the parent again
            session.on_capture_resume(SimpleNamespace(graph=ctypes.c_void_p(resumed)))  # a wp.Graph's handle

    with gc.trace_launches() as trace:
        wp.capture_if(condition, on_true=branch)
    assert trace[0].capture.bodies == (BODY,)


def recorded_conditional(version, *, graph_branch):
    """The graph a ``wp.capture_if`` makes, as a recorded driver: the top graph holds the
    handle-setting kernel and the IF node; the body holds a child graph node (a Graph
    branch) or the branch's launch."""
    keep = Keep()
    recorded = RecordedDriver(version)
    setter = kernel_struct([b"\x00" * 8] * 2, keep, func=0xD00D)
    recorded.kernel(GRAPH, 0x81, setter, [(0, 8), (8, 8)], name=b"set_conditional_if_handle_kernel")
    recorded.node(GRAPH, 0x82, "CONDITIONAL", deps=(0x81,))
    recorded.graphs[BODY] = []
    if graph_branch:
        recorded.child(BODY, 0x83, 0xC000)
        recorded.kernel(0xC000, 0x84, kernel_struct([b"\x00" * 8], keep, func=0xF00), [(0, 8)], name=b"add_one")
    recorded.keep = keep  # type: ignore[attr-defined]
    return recorded


@pytest.mark.parametrize("version", [13000, 13010])
def test_a_graph_branch_body_is_walked_before_driver_13_2(version):
    """Defect 1: on a driver before 13.2 the graph cannot reach a conditional body; the
    body handle learnt at capture time (Warp's capture_resume into it) is walked, even
    when it holds no recorded operation (a capture_if with a Graph branch)."""
    trace, conditional, body_launch = conditional_trace()
    trace._items.remove(body_launch)  # a Graph branch: no operation recorded in the body
    conditional.capture = span((), (0x82,), bodies=(BODY,))
    recorded = recorded_conditional(version, graph_branch=True)
    nodes = walk(_cuda.Reader(recorded, version), GRAPH, trace.records)
    assert [(n.handle, n.depth, n.type) for n in nodes] == [
        (0x81, 0, "KERNEL"), (0x82, 0, "CONDITIONAL"), (0x83, 1, "GRAPH"), (0x84, 2, "KERNEL")
    ]  # fmt: skip
    assert ("cuGraphNodeGetParams", 0x82) not in recorded.calls
    match = match_nodes(nodes, trace)
    assert [n.role for n in nodes] == ["warp-conditional", "recorded", "structure", "embedded"]
    assert check(match).findings == []
    # The branch's kernel runs no Warp kernel loaded here: the replay check cannot read it, and says so.
    assert match.gaps == [
        "the addresses 1 kernel node(s) of child graphs bake cannot be read for the replay check (not a Warp kernel "
        "loaded now): node 3 (add_one)"
    ]


def test_an_unknown_conditional_body_is_a_gap_not_silence():
    """Defect 1: a body neither the driver nor the capture can name is said, not skipped."""
    trace, conditional, body_launch = conditional_trace()
    trace._items.remove(body_launch)
    conditional.capture = span((), (0x82,))  # no body learnt
    recorded = recorded_conditional(13000, graph_branch=True)
    match = match_nodes(walk(_cuda.Reader(recorded, 13000), GRAPH, trace.records), trace)
    (gap,) = match.gaps
    assert "conditional body(ies) were not walked" in gap and "CUDA 13.0 driver cannot reach it" in gap
    assert not check(match).complete


def test_two_branches_get_one_body_each():
    """Warp adds one single-body IF node per branch, the if branch first."""
    nodes = [
        GraphNode(0, 0x91, GRAPH, 0, "KERNEL", fields={"name": "set_conditional_if_else_handles_kernel"}),
        GraphNode(1, 0x92, GRAPH, 0, "CONDITIONAL", (0x91,)),
        GraphNode(2, 0x93, GRAPH, 0, "CONDITIONAL", (0x92,)),
    ]
    from graphcheck.graph import bodies_from_capture

    learnt = bodies_from_capture(nodes, [span((), (0x93,), bodies=(0xB1, 0xB2))])
    assert learnt == {0x92: (0xB1,), 0x93: (0xB2,)}


# -- reading through the recorded driver ------------------------------------------------------------


def test_the_walk_reads_nodes_in_topological_order_with_their_dependencies():
    keep = Keep()
    trace, record, _ = recorded_launch()
    recorded = RecordedDriver()
    recorded.graphs[GRAPH] = []
    recorded.node(GRAPH, 0x2, "MEMSET", memset_struct(0x3000, 64), deps=(0x1,))  # listed first, runs second
    recorded.kernel(GRAPH, 0x1, kernel_struct(record.param_bytes, keep), layout_of(record), name=b"scale_fwd")
    nodes = walk(_cuda.Reader(recorded, 13000), GRAPH, trace.records)
    assert [(n.index, n.handle, n.deps) for n in nodes] == [(0, 0x1, ()), (1, 0x2, (0x1,))]
    assert nodes[0].fields["params"] == record.param_bytes and nodes[0].name == "scale_fwd"


def test_one_unreadable_node_leaves_the_rest_checked_and_the_check_partial():
    """Defect 5: a node the driver cannot read is marked with the reason; the walk and the
    cross-check go on, and the cross-check is partial."""
    keep = Keep()
    a, b = wp.zeros(64, dtype=float, device=DEVICE), wp.ones(64, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=DEVICE)
        wp.copy(a, b)
    launch, copy = trace
    launch.cuda, launch.capture = CudaLaunch(FUNC, 64, 0, 256, 1, 1, 0), span((), (0x1,))
    copy.capture = span((0x1,), (0x2,))
    recorded = RecordedDriver()
    corrupted = list(launch.param_bytes)
    corrupted[3] = bytes(ctypes.c_float(9.0))
    recorded.kernel(GRAPH, 0x1, kernel_struct(corrupted, keep), layout_of(launch))
    recorded.node(GRAPH, 0x2, "MEMCPY", memcpy_struct(a.ptr, b.ptr, 256), deps=(0x1,))
    recorded.failures[("cuGraphMemcpyNodeGetParams", 0x2)] = driver.CUresult.CUDA_ERROR_INVALID_VALUE
    match = match_nodes(walk(_cuda.Reader(recorded, 13000), GRAPH, trace.records), trace)
    result = check(match)
    (finding,) = result.findings
    assert "parameter s is" in finding.message, "the readable node was still checked"
    assert match.nodes[1].role == "unread" and match.nodes[1].record == 1
    assert not result.complete
    assert "cuGraphMemcpyNodeGetParams failed" in result.notes[0] and "CUDA_ERROR_INVALID_VALUE" in result.notes[0]


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (TypeError("an integer is required"), "could not be asked: TypeError: an integer is required"),
        (ValueError("14 is not a valid CUgraphNodeType"), "could not be asked: ValueError"),
    ],
)
def test_binding_exceptions_become_sentences(failure, words):
    """Defect 8: exceptions from the bindings, not only result codes, become sentences on
    the node they concern."""
    recorded = RecordedDriver()
    recorded.node(GRAPH, 0x1, "MEMSET", memset_struct(0x3000, 64))
    recorded.failures[("cuGraphNodeGetType", 0x1)] = failure
    (node,) = _cuda.Reader(recorded, 13000).nodes(GRAPH)
    assert node.type == "UNKNOWN" and words in node.error


def test_a_missing_entry_point_is_a_sentence_naming_the_driver():
    """Defect 8: cuda.bindings raises FunctionNotFoundError (a RuntimeError) for an entry
    point the driver lacks; it becomes a sentence with the driver's version."""
    from cuda.bindings._internal.utils import FunctionNotFoundError

    recorded = RecordedDriver(13000)
    recorded.failures[("cuFuncGetParamInfo", FUNC)] = FunctionNotFoundError("function cuFuncGetParamInfo is not found")
    layout, why = _cuda.Reader(recorded, 13000).layout(FUNC)
    assert layout is None
    assert why.startswith("cuFuncGetParamInfo is not available with this driver (CUDA 13.0)")
    with pytest.raises(_cuda.GraphInspectError, match="cuGraphNodeGetParams is not available with this driver"):
        _cuda.Reader(recorded, 13020).call("cuGraphNodeGetParams", driver.CUgraphNode(1))


def test_function_names_are_not_asked_before_cuda_12_3():
    """Defect 8: cuFuncGetName exists from CUDA 12.3."""
    recorded = RecordedDriver(12020)
    recorded.names[FUNC] = b"scale"
    assert _cuda.Reader(recorded, 12020).name(FUNC) == ""
    assert ("cuFuncGetName", FUNC) not in recorded.calls
    assert _cuda.Reader(recorded, 12030).name(FUNC) == "scale"


def test_layouts_are_cached_per_walk_not_per_process():
    """Defect 7: a CUfunction address can be reused by another function once a module
    unloads: each walk asks again, and reads no more parameters than the driver reports."""
    keep = Keep()
    first, second = RecordedDriver(), RecordedDriver()
    first.layouts[FUNC] = [(0, 8), (8, 4)]
    second.layouts[FUNC] = [(0, 8)]
    reader = _cuda.Reader(first, 13000)
    assert reader.layout(FUNC) == ([(0, 8), (8, 4)], "")
    first.layouts[FUNC] = []
    assert reader.layout(FUNC) == ([(0, 8), (8, 4)], ""), "cached for the walk"
    assert _cuda.Reader(second, 13000).layout(FUNC) == ([(0, 8)], ""), "a new walk asks again"
    second.kernel(GRAPH, 0x1, kernel_struct([b"\x01" * 8, b"\x02" * 4], keep), [(0, 8)])
    (node,) = _cuda.Reader(second, 13000).nodes(GRAPH)
    assert node.fields["params"] == (b"\x01" * 8,)


def test_an_empty_layout_is_unknown_not_zero_parameters():
    """Defect 9: cuFuncGetParamInfo answering INVALID_VALUE at index 0 means the driver
    cannot describe the function: the parameters are not compared, and that is said."""
    keep = Keep()
    trace, record, _ = recorded_launch()
    recorded = RecordedDriver()
    recorded.kernel(GRAPH, 0x1, kernel_struct(record.param_bytes, keep), [])
    assert recorded.cuFuncGetParamInfo(driver.CUfunction(FUNC), 0)[0] == INVALID_VALUE
    match = match_nodes(walk(_cuda.Reader(recorded, 13000), GRAPH, trace.records), trace)
    (node,) = match.nodes
    assert node.fields["params"] is None and "reports no parameters" in node.fields["params_unread"]
    result = check(match)
    assert result.findings == [] and not result.complete
    assert "parameters of 1 kernel node(s) were not compared" in result.notes[0]


def test_parameter_layouts_are_not_asked_before_cuda_12_4():
    layout, why = _cuda.Reader(RecordedDriver(12030), 12030).layout(FUNC)
    assert layout is None and "need a CUDA 12.4 driver" in why and "12.3" in why


def test_an_operation_that_escaped_the_capture_is_a_gap():
    trace, record, _ = recorded_launch()
    record.capture = None
    record.device, record.uncaptured = "cuda:0", None  # a CUDA launch the driver could not place
    (gap,) = match_nodes([], trace).gaps
    assert "1 recorded operation(s) could not be matched to a graph node" in gap


def test_capture_state_reads_the_13x_tuple(monkeypatch):
    """cuStreamGetCaptureInfo's answer as the 13.x bindings shape it, replayed (no driver):
    (result, status, id, graph, dependencies, edge data, count)."""

    class Answer:
        def cuStreamGetCaptureInfo(self, stream):
            active = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
            deps = [driver.CUgraphNode(0x11), driver.CUgraphNode(0x12)]
            return driver.CUresult.CUDA_SUCCESS, active, 7, driver.CUgraph(GRAPH), deps, [None, None], 2

        def __getattr__(self, name):
            return getattr(driver, name)

    monkeypatch.setattr(_cuda, "_driver", Answer())
    monkeypatch.setattr(_cuda, "_version", 13000)
    assert _cuda.capture_state(0x5) == (GRAPH, (0x11, 0x12))


# -- addresses for the replay check -------------------------------------------------------------------


def test_addresses_read_from_nodes_replace_those_recorded_for_the_same_operation():
    # Warp's internal memset (inside wp.zeros) comes first in the capture's trace, so trace
    # indices and report positions differ by one: the launch is record 1 but operation 0.
    keep = Keep()
    a, b = wp.zeros(64, dtype=float, device=DEVICE), wp.ones(64, dtype=float, device=DEVICE)
    with gc.trace_launches(include_warp=True) as trace:
        wp.zeros(64, dtype=float, device=DEVICE)
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=DEVICE)
        wp.copy(b, a)  # its node is not read: it keeps its recorded addresses
    internal, launch, copy = trace
    assert internal.internal and not launch.internal and not copy.internal
    launch.capture = span((), (0x1,))
    node = kernel_node(kernel_struct(launch.param_bytes, keep), layout_of(launch))
    read = match_nodes([node], trace).addresses()
    assert list(read) == [0]
    assert sorted((x.record, x.operation, x.arg, x.start) for x in read[0]) == [(1, 0, "a", a.ptr), (1, 0, "b", b.ptr)]


def test_memcpy_addresses_span_their_extent():
    a, b = wp.zeros(16, dtype=float, device=DEVICE), wp.ones(16, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.copy(a, b)
    trace[0].capture = span((), (0x21,))
    fields = _cuda.memcpy_from_params(memcpy_struct(a.ptr, b.ptr, 64))
    node = GraphNode(0, 0x21, GRAPH, 0, "MEMCPY", (), fields)
    (addresses,) = match_nodes([node], trace).addresses().values()
    assert [(x.arg, x.start, x.nbytes) for x in addresses] == [("dest", a.ptr, 64), ("src", b.ptr, 64)]


# -- Warp's launch configuration and parameter fields ------------------------------------------------


@pytest.mark.parametrize(
    ("dim_size", "block", "max_blocks", "grid_stride", "cluster", "expected"),
    [
        (1000, 256, 0, True, 1, ((4, 1, 1), (256, 1, 1))),
        (1000, 0, 0, True, 1, ((4, 1, 1), (256, 1, 1))),  # Warp's default block size
        (1000, 128, 3, True, 1, ((3, 1, 1), (128, 1, 1))),  # capped by max_blocks
        (1, 256, 0, True, 1, ((1, 1, 1), (256, 1, 1))),
        (1 << 30, 64, 0, False, 1, ((1 << 18, 64, 1), (64, 1, 1))),  # lean 3-D grid
        (1000, 128, 7, True, 2, ((6, 1, 1), (128, 1, 1))),  # cluster rounding of a capped grid
        (0, 256, 0, True, 1, None),  # no launch at all
    ],
)
def test_expected_cuda_config(dim_size, block, max_blocks, grid_stride, cluster, expected):
    assert expected_cuda_config(dim_size, block, max_blocks, grid_stride, cluster) == expected


def test_field_names_inside_parameters():
    trace, record, _ = recorded_launch()
    layout = record.layout
    assert field_at(layout, 0, 8) == "dim.size"
    assert field_at(layout, 1, 0) == "a.data"
    assert field_at(layout, 1, 20) == "a.shape[1]"
    assert field_at(layout, 2, 36) == "b.strides[1]"
    assert field_at(layout, 3, 0) == "s"
    p = K.Params()
    p.scratch = wp.zeros(1, dtype=float, device=DEVICE)
    with gc.trace_launches() as struct_trace:
        wp.launch(K.with_struct, dim=1, inputs=[wp.zeros(1, dtype=float, device=DEVICE), p], device=DEVICE)
    struct_layout = struct_trace[0].layout
    assert field_at(struct_layout, 2, 4) == "p.gravity[1]"
    assert field_at(struct_layout, 2, 12) == "p.dt"
    assert field_at(struct_layout, 2, 16) == "p.scratch.data"


# -- without a driver ----------------------------------------------------------------------------------


@pytest.mark.skipif(_warp.cuda_available(), reason="checks the message on a machine without a driver")
def test_without_a_driver_reading_a_graph_is_one_clear_error():
    with pytest.raises(_cuda.GraphInspectError, match="no NVIDIA driver"):
        _cuda.driver_version()


def test_a_cpu_graph_is_read_from_its_operation_stream_without_the_driver():
    a = wp.zeros(4, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace, wp.ScopedCapture(device=DEVICE) as capture:
        wp.launch(K.add_one, dim=4, inputs=[a], device=DEVICE)
    match = read_match(capture.graph, trace)
    assert match.device == "cpu" and [(n.type, n.role, n.record) for n in match.nodes] == [("KERNEL", "recorded", 0)]


def test_a_body_graph_that_cannot_be_read_is_a_gap():
    """No driver runs: the recorded driver fails to list a body graph's nodes."""
    trace, conditional, body_launch = conditional_trace()
    trace._items.remove(body_launch)
    conditional.capture = span((), (0x82,), bodies=(BODY,))
    recorded = recorded_conditional(13000, graph_branch=True)
    recorded.failures[("cuGraphGetNodes", BODY)] = driver.CUresult.CUDA_ERROR_INVALID_VALUE
    match = match_nodes(walk(_cuda.Reader(recorded, 13000), GRAPH, trace.records), trace)
    assert [n.role for n in match.nodes] == ["warp-conditional", "recorded", "unread"]
    (gap,) = match.gaps
    assert f"graph {BODY:#x} could not be read: cuGraphGetNodes failed" in gap


def test_the_picture_draws_the_matched_nodes_without_reading_the_graph_again():
    from graphcheck import dot
    from graphcheck.findings import Report
    CheckedGraph = gc.CheckedGraph

    keep = Keep()
    trace, record, _ = recorded_launch()
    record.capture = span((0x2,), (0x1,))
    foreign = kernel_node(kernel_struct([b"\x00" * 8], keep, func=0xBEEF), [(0, 8)], handle=0x2, name="other_lib")
    ours = kernel_node(kernel_struct(record.param_bytes, keep), layout_of(record), index=1, deps=(0x2,))
    match = match_nodes([foreign, ours], trace)
    options = gc.CaptureOptions(on_failure="ignore", replay_check="never")
    checked = CheckedGraph(None, Report(), device="cuda:0", owners=None, baked=list, options=options, trace=trace,
                           graph_match=match)  # fmt: skip
    source = dot.to_dot(checked)
    assert "n2 -> n1;" in source and "#0 scale" in source
    assert 'label="kernel other_lib\\n(foreign)" style="filled" fillcolor="#f4c7c3"' in source


def test_the_cross_check_imports_neither_the_guard_nor_the_picture():
    import subprocess
    import sys

    code = "import sys, graphcheck.crosscheck; print(sorted(m for m in sys.modules if m.startswith('graphcheck.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "graphcheck.guard" not in loaded and "graphcheck.dot" not in loaded, loaded


def test_check_replay_reads_the_cuda_graph_template_again(monkeypatch):
    """A kernel node's parameters set after capture (``cuGraphKernelNodeSetParams`` on the
    graph, as a recorded driver answers after it) are a node-mismatch before replay. Driver
    answers replayed from real cuda.bindings structs; tests_gpu/ sets them on a real graph."""
    from types import SimpleNamespace

    from graphcheck.findings import Report

    keep = Keep()
    trace, record, _ = recorded_launch(s=2.5)
    recorded = RecordedDriver(13000)
    recorded.kernel(GRAPH, 0x1, kernel_struct(record.param_bytes, keep), layout_of(record), name=b"scale")
    monkeypatch.setattr(_cuda, "_driver", recorded)
    monkeypatch.setattr(_cuda, "_version", 13000)
    graph = SimpleNamespace(graph=ctypes.c_void_p(GRAPH), device="cuda:0")  # what a wp.Graph holds
    match = read_match(graph, trace)
    options = gc.CaptureOptions(on_failure="ignore", replay_check="never")
    checked = gc.CheckedGraph(graph, Report(name="scale", device="cuda:0"), device="cuda:0", owners=None, baked=list,
                              options=options, trace=trace, graph_match=match)  # fmt: skip
    assert checked.check_replay().checks == ("graph",)
    corrupted = list(record.param_bytes)
    corrupted[3] = bytes(ctypes.c_float(9.0))  # the scalar `s`, set on the graph's node after capture
    recorded.params[0x1] = kernel_struct(corrupted, keep)
    (finding,) = checked.check_replay().findings
    assert finding.kind == "node-mismatch" and "parameter s is 0x41100000 where the launch passed 0x40200000" in (
        finding.message
    )

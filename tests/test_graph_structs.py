"""The CUDA graph cross-check, without a driver.

These tests build REAL cuda.bindings structs (CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D,
CUDA_MEMSET_NODE_PARAMS) in host memory, filled the way the driver fills them, and feed
them through graphcheck's node readers and cross-check logic. Nothing here calls the
driver; the same code paths run against a real captured graph in tests_gpu/.
"""

import ctypes

import pytest
import warp as wp

import graphcheck as gc
from graphcheck import _cuda, _warp
from graphcheck.crosscheck import check_nodes, match
from graphcheck.graph import GraphNode
from graphcheck.params import expected_cuda_config, field_at
from tests import kernels as K

driver = pytest.importorskip("cuda.bindings.driver", reason="needs cuda-python's bindings (no driver needed)")

DEVICE = "cpu"
FUNC = 0x7F00_1000
GRAPH = 0xA000


class Keep:
    """Keeps the ctypes buffers a struct points into alive for the test's duration."""

    def __init__(self):
        self.objects = []

    def __call__(self, obj):
        self.objects.append(obj)
        return obj


def kernel_struct(param_bytes, keep, *, grid=(1, 1, 1), block=(256, 1, 1), smem=0, func=FUNC):
    """A CUDA_KERNEL_NODE_PARAMS holding ``param_bytes`` through ``kernelParams``."""
    buffers = [keep(ctypes.create_string_buffer(bytes(b), max(len(b), 1))) for b in param_bytes]
    pointers = keep((ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers]))
    p = driver.CUDA_KERNEL_NODE_PARAMS()
    p.func = driver.CUfunction(func)
    p.gridDimX, p.gridDimY, p.gridDimZ = grid
    p.blockDimX, p.blockDimY, p.blockDimZ = block
    p.sharedMemBytes = smem
    p.kernelParams = ctypes.addressof(pointers)
    return p


def layout_of(record):
    offsets, out = 0, []
    for b in record.param_bytes:
        out.append((offsets, len(b)))
        offsets += len(b)
    return out


def recorded_launch(s=2.5, n=3, dim=64):
    a, b = wp.zeros(dim, dtype=float, device=DEVICE), wp.ones(dim, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=dim, inputs=[a, b, s, n], device=DEVICE)
    record = trace[0]
    # What the CUDA hook records: the function Warp launched and its native arguments
    # (function, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem bytes),
    # and the node the launch added to the capture.
    record.cuda = (FUNC, dim, 0, 256, 1, 1, 0)
    record.node = (GRAPH, (0x1,))
    return trace, record, (a, b)


def node_from(struct, layout, handle=0x1, index=0, graph=GRAPH):
    return GraphNode(index, handle, graph, 0, "KERNEL", (), _cuda.kernel_from_params(struct, layout))


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
    m = driver.CUDA_MEMCPY3D()
    m.dstDevice = driver.CUdeviceptr(0x1000)
    m.srcDevice = driver.CUdeviceptr(0x2000)
    m.WidthInBytes, m.Height, m.Depth = 256, 1, 1
    assert _cuda.memcpy_from_params(m) == {"dst": 0x1000, "src": 0x2000, "nbytes": 256}
    s = driver.CUDA_MEMSET_NODE_PARAMS()
    s.dst = driver.CUdeviceptr(0x3000)
    s.value, s.elementSize, s.width, s.height = 0, 1, 512, 1
    assert _cuda.memset_from_params(s) == {"dst": 0x3000, "value": 0, "element_size": 1, "nbytes": 512}


def test_a_faithful_kernel_node_passes():
    keep = Keep()
    trace, record, _ = recorded_launch()
    node = node_from(kernel_struct(record.param_bytes, keep), layout_of(record))
    assert check_nodes([node], trace) == []
    assert (node.record, node.role) == (0, "recorded")


def test_a_changed_scalar_in_a_node_is_a_node_mismatch_naming_the_argument():
    keep = Keep()
    trace, record, _ = recorded_launch(s=2.5)
    corrupted = list(record.param_bytes)
    corrupted[3] = bytes(ctypes.c_float(9.0))  # the scalar `s`
    node = node_from(kernel_struct(corrupted, keep), layout_of(record))
    (finding,) = check_nodes([node], trace)
    assert finding.kind == "node-mismatch"
    assert "parameter s is" in finding.message and finding.kernel == "tests.kernels.scale"


def test_a_changed_array_shape_names_the_descriptor_field():
    keep = Keep()
    trace, record, _ = recorded_launch()
    corrupted = list(record.param_bytes)
    descriptor = bytearray(corrupted[1])
    descriptor[16] ^= 0xFF  # array_t.shape[0] of `a`
    corrupted[1] = bytes(descriptor)
    (finding,) = check_nodes([node_from(kernel_struct(corrupted, keep), layout_of(record))], trace)
    assert "parameter a.shape[0]" in finding.message


def test_grid_block_shared_memory_and_function_follow_warps_formula():
    keep = Keep()
    trace, record, _ = recorded_launch(dim=1000)
    record.cuda = (FUNC, 1000, 0, 256, 1, 1, 0)
    good = node_from(kernel_struct(record.param_bytes, keep, grid=(4, 1, 1)), layout_of(record))
    assert check_nodes([good], trace) == []
    bad = node_from(
        kernel_struct(record.param_bytes, keep, grid=(3, 1, 1), block=(128, 1, 1), smem=64, func=FUNC + 8),
        layout_of(record),
    )
    (finding,) = check_nodes([bad], trace)
    for part in ("grid (3, 1, 1) where Warp's configuration is (4, 1, 1)", "block (128, 1, 1)", "64 bytes of shared",
                 "function"):  # fmt: skip
        assert part in finding.message


def test_an_unrecorded_foreign_kernel_is_flagged_unless_allowed():
    keep = Keep()
    trace, record, _ = recorded_launch()
    ours = node_from(kernel_struct(record.param_bytes, keep), layout_of(record))
    theirs = node_from(kernel_struct([b"\x00" * 8], keep, func=0xBEEF), [(0, 8)], handle=0x2, index=1)
    theirs.fields["name"] = "ampere_sgemm_128x64_nn"
    (finding,) = check_nodes([ours, theirs], trace)
    assert finding.kind == "unrecorded-node" and "ampere_sgemm_128x64_nn from outside Warp" in finding.message
    assert theirs.role == "foreign"
    assert check_nodes([ours, theirs], trace, allow_foreign_nodes=True) == []


def test_an_unrecorded_warp_kernel_is_named():
    keep = Keep()
    trace, record, _ = recorded_launch()
    stray = node_from(kernel_struct([b"\x00" * 8], keep, func=0xCAFE), [(0, 8)], handle=0x9)
    (finding,) = check_nodes([stray], trace, warp_functions={0xCAFE: ("integrate_1234abcd", False)})
    assert "Warp kernel integrate_1234abcd that no recorded launch made" in finding.message


def test_warps_own_nodes_are_classified_not_flagged():
    keep = Keep()
    trace, record, _ = recorded_launch()
    helper = node_from(kernel_struct([b"\x00" * 8, b"\x00" * 8], keep, func=0xD00D), [(0, 8), (8, 8)], handle=0x3)
    helper.fields["name"] = "set_conditional_if_handle_kernel"
    sync = GraphNode(2, 0x4, GRAPH, 0, "EMPTY")
    alloc = GraphNode(3, 0x5, GRAPH, 0, "MEM_ALLOC", fields={"dst": 0x9000, "nbytes": 64})
    ours = node_from(kernel_struct(record.param_bytes, keep), layout_of(record))
    nodes = [helper, sync, alloc, ours]
    assert check_nodes(nodes, trace) == []
    assert [n.role for n in nodes] == ["warp-conditional", "synchronization", "allocation", "recorded"]


def test_nodes_before_an_opaque_warp_operation_belong_to_it():
    values = wp.zeros(8, dtype=int, device=DEVICE)
    out = wp.zeros(8, dtype=int, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.utils.array_scan(values, out)
    trace[0].node = (GRAPH, (0x12,))
    keep = Keep()
    first = node_from(kernel_struct([b"\x00" * 8], keep, func=0x77), [(0, 8)], handle=0x11, index=0)
    last = node_from(kernel_struct([b"\x00" * 8], keep, func=0x78), [(0, 8)], handle=0x12, index=1)
    match([first, last], trace)
    assert (first.role, first.record, last.role, last.record) == ("warp-native", 0, "recorded", 0)


def test_memcpy_and_memset_nodes_are_checked_against_their_record():
    a, b = wp.zeros(16, dtype=float, device=DEVICE), wp.ones(16, dtype=float, device=DEVICE)
    with gc.trace_launches() as trace:
        wp.copy(a, b, dest_offset=2, count=4)
        a.zero_()
    copy, zero = trace
    copy.node, zero.node = (GRAPH, (0x21,)), (GRAPH, (0x22,))
    good_copy = GraphNode(0, 0x21, GRAPH, 0, "MEMCPY", fields={"dst": a.ptr + 8, "src": b.ptr, "nbytes": 16})
    good_zero = GraphNode(1, 0x22, GRAPH, 0, "MEMSET", fields={"dst": a.ptr, "value": 0, "element_size": 1,
                                                              "nbytes": 64})  # fmt: skip
    assert check_nodes([good_copy, good_zero], trace) == []
    bad_copy = GraphNode(0, 0x21, GRAPH, 0, "MEMCPY", fields={"dst": a.ptr, "src": b.ptr, "nbytes": 16})
    (finding,) = check_nodes([bad_copy, good_zero], trace)
    assert finding.kind == "node-mismatch" and "dst" in finding.message


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


@pytest.mark.skipif(_warp.cuda_available(), reason="checks the message on a machine without a driver")
def test_without_a_driver_reading_a_graph_is_one_clear_error():
    with pytest.raises(_cuda.GraphInspectError, match="no NVIDIA driver"):
        _cuda.driver_version()


def test_a_cpu_graph_cannot_be_read_as_a_cuda_graph():
    from graphcheck.graph import read_graph

    a = wp.zeros(4, dtype=float, device=DEVICE)
    with wp.ScopedCapture(device=DEVICE) as capture:
        wp.launch(K.add_one, dim=4, inputs=[a], device=DEVICE)
    with pytest.raises(ValueError, match="captured on the CPU"):
        read_graph(capture.graph)


def test_addresses_read_from_nodes_replace_those_recorded_for_the_same_operation():
    # Warp's internal copy (inside wp.clone) comes first in the capture's trace, so trace
    # indices and report positions differ by one: the launch is record 1 but operation 0.
    from graphcheck.crosscheck import baked_from_nodes
    from graphcheck.guard import _Baked

    keep = Keep()
    a, b = wp.zeros(64, dtype=float, device=DEVICE), wp.ones(64, dtype=float, device=DEVICE)
    with gc.trace_launches(include_warp=True) as trace:
        wp.clone(b)
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=DEVICE)
        wp.copy(b, a)  # its node is not read: it keeps its recorded addresses
    internal, launch, copy = trace
    assert internal.internal and not launch.internal and not copy.internal
    launch.node = (GRAPH, (0x1,))
    user = trace.user_view()
    recorded = [_Baked.at(ref.start, ref.nbytes, None, i, r, name) for i, r in enumerate(user.records)
                for name, ref in r.arrays()]  # fmt: skip
    node = node_from(kernel_struct(launch.param_bytes, keep), layout_of(launch))
    baked = baked_from_nodes([node], trace, recorded, None)
    assert sorted((x.index, x.arg, x.ptr) for x in baked) == [
        (0, "a", a.ptr), (0, "b", b.ptr), (1, "dest", b.ptr), (1, "src", a.ptr)
    ]  # fmt: skip

"""Recording on CUDA: the hook at wp_cuda_launch_kernel, bytes, streams, capture attribution."""

import ctypes

import warp as wp

import graphcheck as gc
from graphcheck import _warp
from tests import kernels as K


def test_cuda_launch_is_recorded_with_its_native_arguments(device):
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=1000, inputs=[a, b, 2.5, 3], device=device)
    (record,) = trace
    assert record.device == device and record.block_dim == 256
    assert record.stream == _warp.device_stream_handle(device)
    func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem = record.cuda
    assert func == _warp.kernel_function(record.kernel_object, device, 256)
    assert (dim_size, max_blocks, block_dim, grid_stride) == (1000, 0, 256, 1)
    assert record.args["s"] == 2.5 and record.args["n"] == 3
    assert record.param_bytes[3] == bytes(ctypes.c_float(2.5))
    assert record.param_bytes[1] == bytes(a.__ctype__())
    assert record.capture is None, "not captured"


def test_cuda_copy_memset_and_fill_are_recorded(device):
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)
    with gc.trace_launches() as trace:
        wp.copy(a, b, count=16)
        a.zero_()
        a.fill_(3.0)
    assert [r.kernel for r in trace] == ["wp.copy", "array.zero_", "array.fill_"]
    assert all(r.stream == _warp.device_stream_handle(device) for r in trace)


def test_operations_inside_a_cuda_capture_learn_their_graph_node(device):
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)
    wp.launch(K.scale, dim=64, inputs=[a, b, 1.0, 0], device=device)  # load the module before capturing
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as capture:
        wp.launch(K.scale, dim=64, inputs=[a, b, 1.0, 0], device=device)
        a.zero_()
        wp.copy(a, b)
    top = _warp.graph_handle(capture.graph)
    for record in trace:
        assert record.capture is not None and record.capture.graph == top and record.capture.after, record
    assert len({r.capture.after for r in trace}) == 3
    # Each operation's span holds exactly its own node: before one is after the previous.
    assert [r.capture.before for r in trace][1:] == [r.capture.after for r in trace][:-1]

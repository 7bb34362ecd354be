"""Reading captured CUDA graphs and holding them against the record."""

import ctypes

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck import _cuda, _warp
from graphcheck.crosscheck import check, check_graph
from graphcheck.graph import read_match
from graphcheck.params import expected_cuda_config
from tests import kernels as K

#: Roles that mean "no Warp operation accounts for this node" or "it was not read".
_UNACCOUNTED = ("unrecorded", "foreign", "unread")


def captured(device, fn):
    fn()  # load modules before capturing
    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as capture:
        fn()
    return trace, capture.graph


def test_kernel_memset_and_memcpy_nodes_match_their_records(device):
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)

    def work():
        wp.launch(K.scale, dim=1000, inputs=[a, b, 2.5, 3], device=device)
        a.zero_()
        wp.copy(a, b, dest_offset=4, count=100)

    trace, graph = captured(device, work)
    match = read_match(graph, trace)
    nodes = match.nodes
    print("driver", _cuda.driver_version(), [(n.type, n.name, n.role) for n in nodes])
    kernel = next(n for n in nodes if n.type == "KERNEL")
    launch = trace[0]
    assert kernel.fields["func"] == launch.cuda.function == _warp.kernel_function(launch.kernel_object, device, 256)
    assert kernel.fields["source"] == "kernelParams"
    assert kernel.fields["params"] == launch.param_bytes
    grid, block = expected_cuda_config(1000, 256)
    assert kernel.fields["grid"] == grid and kernel.fields["block"] == block
    memset = next(n for n in nodes if n.type == "MEMSET")
    assert memset.fields["dst"] == a.ptr and memset.fields["nbytes"] == 4000
    memcpy = next(n for n in nodes if n.type == "MEMCPY")
    assert (memcpy.fields["dst"], memcpy.fields["src"], memcpy.fields["nbytes"]) == (a.ptr + 16, b.ptr, 400)
    assert [(n.type, n.record, n.role) for n in nodes] == [
        ("KERNEL", 0, "recorded"), ("MEMSET", 1, "recorded"), ("MEMCPY", 2, "recorded")
    ]  # fmt: skip
    findings, notes = check(match)
    assert findings == [] and notes == []


def test_a_corrupted_kernel_node_is_a_node_mismatch(device):
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)
    trace, graph = captured(device, lambda: wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=device))
    (node,) = trace[0].capture.after  # the one node the launch added
    params = _cuda.kernel_params(node)
    values = list(trace[0].param_bytes)
    values[3] = bytes(ctypes.c_float(7.0))  # the scalar `s`
    buffers = [ctypes.create_string_buffer(v, len(v)) for v in values]
    pointers = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(x) for x in buffers])
    params.kernelParams = ctypes.addressof(pointers)
    _cuda.set_kernel_params(node, params)
    findings, _ = check_graph(graph, trace)
    (finding,) = findings
    assert finding.kind == "node-mismatch" and "parameter s is" in finding.message, finding.message


@pytest.mark.skipif(not wp.is_conditional_graph_supported(), reason="needs conditional graph nodes (CUDA 12.4+)")
def test_capture_while_and_a_child_graph_are_walked(device):
    counter = wp.array([3], dtype=int, device=device)
    x = wp.zeros(16, dtype=float, device=device)
    flag = wp.array([1], dtype=int, device=device)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    wp.launch(K.bump, dim=1, inputs=[counter], device=device)
    with wp.ScopedCapture(device=device) as branch:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)

    def body():
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
        wp.launch(K.decrement_int, dim=1, inputs=[counter], device=device)

    def work():
        wp.capture_while(counter, body)
        wp.capture_if(flag, on_true=branch.graph)

    with gc.trace_launches() as trace, wp.ScopedCapture(device=device) as capture:
        work()
    match = read_match(capture.graph, trace)
    types = [(n.type, n.depth, n.name, n.role) for n in match.nodes]
    print("driver", _cuda.driver_version(), types)
    assert any(t == "CONDITIONAL" for t, _, _, _ in types)
    assert any(d > 0 and t == "KERNEL" and r == "recorded" for t, d, _, r in types), "the while body was walked"
    # The capture_if's Graph branch holds no recorded operation: its body is known from
    # Warp's capture_resume into it, on any driver (13.2 can also say it itself).
    assert any(t == "GRAPH" and d > 0 for t, d, _, _ in types), "the if body with the child graph was walked"
    assert any(r == "embedded" for _, _, _, r in types), "the child graph's contents were walked"
    assert not [t for t in types if t[3] in _UNACCOUNTED], types
    result = check(match)
    assert result.findings == [] and result.notes == [], (result.findings, result.notes)
    wp.capture_launch(capture.graph)
    assert counter.numpy()[0] == 0


_FOREIGN_PTX = b"""
.version 7.0
.target sm_50
.address_size 64
.visible .entry graphcheck_foreign_noop()
{
    ret;
}
"""


def test_a_kernel_from_outside_warp_is_classified_as_foreign(device):
    from cuda.bindings import driver

    x = wp.zeros(16, dtype=float, device=device)
    with wp.ScopedDevice(device):
        err, module = driver.cuModuleLoadData(_FOREIGN_PTX)
        assert err == driver.CUresult.CUDA_SUCCESS, err
        err, func = driver.cuModuleGetFunction(module, b"graphcheck_foreign_noop")
        assert err == driver.CUresult.CUDA_SUCCESS, err
    stream = driver.CUstream(_warp.device_stream_handle(device))

    class Mixed:
        def __init__(self):
            self.x = x

        def step(self):
            wp.launch(K.add_one, dim=16, inputs=[self.x], device=device)
            (err,) = driver.cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0)
            assert err == driver.CUresult.CUDA_SUCCESS, err

    sim = Mixed()
    checked = gc.capture(sim.step, device=device, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "unrecorded-node" and "graphcheck_foreign_noop from outside Warp" in finding.message
    sim = Mixed()
    assert gc.capture(sim.step, device=device, owners=(sim,), allow_foreign_nodes=True).ok

    class ThenCopy(Mixed):
        # The foreign kernel right before a wp.copy and a zero_(): not taken as theirs.
        def step(self):
            (err,) = driver.cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0)
            assert err == driver.CUresult.CUDA_SUCCESS, err
            wp.copy(self.x, self.y)
            (err,) = driver.cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, stream, 0, 0)
            assert err == driver.CUresult.CUDA_SUCCESS, err
            self.x.zero_()

    sim = ThenCopy()
    sim.y = wp.ones(16, dtype=float, device=device)
    checked = gc.capture(sim.step, device=device, owners=(sim,), on_failure="ignore")
    assert [f.kind for f in checked.report.findings] == ["unrecorded-node"] * 2, str(checked.report)
    roles = [(n.type, n.role) for n in checked.graph_match.nodes]
    assert roles == [("KERNEL", "foreign"), ("MEMCPY", "recorded"), ("KERNEL", "foreign"), ("MEMSET", "recorded")]


def test_graph_picture_uses_the_graph_nodes(device, tmp_path):
    from graphcheck import dot

    a = wp.zeros(16, dtype=float, device=device)

    class Sim:
        def __init__(self):
            self.a = a

        def step(self):
            wp.launch(K.add_one, dim=16, inputs=[self.a], device=device)
            self.a.zero_()

    sim = Sim()
    checked = gc.capture(sim.step, device=device, owners=(sim,))
    source = dot.to_dot(checked)
    assert "add_one" in source and "->" in source
    written = dot.write(checked, str(tmp_path / "graph.dot"))
    assert written[0].endswith("graph.dot")
    np.testing.assert_array_equal(a.numpy(), np.zeros(16))


def test_a_copy_with_gradients_checks_both_copies(device):
    a = wp.zeros(16, dtype=float, device=device, requires_grad=True)
    b = wp.ones(16, dtype=float, device=device, requires_grad=True)
    trace, graph = captured(device, lambda: wp.copy(a, b))
    match = read_match(graph, trace)
    copies = [(n.fields["dst"], n.record, n.role) for n in match.nodes if n.type == "MEMCPY"]
    assert copies == [(a.ptr, 0, "recorded"), (a.grad.ptr, 1, "recorded")], copies
    assert check(match) == ([], [])


def test_a_launch_of_dimension_zero_adds_no_node_and_no_finding(device):
    a = wp.zeros(16, dtype=float, device=device)
    command = wp.launch(K.add_one, dim=16, inputs=[a], device=device, record_cmd=True)
    command.launch()

    def work():
        wp.launch(K.add_one, dim=16, inputs=[a], device=device)
        command.set_dim(0)
        command.launch()
        command.set_dim(16)

    trace, graph = captured(device, work)
    match = read_match(graph, trace)
    assert [(n.type, n.record) for n in match.nodes] == [("KERNEL", 0)]
    assert check(match) == ([], [])


def test_every_node_of_a_safe_capture_is_accounted_for(device):
    a, b = wp.zeros(1000, dtype=float, device=device), wp.ones(1000, dtype=float, device=device)

    class Sim:
        def __init__(self):
            self.a, self.b = a, b
            self.keys = wp.array(np.arange(128)[::-1].copy(), dtype=int, device=device)  # 2x count for the sort
            self.values = wp.zeros(128, dtype=int, device=device)

        def step(self):
            wp.launch(K.scale, dim=1000, inputs=[self.a, self.b, 2.5, 3], device=device)
            self.a.fill_(1.0)  # a memtile kernel, not a memset
            self.b.zero_()
            wp.copy(self.a, self.b, dest_offset=4, count=100)
            wp.utils.radix_sort_pairs(self.keys, self.values, 64)

    sim = Sim()
    checked = gc.capture(sim.step, device=device, owners=(sim,))
    assert checked.ok and "graph" in checked.report.checks, str(checked.report)
    assert not [n for n in checked.graph_match.nodes if n.role in _UNACCOUNTED]


def test_check_replay_reads_the_graph_again_after_its_kernel_node_was_set(device):
    """cuGraphKernelNodeSetParams on the graph after capture: the explicit replay check reads
    the template again and finds it (an executable's own parameters, set with
    cuGraphExecKernelNodeSetParams, cannot be read back: docs/limits.md)."""
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)

    def step():
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], device=device)

    step()
    checked = gc.capture(step, device=device, owners=(a, b))
    assert checked.report.ok and checked.check_replay().ok, str(checked.report)
    node = next(n for n in checked.graph_match.nodes if n.type == "KERNEL" and n.role == "recorded")
    params = _cuda.kernel_params(node.handle)
    values = list(node.fields["params"])
    values[3] = bytes(ctypes.c_float(7.0))  # the scalar `s`
    buffers = [ctypes.create_string_buffer(v, len(v)) for v in values]
    pointers = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(x) for x in buffers])
    params.kernelParams = ctypes.addressof(pointers)
    _cuda.set_kernel_params(node.handle, params)
    replay = checked.check_replay(on_failure="ignore")
    assert [f.kind for f in replay.findings] == ["node-mismatch"], str(replay)
    assert "parameter s is" in replay.findings[0].message and "graph" in replay.checks

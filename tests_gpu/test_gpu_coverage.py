"""Real captures of what the rest of tests_gpu/ does not launch: adjoint, struct, indexed
and fabric arguments, multi-dimensional bounds, tiles, a capture on a stream that is not
the device's current one, mem-free nodes, child graphs, deterministic mode.

Each captures with graphcheck recording, reads the graph, and expects every node
accounted for, every kernel node's bytes equal to its record's, and the cross-check
complete and clean. Written without a GPU at hand: the first run on one is
their first run.
"""

import gc as gc_module

import pytest
import warp as wp

import graphcheck as gc
from graphcheck.checks.escaped_work import uncaptured
from graphcheck.crosscheck import check
from graphcheck.graph import read_match
from tests import kernels as K
from tests_gpu import gpu_kernels as G

_UNACCOUNTED = ("unrecorded", "foreign", "unread")


def capture(device, work, stream=None):
    """``(trace, graph, match)`` of ``work`` captured (Warp's own operations in the trace),
    after one eager call that loads its modules."""
    work()
    wp.synchronize_device(device)
    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=device, stream=stream) as cap:
        work()
    return trace, cap.graph, read_match(cap.graph, trace)


def assert_clean(trace, match):
    assert [r.kernel for r in trace if r.capture is None] == [], "every operation learnt its place in the capture"
    assert [(n.index, n.type, n.role) for n in match.nodes if n.role in _UNACCOUNTED] == []
    findings, notes = check(match)
    assert [f.message for f in findings] == [] and notes == []
    for node in match.nodes:
        if node.role == "recorded" and node.type == "KERNEL":
            assert node.fields["params"] == trace.records[node.record].param_bytes, trace.records[node.record].kernel


def test_every_argument_kind_bakes_the_recorded_bytes(device):
    """Indexed arrays, a struct with half and bool fields, float16, vec3h, mat33d, bool, a 3-D array and launch."""
    inputs = G.exotic_inputs(device)
    trace, graph, match = capture(device, lambda: wp.launch(G.exotic, dim=(4, 4, 4), inputs=inputs, device=device))
    assert_clean(trace, match)
    wp.capture_launch(graph)
    assert inputs[-1].numpy()[0, 0, 0] == pytest.approx(4.0 + 1.0 + 1.5 + 0.5 + 1.0 + 0.0)


def test_a_fabric_array_bakes_the_recorded_bytes(device):
    data, out = wp.array([1.0, 2.0, 3.0], dtype=float, device=device), wp.zeros(3, dtype=float, device=device)
    fabric = G.fabric_of(data)
    trace, graph, match = capture(
        device, lambda: wp.launch(G.through_fabric, dim=3, inputs=[fabric, out], device=device)
    )
    assert_clean(trace, match)
    wp.capture_launch(graph)
    assert out.numpy().tolist() == [2.0, 4.0, 6.0]


def test_an_adjoint_launch_bakes_the_recorded_bytes(device):
    a, b = wp.zeros(64, dtype=float, device=device), wp.ones(64, dtype=float, device=device)
    ga, gb = wp.ones(64, dtype=float, device=device), wp.zeros(64, dtype=float, device=device)

    def work():
        wp.launch(K.scale, dim=64, inputs=[a, b, 2.5, 3], adjoint=True, adj_inputs=[ga, gb, 0.0, 0], device=device)

    trace, graph, match = capture(device, work)
    assert [r.adjoint for r in trace] == [True]
    assert_clean(trace, match)


def test_a_tile_launch_bakes_the_recorded_bytes(device):
    tiles, sums = wp.ones((4, G.TILE), dtype=float, device=device), wp.zeros(4, dtype=float, device=device)

    def work():
        wp.launch_tiled(G.tile_sum, dim=[4], inputs=[tiles, sums], block_dim=64, device=device)

    trace, graph, match = capture(device, work)
    (record,) = [r for r in trace if r.kind == "launch"]
    assert record.tile_block_dim == 64 and record.cuda.block_dim == 64
    assert_clean(trace, match)
    wp.capture_launch(graph)
    assert sums.numpy().tolist() == [float(G.TILE)] * 4


@pytest.mark.skipif(not wp.is_conditional_graph_supported(), reason="needs conditional graph nodes (CUDA 12.4+)")
def test_a_capture_on_a_stream_that_is_not_current(device):
    """capture_if is asked about on its stream=; work Warp sends to the current stream is a stream-drift."""
    s = wp.Stream(device)
    x, y = wp.zeros(16, dtype=float, device=device), wp.ones(16, dtype=float, device=device)
    flag = wp.array([1], dtype=int, device=device)

    def work():
        wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
        wp.capture_if(flag, on_true=lambda: wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s),
                      stream=s)  # fmt: skip

    trace, graph, match = capture(device, work, stream=s)
    assert_clean(trace, match)
    with gc.trace_launches() as escaped, wp.ScopedCapture(device=device, stream=s):
        wp.launch(K.add_one, dim=16, inputs=[x], device=device, stream=s)
        y.zero_()  # Warp sends it to the device's current stream, which is not capturing
    assert [f.kind for f in uncaptured(escaped)] == ["stream-drift"]


def test_an_array_freed_inside_the_capture_gives_allocation_nodes(device):
    if not wp.is_mempool_enabled(device):
        pytest.skip("the device's memory pool is off")
    made = []

    def work():
        t = wp.zeros(64, dtype=float, device=device)
        made.append(t.ptr)
        wp.launch(K.add_one, dim=64, inputs=[t], device=device)
        del t
        gc_module.collect()

    trace, graph, match = capture(device, work)
    kinds = [(n.type, n.fields.get("dst"), n.role) for n in match.nodes if n.type in ("MEM_ALLOC", "MEM_FREE")]
    assert kinds == [("MEM_ALLOC", made[-1], "allocation"), ("MEM_FREE", made[-1], "allocation")]
    assert_clean(trace, match)


@pytest.mark.skipif(not wp.is_conditional_graph_supported(), reason="needs conditional graph nodes (CUDA 12.4+)")
def test_a_graph_branch_bakes_addresses_the_replay_check_sees(device):
    x = wp.zeros(16, dtype=float, device=device)
    flag = wp.array([1], dtype=int, device=device)
    wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    with wp.ScopedCapture(device=device) as branch:
        wp.launch(K.add_one, dim=16, inputs=[x], device=device)
    trace, graph, match = capture(device, lambda: wp.capture_if(flag, on_true=branch.graph))
    assert_clean(trace, match)
    baked = {a.start for addresses in match.addresses().values() for a in addresses}
    assert x.ptr in baked and flag.ptr in baked


def test_a_deterministic_launch_is_accounted_for(device):
    mode = getattr(getattr(wp.config, "DeterministicMode", None), "RUN_TO_RUN", None)
    if mode is None:
        pytest.skip(f"Warp {wp.__version__} has no deterministic mode")
    saved = wp.config.deterministic
    wp.config.deterministic = mode
    try:
        from tests_gpu import deterministic_kernels as D

        x, total = wp.ones(256, dtype=float, device=device), wp.zeros(1, dtype=float, device=device)
        trace, graph, match = capture(
            device, lambda: wp.launch(D.atomic_total, dim=256, inputs=[x, total], device=device)
        )
        assert [(n.index, n.type, n.role) for n in match.nodes if n.role in _UNACCOUNTED] == []
        findings, notes = check(match)
        assert [f.message for f in findings] == [] and notes == []
    finally:
        wp.config.deterministic = saved

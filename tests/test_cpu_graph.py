"""The CPU graph cross-check: every operation a CPU graph replays is read back from Warp's
operation stream and matched to the record, and what it does not hold is found from the
graph itself. Each producer here is also replayed against an eagerly stepped twin: a
verdict is a claim."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
import warp as wp
import warp.sparse as wps

import graphcheck as gc
from graphcheck import crosscheck
from tests.cpu_graph_kernels import advance, bump, count_boxes, count_down, count_near, move, scramble, square_sum
from tests.internals import _warp
from tests.releases import WARP_RELEASE, needs_warp

DEVICE = "cpu"
N = 16

#: Warp 1.16 made CPU graphs record reductions, BVH refits and hash grid updates.
RECORDS_NATIVES = needs_warp((1, 16), "CPU graph operations for reductions, BVH refits and hash grid updates")


@wp.struct
class Params:
    gain: float
    count: int
    offset: wp.vec3
    data: wp.array(dtype=float)


@wp.kernel
def mixed(x: float, n: int, v: wp.vec3, m: wp.mat33, p: Params, a: wp.array(dtype=float), b: wp.array2d(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + x * float(n) + v[0] + m[1, 1] + p.gain * p.data[i] + p.offset[2]
    b[i, 0] = b[i, 0] + float(p.count)


@wp.kernel
def small_types(a: wp.array2d(dtype=float), s: wp.int8, h: wp.vec3h, t: wp.int16):
    i, j = wp.tid()
    a[i, j] = a[i, j] + float(s) + float(h[1]) + float(t)


class Producer:
    """A producer whose step holds one kind of CPU graph operation (``kind``)."""

    kind = "KERNEL"

    def __init__(self, device=DEVICE):
        self.device = device
        self.a = wp.array(np.arange(N, dtype=np.float32), device=device)
        self.step_count = wp.zeros(1, dtype=int, device=device)

    def launch(self, kernel, inputs, dim=N):
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.device)


class Kernels(Producer):
    kind = "KERNEL"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.b = wp.zeros((N, 3), dtype=float, device=device)
        self.p = Params()
        self.p.gain, self.p.count, self.p.offset, self.p.data = 0.5, 7, wp.vec3(1.0, 2.0, 3.0), self.a

    def step(self):
        m = wp.mat33(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
        self.launch(mixed, [1.5, 3, wp.vec3(10.0, 20.0, 30.0), m, self.p, self.a, self.b])
        self.launch(small_types, [self.b, wp.int8(-2), wp.vec3h(1.0, 2.0, 3.0), wp.int16(300)], dim=(N, 3))


class Copies(Producer):
    kind = "MEMCPY"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.b = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(advance, [self.a, 1.0])
        wp.copy(self.b, self.a)
        wp.copy(self.a, self.b, dest_offset=1, src_offset=3, count=5)


class Memsets(Producer):
    kind = "MEMSET"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.b = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(advance, [self.a, 1.0])
        self.b.zero_()
        self.launch(advance, [self.b, 2.0])


class Fills(Producer):
    kind = "MEMTILE"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.small = wp.zeros(N, dtype=wp.uint8, device=device)
        self.vectors = wp.zeros(N, dtype=wp.vec3, device=device)

    def step(self):
        self.a.fill_(3.0)
        self.small.fill_(7)
        self.vectors.fill_(wp.vec3(1.0, 2.0, 3.0))
        self.launch(advance, [self.a, 1.0])


class Scan(Producer):
    kind = "SCAN"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.out = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(advance, [self.a, 1.0])
        wp.utils.array_scan(self.a, self.out, inclusive=True)


class Reductions(Producer):
    kind = "REDUCTION"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.total = wp.zeros(1, dtype=float, device=device)
        self.inner = wp.zeros(1, dtype=float, device=device)

    def step(self):
        self.launch(advance, [self.a, 1.0])
        wp.utils.array_sum(self.a, out=self.total)
        wp.utils.array_inner(self.a, self.a, out=self.inner)


class Sorts(Producer):
    kind = "RADIX_SORT"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        rng = np.random.default_rng(3)
        self.keys = wp.array(rng.integers(0, 23, 2 * N).astype(np.int32), device=device)
        self.values = wp.array(np.arange(2 * N, dtype=np.int32), device=device)
        self.seg_keys = wp.array(rng.integers(0, 23, 2 * N).astype(np.int32), device=device)
        self.seg_values = wp.array(np.arange(2 * N, dtype=np.int32), device=device)
        self.starts = wp.array(np.array([0, 5, 11], dtype=np.int32), device=device)
        self.ends = wp.array(np.array([5, 11, N], dtype=np.int32), device=device)

    def step(self):
        self.launch(scramble, [self.keys, self.step_count])
        self.launch(scramble, [self.seg_keys, self.step_count])
        self.launch(bump, [self.step_count], dim=1)
        wp.utils.radix_sort_pairs(self.keys, self.values, N)
        wp.utils.segmented_sort_pairs(self.seg_keys, self.seg_values, N, self.starts, self.ends)


class RunLengths(Producer):
    kind = "RUNLENGTH_ENCODE"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.keys = wp.array(np.arange(N, dtype=np.int32) % 4, device=device)
        self.values = wp.array(np.arange(N, dtype=np.int32), device=device)
        self.run_values = wp.zeros(N, dtype=int, device=device)
        self.run_lengths = wp.zeros(N, dtype=int, device=device)
        self.runs = wp.zeros(1, dtype=int, device=device)

    def step(self):
        self.launch(scramble, [self.keys, self.step_count])
        self.launch(bump, [self.step_count], dim=1)
        wp.utils.radix_sort_pairs(self.keys, self.values, N // 2)
        wp.utils.runlength_encode(self.keys, self.run_values, self.run_lengths, run_count=self.runs)


class Sparse(Producer):
    kind = "BSR_FROM_TRIPLETS"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        rows = np.array([0, 1, 2, 2, 3, 0], dtype=np.int32)
        columns = np.array([1, 0, 2, 3, 3, 1], dtype=np.int32)
        self.rows = wp.array(rows, device=device)
        self.columns = wp.array(columns, device=device)
        self.values = wp.array(np.arange(6, dtype=np.float32) + 1.0, device=device)
        self.matrix = wps.bsr_zeros(4, 4, block_type=float, device=device)
        self.transposed = wps.bsr_zeros(4, 4, block_type=float, device=device)
        # Sized once: inside a capture Warp neither allocates nor reads back sizes.
        wps.bsr_set_from_triplets(self.matrix, self.rows, self.columns, self.values)
        wps.bsr_set_transpose(self.transposed, self.matrix)

    def step(self):
        self.launch(advance, [self.values, 1.0], dim=6)
        wps.bsr_set_from_triplets(self.matrix, self.rows, self.columns, self.values)
        wps.bsr_set_transpose(self.transposed, self.matrix)


class Conditionals(Producer):
    kind = "CONDITIONAL"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.flag = wp.ones(1, dtype=int, device=device)  # the reference call runs the body too
        self.remaining = wp.zeros(1, dtype=int, device=device)

    def step(self):
        wp.capture_if(self.flag, on_true=lambda: self.launch(advance, [self.a, 1.0]))
        self.launch(bump, [self.flag], dim=1)
        self.remaining.fill_(3)
        wp.capture_while(self.remaining, lambda: self.launch(count_down, [self.remaining, self.a], dim=1))


class Gradients(Producer):
    kind = "KERNEL"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.x = wp.array(np.arange(3, dtype=np.float32) + 1.0, device=device, requires_grad=True)
        self.y = wp.zeros(3, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.tape = wp.Tape()

    def step(self):
        self.tape.reset()
        self.loss.zero_()
        with self.tape:
            wp.launch(square_sum, dim=3, inputs=[self.x], outputs=[self.y, self.loss], device=self.device)
        self.tape.backward(loss=self.loss)
        wp.launch(advance, dim=3, inputs=[self.x, 0.5], device=self.device)


class Commands(Producer):
    kind = "KERNEL"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.cmd = wp.launch(advance, dim=N, inputs=[self.a, 2.0], device=device, record_cmd=True)

    def step(self):
        self.cmd.launch()


class HashGrids(Producer):
    kind = "HASH_GRID_UPDATE"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        rng = np.random.default_rng(5)
        self.points = wp.array(rng.random((N, 3)).astype(np.float32) * 2.0, dtype=wp.vec3, device=device)
        self.grid = wp.HashGrid(4, 4, 4, device=device)
        self.near = wp.zeros(N, dtype=int, device=device)

    def step(self):
        self.launch(move, [self.points, wp.vec3(0.05, 0.1, 0.0)])
        self.grid.build(self.points, 0.6)
        self.launch(count_near, [self.grid.id, self.points, self.near])


class Bvhs(Producer):
    kind = "BVH_REFIT"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        rng = np.random.default_rng(8)
        low = rng.random((N, 3)).astype(np.float32)
        self.lower = wp.array(low, dtype=wp.vec3, device=device)
        self.upper = wp.array(low + 0.1, dtype=wp.vec3, device=device)
        self.bvh = wp.Bvh(self.lower, self.upper)
        self.found = wp.zeros(2, dtype=int, device=device)

    def step(self):
        for bounds in (self.lower, self.upper):
            self.launch(move, [bounds, wp.vec3(0.1, 0.0, 0.0)])
        self.bvh.refit()
        self.launch(count_boxes, [self.bvh.id, self.found], dim=1)
        self.bvh.rebuild()


class RawNativeCall(Producer):
    """A library calling Warp's native library directly, as Newton does."""

    kind = "MEMCPY"

    def __init__(self, device=DEVICE):
        super().__init__(device)
        self.b = wp.zeros(N, dtype=float, device=device)

    def step(self):
        self.launch(advance, [self.a, 1.0])
        core = wp._src.context.runtime.core
        core.wp_memcpy_h2h(ctypes.c_void_p(self.b.ptr), ctypes.c_void_p(self.a.ptr), self.a.capacity)


EVERY_KIND = [
    Kernels, Copies, Memsets, Fills, Scan, Sorts, RunLengths, Conditionals, Gradients, Commands, RawNativeCall,
    pytest.param(Reductions, marks=RECORDS_NATIVES), pytest.param(HashGrids, marks=RECORDS_NATIVES),
    pytest.param(Bvhs, marks=RECORDS_NATIVES), Sparse,
]  # fmt: skip


@pytest.mark.parametrize("producer", EVERY_KIND, ids=lambda p: p.__name__)
def test_every_operation_kind_is_read_matched_and_replays_as_eager(producer):
    p = producer()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    report = checked.report
    assert report.ok and "graph" in report.checks and not report.skipped, str(report)
    match = checked.graph_match
    assert match.device == "cpu" and not match.dropped and not match.gaps
    assert all(node.role == "recorded" for node in match.nodes), [(n.type, n.role) for n in match.nodes]
    assert producer.kind in {node.type for node in match.nodes}
    # A verdict is a claim: the graph, replayed, computes what eager stepping does.
    values = gc.verify_replay(producer, steps=4, device=DEVICE, on_failure="ignore")
    assert values.ok, str(values)


def test_a_kernel_launch_is_read_as_replay_will_pass_it():
    p = Kernels()
    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=DEVICE) as capture:
        p.step()
    graph = _warp.read_cpu_graph(capture.graph)
    first, second = (n for n in graph.nodes if n.type == "KERNEL")
    assert (first.name, first.fields["shape"], first.fields["adjoint"]) == ("mixed", (N,), False)
    assert second.fields["shape"] == (N, 3)
    # Byte for byte what the launch passed: the launch bounds, then each argument, pointer
    # slots resolved to the addresses replay hands the kernel.
    assert first.fields["params"] == trace.records[0].param_bytes
    assert second.fields["params"] == trace.records[1].param_bytes


def test_warps_own_save_holds_the_stream_read_from_memory():
    p = Conditionals()
    with wp.ScopedCapture(device=DEVICE) as capture:
        p.step()
    memory = _warp.read_cpu_graph(capture.graph)
    saved = _warp.read_cpu_graph(capture.graph, source="save")
    assert memory.source == "memory" and saved.source == "save"
    assert [n.type for n in memory.nodes] == [n.type for n in saved.nodes]
    assert saved.gaps and "could not be read" in saved.gaps[0] and not memory.gaps
    assert memory.format == _warp.stream_format() in _warp.CPU_GRAPH_FORMATS


def _stream(graph) -> tuple[int, int]:
    """Where a CPU graph's operation stream lies in memory (APICState.operation_stream)."""
    state = _warp.cpu_graph_state(graph)
    begin, end, _ = struct.unpack_from("<QQQ", ctypes.string_at(state, 32), 8)
    return begin, end - begin


def test_a_byte_changed_in_the_stream_after_capture_is_a_node_mismatch_before_replay():
    class Scaled(Producer):
        def step(self):
            self.launch(advance, [self.a, 3.25])

    p, eager = Scaled(), Scaled()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    eager.step()
    assert checked.report.ok and checked.check_replay().ok
    begin, nbytes = _stream(checked.graph)
    at = ctypes.string_at(begin, nbytes).index(struct.pack("<f", 3.25))
    ctypes.memmove(begin + at, struct.pack("<f", 4.25), 4)  # one argument byte rewritten in place
    replay = checked.check_replay(on_failure="ignore")
    (finding,) = replay.findings
    assert finding.kind == "node-mismatch" and "graph" in replay.checks, str(replay)
    assert "parameter by is 0x40880000 where the launch passed 0x40500000" in finding.message
    # And the changed graph does replay wrong.
    wp.capture_launch(checked.graph)
    eager.step()
    assert not np.array_equal(p.a.numpy(), eager.a.numpy())


def test_another_graph_put_in_place_is_read_again_before_replay():
    class Scaled(Producer):
        def __init__(self, by):
            super().__init__()
            self.by = by

        def step(self):
            self.launch(advance, [self.a, self.by])

    p = Scaled(1.0)
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    other = gc.capture(Scaled(2.0).step, device=DEVICE, on_failure="ignore")
    checked.graph = other.graph
    replay = checked.check_replay(on_failure="ignore")
    assert {f.kind for f in replay.findings} == {"node-mismatch"}, str(replay)
    # A launch() checks without reading the graph again: it stays as cheap as it is.
    assert "graph" not in checked._check_replay("ignore", graph=False).checks


def test_a_graph_unchanged_since_capture_is_not_matched_again():
    p = Kernels()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    assert checked.graph_match.holds_what_was_read(checked.graph)
    replay = checked.check_replay()
    assert replay.ok and replay.checks == ("replay", "graph")


def test_a_mesh_refit_inside_a_cpu_capture_is_found_by_the_cross_check():
    class Refit(Producer):
        def __init__(self, device=DEVICE):
            super().__init__(device)
            points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32)
            self.points = wp.array(points, dtype=wp.vec3, device=device)
            self.mesh = wp.Mesh(points=self.points, indices=wp.array([0, 1, 2], dtype=int, device=device))

        def step(self):
            self.launch(move, [self.points, wp.vec3(0.5, 0.0, 0.0)], dim=3)
            self.mesh.refit()
            self.mesh.points = self.points  # the setter refits too

    p = Refit()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,), on_failure="ignore")
    found = {(f.kind, f.kernel): f for f in checked.report.findings}
    assert set(found) == {("capture-error", "mesh_refit_host"), ("capture-error", "mesh_set_points_host")}
    assert all(f.detail["graph"] == "cpu" for f in found.values())
    assert "Warp's CPU graphs have no operation for it" in found["capture-error", "mesh_refit_host"].message
    assert [n.type for n in checked.graph_match.nodes] == ["KERNEL"]  # the launch, and nothing for the refits


def test_a_graph_launched_inside_a_capture_loses_its_kernels_and_flattens_its_conditional():
    cond = wp.zeros(1, dtype=int, device=DEVICE)
    out = wp.zeros(2, dtype=float, device=DEVICE)
    total = wp.zeros(1, dtype=float, device=DEVICE)
    with wp.ScopedCapture(device=DEVICE) as inner:
        wp.launch(advance, dim=2, inputs=[out, 1.0], device=DEVICE)
        wp.capture_if(cond, on_true=lambda: out.fill_(1.0), on_false=lambda: out.fill_(-1.0))
        total.zero_()

    checked = gc.capture(lambda: wp.capture_launch(inner.graph), device=DEVICE, owners=(cond, out, total),
                         reference=False, on_failure="ignore")  # fmt: skip
    (finding,) = checked.report.findings
    assert (finding.kind, finding.kernel) == ("capture-error", "wp.capture_launch"), str(checked.report)
    assert "it holds 2 of that graph's 4 operation(s): not the launch of advance" in finding.message
    assert "its wp.capture_if flattened to the second branch, the one taken at capture" in finding.message
    # What the outer graph holds is what the inner one re-recorded: the fill taken, the memset.
    assert [(n.type, n.role) for n in checked.graph_match.nodes] == [("MEMTILE", "recorded"), ("MEMSET", "recorded")]
    # The evidence: with the condition raised, the inner graph takes the first branch, the outer does not.
    cond.fill_(1)
    wp.capture_launch(inner.graph)
    inner_out = out.numpy().copy()
    wp.capture_launch(checked.graph)
    assert inner_out.tolist() == [1.0, 1.0] and out.numpy().tolist() == [-1.0, -1.0]


def test_array_inner_dropped_by_warp_1_15_is_found_by_the_cross_check():
    a = wp.array(np.array([1.0, 2.0], dtype=np.float32), device=DEVICE)
    out = wp.zeros(1, dtype=float, device=DEVICE)
    checked = gc.capture(lambda: wp.utils.array_inner(a, a, out=out), device=DEVICE, owners=(a, out),
                         on_failure="ignore")  # fmt: skip
    dropped = [f for f in checked.report.findings if f.kind == "capture-error"]
    out.zero_()
    wp.capture_launch(checked.graph)
    replayed = out.numpy()[0] == 5.0
    assert replayed == (WARP_RELEASE >= (1, 16)) == (not dropped), str(checked.report)
    if dropped:
        assert dropped[0].kernel == "array_inner_float_host"
        assert "the graph holds no reduction for it" in dropped[0].message


def test_an_operation_no_record_asked_for_is_an_unrecorded_node():
    a = wp.zeros(N, dtype=float, device=DEVICE)
    with wp.ScopedCapture(device=DEVICE) as capture:
        wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)  # before the trace started
        with gc.trace_launches(include_warp=True) as trace:
            a.zero_()
    result = crosscheck.check_graph(capture.graph, trace)
    assert result.complete
    (finding,) = result.findings
    assert finding.kind == "unrecorded-node" and "Warp kernel advance that no recorded launch made" in finding.message


def test_the_matching_holds_its_place_where_the_graph_leaves_an_operation_out():
    points = wp.array(np.zeros((3, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
    mesh = wp.Mesh(points=points, indices=wp.array([0, 1, 2], dtype=int, device=DEVICE))
    a = wp.zeros(N, dtype=float, device=DEVICE)

    def step():
        wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)
        mesh.refit()
        a.zero_()
        wp.launch(advance, dim=N, inputs=[a, 2.0], device=DEVICE)

    checked = gc.capture(step, device=DEVICE, owners=(a, points), on_failure="ignore")
    assert [f.kernel for f in checked.report.findings] == ["mesh_refit_host"]
    assert [(n.type, n.record) for n in checked.graph_match.nodes] == [("KERNEL", 0), ("MEMSET", 2), ("KERNEL", 3)]


def test_an_unreadable_stream_format_is_not_checked_never_passed(monkeypatch):
    monkeypatch.setattr("graphcheck._warp.cpu_graph._format", 99)
    p = Kernels()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    report = checked.report
    assert report.status == "partial" and not report.ok and "graph" not in report.checks
    assert "writes its CPU graphs in format 99, which graphcheck does not read" in dict(report.skipped)["graph"]


def test_a_state_that_fails_the_layout_check_is_read_from_warps_save_and_said_partial(monkeypatch):
    monkeypatch.setattr("graphcheck._warp.cpu_graph._COUNT", 36)  # as if Warp moved the count
    p = Kernels()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    report = checked.report
    assert report.status == "partial" and not report.findings, str(report)
    why = dict(report.skipped)["graph"]
    assert "the cross-check is partial" in why and "not laid out as graphcheck reads it" in why
    assert [n.role for n in checked.graph_match.nodes] == ["recorded", "recorded"]


def test_read_graph_returns_the_nodes_and_check_shows_them_with_their_source_lines(tmp_path):
    p = Copies()
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    nodes = gc.read_graph(checked)
    assert [(n.type, n.role) for n in nodes] == [("KERNEL", "recorded"), ("MEMCPY", "recorded"), ("MEMCPY", "recorded")]
    assert [n.type for n in gc.read_graph(checked.graph)] == ["KERNEL", "MEMCPY", "MEMCPY"]
    assert nodes[1].fields["nbytes"] == 4 * N and nodes[1].fields["dst"] == p.b.ptr
    from tests.test_cli import graphcheck

    (tmp_path / "copies.py").write_text("from tests.test_cpu_graph import Copies\n")
    result = graphcheck("check", "copies:Copies", "--device", "cpu", "--show-graph", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert "graphcheck: the CPU graph, 3 node(s):" in lines
    assert any(line.startswith("  0: kernel advance shape (16,)  <- operation #0") and "test_cpu_graph.py:" in line
               for line in lines), lines  # fmt: skip
    assert any(line.startswith("  1: memcpy 64 bytes") and "<- operation #1 wp.copy at test_cpu_graph.py:" in line
               for line in lines), lines  # fmt: skip


def test_a_plain_graphs_nodes_print_as_what_they_are_and_read_graph_takes_graphs_only():
    p = Copies()
    p.step()  # compiled before the capture
    with wp.ScopedCapture(device=DEVICE) as capture:
        p.step()
    nodes = gc.read_graph(capture.graph)
    assert str(nodes[0]) == "0: kernel advance shape (16,)"
    assert repr(nodes[0]) == "<GraphNode 0: kernel advance shape (16,)>"
    assert str(nodes[1]).startswith("1: memcpy 64 bytes 0x")
    assert "\\x" not in repr(nodes) and "params" not in repr(nodes), "no raw parameter bytes"
    checked = gc.capture(p.step, device=DEVICE, owners=(p,))
    assert checked.graph_match.lines()[0].startswith("0: kernel advance shape (16,)  <- operation #0")
    with pytest.raises(TypeError, match=r"^read_graph\(\) takes a wp.Graph .* got 'x' \(a str\)$"):
        gc.read_graph("x")


def test_work_done_while_a_cpu_capture_is_paused_is_not_wanted_in_the_graph():
    a, b = wp.zeros(N, dtype=float, device=DEVICE), wp.zeros(N, dtype=float, device=DEVICE)
    wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)
    with gc.GraphGuard(device=DEVICE, owners=(a, b)) as guard:
        wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)
        paused = wp._src.context.capture_pause(device=DEVICE)
        b.zero_()  # runs at once, out of the graph, on purpose
        wp.launch(advance, dim=N, inputs=[b, 2.0], device=DEVICE)
        wp._src.context.capture_resume(paused, device=DEVICE)
        wp.launch(advance, dim=N, inputs=[a, 3.0], device=DEVICE)
    report = guard.report
    assert not report.findings and "graph" in report.checks, str(report)
    assert [(n.type, n.role) for n in guard.checked.graph_match.nodes] == [("KERNEL", "recorded")] * 2


def test_a_raw_native_call_with_ctypes_arguments_is_matched():
    a = wp.zeros(N, dtype=float, device=DEVICE)
    core = wp._src.context.runtime.core

    def step():
        wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)
        core.wp_memset_host(ctypes.c_void_p(a.ptr), ctypes.c_int(0), ctypes.c_size_t(a.capacity))

    checked = gc.capture(step, device=DEVICE, owners=(a,))
    assert checked.report.ok, str(checked.report)
    (memset,) = [n for n in checked.graph_match.nodes if n.type == "MEMSET"]
    assert memset.role == "recorded" and memset.asked == {"dst": a.ptr, "value": 0, "nbytes": a.capacity}


def test_a_conditional_that_raised_is_not_wanted_in_the_graph():
    flag = wp.ones(1, dtype=int, device=DEVICE)
    a = wp.zeros(N, dtype=float, device=DEVICE)

    def body():
        wp.launch(advance, dim=N, inputs=[a, 1.0], device=DEVICE)
        raise KeyError("the body fails")

    with gc.trace_launches(include_warp=True) as trace, wp.ScopedCapture(device=DEVICE) as capture:
        with pytest.raises(KeyError):
            wp.capture_if(flag, on_true=body)
        wp.launch(advance, dim=N, inputs=[a, 2.0], device=DEVICE)
    result = crosscheck.check_graph(capture.graph, trace)
    assert result.findings == [] and result.complete

"""The recorder: every path by which Warp enqueues work, recorded exactly."""

import ctypes
import math
import threading

import numpy as np
import pytest
import warp as wp
from warp import launch as early_bound_launch  # bound before graphcheck hooks anything

import graphcheck as gc
from tests import kernels as K
from tests.internals import _warp


def trace_of(fn):
    with gc.trace_launches() as trace:
        fn()
    return trace


def assert_recorded_alike(eager, captured):
    """Each captured launch carries the bytes and the arguments of its eager twin."""
    for e, c in zip(eager, captured, strict=True):
        assert c.param_bytes == e.param_bytes
        assert dict(c.args) == dict(e.args)


def assert_replay_gives(graph, array, reset):
    """Replaying ``graph`` after ``reset()`` leaves ``array`` as the eager call left it."""
    expected = array.numpy().copy()
    reset()
    wp.capture_launch(graph)
    assert (array.numpy() == expected).all()


def arrays(n=16, device="cpu"):
    return wp.zeros(n, dtype=float, device=device), wp.ones(n, dtype=float, device=device)


def test_launch_records_kernel_dims_and_arguments_by_name(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.5, 3], device=cpu)
    assert len(trace) == 1
    record = trace[0]
    assert record.kind == "launch"
    assert record.kernel == "tests.kernels.scale"
    assert record.dim == (16,)
    assert record.device == "cpu"
    assert record.stream is None
    assert record.block_dim == 1
    assert record.max_blocks == 0
    assert not record.adjoint and not record.internal
    assert record.args["s"] == 2.5
    assert record.args["n"] == 3
    assert record.args["a"].ptr == a.ptr
    assert record.args["a"].nbytes == 16 * 4
    assert record.args["b"].shape == (16,)
    assert record.args["b"].strides == (4,)
    assert record.site.function == "test_launch_records_kernel_dims_and_arguments_by_name"
    assert record.site.filename == __file__
    assert a.numpy()[0] == 5.5, "the launch still ran"


def test_call_site_is_the_users_line(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        line = _line_after()
        wp.launch(K.scale, dim=16, inputs=[a, b, 1.0, 0], device=cpu)
    assert trace[0].site.lineno == line
    assert trace[0].site.short == f"test_record.py:{line}"


def _line_after():
    import inspect

    return inspect.currentframe().f_back.f_lineno + 1


def test_early_bound_launch_is_recorded(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        early_bound_launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device=cpu)
    assert trace.kernels() == ["tests.kernels.scale"]


def test_launch_tiled_is_recorded_with_its_lane_dimension(cpu):
    a = wp.ones((4, 8), dtype=float, device=cpu)
    out = wp.zeros(4, dtype=float, device=cpu)
    with gc.trace_launches() as trace:
        wp.launch_tiled(K.tiled_sum, dim=[4], inputs=[a, out], block_dim=8, device=cpu)
    assert trace.kernels() == ["tests.kernels.tiled_sum"]
    assert trace[0].via == "launch_tiled"
    assert trace[0].dim[0] == 4


def test_launch_replay_is_recorded_and_the_recorded_command_is_not(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        cmd = wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device=cpu, record_cmd=True)
        assert len(trace) == 0, "record_cmd=True enqueues nothing"
        cmd.launch()
        cmd.launch()
    assert len(trace) == 2
    assert all(r.replay for r in trace)
    assert trace[0].args["s"] == 2.0
    assert trace[0].param_bytes == trace[1].param_bytes


def test_replay_bytes_are_those_of_the_launch_time(cpu):
    a, b = arrays()
    cmd = wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 1], device=cpu, record_cmd=True)
    with gc.trace_launches() as trace:
        cmd.launch()
        cmd.set_param_by_name("s", 4.0)
        cmd.launch()
    assert [r.args["s"] for r in trace] == [2.0, 4.0]


def test_adjoint_launch_is_recorded_with_adjoint_arguments(cpu):
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=cpu, requires_grad=True)
    y = wp.zeros(3, dtype=float, device=cpu, requires_grad=True)
    with gc.trace_launches() as trace:
        wp.launch(K.square, dim=3, inputs=[x], outputs=[y], device=cpu)
        y.grad.fill_(1.0)
        wp.launch(
            K.square, dim=3, inputs=[x], outputs=[y], adj_inputs=[x.grad], adj_outputs=[y.grad], adjoint=True,
            device=cpu,
        )  # fmt: skip
    launch, fill, adjoint = trace
    assert not launch.adjoint and adjoint.adjoint
    assert set(adjoint.args) == {"x", "y", "adj_x", "adj_y"}
    assert adjoint.args["adj_x"].ptr == x.grad.ptr
    assert adjoint.args["x"].grad == x.grad.ptr, "the forward descriptor carries the gradient address"
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_tape_backward_launches_are_recorded(cpu):
    x = wp.array([1.0, 2.0], dtype=float, device=cpu, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=cpu, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(K.square, dim=2, inputs=[x], outputs=[y], device=cpu)
    with gc.trace_launches() as trace:
        tape.backward(grads={y: wp.ones(2, dtype=float, device=cpu)})
    adjoints = [r for r in trace if r.kind == "launch"]
    assert [r.adjoint for r in adjoints] == [True]
    assert adjoints[0].via == "backward"


def test_launch_inside_a_cpu_capture_is_recorded_with_the_same_bytes(cpu):
    a, b = arrays()
    p = K.Params()
    p.gravity = wp.vec3(0.0, -9.8, 0.0)
    p.dt = 0.01
    p.scratch = wp.zeros(16, dtype=float, device=cpu)
    with gc.trace_launches() as eager:
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 3], device=cpu)
        wp.launch(K.with_struct, dim=16, inputs=[a, p], device=cpu)
    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        wp.launch(K.scale, dim=16, inputs=[a, b, 2.0, 3], device=cpu)
        wp.launch(K.with_struct, dim=16, inputs=[a, p], device=cpu)
    assert captured.kernels() == eager.kernels()
    for e, c in zip(eager, captured):
        assert e.param_bytes == c.param_bytes
        assert dict(e.args) == dict(c.args)
    a.zero_()
    wp.capture_launch(capture.graph)
    assert a.numpy()[0] == pytest.approx(0.01 + 0.0 - 9.8)


@wp.kernel
def seen_first_in_a_capture(a: wp.array[float], b: wp.array[float], s: float, n: int):
    i = wp.tid()
    a[i] = b[i] * s + float(n)


def test_a_kernel_first_launched_inside_a_capture_is_recorded_alike_by_both_paths(cpu):
    # No eager launch came first: the capture's first launch of the kernel takes the
    # general path, which makes the next ones take the fast path.
    a, b = arrays()
    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        for n in range(3):
            wp.launch(seen_first_in_a_capture, dim=16, inputs=[a, b, 2.0, n], device=cpu)
    assert [type(item).__name__ for item in captured._items] == ["LaunchRecord", "tuple", "tuple"]
    with gc.trace_launches() as eager:
        for n in range(3):
            wp.launch(seen_first_in_a_capture, dim=16, inputs=[a, b, 2.0, n], device=cpu)
    for e, c in zip(eager, captured):
        assert (c.kernel, c.block_dim, c.max_blocks, c.dim) == (e.kernel, e.block_dim, e.max_blocks, e.dim)
    assert_recorded_alike(eager, captured)
    assert_replay_gives(capture.graph, a, a.zero_)


def echo_inputs(device):
    """K.echo's inputs: its output (12 floats), then one value of each kind it echoes."""
    p = K.Params()
    p.gravity = wp.vec3(0.5, -9.8, 1.5)
    p.dt = 0.125
    p.scratch = wp.zeros(4, dtype=float, device=device)
    out = wp.zeros(12, dtype=float, device=device)
    return [out, 1.5, -7, wp.vec3(1.0, 2.0, 3.0), wp.mat22(1.0, 2.0, 3.0, 4.0), 2.25, 0.5, True, p]


def test_a_padded_argument_struct_inside_a_capture_splits_as_the_eager_parameters(cpu):
    # echo's argument struct has padding (a float64 after a mat22, a float16, a bool, a
    # struct): the capture keeps Warp's struct as it is laid out in C and splits it by its
    # fields' offsets, which must give the bytes the eager launch was given.
    inputs = echo_inputs(cpu)
    out = inputs[0]

    def step():
        for _ in range(2):
            wp.launch(K.echo, dim=1, inputs=inputs, device=cpu)

    eager = trace_of(step)
    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        step()
    assert [len(item) for item in captured._items] == [9, 9]  # the capture's fast path
    args_struct = captured._items[0][8]
    assert sum(size for _, size in _warp.struct_param_slices(args_struct)) < ctypes.sizeof(args_struct)  # padded
    assert eager.same_launches(captured)
    assert_recorded_alike(trace_of(step), captured)
    assert_replay_gives(capture.graph, out, out.zero_)


def test_a_generic_kernel_inside_a_capture_keeps_the_general_path(cpu):
    # The kernel passed to wp.launch is not the overload that runs: it is not registered
    # for the fast path, and every launch is recorded as the general path records it.
    from tests.judgement_kernels import generic_scale

    a = wp.full(8, 2.0, dtype=float, device=cpu)

    def step():
        for _ in range(2):
            wp.launch(generic_scale, dim=8, inputs=[a, 1.5], device=cpu)

    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        step()
    assert [type(item).__name__ for item in captured._items] == ["LaunchRecord", "LaunchRecord"]
    eager = trace_of(step)
    assert [c.param_bytes for c in captured] == [e.param_bytes for e in eager]
    assert_recorded_alike(eager, captured)
    assert_replay_gives(capture.graph, a, lambda: a.fill_(2.0))


def test_a_generic_kernel_inside_a_capture_is_the_overload_its_launch_resolved(cpu, monkeypatch):
    # Inside a capture the recorder sees the kernel passed to wp.launch (generic); the
    # overload that runs is read from that wp.launch call, which resolved it already, rather
    # than resolved again from the arguments (as costly as Warp's own resolution). Here
    # resolving again would fail: the record must still name the overload Warp launched.
    from graphcheck._warp import objects
    from tests.judgement_kernels import generic_scale

    a = wp.full(8, 2.0, dtype=float, device=cpu)
    wp.launch(generic_scale, dim=8, inputs=[a, 1.0], device=cpu)  # the overload exists: no rebuild in the capture
    (launched,) = [k for k in generic_scale.overloads.values() if k.adj.arg_types["a"].dtype is wp.float32]

    def not_again(kernel: object, arg_types: object) -> object:
        raise AssertionError("the overload was resolved again from the arguments")

    monkeypatch.setattr(objects, "_add_overload", not_again)
    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        wp.launch(generic_scale, dim=8, inputs=[a, 1.5], device=cpu)
    (record,) = captured
    assert record.kernel_object is launched and record.args["s"] == 1.5
    wp.capture_launch(capture.graph)
    np.testing.assert_array_equal(a.numpy(), np.full(8, 3.0))  # as the eager launch gives


def test_launches_with_the_same_parameter_block_share_one_split(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        for s in (2.0, 2.0, 3.0):
            wp.launch(K.scale, dim=16, inputs=[a, b, s, 1], device=cpu)
    first, again, other = trace
    assert first.param_bytes is again.param_bytes  # one split, its bytes hashed once
    assert first.args is again.args  # and one decoded dict
    assert other.param_bytes != first.param_bytes and other.args["s"] == 3.0


def test_memset_fill_and_copy_are_recorded(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        a.zero_()
        a.fill_(7.0)
        wp.copy(a, b, dest_offset=2, src_offset=1, count=5)
    zero, fill, copy = trace
    assert (zero.kind, zero.kernel, zero.value) == ("memset", "array.zero_", 0)
    assert zero.dest.ptr == a.ptr and zero.dest.nbytes == 64
    assert (fill.kind, fill.kernel, fill.value) == ("memset", "array.fill_", 7.0)
    assert copy.kind == "copy"
    assert copy.args["dest_offset"] == 2 and copy.args["src_offset"] == 1 and copy.count == 5
    assert copy.src.ptr == b.ptr
    assert copy.dim == (5,)
    np.testing.assert_array_equal(a.numpy()[:8], [7, 7, 1, 1, 1, 1, 1, 7])


def test_fill_with_a_vector_value(cpu):
    v = wp.zeros(4, dtype=wp.vec3, device=cpu)
    with gc.trace_launches() as trace:
        v.fill_(wp.vec3(1.0, 2.0, 3.0))
    assert trace[0].value == (1.0, 2.0, 3.0)


def test_zero_of_a_strided_view_is_one_operation(cpu):
    a = wp.ones(16, dtype=float, device=cpu)
    with gc.trace_launches() as trace:
        a[::2].zero_()
    assert [r.kernel for r in trace] == ["array.zero_"]
    assert trace[0].dest.strides == (8,)


def test_a_memset_names_the_array_as_it_is_each_time(cpu):
    # What an operation records of an array is read once per descriptor (the same arrays are
    # zeroed every step): a view, another dtype over the same memory and a gradient set in
    # between are each told apart.
    a = wp.zeros(16, dtype=float, device=cpu)
    as_int = wp.array(ptr=a.ptr, shape=(16,), dtype=wp.int32, device=cpu)
    with gc.trace_launches() as trace:
        a.zero_()
        a.zero_()
        a[::2].zero_()
        as_int.zero_()
        a.grad = wp.zeros_like(a)
        a.zero_()
    whole, again, view, ints, with_grad = (record.dest for record in trace)
    assert whole is again  # one descriptor, read once
    assert (whole.ptr, whole.nbytes, whole.strides, whole.grad, whole.dtype) == (a.ptr, 64, (4,), 0, "float32")
    assert (view.nbytes, view.shape, view.strides) == (60, (8,), (8,))
    assert (ints.ptr, ints.dtype) == (a.ptr, "int32")
    assert with_grad.grad == a.grad.ptr != 0


def test_assign_and_the_gradient_copy_are_recorded(cpu):
    a = wp.zeros(4, dtype=float, device=cpu, requires_grad=True)
    b = wp.ones(4, dtype=float, device=cpu, requires_grad=True)
    with gc.trace_launches() as trace:
        a.assign(b)
    assert [r.kernel for r in trace] == ["wp.copy", "wp.copy"]
    data, grad = trace
    assert data.dest.ptr == a.ptr and grad.dest.ptr == a.grad.ptr
    assert data.via == "assign"
    assert data.site == grad.site


def test_assign_from_numpy_records_the_copy_and_the_wrapped_host_buffer(cpu):
    a = wp.zeros(4, dtype=float, device=cpu)
    host = np.arange(4, dtype=np.float32)
    with gc.trace_launches() as trace:
        a.assign(host)
    assert trace.kernels() == ["wp.copy"]
    (alloc,) = trace.allocations
    assert alloc.how == "wrapped"
    assert trace[0].src.ptr in alloc


def test_clone_copy_and_full_fill_are_the_users_operations(cpu):
    # They carry the user's values (the source, the fill value): compared like the user's own.
    a, _ = arrays()
    with gc.trace_launches() as trace:
        c = wp.clone(a)
        f = wp.full(8, 2.5, dtype=float, device=cpu)
    copy, fill = trace
    assert (copy.kernel, copy.via, copy.internal) == ("wp.copy", "clone", False)
    assert (copy.src.ptr, copy.dest.ptr) == (a.ptr, c.ptr)
    assert (fill.kernel, fill.via, fill.internal, fill.value) == ("array.fill_", "full", False, 2.5)
    assert fill.dest.ptr == f.ptr
    assert [alloc.via for alloc in trace.allocations] == ["clone", "full"]


def test_zeros_memset_is_internal(cpu):
    with gc.trace_launches() as trace:
        wp.zeros(8, dtype=float, device=cpu)
    assert len(trace) == 0 and len(trace.allocations) == 1
    with gc.trace_launches(include_warp=True) as everything:
        wp.zeros(8, dtype=float, device=cpu)
    assert [(r.kernel, r.internal, r.via) for r in everything] == [("array.zero_", True, "zeros")]


def test_allocations_are_tracked_and_views_are_not(cpu):
    base = wp.zeros(32, dtype=float, device=cpu)
    with gc.trace_launches() as trace:
        e = wp.empty(4, dtype=float, device=cpu)
        f = wp.full(4, 2.0, dtype=float, device=cpu)
        n = wp.array(np.ones(4, dtype=np.float32), dtype=float, device=cpu)
        base[4:8]
        base.reshape((4, 8))
    hows = [(a.via, a.how) for a in trace.allocations]
    assert hows == [("empty", "allocated"), ("full", "allocated"), ("array", "uploaded")]
    for arr, alloc in zip((e, f, n), trace.allocations):
        assert arr.ptr in alloc
        assert alloc.site.function == "test_allocations_are_tracked_and_views_are_not"


def test_allocation_lookup_resolves_a_reused_address_to_the_live_allocation(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        for _ in range(3):
            tmp = wp.empty(16, dtype=float, device=cpu)
            wp.launch(K.scale, dim=16, inputs=[tmp, b, 1.0, 0], device=cpu)
            del tmp
    allocs = trace.allocations
    assert len(allocs) == 3
    for record, alloc in zip(trace, allocs):
        assert trace.allocation_at(record.args["a"].ptr, record.seq) is alloc
    assert trace.allocation_at(b.ptr) is None


def test_made_here_keeps_the_ranges_inside_allocations_of_the_call(cpu):
    a, b = arrays()
    with gc.trace_launches() as trace:
        tmp = wp.empty(16, dtype=float, device=cpu)
        wp.launch(K.scale, dim=16, inputs=[tmp, b, 1.0, 0], device=cpu)
        wp.launch(K.scale, dim=16, inputs=[a, b, 1.0, 0], device=cpu)
    made, owned = (trace.made_here(record.addresses()) for record in trace)
    assert [(x.arg, x.start) for x in made] == [("a", tmp.ptr)] and owned == ()
    with gc.trace_launches() as nothing_made:
        wp.launch(K.scale, dim=16, inputs=[a, b, 1.0, 0], device=cpu)
    assert nothing_made.made_here(nothing_made[0].addresses()) == ()


def test_native_helpers_are_recorded_with_their_buffers_by_role(cpu):
    values = wp.array(np.arange(8, dtype=np.int32), dtype=int, device=cpu)
    out = wp.zeros(8, dtype=int, device=cpu)
    keys = wp.array(np.arange(16, dtype=np.int32)[::-1].copy(), dtype=int, device=cpu)
    items = wp.zeros(16, dtype=int, device=cpu)
    with gc.trace_launches() as trace:
        wp.utils.array_scan(values, out, inclusive=True)
        wp.utils.radix_sort_pairs(keys, items, 8)
    scan, sort = trace
    assert scan.kind == "native"
    assert scan.kernel.startswith("array_scan_int_host")
    assert (scan.args["src"].ptr, scan.args["src"].nbytes) == (values.ptr, 32)
    assert (scan.args["dest"].ptr, scan.args["inclusive"]) == (out.ptr, True)
    # Radix sort works through twice the count: both halves are the operation's.
    assert list(sort.addresses()) == [("keys", keys.ptr, 64), ("values", items.ptr, 64)]
    assert sort.args["count"] == 8
    np.testing.assert_array_equal(out.numpy(), np.cumsum(np.arange(8)))


def test_hash_grid_builds_are_recorded_with_their_points(cpu):
    grid = wp.HashGrid(4, 4, 4, device=cpu)
    points = wp.array(np.random.default_rng(0).random((32, 3)), dtype=wp.vec3, device=cpu)
    with gc.trace_launches() as trace:
        grid.build(points, radius=0.25)
    (build,) = trace
    assert build.kernel == "hash_grid_update_host"
    assert (build.args["grid"], build.args["radius"]) == (grid.id, 0.25)
    assert (build.args["points"].ptr, build.args["points"].nbytes) == (points.ptr, 32 * 12)


def test_another_threads_work_is_not_recorded(cpu):
    a, b = arrays()
    started, done = threading.Event(), threading.Event()

    def other():
        started.wait()
        for _ in range(5):
            wp.launch(K.add_one, dim=16, inputs=[b], device=cpu)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with gc.trace_launches() as trace:
        started.set()
        done.wait(30)
        wp.launch(K.add_one, dim=16, inputs=[a], device=cpu)
    thread.join()
    assert len(trace) == 1
    assert trace[0].args["a"].ptr == a.ptr


def test_traces_in_two_threads_record_their_own_work(cpu):
    results = {}

    def work(name):
        arr = wp.zeros(8, dtype=float, device=cpu)
        with gc.trace_launches() as trace:
            for _ in range(3 if name == "x" else 5):
                wp.launch(K.add_one, dim=8, inputs=[arr], device=cpu)
        results[name] = len(trace)

    threads = [threading.Thread(target=work, args=(n,)) for n in "xy"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"x": 3, "y": 5}


def test_nested_traces_both_record(cpu):
    a, b = arrays()
    with gc.trace_launches() as outer:
        wp.launch(K.add_one, dim=16, inputs=[a], device=cpu)
        with gc.trace_launches() as inner:
            wp.launch(K.add_one, dim=16, inputs=[b], device=cpu)
        assert _warp.hooks_installed()
        wp.launch(K.add_one, dim=16, inputs=[a], device=cpu)
    assert len(outer) == 3 and len(inner) == 1
    assert inner[0].seq == outer[1].seq and inner[0].param_bytes == outer[1].param_bytes


def test_a_trace_cannot_be_entered_twice(cpu):
    trace = gc.trace_launches()
    with trace, pytest.raises(RuntimeError, match="already recording"), trace:
        pass


def test_hooks_are_removed_and_the_users_exception_propagates(cpu):
    a, _ = arrays()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), gc.trace_launches() as trace:
        wp.launch(K.add_one, dim=16, inputs=[a], device=cpu)
        raise Boom
    assert not _warp.hooks_installed()
    assert wp.launch.__code__.co_filename.endswith("context.py")
    wp.launch(K.add_one, dim=16, inputs=[a], device=cpu)
    assert len(trace) == 1


def test_a_failed_launch_leaves_no_record(cpu):
    a, _ = arrays()
    with gc.trace_launches() as trace:
        with pytest.raises(RuntimeError):
            wp.launch(K.add_one, dim=16, inputs=[a, a], device=cpu)  # one argument too many
        with pytest.raises(RuntimeError):
            wp.copy(a, wp.zeros(32, dtype=float, device=cpu), count=32)  # too large
    assert len(trace) == 0


def test_recorded_bytes_equal_what_the_kernel_received(cpu):
    inputs = echo_inputs(cpu)
    out, v, m, p = inputs[0], inputs[3], inputs[4], inputs[8]
    with gc.trace_launches() as trace:
        wp.launch(K.echo, dim=1, inputs=inputs, device=cpu)
    (record,) = trace
    received = out.numpy()
    args = record.args
    assert [args["f"], args["i"], *args["v"], args["m"][0][1], args["m"][1][0]] == list(received[:7])
    assert [args["d"], args["h"], 1.0 if args["b"] else 0.0, args["p.dt"], args["p.gravity"][1]] == list(
        received[7:12]
    )
    # Byte for byte, as Warp packs each parameter.
    names = [spec.name for spec in record.layout]
    assert names == ["dim", "out", "f", "i", "v", "m", "d", "h", "b", "p"]
    bytes_of = dict(zip(names, record.param_bytes))
    assert bytes_of["f"] == bytes(ctypes.c_float(1.5))
    assert bytes_of["i"] == bytes(ctypes.c_int32(-7))
    assert bytes_of["v"] == bytes(v)
    assert bytes_of["m"] == bytes(m)
    assert bytes_of["d"] == bytes(ctypes.c_double(2.25))
    assert bytes_of["h"] == np.float16(0.5).tobytes()
    assert bytes_of["b"] == b"\x01"
    assert bytes_of["p"] == bytes(p.__ctype__())
    assert bytes_of["out"] == bytes(out.__ctype__())
    assert len(bytes_of["dim"]) == 24


def test_vectors_and_structs_are_copied_at_launch_time(cpu):
    out = wp.zeros(16, dtype=float, device=cpu)
    p = K.Params()
    p.dt = 0.1
    p.scratch = wp.zeros(16, dtype=float, device=cpu)
    with gc.trace_launches() as trace:
        wp.launch(K.with_struct, dim=16, inputs=[out, p], device=cpu)
        p.dt = 0.2
        p.gravity[1] = -1.0
        wp.launch(K.with_struct, dim=16, inputs=[out, p], device=cpu)
    assert [r.args["p.dt"] for r in trace] == [0.1, 0.2]
    assert [r.args["p.gravity"] for r in trace] == [(0.0, 0.0, 0.0), (0.0, -1.0, 0.0)]


def test_struct_array_fields_are_flattened(cpu):
    out = wp.zeros(16, dtype=float, device=cpu)
    p = K.Params()
    p.scratch = wp.zeros(16, dtype=float, device=cpu)
    with gc.trace_launches() as trace:
        wp.launch(K.with_struct, dim=16, inputs=[out, p], device=cpu)
    assert trace[0].args["p.scratch"].ptr == p.scratch.ptr
    assert dict(trace[0].arrays()).keys() == {"out", "p.scratch"}


def test_nan_scalars_compare_equal(cpu):
    a, _ = arrays()
    traces = []
    for _ in range(2):
        with gc.trace_launches() as trace:
            wp.launch(K.nan_scale, dim=16, inputs=[a, math.nan], device=cpu)
        traces.append(trace)
    assert traces[0].same_topology(traces[1])
    assert math.isnan(traces[0][0].args["s"])


def test_recorded_bytes_equal_warps_own_packing(cpu):
    from graphcheck.packing import expected_params, kernel_layout
    from graphcheck.params import decode

    out = wp.zeros(12, dtype=float, device=cpu)
    p = K.Params()
    p.gravity = wp.vec3(0.5, -9.8, 1.5)
    p.scratch = wp.zeros(4, dtype=float, device=cpu)
    inputs = [out, 1.5, -7, wp.vec3(1.0, 2.0, 3.0), wp.mat22(1.0, 2.0, 3.0, 4.0), 2.25, 0.5, True, p]
    with gc.trace_launches() as trace:
        wp.launch(K.echo, dim=1, inputs=inputs, device=cpu)
    expected = expected_params(K.echo, 1, inputs, device=cpu)
    assert trace[0].param_bytes == expected
    assert decode(kernel_layout(K.echo), expected)["f"] == 1.5


def _echo(out, f, params, device):
    inputs = [out, f, -7, wp.vec3(1.0, 2.0, 3.0), wp.mat22(1.0, 2.0, 3.0, 4.0), 2.25, 0.5, True, params]
    wp.launch(K.echo, dim=1, inputs=inputs, device=device)


def test_a_launch_read_from_another_reads_only_what_differs_and_decodes_alike(cpu):
    from graphcheck.params import decode, decode_like

    def params(scratch):
        p = K.Params()
        p.gravity = wp.vec3(0.5, -9.8, 1.5)
        p.scratch = scratch
        return p

    out, other = wp.zeros(12, dtype=float, device=cpu), wp.zeros(12, dtype=float, device=cpu)
    p, q = params(wp.zeros(4, dtype=float, device=cpu)), params(wp.zeros(4, dtype=float, device=cpu))
    with gc.trace_launches() as first:
        _echo(out, 1.5, p, cpu)
    with gc.trace_launches() as second:
        _echo(other, 2.5, q, cpu)  # an array, a scalar and a struct's array differ
    ra, rb = first[0], second[0]
    whole = decode(rb.layout, rb.param_bytes)
    like = decode_like(rb.layout, rb.param_bytes, ra.param_bytes, ra.args)
    assert like == whole and list(like) == list(whole)
    assert (like["out"].ptr, like["f"], like["p.scratch"].ptr) == (other.ptr, 2.5, q.scratch.ptr)
    rb.read_like(ra)
    assert rb.args == whole and list(rb.args) == list(whole)


def test_a_launch_whose_arguments_decode_to_other_names_is_read_whole(cpu):
    from graphcheck.params import decode, decode_like
    from tests import judgement_kernels as J

    data, idx = wp.zeros(8, dtype=float, device=cpu), wp.array([0, 2, 4, 6], dtype=int, device=cpu)
    with gc.trace_launches() as plain:
        wp.launch(J.add_indexed, dim=4, inputs=[wp.indexedarray(data)], device=cpu)
    with gc.trace_launches() as indexed:
        wp.launch(J.add_indexed, dim=4, inputs=[wp.indexedarray(data, [idx])], device=cpu)
    ra, rb = plain[0], indexed[0]
    # The index array is named only when set: the block is decoded whole, and so is one with
    # another number of parameters than its layout.
    assert decode_like(rb.layout, rb.param_bytes, ra.param_bytes, ra.args) is None
    assert decode_like(rb.layout, (*rb.param_bytes, b"x"), (*ra.param_bytes, b"y"), ra.args) is None
    rb.read_like(ra)
    whole = decode(rb.layout, rb.param_bytes)
    assert rb.args == whole and list(rb.args) == ["a", "a.indices[0]"]
    assert rb.args["a.indices[0]"].ptr == idx.ptr


def test_recorded_adjoint_bytes_equal_warps_own_packing(cpu):
    from graphcheck.packing import expected_params

    x = wp.array([1.0, 2.0], dtype=float, device=cpu, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=cpu, requires_grad=True)
    with gc.trace_launches() as trace:
        wp.launch(K.square, dim=2, inputs=[x], outputs=[y], adj_inputs=[x.grad], adj_outputs=[y.grad],
                  adjoint=True, device=cpu)  # fmt: skip
    expected = expected_params(
        K.square, 2, [x], [y], device=cpu, adjoint=True, adj_inputs=[x.grad], adj_outputs=[y.grad]
    )
    assert trace[0].param_bytes == expected


def test_an_argument_of_a_type_graphcheck_cannot_decode_is_named_in_a_note():
    from graphcheck.checks.undecodable import undecoded
    from graphcheck.params import Opaque, ParamKind, ParamSpec, decode
    from graphcheck.record import LaunchRecord

    spec = ParamSpec("blob", ParamKind.OPAQUE, None, 4, dtype="MyNativeType")
    bounds = ParamSpec("dim", ParamKind.BOUNDS, None, 0)
    (value,) = decode((bounds, spec), (b"", b"\x01\x02\x03\x04")).values()
    assert value == Opaque(b"\x01\x02\x03\x04", "MyNativeType")
    assert "4 bytes 01020304" in str(value)
    args = {"blob": value}
    record = LaunchRecord("native", "custom_op", False, None, args, "cpu", 0, 0, None, None, -1, "", False, 1)
    trace = gc.LaunchTrace()
    trace._items = [record]
    (note,) = undecoded(trace)
    assert "custom_op argument 'blob' has type MyNativeType, which graphcheck cannot decode" in note

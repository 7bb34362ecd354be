"""Comparing two traces: alignment, readable differences, topology with owned buffers."""

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck.compare import align, reused
from tests import kernels as K


def record(fn):
    with gc.trace_launches() as trace:
        fn()
    return trace


def test_align_pairs_one_extra_operation_as_one_difference():
    a = ["k1", "k2", "k3", "k4", "k5"]
    b = ["k1", "k2", "extra", "k3", "k4", "k5"]
    assert align(a, b) == [(0, 0), (1, 1), (None, 2), (2, 3), (3, 4), (4, 5)]
    assert align(b, a) == [(0, 0), (1, 1), (2, None), (3, 2), (4, 3), (5, 4)]


def test_align_pairs_a_replaced_operation_in_place():
    assert align(["a", "b", "c"], ["a", "x", "c"]) == [(0, 0), (1, 1), (2, 2)]


def test_align_of_identical_sequences_is_positional():
    assert align(list("abc"), list("abc")) == [(0, 0), (1, 1), (2, 2)]


def test_diff_names_kernel_argument_index_site_and_both_values(cpu):
    a, b = wp.zeros(8, dtype=float, device=cpu), wp.ones(8, dtype=float, device=cpu)
    first = record(lambda: wp.launch(K.scale, dim=8, inputs=[a, b, 0.5, 3], device=cpu))
    second = record(lambda: wp.launch(K.scale, dim=8, inputs=[a, b, 0.75, 4], device=cpu))
    lines = first.diff(second)
    assert len(lines) == 2
    assert lines[0].startswith("#0 tests.kernels.scale at test_compare.py:")
    assert "argument 's' 0.5 vs 0.75 (Δ +0.25)" in lines[0]
    assert "argument 'n' 3 vs 4 (Δ +1)" in lines[1]
    assert not first.same_topology(second)
    with pytest.raises(AssertionError, match="argument 's'"):
        gc.assert_same_topology(first, second)


def test_diff_reports_buffers_by_label_with_owned_buffers(cpu):
    x, y = wp.zeros(8, dtype=float, device=cpu), wp.zeros(8, dtype=float, device=cpu)
    owned = gc.BufferSet().add(x, "sim.x").add(y, "sim.y")
    first = record(lambda: wp.launch(K.add_one, dim=8, inputs=[x], device=cpu))
    second = record(lambda: wp.launch(K.add_one, dim=8, inputs=[y], device=cpu))
    (line,) = first.diff(second, owned)
    assert "argument 'a'" in line and "(sim.x+0)" in line and "(sim.y+0)" in line


def test_two_producers_built_alike_have_the_same_topology(cpu):
    def make():
        return wp.zeros(8, dtype=float, device=cpu)

    x1, x2 = make(), make()
    first = record(lambda: wp.launch(K.add_one, dim=8, inputs=[x1], device=cpu))
    second = record(lambda: wp.launch(K.add_one, dim=8, inputs=[x2], device=cpu))
    assert not first.same_topology(second)
    assert first.same_topology(second, gc.BufferSet().add(x1, "x")) is False
    assert first.topology(gc.BufferSet().add(x1, "x")) == second.topology(gc.BufferSet().add(x2, "x"))


def test_diff_reports_an_extra_launch_once(cpu):
    a = wp.zeros(8, dtype=float, device=cpu)

    def step(extra):
        wp.launch(K.add_one, dim=8, inputs=[a], device=cpu)
        if extra:
            wp.launch(K.scale, dim=8, inputs=[a, a, 2.0, 0], device=cpu)
        wp.launch(K.add_one, dim=8, inputs=[a], device=cpu)
        a.zero_()

    lines = record(lambda: step(False)).diff(record(lambda: step(True)))
    assert len(lines) == 1
    assert lines[0].startswith("#1 (second call only) tests.kernels.scale")


def test_diff_reports_dims_and_copy_counts(cpu):
    a, b = wp.zeros(16, dtype=float, device=cpu), wp.zeros(16, dtype=float, device=cpu)
    first = record(lambda: (wp.launch(K.add_one, dim=8, inputs=[a], device=cpu), wp.copy(a, b, count=4)))
    second = record(lambda: (wp.launch(K.add_one, dim=12, inputs=[a], device=cpu), wp.copy(a, b, count=6)))
    lines = first.diff(second)
    assert any("dim (8,) vs (12,)" in line for line in lines)
    assert any("argument 'count' 4 vs 6 (Δ +2)" in line for line in lines)


def test_diff_limit(cpu):
    a = wp.zeros(4, dtype=float, device=cpu)
    first = record(lambda: [wp.launch(K.scale, dim=4, inputs=[a, a, float(i), 0], device=cpu) for i in range(30)])
    second = record(lambda: [wp.launch(K.scale, dim=4, inputs=[a, a, float(i + 1), 0], device=cpu) for i in range(30)])
    lines = first.diff(second, limit=5)
    assert len(lines) == 6 and lines[-1] == "... and 25 more"
    assert len(first.diff(second, limit=None)) == 30


def test_foreign_pointers_and_assert_pointers_within(cpu):
    owned_array, stranger = wp.zeros(4, dtype=float, device=cpu), wp.zeros(4, dtype=float, device=cpu)
    owned = gc.BufferSet().add(owned_array, "owned")
    trace = record(lambda: wp.launch(K.axpy, dim=4, inputs=[owned_array, stranger, 1.0], device=cpu))
    ((rec, name, ptr),) = trace.foreign_pointers(owned)
    assert (name, ptr) == ("y", stranger.ptr)
    assert trace.foreign_pointers(owned, ignore=[stranger]) == []
    message = r"1 address\(es\) outside the 1 allowed buffers:\n  #0 tests.kernels.axpy"
    with pytest.raises(AssertionError, match=message):
        gc.assert_pointers_within(trace, owned)
    gc.assert_pointers_within(trace, gc.BufferSet().add(owned_array, "a").add(stranger, "b"))


# -- An eager call against its capture, compared without reading the eager launches ---------

_LIKE = {"kernel": K.scale, "dim": 8, "s": 0.5, "n": 3, "swap": False, "max_blocks": 0, "extra": False}
_CHANGES = {
    "alike": {},
    "scalar": {"s": 0.75},
    "int": {"n": 4},
    "buffer": {"swap": True},
    "dim": {"dim": 4},
    "max_blocks": {"max_blocks": 2},
    "extra launch": {"extra": True},
}


def _step(x, y, cpu, kernel, dim, s, n, swap, max_blocks, extra):
    a, b = (y, x) if swap else (x, y)
    wp.launch(kernel, dim=dim, inputs=[a, b, s, n], device=cpu, max_blocks=max_blocks)
    if extra:
        wp.launch(K.add_one, dim=dim, inputs=[a], device=cpu)


@pytest.mark.parametrize("change", list(_CHANGES))
def test_an_eager_call_and_its_capture_compare_alike_without_reading_the_eager_launches(cpu, change):
    x, y = wp.zeros(8, dtype=float, device=cpu), wp.full(8, 2.0, dtype=float, device=cpu)
    eager = record(lambda: _step(x, y, cpu, **_LIKE))
    with gc.trace_launches() as captured, wp.ScopedCapture(device=cpu) as capture:
        _step(x, y, cpu, **{**_LIKE, **_CHANGES[change]})
    assert all(type(item) is tuple for item in eager._items)  # the fast path kept them raw
    assert eager.same_launches(captured) is (change == "alike")
    differences = eager.diff(captured)  # the cheap test first, the full comparison when it fails
    assert bool(differences) is (change != "alike"), differences
    if change == "alike":
        assert all(type(item) is tuple for item in eager._items)  # left unread
    # The full comparison, with the eager launches read into records, agrees.
    read = record(lambda: _step(x, y, cpu, **_LIKE))
    assert len(read.records) == len(eager)
    assert not read.same_launches(captured)
    assert bool(read.diff(captured)) is (change != "alike")
    if change == "alike":  # the verdict, by values: the replay does what the eager call did
        x.zero_()
        _step(x, y, cpu, **_LIKE)
        expected = x.numpy().copy()
        x.zero_()
        wp.capture_launch(capture.graph)
        assert (x.numpy() == expected).all()


# -- Buffers one call made and the other used: caches, and addresses handed out again -------


def test_a_buffer_the_first_call_made_and_the_second_uses_is_found_either_way_round(cpu):
    cache = []

    def step():
        if not cache:  # a cache filled on the first call only, and kept
            cache.append(wp.zeros(8, dtype=float, device=cpu))
        wp.launch(K.add_one, dim=8, inputs=[cache[0]], device=cpu)

    first, second = record(step), record(step)
    (made,) = first.allocations
    assert [alloc for _, alloc in reused(first, second)] == [made]
    assert not any(type(item) is tuple for item in second._items)  # read: it ran after the cache was made
    # The other way round: the second call made nothing, and the first used nothing before it was made.
    assert list(reused(second, first)) == []
    assert first.diff(second) == [] and second.diff(first) == []


def test_memory_made_at_an_address_the_other_call_used_before_is_no_reuse(cpu):
    # A buffer made at an address an earlier call used for other memory (the allocator hands
    # addresses out again; here a wrapped host array, at a known address) is the call's own
    # temporary, matched with the earlier call's like any other.
    host_x, host_y = np.zeros(8, dtype=np.float32), np.zeros(8, dtype=np.float32)
    x = wp.array(host_x, dtype=float, device=cpu, copy=False)

    def step(host):
        wp.launch(K.add_one, dim=8, inputs=[x], device=cpu)
        wrapped = wp.array(host, dtype=float, device=cpu, copy=False)
        wp.launch(K.add_one, dim=8, inputs=[wrapped], device=cpu)

    first, second = record(lambda: step(host_y)), record(lambda: step(host_x))
    assert [alloc.start for alloc in second.allocations] == [x.ptr]  # made where the first call's x is
    assert list(reused(second, first)) == []
    assert all(type(item) is tuple for item in first._items)  # it all came before: left unread
    assert first.diff(second) == [] and second.diff(first) == []
    # The same verdict as for a wrapped array anywhere else.
    elsewhere = record(lambda: step(np.zeros(8, dtype=np.float32)))
    assert first.diff(elsewhere) == [] and elsewhere.diff(first) == []


def test_buffers_warp_keeps_are_looked_for_only_where_the_reference_call_made_one_for_warp(cpu):
    from graphcheck.checks.warp_pools import held_by_warp

    kept = []

    def step():
        scratch = wp.zeros(8, dtype=float, device=cpu)  # the user's own temporary: no buffer Warp keeps
        wp.launch(K.add_one, dim=8, inputs=[scratch], device=cpu)
        kept.append(scratch)

    reference, captured = record(step), record(step)
    assert held_by_warp(captured, reference) == {}
    assert all(type(item) is tuple for item in captured._items)  # left unread (warp.fem's test reads them)


def test_temporaries_are_numbered_by_first_use_among_those_made_at_one_line(cpu):
    def step():
        made = [wp.zeros(8, dtype=float, device=cpu) for _ in range(2)]  # two of a kind at one line
        for scratch in reversed(made):  # used in the other order
            wp.launch(K.add_one, dim=8, inputs=[scratch], device=cpu)

    trace = record(step)
    first_made, second_made = trace.allocations
    assert [k for _, k in map(trace.allocation_order, (second_made, first_made))] == [0, 1]
    assert not any(type(item) is tuple for item in trace._items)  # read, to find the first uses


def test_temporaries_each_the_only_one_of_its_kind_are_numbered_without_reading_the_launches(cpu):
    kept = []  # held, so that no call's temporary lands where an earlier one was

    def step(swap=False):
        a = wp.zeros(8, dtype=float, device=cpu)
        b = wp.zeros(8, dtype=wp.int32, device=cpu)  # another type: another kind, made at the same line
        c = wp.zeros(8, dtype=float, device=cpu)
        for scratch in (a, c) if swap else (c, a):
            wp.launch(K.add_one, dim=8, inputs=[scratch], device=cpu)
        kept.append((a, b, c))

    first, second = record(step), record(step)
    assert [trace.allocation_order(alloc)[1] for trace in (first, second) for alloc in trace.allocations] == [0] * 6
    assert all(type(item) is tuple for trace in (first, second) for item in trace._items)  # left unread
    assert first.diff(second) == []  # each matched with its twin, wherever the allocator put it
    # Temporaries used in another order are found, and named.
    line = step.__code__.co_firstlineno
    lines = first.diff(record(lambda: step(swap=True)))
    assert len(lines) == 2
    assert f"(temporary #0 from test_compare.py:{line + 3}+0) vs" in lines[0]
    assert f"(temporary #0 from test_compare.py:{line + 1}+0) (Δ" in lines[0]

"""The argument-type matrix: every Warp value type, array kind, rank and annotation
syntax, alone and as struct fields, judged right.

For each: identical calls give nothing; a changed value gives ``scalar-drift``; a swapped
buffer ``buffer-drift``; a buffer the owners do not hold ``foreign-buffer``; a buffer
reallocated after capture ``stale-pointer`` before replay. The kinds are asserted
exactly: an argument decoded as opaque bytes would give ``scalar-drift`` with hex where
``buffer-drift`` is right, and would hide foreign and stale buffers altogether.

Then every way an owner holds an array (a dict key, a deque, a ``functools.partial``, a
default argument...): owned, replaced after capture, followed by the replay probe, and the
ways that do not own (a weak mapping, a generator).
"""

from __future__ import annotations

import collections
import functools
import weakref
from typing import Any

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck.buffers import arrays_of
from tests import kernels as K, matrix_kernels as M, producers as P
from tests.internals import OwnersProbe, Unsupported

DEVICE = "cpu"


def _values(dtype):
    """Two values of ``dtype`` that differ in their last component."""
    if not hasattr(dtype, "_wp_scalar_type_"):
        if dtype is wp.bool:
            return wp.bool(False), wp.bool(True)
        return dtype(1), dtype(2)
    first = [1.0] * dtype._length_
    second = [*first[:-1], 2.0]
    if dtype._wp_scalar_type_ in (wp.int32, wp.uint8):
        first, second = [int(v) for v in first], [int(v) for v in second]
    return dtype(*first), dtype(*second)


class ValueProducer:
    def __init__(self, values):
        self.out = wp.zeros(1, dtype=float, device=DEVICE)
        self.values = values
        self.calls = 0

    def step(self):
        value = self.values[self.calls % len(self.values)]  # every other call: the later calls compared alternate too
        self.calls += 1
        wp.launch(M.value_arg, dim=1, inputs=[self.out, value], device=DEVICE)


@pytest.mark.parametrize("name", list(M.VALUE_TYPES))
def test_a_value_argument_is_decoded_by_its_type(name):
    first, second = _values(M.VALUE_TYPES[name])
    same = ValueProducer([first])
    checked = gc.capture(same.step, device=DEVICE, owners=(same,))
    assert checked.report.ok, str(checked.report)
    changed = ValueProducer([first, second])
    checked = gc.capture(changed.step, device=DEVICE, owners=(changed,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.arg) == ("scalar-drift", "v"), str(checked.report)
    assert "bytes" not in finding.message, "a value graphcheck can decode is never shown as bytes"


def test_minus_zero_and_zero_differ():
    producer = ValueProducer([wp.float32(0.0), wp.float32(-0.0)])
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"scalar-drift"}


def test_nan_equals_nan():
    producer = ValueProducer([wp.float32(float("nan"))])
    assert gc.capture(producer.step, device=DEVICE, owners=(producer,)).report.ok


_FOREIGN: dict[str, object] = {}


def _foreign(name, shape, dtype):
    if name not in _FOREIGN:
        _FOREIGN[name] = wp.zeros(shape, dtype=dtype, device=DEVICE)
    return _FOREIGN[name]


class ArrayProducer:
    """Launches one array kernel; ``mode`` says how the second call differs."""

    def __init__(self, name, mode):
        self.name, self.mode = name, mode
        self.kernel, shape, dtype, self.indexed = M.ARRAY_KERNELS[name]
        self.shape, self.dtype = shape, dtype
        self.a = wp.zeros(shape, dtype=dtype, device=DEVICE)
        self.b = wp.zeros(shape, dtype=dtype, device=DEVICE)
        self.out = wp.zeros(1, dtype=float, device=DEVICE)
        self.idx = wp.array(np.arange(shape[0], dtype=np.int32), device=DEVICE)
        self.idx2 = wp.array(np.arange(shape[0], dtype=np.int32)[::-1].copy(), device=DEVICE)
        self.calls = 0

    def argument(self):
        second = self.calls % 2 == 1  # every other call: the calls graphcheck compares alternate too
        self.calls += 1
        data, idx = self.a, self.idx
        if self.mode == "swap" and second:
            data = self.b
        elif self.mode == "foreign":
            data = _foreign(self.name, self.shape, self.dtype)
        elif self.mode == "swap-indices" and second:
            idx = self.idx2
        elif self.mode == "foreign-indices":
            idx = _foreign(f"{self.name}.idx", self.shape[:1], wp.int32)
        if self.indexed:
            return wp.indexedarray(data, [idx] + [None] * (len(self.shape) - 1))
        return data

    def step(self):
        wp.launch(self.kernel, dim=1, inputs=[self.argument(), self.out], device=DEVICE)


ARRAYS = list(M.ARRAY_KERNELS)


@pytest.mark.parametrize("name", ARRAYS)
def test_identical_array_calls_give_nothing(name):
    producer = ArrayProducer(name, "same")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)
    checked.launch()
    assert checked.check_replay().ok


@pytest.mark.parametrize("name", ARRAYS)
def test_a_swapped_array_is_buffer_drift(name):
    producer = ArrayProducer(name, "swap")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert (finding.kind, finding.arg) == ("buffer-drift", "a"), str(checked.report)
    assert "owner.a" in finding.message and "owner.b" in finding.message


@pytest.mark.parametrize("name", ARRAYS)
def test_an_unowned_array_is_foreign(name):
    producer = ArrayProducer(name, "foreign")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("foreign-buffer", "a")}, str(checked.report)


@pytest.mark.parametrize("name", ARRAYS)
def test_an_array_reallocated_after_capture_is_a_stale_pointer(name):
    producer = ArrayProducer(name, "same")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    producer.a = wp.zeros(producer.shape, dtype=producer.dtype, device=DEVICE)
    replay = checked.check_replay(on_failure="ignore")
    assert {(f.kind, f.arg) for f in replay.findings} == {("stale-pointer", "a")}, str(replay)


@pytest.mark.parametrize("name", [n for n in ARRAYS if M.ARRAY_KERNELS[n][3]])
def test_an_indexed_array_s_indices_are_buffers_too(name):
    swapped = ArrayProducer(name, "swap-indices")
    checked = gc.capture(swapped.step, device=DEVICE, owners=(swapped,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("buffer-drift", "a.indices[0]")}, str(checked.report)
    foreign = ArrayProducer(name, "foreign-indices")
    checked = gc.capture(foreign.step, device=DEVICE, owners=(foreign,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("foreign-buffer", "a.indices[0]")}
    stale = ArrayProducer(name, "same")
    checked = gc.capture(stale.step, device=DEVICE, owners=(stale,))
    stale.idx = wp.array(np.arange(stale.shape[0], dtype=np.int32), device=DEVICE)
    assert {(f.kind, f.arg) for f in checked.check_replay(on_failure="ignore").findings} == {
        ("stale-pointer", "a.indices[0]")
    }


# -- struct fields ------------------------------------------------------------------------

FIELD_VALUES = {
    "f_int8": wp.int8,
    "f_uint16": wp.uint16,
    "f_int64": wp.int64,
    "f_uint64": wp.uint64,
    "f_float16": wp.float16,
    "f_float32": wp.float32,
    "f_float64": wp.float64,
    "f_bool": wp.bool,
    "f_vec3": wp.vec3,
    "f_vec3h": wp.vec3h,
    "f_mat33": wp.mat33,
    "f_quat": wp.quat,
    "f_transform": wp.transform,
    "f_spatial": wp.spatial_vector,
}
ARRAY_FIELDS = {"a_new": ((8,), float), "a_new2d": ((2, 4), wp.vec3), "a_old": ((8,), float),
                "a_old3d": ((2, 2, 2), wp.vec3), "inner.data": ((8,), float)}  # fmt: skip


class StructProducer:
    def __init__(self, field=None, mode="same"):
        self.field, self.mode = field, mode
        self.out = wp.zeros(1, dtype=float, device=DEVICE)
        self.s = M.AllFields()
        self.s.inner = M.Inner()
        self.spare = {}
        for name, (shape, dtype) in ARRAY_FIELDS.items():
            self._set(name, wp.zeros(shape, dtype=dtype, device=DEVICE))
            self.spare[name] = wp.zeros(shape, dtype=dtype, device=DEVICE)
        self.calls = 0

    def _set(self, name, value):
        owner, _, attr = name.rpartition(".")
        setattr(getattr(self.s, owner) if owner else self.s, attr, value)

    def step(self):
        # Every other call: the later calls a retry compares alternate too.
        if self.mode == "change":
            self._set(self.field, _values(FIELD_VALUES[self.field])[self.calls % 2])
        elif self.mode == "swap":
            self.spare[self.field], kept = self._get(self.field), self.spare[self.field]
            self._set(self.field, kept)
        self.calls += 1
        if self.mode == "foreign":
            # A buffer the producer does not keep: set for the launch only.
            shape, dtype = ARRAY_FIELDS[self.field]
            kept = self._get(self.field)
            self._set(self.field, _foreign(f"struct.{self.field}", shape, dtype))
            wp.launch(M.struct_arg, dim=1, inputs=[self.out, self.s], device=DEVICE)
            self._set(self.field, kept)
            return
        wp.launch(M.struct_arg, dim=1, inputs=[self.out, self.s], device=DEVICE)

    def _get(self, name):
        owner, _, attr = name.rpartition(".")
        return getattr(getattr(self.s, owner) if owner else self.s, attr)


def test_identical_struct_calls_give_nothing():
    producer = StructProducer()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)


@pytest.mark.parametrize("field", list(FIELD_VALUES))
def test_a_changed_struct_field_is_scalar_drift(field):
    producer = StructProducer(field, "change")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("scalar-drift", f"s.{field}")}, str(checked.report)


@pytest.mark.parametrize("field", list(ARRAY_FIELDS))
def test_a_swapped_struct_array_field_is_buffer_drift(field):
    producer = StructProducer(field, "swap")
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("buffer-drift", f"s.{field}")}, str(checked.report)


@pytest.mark.parametrize("field", list(ARRAY_FIELDS))
def test_a_struct_array_field_is_owned_foreign_or_stale(field):
    producer = StructProducer(field, "foreign")
    shape, dtype = ARRAY_FIELDS[field]
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("foreign-buffer", f"s.{field}")}
    producer = StructProducer()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    producer._set(field, wp.zeros(shape, dtype=dtype, device=DEVICE))
    assert {(f.kind, f.arg) for f in checked.check_replay(on_failure="ignore").findings} == {
        ("stale-pointer", f"s.{field}")
    }


# -- kernels declared in the call ----------------------------------------------------------
# A kernel declared inside the step is a new wp.Kernel each call: the same compiled code
# when nothing it captures changes (safe), other code when a closure value does (drift).


@wp.func
def _plus_one(v: float):
    return v + 1.0


@wp.func
def _plus_two(v: float):
    return v + 2.0


def _declared(how, value):
    """A kernel declared now, ``how`` (a plain decorator, a unique module, a generic kernel, a
    captured wp.func), whose code depends on ``value`` (0 or 1)."""
    offset = float(value)
    if how == "decorator":

        @wp.kernel
        def add_offset(a: wp.array(dtype=float)):
            a[wp.tid()] = a[wp.tid()] + offset

        return add_offset
    if how == "unique":

        @wp.kernel(module="unique")
        def add_offset_unique(a: wp.array(dtype=float)):
            a[wp.tid()] = a[wp.tid()] + offset

        return add_offset_unique
    if how == "generic":

        @wp.kernel
        def add_offset_generic(a: wp.array(dtype=Any)):
            a[wp.tid()] = a[wp.tid()] + a.dtype(offset)

        return add_offset_generic
    step = _plus_two if value else _plus_one

    @wp.kernel
    def apply_func(a: wp.array(dtype=float)):
        a[wp.tid()] = step(a[wp.tid()])

    return apply_func


class DeclaredKernel:
    """Launches a kernel declared in the step; ``changes``: its closure value alternates."""

    how = "decorator"
    changes = False

    def __init__(self, device=DEVICE):
        self.device = device
        self.x = wp.zeros(8, dtype=float, device=device)
        self.calls = 0

    def step(self):
        self.calls += 1
        kernel = _declared(self.how, self.calls % 2 if self.changes else 0)
        wp.launch(kernel, dim=8, inputs=[self.x], device=self.device)


DECLARED = ["decorator", "unique", "generic", "func"]


def _declared_producer(how, changes):
    name = f"Declared_{how}_{'changes' if changes else 'same'}"
    return type(name, (DeclaredKernel,), {"how": how, "changes": changes})


@pytest.mark.parametrize("how", DECLARED)
def test_a_kernel_declared_in_the_call_is_the_same_code_each_call(how):
    producer = _declared_producer(how, False)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)
    report = gc.verify_replay(_declared_producer(how, False), steps=3, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


@pytest.mark.parametrize("how", DECLARED)
def test_a_kernel_whose_closure_value_changes_is_other_code(how):
    producer = _declared_producer(how, True)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "launch-sequence-drift", str(checked.report)
    assert "the same kernel compiled to other code" in finding.message and "closure constant" in finding.message
    report = gc.verify_replay(_declared_producer(how, True), steps=3, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)


# -- every way an owner holds an array ------------------------------------------------------
# The owner holds the array its step writes only through one way in. Owned: no finding, and a
# replay equals eager stepping; the same way holding a new array after the capture: stale-pointer
# before replay, and a replay that differs from eager stepping; the replay probe follows the way
# (or says it cannot: a member of a container that cannot be indexed). Held only weakly, or only
# by an iterator that must not be consumed: not owned, foreign-buffer.


def _noop(*args, **kwargs):
    return args, kwargs


def _tape_keyed(array):
    tape = wp.Tape()
    tape.gradients[array] = array.grad  # as wp.Tape keeps the arrays whose gradients it zeroes
    return tape


def _defaults_of_a_partials_function(array):
    return functools.partial(lambda scale, out=array: out, 1.0)


def _closure(array):
    return lambda: array


#: way -> (build the holder of an array, read the array back from the holder)
WAYS = {
    "dict_key": (lambda a: {a: "moment"}, lambda h: next(iter(h))),
    "dict_key_to_array": (lambda a: {a: wp.zeros(4, dtype=float, device=DEVICE)}, lambda h: next(iter(h))),
    "value_of_a_tuple_key": (lambda a: {("state", 0): a}, lambda h: h[("state", 0)]),
    "tape_gradients_key": (_tape_keyed, lambda t: next(iter(t.gradients))),
    "deque": (lambda a: collections.deque([a]), lambda h: h[0]),
    "deque_in_a_dict": (lambda a: {"recent": collections.deque([a], maxlen=4)}, lambda h: h["recent"][-1]),
    "dict_values_view": (lambda a: {"k": a}.values(), lambda h: next(iter(h))),
    "partial_args": (lambda a: functools.partial(_noop, a), lambda h: h.args[0]),
    "partial_keywords": (lambda a: functools.partial(_noop, out=a), lambda h: h.keywords["out"]),
    "default": (lambda a: lambda x, out=a: out, lambda h: h(None)),
    "keyword_only_default": (lambda a: lambda *, out=a: out, lambda h: h()),
    "default_of_a_partials_function": (_defaults_of_a_partials_function, lambda h: h()),
    "closure": (_closure, lambda h: h()),
}
#: Ways the replay probe cannot follow: the full replay check then runs before every launch.
UNFOLLOWED = {"dict_values_view"}

# What the not-owning ways hold weakly, or must not consume, by way: kept alive here for the step.
_ALIVE: dict[str, object] = {}


def _weak_key(array):
    return weakref.WeakKeyDictionary({array: "moment"})


def _weak_value(array):
    return weakref.WeakValueDictionary({"out": array})


def _generator(array):
    return (held for held in [array])


NOT_OWNING = {"weak_key": _weak_key, "weak_value": _weak_value, "generator": _generator}


class HeldOneWay:
    """Writes ``y`` that the owner holds only through ``way`` (its holder's ``read``)."""

    def __init__(self, way, device=DEVICE):
        self.way = way
        self.x = wp.full(8, 0.5, dtype=float, device=device)
        if way in NOT_OWNING:
            y = _ALIVE[way] = wp.zeros(8, dtype=float, device=device)
            self.holder, self.read = NOT_OWNING[way](y), lambda _holder: _ALIVE[way]
        else:
            hold, self.read = WAYS[way]
            self.holder = hold(wp.zeros(8, dtype=float, device=device))

    def step(self):
        wp.launch(K.axpy, dim=8, inputs=[self.x, self.read(self.holder), 0.5], device=DEVICE)

    def replace(self):
        """Hold a new array the same way (a copy of the one held)."""
        self.holder = WAYS[self.way][0](wp.clone(self.read(self.holder)))


@pytest.mark.parametrize("way", list(WAYS))
def test_an_array_held_any_way_is_owned_and_replays_right(way):
    producer = HeldOneWay(way)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok, str(checked.report)
    report = gc.verify_replay(lambda device: HeldOneWay(way, device), steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)
    y = producer.read(producer.holder)
    assert any(array is y for _, array in arrays_of(producer)), "the value check compares the array held that way"


@pytest.mark.parametrize("way", list(WAYS))
def test_an_array_held_any_way_and_replaced_after_capture_is_stale_and_replays_wrong(way):
    eager, replayed = HeldOneWay(way), HeldOneWay(way)
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), replay_check="never")
    eager.step()  # as the capture's reference call did
    kept = [eager.read(eager.holder), replayed.read(replayed.holder)]  # the graph writes the old one
    eager.replace()
    replayed.replace()
    replay = checked.check_replay(on_failure="ignore")
    assert {(f.kind, f.arg) for f in replay.findings} == {("stale-pointer", "y")}, str(replay)
    for _ in range(2):
        eager.step()
        checked.launch()
    assert not np.array_equal(eager.read(eager.holder).numpy(), replayed.read(replayed.holder).numpy())
    del kept


@pytest.mark.parametrize("way", list(WAYS))
def test_the_replay_probe_follows_every_way_it_can(way):
    producer = HeldOneWay(way)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    labels = [baked.label for baked in checked.baked if baked.label is not None]
    if way in UNFOLLOWED:
        with pytest.raises(Unsupported):
            OwnersProbe((producer,), labels, single=True)
        return
    probe = OwnersProbe((producer,), labels, single=True)
    assert probe.unchanged()
    held = producer.holder
    producer.replace()
    assert not probe.unchanged()
    producer.holder = held
    assert probe.unchanged()


@pytest.mark.parametrize("way", list(NOT_OWNING))
def test_an_array_held_only_weakly_or_by_an_iterator_is_foreign(way):
    producer = HeldOneWay(way)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.arg) for f in checked.report.findings} == {("foreign-buffer", "y")}, str(checked.report)
    if way == "generator":
        assert next(producer.holder) is producer.read(producer.holder), "the walk did not consume the generator"


# -- swaps that carry no state ---------------------------------------------------------------
# A pair swapped an odd number of times per call is safe when each call overwrites the buffer
# it writes first (whole, without reading it): no value crosses from one call to the next.
# Each way of writing it first, and the one-line twins that leave part of it unwritten.


@wp.kernel
def _masked_write(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    if b[i] > 0.5:
        a[i] = b[i]


@wp.kernel
def _overwrite(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = b[i] + 1.0


@wp.kernel
def _smooth(out: wp.array(dtype=float), src: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = 0.5 * src[i] + 1.0


SWAP_N = 8
FIRST_WRITES = {
    # name: (the call's first use of the pair's current buffer, whether the swap carries no state)
    "fill": (lambda p: p.a.fill_(2.0), True),
    "zero": (lambda p: p.a.zero_(), True),
    "copy": (lambda p: wp.copy(p.a, p.x), True),
    "kernel": (lambda p: wp.launch(_overwrite, dim=SWAP_N, inputs=[p.a, p.x], device=DEVICE), True),
    "copy_half": (lambda p: wp.copy(p.a, p.x, count=SWAP_N // 2), False),
    "kernel_reads": (lambda p: wp.launch(_smooth, dim=SWAP_N, inputs=[p.a, p.a], device=DEVICE), False),
    "kernel_masked": (lambda p: wp.launch(_masked_write, dim=SWAP_N, inputs=[p.a, p.x], device=DEVICE), False),
    "kernel_half_dim": (lambda p: wp.launch(_overwrite, dim=SWAP_N // 2, inputs=[p.a, p.x], device=DEVICE), False),
}


class FirstWritePingPong:
    """Writes ``a`` first (``how``), one smoothing pass from ``a`` into ``b``, swaps them
    (an odd number of swaps per call), copies the result out and advances ``x``."""

    how = "fill"

    def __init__(self, device=DEVICE):
        self.device = device
        self.x = wp.array(np.linspace(0.0, 1.0, SWAP_N, dtype=np.float32), device=device)
        self.a = wp.array(np.full(SWAP_N, 3.0, dtype=np.float32), device=device)
        self.b = wp.zeros(SWAP_N, dtype=float, device=device)
        self.out = wp.zeros(SWAP_N, dtype=float, device=device)

    def step(self):
        FIRST_WRITES[self.how][0](self)
        wp.launch(_smooth, dim=SWAP_N, inputs=[self.b, self.a], device=self.device)
        self.a, self.b = self.b, self.a
        wp.copy(self.out, self.a)
        wp.launch(_overwrite, dim=SWAP_N, inputs=[self.x, self.out], device=self.device)


def _first_write(how):
    return type(f"FirstWrite_{how}", (FirstWritePingPong,), {"how": how})


@pytest.mark.parametrize("how", list(FIRST_WRITES))
def test_a_swap_carries_state_unless_each_call_overwrites_it_first(how):
    stateless = FIRST_WRITES[how][1]
    producer = _first_write(how)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    report = gc.verify_replay(_first_write(how), steps=4, device=DEVICE, on_failure="ignore")
    if stateless:
        assert checked.report.ok, str(checked.report)
        assert any("carries no state" in n for n in checked.report.notes)
        assert report.ok and "values" in report.checks, str(report)
    else:
        assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
        assert "replay-divergence" in report.kinds(), str(report)


# -- generic kernels in a CPU graph -------------------------------------------------------

# The larger dtype first: the replay runs the last launched overload's code for both, and
# the smaller dtype's code stays inside the larger array (the other way round, it writes
# past the smaller array's end: the MPM examples' replay does, and may crash the process).
OVERLOAD_PAIRS = {"float64-float32": (wp.float64, wp.float32), "mat33-vec3": (wp.mat33, wp.vec3),
                  "int32-float32": (wp.int32, wp.float32)}  # fmt: skip


class OverloadProducer:
    """Launches the generic ``add_one_any`` on two arrays of the given dtypes."""

    def __init__(self, first, second):
        self.a = wp.zeros(4, dtype=first, device=DEVICE)
        self.b = wp.zeros(4, dtype=second, device=DEVICE)

    def step(self):
        wp.launch(P.add_one_any, dim=4, inputs=[self.a], device=DEVICE)
        wp.launch(P.add_one_any, dim=4, inputs=[self.b], device=DEVICE)


@pytest.mark.parametrize("pair", list(OVERLOAD_PAIRS))
def test_two_overloads_of_a_generic_kernel_are_a_cpu_capture_error(pair):
    first, second = OVERLOAD_PAIRS[pair]
    producer = OverloadProducer(first, second)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert {(f.kind, f.kernel.rsplit(".", 1)[-1]) for f in checked.report.findings} == {
        ("capture-error", "add_one_any")
    }, str(checked.report)
    # The claim: the replay runs one overload's code for both.
    report = gc.verify_replay(lambda: OverloadProducer(first, second), steps=2, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)
    # One overload, launched twice (one dtype for both arrays): clean, and replayed as eager.
    same = OverloadProducer(first, first)
    assert gc.capture(same.step, device=DEVICE, owners=(same,)).report.ok
    assert gc.verify_replay(lambda: OverloadProducer(first, first), steps=2, device=DEVICE).ok


# -- work only the first call does -----------------------------------------------------------
# Each kind of operation as set-up on the first call only (safe: the capture is a later call, and
# one more eager call settles the verdict) and as set-up on every odd call (the one-line twin: a
# drift still after that call, and a replay that differs from eager stepping).

SETUPS = {
    "fill": lambda p: p.state.fill_(2.0),
    "zero": lambda p: p.state.zero_(),
    "copy": lambda p: wp.copy(p.state, p.x),
    "launch": lambda p: wp.launch(_smooth, dim=SWAP_N, inputs=[p.state, p.x], device=DEVICE),
    "assign": lambda p: p.state.assign(np.full(SWAP_N, 7.0, dtype=np.float32)),
}


class SetUpProducer:
    """Sets ``state`` up (``how``) on the first call only, or with ``odd`` on every odd call;
    then advances ``x`` from ``state`` and ``state`` from ``x``."""

    how = "fill"
    odd = False

    def __init__(self, device=DEVICE):
        self.x = wp.array(np.linspace(0.0, 1.0, SWAP_N, dtype=np.float32), device=device)
        self.state = wp.zeros(SWAP_N, dtype=float, device=device)
        self.calls = 0

    def step(self):
        self.calls += 1
        if (self.calls % 2 == 1) if self.odd else (self.calls == 1):
            SETUPS[self.how](self)
        wp.launch(_smooth, dim=SWAP_N, inputs=[self.x, self.state], device=DEVICE)
        wp.launch(_overwrite, dim=SWAP_N, inputs=[self.state, self.x], device=DEVICE)


def _set_up(how, odd):
    return type(f"SetUp_{how}_{'odd' if odd else 'first'}", (SetUpProducer,), {"how": how, "odd": odd})


@pytest.mark.parametrize("how", list(SETUPS))
def test_set_up_on_the_first_call_only_is_safe(how):
    producer = _set_up(how, False)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and checked.eager_calls == 3, str(checked.report)
    strict = _set_up(how, False)()
    checked = gc.capture(strict.step, device=DEVICE, owners=(strict,), on_failure="ignore", warmup=0)
    (finding,) = checked.report.findings
    assert finding.kind == "launch-sequence-drift" and "looks like first-call work" in finding.message
    report = gc.verify_replay(_set_up(how, False), steps=4, device=DEVICE, on_failure="ignore")
    assert report.ok and "values" in report.checks, str(report)


@pytest.mark.parametrize("how", list(SETUPS))
def test_set_up_on_every_odd_call_is_drift(how):
    producer = _set_up(how, True)()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"launch-sequence-drift"}, str(checked.report)
    report = gc.verify_replay(_set_up(how, True), steps=4, device=DEVICE, on_failure="ignore")
    assert "replay-divergence" in report.kinds(), str(report)

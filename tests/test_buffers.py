"""BufferSet look-ups and buffers_of's walk over a producer's objects."""

import collections
import dataclasses
import functools
import random
import weakref

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K
from tests.internals import OwnersProbe


def brute_force(ranges, ptr):
    best = None
    for i, (start, end, label) in enumerate(ranges):
        if start <= ptr < end and (best is None or end - start < best[0]):
            best = (end - start, i, label, ptr - start)
    return None if best is None else (best[2], best[3])


def test_locate_finds_the_innermost_buffer():
    buffers = gc.BufferSet().add_range(100, 200, "outer").add_range(120, 140, "inner").add_range(300, 310, "other")
    assert buffers.locate(99) is None
    assert buffers.locate(100) == ("outer", 0)
    assert buffers.locate(125) == ("inner", 5)
    assert buffers.locate(140) == ("outer", 40)
    assert buffers.locate(199) == ("outer", 99)
    assert buffers.locate(200) is None
    assert buffers.locate(305) == ("other", 5)
    assert 130 in buffers and 250 not in buffers
    assert len(buffers) == 3
    assert buffers.labels() == ["outer", "inner", "other"]


def test_equal_ranges_resolve_to_the_first_added():
    buffers = gc.BufferSet().add_range(0, 10, "first").add_range(0, 10, "alias")
    assert buffers.locate(5) == ("first", 5)


@pytest.mark.parametrize("seed", range(5))
def test_locate_agrees_with_a_brute_force_search(seed):
    rng = random.Random(seed)
    ranges = []
    for i in range(300):
        start = rng.randrange(0, 10_000)
        ranges.append((start, start + rng.randrange(1, 600), f"b{i}"))
    buffers = gc.BufferSet()
    for start, end, label in ranges:
        buffers.add_range(start, end, label)
    for ptr in range(0, 10_700, 7):
        assert buffers.locate(ptr) == brute_force(ranges, ptr), ptr


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("views", [False, True], ids=["disjoint", "with-views"])
def test_locate_agrees_with_a_brute_force_search_over_a_simulators_arrays(seed, views):
    # A simulator's arrays share no byte, as a rule: the index is built a shorter way then.
    # With a few views or aliases of them, the index sweeps only the ranges that overlap.
    rng = random.Random(seed)
    ranges, end = [], 0
    for i in range(300):
        start = end + rng.choice((0, 0, rng.randrange(1, 50)))  # next to the last range, or after a gap
        end = start + rng.randrange(1, 60)
        ranges.append((start, end, f"b{i}"))
        if views and rng.random() < 0.1:  # a view inside it, an alias of it, or one that runs into the next
            inner = rng.randrange(start, end)
            ranges.append(rng.choice([(inner, rng.randrange(inner, end) + 1, f"v{i}"), (start, end, f"a{i}"),
                                      (inner, end + rng.randrange(1, 30), f"r{i}")]))  # fmt: skip
    rng.shuffle(ranges)
    buffers = gc.BufferSet()
    for start, stop, label in ranges:
        buffers.add_range(start, stop, label)
    for ptr in range(0, end + 32):
        assert buffers.locate(ptr) == brute_force(ranges, ptr), ptr


def test_adding_after_a_lookup_rebuilds_the_index():
    buffers = gc.BufferSet().add_range(0, 10, "a")
    assert buffers.locate(20) is None
    buffers.add_range(15, 25, "b")
    assert buffers.locate(20) == ("b", 5)


def test_an_empty_range_is_a_clear_error():
    with pytest.raises(ValueError, match=r"must not be empty.*'x'"):
        gc.BufferSet().add_range(10, 10, "x")


def test_add_uses_an_arrays_capacity_and_ignores_null_arrays(cpu):
    a = wp.zeros(8, dtype=float, device=cpu)
    buffers = gc.BufferSet().add(a, "a").add(wp.empty(0, dtype=float, device=cpu), "empty")
    assert len(buffers) == 1
    assert buffers.locate(a.ptr + 31) == ("a", 31)
    assert buffers.locate(a.ptr + 32) is None


@dataclasses.dataclass
class State:
    x: wp.array
    v: wp.array


class Slotted:
    __slots__ = ("buf", "other")

    def __init__(self, buf):
        self.buf = buf
        self.other = None


class Sim:
    def __init__(self, device):
        self.state = State(wp.zeros(4, dtype=float, device=device), wp.zeros(4, dtype=float, device=device))
        self.history = [wp.zeros(2, dtype=float, device=device), wp.zeros(2, dtype=float, device=device)]
        self.named = {"seed": wp.zeros(1, dtype=int, device=device)}
        self.slotted = Slotted(wp.zeros(3, dtype=float, device=device))
        self.params = K.Params()
        self.params.scratch = wp.zeros(5, dtype=float, device=device)
        self.grad_array = wp.zeros(6, dtype=float, device=device, requires_grad=True)
        self.device = wp.get_device(device)
        self.myself = self  # a cycle
        self.numbers = list(range(1000))

    def step(self):
        pass


def test_buffers_of_walks_attributes_containers_structs_and_grads(cpu):
    sim = Sim(cpu)
    owned = gc.buffers_of(sim, root="sim")
    labels = set(owned.labels())
    assert labels == {
        "sim.state.x",
        "sim.state.v",
        "sim.history[0]",
        "sim.history[1]",
        "sim.named['seed']",
        "sim.slotted.buf",
        "sim.params.scratch",
        "sim.grad_array",
        "sim.grad_array.grad",
    }
    assert owned.locate(sim.state.v.ptr + 4) == ("sim.state.v", 4)


def test_buffers_of_walks_closures_and_bound_methods(cpu):
    sim = Sim(cpu)
    scratch = wp.zeros(3, dtype=float, device=cpu)

    def step():
        return sim, scratch

    labels = set(gc.buffers_of(step, root="step").labels())
    assert "step.<scratch>" in labels and "step.<sim>.state.x" in labels
    assert "m.state.x" in gc.buffers_of(sim.step, root="m").labels()


def test_buffers_of_labels_every_way_in_as_the_replay_probe_follows_it(cpu):
    def make():
        return wp.zeros(2, dtype=float, device=cpu)

    param, moment, queued, argument, keyword, default, keyword_only = (make() for _ in range(7))
    holder = {
        "moments": {param: moment},
        "queue": collections.deque([queued]),
        "bound": functools.partial(print, argument, file=keyword),
        "callback": lambda v, f=default, *, g=keyword_only: v,
    }
    found = dict(gc.buffers.arrays_of(holder, root="h"))
    assert found == {
        "h['moments'].keys()[0]": param,
        "h['moments'].values()[0]": moment,
        "h['queue'][0]": queued,
        "h['bound'].args[0]": argument,
        "h['bound'].keywords['file']": keyword,
        "h['callback'].<f>": default,
        "h['callback'].<g>": keyword_only,
    }
    for path in found:  # the replay probe follows each label
        assert OwnersProbe((holder,), [path.replace("h", "owner", 1)], single=True).unchanged()


def test_buffers_of_runs_no_user_code_and_consumes_no_iterator(cpu):
    calls = []

    class Lazy:
        __slots__ = ()

        def __iter__(self):  # Python code: it might do anything, so it is never called
            calls.append(1)
            return iter([wp.zeros(1, dtype=float, device=cpu)])

    class Numbers(collections.deque):  # an array-like (CuPy's): its items are numbers, never walked
        __slots__ = ()
        __cuda_array_interface__ = None

    kept = wp.zeros(1, dtype=float, device=cpu)
    generator = (a for a in [kept])
    holder = [Lazy(), generator, iter([kept]), weakref.WeakKeyDictionary({kept: 1}), weakref.ref(kept), Numbers([kept])]
    assert len(gc.buffers_of(holder)) == 0 and not calls
    assert next(generator) is kept

    class Counted(collections.deque):  # iterated in C; its own __len__ is Python code, never called
        __slots__ = ()

        def __len__(self):
            calls.append(1)
            return super().__len__()

    assert gc.buffers_of(Counted([kept]), root="q").labels() == ["q[0]"] and not calls


def test_buffers_of_walks_built_in_containers_without_attributes(cpu):
    a, b = wp.zeros(1, dtype=float, device=cpu), wp.zeros(1, dtype=float, device=cpu)
    assert gc.buffers_of({"k": a}.values(), collections.deque([b], maxlen=3), root=["view", "ring"]).labels() in (
        ["view{0}", "ring[0]"],
        ["ring[0]", "view{0}"],
    )


def test_buffers_of_is_bounded_in_depth(cpu):
    deep = {"a": {"b": {"c": {"d": wp.zeros(1, dtype=float, device=cpu)}}}}
    assert len(gc.buffers_of(deep, max_depth=2)) == 0
    assert gc.buffers_of(deep, root="deep").labels() == ["deep['a']['b']['c']['d']"]


def test_buffers_of_labels_several_objects(cpu):
    a, b = wp.zeros(1, dtype=float, device=cpu), wp.zeros(1, dtype=float, device=cpu)
    assert gc.buffers_of(a, b).labels() in (["obj0", "obj1"], ["obj1", "obj0"])
    assert sorted(gc.buffers_of(a, b, root=["x", "y"]).labels()) == ["x", "y"]
    with pytest.raises(TypeError, match="2 object.*1 root label"):
        gc.buffers_of(a, b, root=["x"])


def test_buffers_of_does_not_enter_warp_objects(cpu):
    class Holder:
        def __init__(self):
            self.kernel = K.scale
            self.device = wp.get_device(cpu)

    assert len(gc.buffers_of(Holder())) == 0


def test_buffers_of_enters_warps_containers(cpu):
    import warp.optim
    import warp.sparse

    points = wp.array(np.random.default_rng(0).random((4, 3)), dtype=wp.vec3, device=cpu)
    indices = wp.array(np.array([0, 1, 2, 1, 2, 3], dtype=np.int32), dtype=int, device=cpu)

    class Holder:
        def __init__(self):
            self.mesh = wp.Mesh(points=points, indices=indices)
            self.params = wp.zeros(8, dtype=float, device=cpu, requires_grad=True)
            self.adam = warp.optim.Adam([self.params], lr=0.1)
            self.matrix = warp.sparse.bsr_zeros(4, 4, float, device=cpu)

    labels = gc.buffers_of(Holder(), root="h").labels()
    assert {"h.mesh._points", "h.mesh.indices", "h.params", "h.params.grad"} <= set(labels)
    assert any(label.startswith("h.adam.") for label in labels), labels
    assert any(label.startswith("h.matrix.") for label in labels), labels


def test_the_arrays_a_sparse_matrix_keeps_beside_its_fields_are_owned(cpu):
    # A matrix is a @wp.struct that keeps some buffers beside its fields: its topology status,
    # and on Warp 1.15 to 1.17 the host int every CPU update writes the block count into.
    import warp.sparse

    matrix = warp.sparse.bsr_zeros(4, 4, float, device=cpu)
    rows = wp.array(np.arange(4, dtype=np.int32), device=cpu)
    warp.sparse.bsr_set_from_triplets(matrix, rows, rows, wp.ones(4, dtype=float, device=cpu))
    matrix._ensure_status()
    kept = [
        array
        for value in vars(matrix).values()
        for array in (value if isinstance(value, tuple) else (value,))
        if isinstance(array, wp.array)
    ]
    owned = gc.buffers_of(matrix, root="m")
    assert "m._status" in owned.labels()
    assert all(owned.find(array.ptr, array.capacity) is not None for array in kept), owned.labels()


def test_a_transposed_or_strided_view_registers_the_span_it_addresses(cpu):
    a = wp.zeros((4, 6), dtype=float, device=cpu)
    transposed = gc.BufferSet().add(a.transpose(), "t")
    assert transposed.find(a.ptr, 96).label == "t"
    every_other = gc.BufferSet().add(a[:, ::2], "v")
    assert every_other.find(a.ptr, 24 * 3 + 5 * 4).label == "v"


def test_an_indexed_arrays_indices_and_a_kept_numpy_array_are_owned(cpu):
    data = wp.zeros(8, dtype=float, device=cpu)
    idx = wp.array(np.arange(4, dtype=np.int32), device=cpu)

    class Holder:
        def __init__(self):
            self.view = wp.indexedarray(data, [idx])
            self.staging = np.zeros(16, dtype=np.float32)

    owned = gc.buffers_of(Holder(), root="h")
    assert owned.find(idx.ptr, 16).label == "h.view.indices[0]"
    assert owned.find(data.ptr, 32).label == "h.view"
    assert any(label == "h.staging" for label in owned.labels())


def test_a_fixedarray_annotation_an_owner_holds_is_no_buffer():
    # Newton's objects can hold wp.fixedarray instances (kernel type annotations, never memory).
    class Holder:
        def __init__(self):
            self.annotation = wp.fixedarray(dtype=float, shape=3)
            self.values = wp.zeros(3, dtype=float, device="cpu")

    holder = Holder()
    assert [b.label for b in gc.buffers_of(holder)] == ["obj0.values"]


@dataclasses.dataclass
class Pair:
    a: object
    b: object


@dataclasses.dataclass(init=False)
class SetBackwards(Pair):
    def __init__(self, value):  # its __dict__ holds b before a
        self.b = value
        self.a = value


class Shadowed(Pair):
    """A dataclass whose field ``a`` a property takes over: getattr reads it, not ``__dict__['a']``."""

    a = property(lambda self: self.__dict__["real"])


def test_the_walk_reads_a_dataclass_fields_first_as_getattr_reads_them(cpu):
    x, decoy = wp.zeros(1, dtype=float, device=cpu), wp.zeros(1, dtype=float, device=cpu)
    # An array reached twice is named by the first way in: a dataclass's fields come first, in their order.
    assert gc.buffers_of(Pair(x, x), root="p").labels() == ["p.a"]
    assert gc.buffers_of(SetBackwards(x), root="p").labels() == ["p.a"]
    shadowed = Shadowed.__new__(Shadowed)
    shadowed.__dict__.update(a=decoy, b=None, real=x)
    assert dict(gc.buffers.arrays_of(shadowed, root="s")) == {"s.a": x}


def test_the_walk_asks_each_object_what_it_is_where_its_type_cannot_say(cpu):
    array, inner, hidden = (wp.zeros(1, dtype=float, device=cpu) for _ in range(3))

    class Holder:
        def __init__(self):
            self.inner = inner

    holder = Holder()
    # A weak proxy is what it refers to, object by object: one to an array, one to a holder.
    found = dict(gc.buffers.arrays_of([weakref.proxy(array), weakref.proxy(holder)], root="p"))
    assert found.keys() == {"p[0]", "p[1].inner"}

    device_class = type(wp.get_device(cpu))

    class Disguised:  # its objects say which class they are, one by one
        def __init__(self, as_device, **attributes):
            self.as_device = as_device
            self.__dict__.update(attributes)

        @property
        def __class__(self):
            return device_class if self.as_device else Disguised

    held = [Disguised(False, shown=array), Disguised(True, hidden=hidden)]
    assert gc.buffers_of(held, root="h").labels() == ["h[0].shown"]  # a Warp device is not entered


def test_the_walk_names_a_null_array_only_where_the_arrays_are_asked_for(cpu):
    empty = wp.empty(0, dtype=float, device=cpu)
    assert len(gc.buffers_of([empty])) == 0
    assert dict(gc.buffers.arrays_of([empty], root="h")) == {"h[0]": empty}


def test_a_kept_numpy_array_owns_the_bytes_its_strides_reach():
    base = np.zeros((4, 6), dtype=np.float32)
    start = base.__array_interface__["data"][0]
    spans = {
        "whole": (base, start, start + 96),
        "row": (base[1:2], start + 24, start + 48),  # contiguous
        "column": (base[:, 2], start + 8, start + 84),  # strided: first to last element
        "backwards": (base[::-1, ::-2], start + 4, start + 96),  # negative strides
    }
    for name, (array, low, high) in spans.items():
        assert gc.buffers_of(array, root=name).find(low, high - low).nbytes == high - low, name


def test_a_set_iterates_by_start_the_longer_first_then_in_the_order_added():
    buffers = gc.BufferSet()
    for start, end, label in [(50, 60, "late"), (0, 10, "inner"), (0, 40, "outer"), (0, 10, "alias"), (20, 30, "mid")]:
        buffers.add_range(start, end, label)
    assert buffers.labels() == ["outer", "inner", "alias", "mid", "late"]

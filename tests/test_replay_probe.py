"""The replay check before every launch: a full check, then a cheap probe of
the very arrays it found, and a full check again whenever one of them changed."""

import types
import warnings

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck import CheckedGraph
from tests import kernels as K
from tests.internals import OwnersProbe, Unsupported, _owners_probe

N = 16


class Sim:
    """Buffers at every kind of place a label can name: attribute, list item, dict key."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device="cpu")
        self.bufs = [wp.ones(N, dtype=float, device="cpu") for _ in range(3)]
        self.named = {"v": wp.full(N, 2.0, dtype=float, device="cpu")}
        self.t = 0.0  # changes every step: not a buffer, never a reason to walk again

    def step(self):
        wp.launch(K.axpy, dim=N, inputs=[self.bufs[0], self.x, 1.0], device="cpu")
        wp.launch(K.axpy, dim=N, inputs=[self.named["v"], self.bufs[2], 0.5], device="cpu")
        self.t += 0.1


@pytest.fixture
def full_checks(monkeypatch):
    """Counts full replay checks (the walk of the owners: launch()'s, and check_replay()'s)."""
    calls = []
    original = CheckedGraph._check_replay

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CheckedGraph, "_check_replay", counted)
    return calls


def eager_twin_after(launches):
    twin = Sim()
    for _ in range(launches + 1):  # the reference call ran the step once more
        twin.step()
    return twin


def test_every_launch_is_checked_by_default_and_walks_the_owners_only_when_they_changed(full_checks):
    sim = Sim()
    checked = gc.capture(sim.step, device="cpu", owners=(sim,))
    assert checked.replay_check == "always"
    for _ in range(5):
        sim.t += 1.0  # an attribute that is no buffer changes: no walk
        checked.launch()
    assert len(full_checks) == 1
    np.testing.assert_array_equal(sim.x.numpy(), eager_twin_after(5).x.numpy())
    sim.bufs[1] = wp.zeros(N, dtype=float, device="cpu")  # a buffer the graph does not use
    checked.launch()
    assert len(full_checks) == 1
    sim.bufs[0] = wp.zeros(N, dtype=float, device="cpu")  # one it uses
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()
    assert len(full_checks) == 2


@pytest.mark.parametrize(
    "change",
    [
        lambda sim: setattr(sim, "x", wp.zeros(N, dtype=float, device="cpu")),
        lambda sim: sim.bufs.__setitem__(2, wp.zeros(N, dtype=float, device="cpu")),
        lambda sim: sim.named.__setitem__("v", wp.zeros(N, dtype=float, device="cpu")),
    ],
    ids=["attribute", "list item", "dict value"],
)
def test_a_reassigned_buffer_is_found_at_the_next_launch(change):
    sim = Sim()
    checked = gc.capture(sim.step, device="cpu", owners=(sim,))
    checked.launch()
    kept = (sim.x, sim.bufs[2], sim.named["v"])  # alive: the probe must not rely on a freed id
    change(sim)
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()
    del kept


def test_a_freed_buffer_is_found_even_if_its_id_is_reused():
    # (A CPU graph keeps its arrays alive itself; a CUDA graph does not.)
    sim = Sim()
    probe = OwnersProbe((sim,), ["owner.bufs[0]", "owner.x"], single=True)
    assert probe.unchanged()
    sim.bufs[0] = None  # freed: a new array could take its id
    assert probe.freed and not probe.unchanged()


def test_the_probe_compares_identities_not_equality_and_holds_nothing():
    import gc as collector
    import weakref

    sim = Sim()
    sim.bufs = [wp.zeros(N, dtype=float, device="cpu") for _ in range(12)]
    probe = OwnersProbe((sim,), [f"owner.bufs[{i}]" for i in range(12)] + ["owner.x"], single=True)
    assert probe.unchanged()
    kept = list(sim.bufs)
    sim.bufs[5], sim.bufs[6] = sim.bufs[6], sim.bufs[5]  # the same arrays, swapped
    assert not probe.unchanged()
    sim.bufs = list(kept)  # another list holding the same arrays in the same order
    assert probe.unchanged()
    sim.bufs = tuple(kept)  # a tuple: same identities
    assert probe.unchanged()
    sim.bufs = kept[:11]
    assert not probe.unchanged()
    sim.bufs = kept
    ref = weakref.ref(sim.x)
    sim.x = wp.zeros(N, dtype=float, device="cpu")
    collector.collect()
    assert ref() is None  # the probe kept no strong reference
    assert not probe.unchanged()


def test_the_probe_follows_every_kind_of_label_and_refuses_what_it_cannot():
    sim, other = Sim(), Sim()
    labels = ["owners[0].x", "owners[0].bufs[2]", "owners[0].named['v']", "owners[1].x"]
    probe = OwnersProbe((sim, other), labels, single=False)
    assert probe.unchanged()
    other.x = wp.zeros(N, dtype=float, device="cpu")
    assert not probe.unchanged()
    assert OwnersProbe((sim,), [], single=True).unchanged()  # nothing owned was baked
    state = sim.x

    def step():
        return state

    closure = OwnersProbe((step,), ["owner.<state>"], single=True)
    assert closure.unchanged()
    for label in ["owner.class", "owner.<missing>", "owner{0}", "elsewhere.x", "owner.t"]:
        with pytest.raises(Unsupported):
            OwnersProbe((sim,), [label], single=True)


def test_many_buffers_in_one_list_are_compared_as_one_sequence():
    sim = Sim()
    sim.bufs = [wp.zeros(N, dtype=float, device="cpu") for _ in range(12)]
    probe = OwnersProbe((sim,), [f"owner.bufs[{i}]" for i in range(10)] + ["owner.x"], single=True)
    unchanged = probe.source.split("def unchanged")[1]
    assert unchanged.count("v1[") == 0 and "holds0(items0)" in unchanged  # no item looked up: the list's pointers
    assert probe.unchanged()
    replaced = sim.bufs[3]
    sim.bufs[3] = wp.zeros(N, dtype=float, device="cpu")
    assert not probe.unchanged()
    sim.bufs[3] = replaced
    assert probe.unchanged()
    sim.bufs.append(wp.zeros(N, dtype=float, device="cpu"))  # not baked, but the list changed
    assert not probe.unchanged()


def test_without_a_probe_every_launch_is_a_full_check(full_checks):
    sim = Sim()
    owned = gc.buffers_of(sim, root="owner")  # owners given as a BufferSet: nothing to follow
    checked = gc.capture(sim.step, device="cpu", owners=owned)
    checked.launch()
    checked.launch()
    assert len(full_checks) == 2


def test_a_dict_of_many_buffers_is_compared_by_its_values():
    sim = Sim()
    sim.table = {i: wp.zeros(N, dtype=float, device="cpu") for i in range(10)}  # int keys: labels "[3]", like a list's
    probe = OwnersProbe((sim,), [f"owner.table[{i}]" for i in range(10)], single=True)
    assert probe.unchanged()
    kept = sim.table[3]
    sim.table[3] = wp.zeros(N, dtype=float, device="cpu")
    assert not probe.unchanged()
    sim.table[3] = kept
    assert probe.unchanged()


def test_a_list_whose_storage_moved_or_was_built_again_is_compared_by_its_items():
    sim = Sim()
    sim.bufs = [wp.zeros(N, dtype=float, device="cpu") for _ in range(12)]
    probe = OwnersProbe((sim,), [f"owner.bufs[{i}]" for i in range(12)], single=True)
    kept = list(sim.bufs)
    sim.bufs.extend([None] * 10_000)  # the list's item storage moves
    del sim.bufs[12:]
    assert probe.unchanged()
    sim.bufs[0] = wp.zeros(N, dtype=float, device="cpu")
    assert not probe.unchanged()
    sim.bufs = tuple(kept)
    assert probe.unchanged()
    sim.bufs = (*kept[:11], wp.zeros(N, dtype=float, device="cpu"))
    assert not probe.unchanged()


@pytest.mark.parametrize("mode, checks", [("always", 2), ("first", 0), ("never", 0)])
def test_every_launch_after_a_change_is_checked_as_replay_check_says(mode, checks, full_checks):
    sim = Sim()
    checked = gc.capture(sim.step, device="cpu", owners=(sim,), replay_check=mode, on_failure="warn")
    for _ in range(3):
        checked.launch()
    sim.x = wp.zeros(N, dtype=float, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checked.launch()
        checked.launch()  # a stale graph warns at every launch that checks
    assert len(full_checks) == (1 if mode != "never" else 0) + checks
    assert sum("stale-pointer" in str(w.message) for w in caught) == checks


def test_a_step_captured_without_owners_is_probed_through_the_object_it_is_bound_to(full_checks):
    # gc.capture(sim.step): the owner is the bound method, whose labels are sim's (owner.x).
    sim = Sim()
    checked = gc.capture(sim.step, device="cpu")
    for _ in range(3):
        checked.launch()
    assert len(full_checks) == 1  # the probe followed owner.x through sim.step.__self__
    np.testing.assert_array_equal(sim.x.numpy(), eager_twin_after(3).x.numpy())
    sim.bufs[1] = wp.zeros(N, dtype=float, device="cpu")  # not baked
    checked.launch()
    assert len(full_checks) == 1
    sim.x = wp.zeros(N, dtype=float, device="cpu")  # baked
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()
    assert len(full_checks) == 2


class Neighbours:
    """Counts each point's neighbours in an owned hash grid: the graph bakes the grid's id."""

    def __init__(self, seed=3):
        self.points = wp.array(np.random.default_rng(seed).random((N, 3)), dtype=wp.vec3, device="cpu")
        self.grid = wp.HashGrid(4, 4, 4, device="cpu")
        self.grid.build(self.points, radius=0.25)
        self.counts = wp.zeros(N, dtype=float, device="cpu")

    def step(self):
        wp.launch(K.count_neighbors, dim=N, inputs=[self.grid.id, self.points, self.counts], device="cpu")


def test_a_structure_is_probed_by_its_handle_and_a_rebuilt_one_replays_wrong(full_checks):
    sim = Neighbours()
    checked = gc.capture(sim.step, device="cpu", owners=(sim,), on_failure="warn")
    for _ in range(3):
        checked.launch()
    assert len(full_checks) == 1  # the probe compared owner.grid.id: no walk
    twin = Neighbours()
    twin.step()
    np.testing.assert_array_equal(sim.counts.numpy(), twin.counts.numpy())
    # The grid rebuilt from other points: the graph still queries the old one (kept alive here).
    old = sim.grid
    sim.points.assign(np.random.default_rng(4).random((N, 3)).astype(np.float32))
    sim.grid = wp.HashGrid(4, 4, 4, device="cpu")
    sim.grid.build(sim.points, radius=0.25)
    with pytest.warns(gc.GraphCheckWarning, match="stale-pointer"):
        checked.launch()
    assert len(full_checks) == 2
    twin.points.assign(sim.points)
    twin.grid = wp.HashGrid(4, 4, 4, device="cpu")
    twin.grid.build(twin.points, radius=0.25)
    twin.step()
    assert not np.array_equal(sim.counts.numpy(), twin.counts.numpy())  # the replay queried the old grid
    del old


def test_a_handle_that_is_no_structure_s_is_not_probed():
    sim = Neighbours()
    sim.fake = types.SimpleNamespace(id=sim.grid.id)  # an int at .id, but no structure
    with pytest.raises(Unsupported):
        OwnersProbe((sim,), ["owner.fake.id"], single=True)
    probe = OwnersProbe((sim,), ["owner.grid.id", "owner.points"], single=True)
    assert probe.unchanged()
    sim.grid = types.SimpleNamespace(id=sim.grid.id)  # the same int, no longer a hash grid
    assert not probe.unchanged()


@pytest.mark.parametrize("mode", ["always", "first", "never"])
def test_every_launch_replays_whatever_is_checked_before_it(mode, monkeypatch):
    sim = Sim()
    checked = gc.capture(sim.step, device="cpu", owners=(sim,), replay_check=mode)
    for _ in range(4):  # the first launch goes the whole way, the next ones replay at once
        checked.launch()
    np.testing.assert_array_equal(sim.x.numpy(), eager_twin_after(4).x.numpy())
    monkeypatch.setenv("GRAPHCHECK_DISABLE", "1")
    disabled_sim = Sim()
    disabled = gc.capture(disabled_sim.step, device="cpu", owners=(disabled_sim,), replay_check=mode)
    for _ in range(3):
        disabled.launch()
    np.testing.assert_array_equal(disabled_sim.x.numpy(), eager_twin_after(2).x.numpy())


class ManyAttributes:
    """Arrays as attributes of their own (as a simulator's state holds them: MuJoCo Warp's Data
    holds 161 and a few numbers): twenty share their keys with the class's other instances (a
    split table), forty or more make a dict of their own (a combined table)."""

    def __init__(self, count=20):
        self.count = count  # numbers beside the arrays, as Data's
        self.frame = 0
        for i in range(count):
            setattr(self, f"a{i}", wp.full(N, float(i), dtype=float, device="cpu"))

    def step(self):
        for i in range(self.count - 1):
            wp.launch(K.axpy, dim=N, inputs=[getattr(self, f"a{i}"), getattr(self, f"a{i + 1}"), 0.5], device="cpu")


class SlottedAttributes:
    """Twenty arrays in slots: no dict to compare, each array looked up."""

    __slots__ = tuple(f"a{i}" for i in range(20))

    def __init__(self):
        for i, name in enumerate(self.__slots__):
            setattr(self, name, wp.full(N, float(i), dtype=float, device="cpu"))


def by_its_dict(probe):
    """Makes the probe's comparison of arrays one by one (where its dict changed) always fail:
    then only the comparison of the dict in place can find them unchanged."""
    namespace = probe.unchanged.__globals__
    assert "dict0_entries" in namespace  # the probe compares the dict's table
    namespace["dict0_expected"] = b""


def labels(count):
    return [f"owner.a{i}" for i in range(count)]


@pytest.mark.skipif(not _owners_probe._DICT_KEYS, reason="dicts are read in place on CPython 3.11 and later")
@pytest.mark.parametrize("count", [20, 40, 200])
def test_many_arrays_in_one_dict_are_compared_in_place(count):
    sim = ManyAttributes(count)
    if count == 20 and _owners_probe._SPLIT_VALUES is None:
        pytest.skip("a split table is read in place on CPython 3.11 to 3.13's layouts only")
    probe = OwnersProbe((sim,), labels(count), single=True)
    unchanged = probe.source.split("def unchanged")[1]
    assert "dict0_same_entries(dict0_entries)" in unchanged and "    v1 = " not in unchanged  # no array by name
    by_its_dict(probe)
    assert probe.unchanged()
    sim.count += 1  # a number beside them changed: the dict's table did
    assert not probe.unchanged()
    sim.count -= 1  # the same int object (a small int): the same table again
    assert probe.unchanged()
    kept = sim.a7
    sim.a7 = wp.zeros(N, dtype=float, device="cpu")  # reassigned
    assert not probe.unchanged()
    sim.a7 = kept
    assert probe.unchanged()
    sim.a3, sim.a4 = sim.a4, sim.a3  # the same arrays at each other's places
    assert not probe.unchanged()
    sim.a3, sim.a4 = sim.a4, sim.a3
    assert probe.unchanged()
    for i in range(200):  # the dict grows into a new table: the old one is freed memory now
        setattr(sim, f"grown{i}", i)
    for i in range(200):
        delattr(sim, f"grown{i}")
    assert not probe.unchanged()  # the dict's own pointers tell: the old table is not read
    sim = ManyAttributes(count)
    probe = OwnersProbe((sim,), labels(count), single=True)
    by_its_dict(probe)
    first, second = sim.a0, sim.a1  # the same values in the same order, under each other's keys
    del sim.a0, sim.a1
    sim.a1, sim.a0 = first, second
    assert not probe.unchanged()


@pytest.mark.parametrize("count", [20, 40])
def test_a_change_in_the_dict_falls_back_on_the_arrays_one_by_one(count):
    sim = ManyAttributes(count)
    probe = OwnersProbe((sim,), labels(count), single=True)
    sim.count += 1  # not an array: still unchanged, by the arrays compared one by one
    sim.extra = 1.0
    ManyAttributes(count).other = 1.0  # another instance grows the keys the class shares
    assert probe.unchanged()
    first, second = sim.a0, sim.a1
    del sim.a0, sim.a1
    sim.a1, sim.a0 = second, first  # re-inserted in another order: the same arrays by name
    assert probe.unchanged()
    sim.a1, sim.a0 = first, second
    assert not probe.unchanged()


def test_a_freed_or_resized_array_in_the_dict_is_found():
    sim = ManyAttributes(40)
    probe = OwnersProbe((sim,), labels(40), single=True)
    kept = sim.a9
    sim.a9 = wp.zeros(2 * N, dtype=float, device="cpu")  # resized: another array
    assert not probe.unchanged()
    sim.a9 = kept
    assert probe.unchanged()
    sim.a9 = None
    del kept  # freed: a new array could take its id
    assert probe.freed and not probe.unchanged()


class Guarded(ManyAttributes):
    """One array's name is a property of the class: it answers, not the dict."""

    @property
    def a5(self):
        return self.__dict__["hidden"]

    @a5.setter
    def a5(self, value):
        self.__dict__["hidden"] = value


@pytest.mark.parametrize("kind", [SlottedAttributes, Guarded])
def test_arrays_a_dict_does_not_answer_for_are_compared_one_by_one(kind):
    sim = kind()
    probe = OwnersProbe((sim,), labels(20), single=True)
    unchanged = probe.source.split("def unchanged")[1]
    assert "dict0" not in unchanged and "_pointers((" in unchanged  # one tuple of the arrays looked up
    assert probe.unchanged()
    sim.a3, sim.a4 = sim.a4, sim.a3
    assert not probe.unchanged()
    sim.a3, sim.a4 = sim.a4, sim.a3
    kept = sim.a5
    sim.a5 = wp.zeros(N, dtype=float, device="cpu")
    assert not probe.unchanged()
    del kept


@pytest.mark.parametrize("count", [20, 40])
def test_a_graph_over_many_arrays_in_one_dict_replays_right_and_a_reassigned_one_is_found(count, full_checks):
    sim = ManyAttributes(count)
    checked = gc.capture(sim.step, device="cpu", owners=(sim,), on_failure="warn")
    twin = ManyAttributes(count)
    for _ in range(4):  # the reference call, then three replays
        twin.step()
    for _ in range(3):
        checked.launch()
    assert len(full_checks) == 1  # the probe answered the next two
    assert "dict0_entries" in checked._probe.source or not _owners_probe._DICT_KEYS
    for frame in range(2):
        sim.frame = 1000 + frame  # a number in the same dict changes: compared one by one, no walk
        checked.launch()
        twin.step()
    assert len(full_checks) == 1
    np.testing.assert_array_equal(sim.a19.numpy(), twin.a19.numpy())
    before = sim.a7.numpy().copy()
    sim.a7 = wp.array(before, dtype=float, device="cpu")  # a copy, reassigned: the graph still writes the old one
    with pytest.warns(gc.GraphCheckWarning, match="stale-pointer"):
        checked.launch()
    twin.step()
    assert len(full_checks) == 2
    np.testing.assert_array_equal(sim.a7.numpy(), before)  # the replay did not add a6 to the a7 the owner holds
    assert not np.array_equal(sim.a7.numpy(), twin.a7.numpy())


@pytest.mark.parametrize("key", ["plain", "x{0}", "w{b}", "p{}", "}{"])
def test_a_dict_key_with_braces_is_probed_like_any_other(key):
    """The probe writes a key as a literal into generated code: braces in it are kept as they are."""
    arrays = {key: wp.zeros(N, dtype=float, device="cpu")}
    holder = types.SimpleNamespace(d=arrays, v=wp.ones(N, dtype=float, device="cpu"))

    def step():
        wp.launch(K.axpy, dim=N, inputs=[holder.v, holder.d[key], 1.0], device="cpu")

    checked = gc.capture(step, device="cpu", owners=(holder,))
    checked.launch()
    checked.launch()  # the probe's answer
    np.testing.assert_array_equal(holder.d[key].numpy(), np.full(N, 3.0))  # the reference call and two replays
    holder.d[key] = wp.zeros(N, dtype=float, device="cpu")  # reassigned: the probe sees it
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()


def test_owners_that_are_arrays_themselves_are_probed_and_replay_as_eager(full_checks):
    x = wp.zeros(N, dtype=float, device="cpu")
    ys = [wp.ones(N, dtype=float, device="cpu") for _ in range(9)]  # enough to be a sequence probe's list

    def step():
        wp.launch(K.add_one, dim=N, inputs=[x], device="cpu")
        for y in ys:
            wp.launch(K.add_one, dim=N, inputs=[y], device="cpu")

    with warnings.catch_warnings():
        warnings.simplefilter("error", gc.GraphCheckWarning)  # the probe is built, no fallback
        checked = gc.capture(step, device="cpu", owners=(x, *ys))
        for _ in range(3):
            checked.launch()
    assert checked._probe is not None
    assert len(full_checks) == 1  # the first launch's full check; the probe answered after it
    np.testing.assert_array_equal(x.numpy(), np.full(N, 4.0))  # the reference call and three replays
    np.testing.assert_array_equal(ys[8].numpy(), np.full(N, 5.0))

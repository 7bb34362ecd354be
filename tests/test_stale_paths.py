"""A buffer the owners hold by several paths, one of them through an object built once.

A recorded ``wp.Launch`` command keeps its arguments, a ``@wp.struct`` its fields, an indexed
array its data: built at init, each keeps the array it was given however the owners name it
elsewhere. When the owner reallocates its own list of arrays after the capture, a step that
reaches an array only through such an object still uses the old one, as the graph does: no
``stale-pointer``. When every path moved (the step reads the list itself, or the holder was
given the new array too), the graph's array is stale. Each verdict is proven by values: the
same change made to an eagerly stepped twin, then replays compared with its steps.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from tests import kernels as K

DEVICE = "cpu"
N = 8


@wp.kernel
def _add_indexed(a: wp.indexedarray(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] + 1.0


class Held:
    """Four arrays in a list; the step reaches one of them through ``how``: a recorded command
    (``"command"``), a struct's field (``"struct"``), an indexed array made once (``"indexed"``),
    or the list itself (``"list"``)."""

    how = "command"

    def __init__(self, device=DEVICE):
        self.device = device
        self.blist = [wp.full(N, float(i + 1), dtype=float, device=device) for i in range(4)]
        self.out = wp.zeros(N, dtype=float, device=device)
        self.total = wp.zeros(N, dtype=float, device=device)
        self.cmd = wp.launch(K.scale, dim=N, inputs=[self.out, self.blist[3], 0.5, 1], device=device, record_cmd=True)
        self.params = K.Params()
        self.params.scratch = self.blist[2]
        self.params.dt = 0.25
        self.view = wp.indexedarray(self.blist[1], [wp.array(np.arange(N, dtype=np.int32), device=device)])

    def step(self):
        # out from the array reached through the holder (or the list), then added to a running total.
        if self.how == "command":
            self.cmd.launch()
        elif self.how == "struct":
            wp.launch(K.with_struct, dim=N, inputs=[self.out, self.params], device=self.device)
        elif self.how == "indexed":
            wp.launch(_add_indexed, dim=N, inputs=[self.view, self.out], device=self.device)
        else:
            wp.launch(K.scale, dim=N, inputs=[self.out, self.blist[3], 0.5, 1], device=self.device)
        wp.launch(K.axpy, dim=N, inputs=[self.out, self.total, 1.0], device=self.device)

    def reallocate(self):
        """The owner's list made again (a reset): the holders built once keep the old arrays."""
        self.blist = [wp.full(N, 10.0 * (i + 1), dtype=float, device=self.device) for i in range(4)]

    def reallocate_everywhere(self):
        """The list made again and handed to the holders too: every path moved."""
        self.reallocate()
        self.cmd.set_param_at_index(1, self.blist[3])
        self.params.scratch = self.blist[2]
        self.view = wp.indexedarray(self.blist[1], [wp.array(np.arange(N, dtype=np.int32), device=self.device)])


def _held(how):
    return type(f"Held_{how}", (Held,), {"how": how})


def _replays_like_eager(cls, change):
    """The capture, then ``change`` made to the producer and to an eagerly stepped twin; whether
    replays then equal eager steps, with the replay check's verdict before them."""
    eager, replayed = cls(), cls()
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), on_failure="ignore", replay_check="never")
    for _ in range(checked.eager_calls):
        eager.step()
    kept = [eager.blist, replayed.blist]  # the arrays the graph baked stay alive whatever the change
    getattr(eager, change)()
    getattr(replayed, change)()
    report = checked.check_replay(on_failure="ignore")
    for _ in range(3):
        eager.step()
        checked.launch()
    alike = np.array_equal(eager.total.numpy(), replayed.total.numpy())
    del kept
    return report, alike


@pytest.mark.parametrize("how", ["command", "struct", "indexed"])
def test_a_buffer_an_object_built_once_still_keeps_is_no_stale_pointer(how):
    report, alike = _replays_like_eager(_held(how), "reallocate")
    assert report.ok, str(report)
    assert alike  # the step reaches the old array through the holder, as the graph does


def test_a_buffer_the_step_reads_from_the_moved_path_is_a_stale_pointer():
    report, alike = _replays_like_eager(_held("list"), "reallocate")
    assert set(report.kinds()) == {"stale-pointer"}, str(report)
    assert not alike


@pytest.mark.parametrize("how", ["command", "struct", "indexed"])
def test_a_buffer_every_path_moved_from_is_reported(how):
    report, alike = _replays_like_eager(_held(how), "reallocate_everywhere")
    assert report.kinds() and set(report.kinds()) <= {"stale-pointer", "buffer-drift"}, str(report)
    assert not alike


class Aliased:
    """The same array under two plain names; the step reads one of them."""

    def __init__(self, device=DEVICE):
        self.device = device
        self.x = wp.ones(N, dtype=float, device=device)
        self.alias = self.x  # a plain second name, not an object built once
        self.total = wp.zeros(N, dtype=float, device=device)
        self.blist = [self.x]

    def step(self):
        wp.launch(K.axpy, dim=N, inputs=[self.x, self.total, 1.0], device=self.device)

    def reallocate(self):
        self.x = wp.full(N, 3.0, dtype=float, device=self.device)


def test_a_plain_second_name_does_not_keep_a_buffer_the_step_reads_by_the_first():
    report, alike = _replays_like_eager(Aliased, "reallocate")
    assert set(report.kinds()) == {"stale-pointer"}, str(report)
    assert not alike


def test_the_replay_probe_follows_the_holder_after_the_owner_s_name_moved():
    producer = _held("indexed")()
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    producer.reallocate()
    checked.launch()  # the full check: kept by the indexed array
    checked.launch()  # the probe, following owner.view
    producer.view = wp.indexedarray(producer.blist[1], [wp.array(np.arange(N, dtype=np.int32), device=DEVICE)])
    with pytest.raises(gc.GraphCheckError, match="stale-pointer"):
        checked.launch()


class CommandSetEachCall(Held):
    """The command's argument set from the list on every call: the step re-derives it, so the
    command keeps nothing built once, and the moved name is what the next call hands it."""

    how = "command"

    def step(self):
        self.cmd.set_param_at_index(1, self.blist[3])
        super().step()


class StructSetEachCall(Held):
    how = "struct"

    def step(self):
        self.params.scratch = self.blist[2]
        super().step()


class ViewMadeEachCall(Held):
    how = "indexed"

    def step(self):
        self.view = wp.indexedarray(self.blist[1], [wp.array(np.arange(N, dtype=np.int32), device=self.device)])
        super().step()


@pytest.mark.parametrize("cls", [CommandSetEachCall, StructSetEachCall, ViewMadeEachCall], ids=lambda c: c.__name__)
def test_an_object_the_step_sets_again_each_call_keeps_nothing(cls):
    report, alike = _replays_like_eager(cls, "reallocate")
    assert set(report.kinds()) == {"stale-pointer"}, str(report)
    assert not alike

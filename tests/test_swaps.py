"""Buffer swaps that carry no state: each call overwrites the pair first (tests/test_matrix.py
has every way to). A pair that holds the same values at every call boundary (Newton's VBD)
is no such swap: updated in place between replays, the replay reads the other buffer.

The corpus producer OverwrittenPingPong (safe) and its twin PingPongCarriedOver (unsafe) are
proven by values in tests/test_corpus.py; MirroredStateSwap here.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import graphcheck as gc
from graphcheck import _warp
from tests import kernels as K, producers as P

DEVICE = "cpu"


@wp.kernel
def _two_writes(a: wp.array(dtype=float), b: wp.array(dtype=float), c: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 1.0
    b[i] = a[i]
    if i > 0:
        c[i] = 2.0


@wp.kernel
def _early_return(a: wp.array(dtype=float)):
    i = wp.tid()
    if i > 3:
        return
    a[i] = 1.0


@wp.kernel
def _reindexed(a: wp.array(dtype=float)):
    i = wp.tid()
    i = i + 1
    a[i] = 1.0


def test_which_parameters_a_kernel_overwrites_is_read_from_its_source():
    assert _warp.overwritten_params(K.scale) == {"a"}
    assert _warp.overwritten_params(K.copy_kernel) == {"dst"}
    assert _warp.overwritten_params(K.add_one) == frozenset()  # read and written
    assert _warp.overwritten_params(K.axpy) == frozenset()
    assert _warp.overwritten_params(_two_writes) == {"b"}  # a read back; c written under an if
    assert _warp.overwritten_params(_early_return) == frozenset()
    assert _warp.overwritten_params(_reindexed) == frozenset()


def test_a_swap_of_buffers_the_call_overwrites_first_is_noted_not_reported():
    producer = P.OverwrittenPingPong(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,))
    assert checked.report.ok and checked.eager_calls == 1, str(checked.report)
    (note,) = [n for n in checked.report.notes if "carries no state" in n]
    assert "owner.a" in note and "owner.b" in note


def test_a_swap_of_buffers_identical_after_each_call_stays_reported():
    """Equal at every call boundary is no rule: an update between replays would be dropped."""
    producer = P.MirroredStateSwap(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
    assert checked.eager_calls == 3 and any("differ too" in n for n in checked.report.notes)


def _reset(producer):
    producer.x.assign(np.full(P.N, 5.0, dtype=np.float32))  # the state the next step reads, updated in place


@pytest.mark.parametrize("cls", [P.MirroredStateSwap, P.MirroredSwapKeepsClone], ids=lambda c: c.__name__)
def test_identical_swapped_buffers_replay_wrong_once_one_is_updated_in_place(cls):
    # The claim, by values: the eager twin reads the update, the replay reads the other buffer.
    eager, replayed = cls(DEVICE), cls(DEVICE)
    checked = gc.capture(replayed.step, device=DEVICE, owners=(replayed,), on_failure="ignore", replay_check="never")
    for _ in range(checked.eager_calls):
        eager.step()
    for _ in range(2):
        checked.launch()
        eager.step()
    assert np.array_equal(eager.x.numpy(), replayed.x.numpy())  # alike while nothing is updated
    _reset(eager)
    _reset(replayed)
    checked.launch()
    eager.step()
    assert not np.array_equal(eager.x.numpy(), replayed.x.numpy())


def test_a_swap_that_carries_state_is_not_settled_by_later_calls():
    producer = P.MirroredStateHalfCopied(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"} and checked.eager_calls == 3
    assert all(f.detail["swapped buffers"] for f in checked.report.findings)


class UnchangedMirror(P.Producer):
    """Identical buffers the step leaves unchanged (a copy of zeros into zeros): equal, but a
    fixed point proves nothing about later states; the swap stays reported."""

    def __init__(self, device):
        super().__init__(device)
        self.y = wp.zeros(P.N, dtype=float, device=device)

    def step(self):
        self.launch(K.copy_kernel, [self.x, self.y])
        self.x, self.y = self.y, self.x


def test_identical_buffers_the_call_leaves_unchanged_stay_reported():
    producer = UnchangedMirror(DEVICE)
    checked = gc.capture(producer.step, device=DEVICE, owners=(producer,), on_failure="ignore")
    assert set(checked.report.kinds()) == {"buffer-drift"}, str(checked.report)
    assert checked.eager_calls == 3 and any("differ too" in n for n in checked.report.notes)

"""verify_replay, check_producer and fallback= on a CUDA device (the CPU tests are in tests/)."""

import numpy as np

import graphcheck as gc
from tests import value_producers as P


def test_a_plain_producer_replays_what_eager_stepping_computes(device):
    report = gc.verify_replay(P.Plain, steps=5, device=device)
    assert report.ok, str(report)
    assert "values" in report.checks


def test_overloads_of_one_generic_kernel_replay_right_on_cuda(device):
    """A CUDA graph's kernel nodes each hold their own function: the CPU-only Warp behaviour
    of the limits page does not apply."""
    report = gc.verify_replay(P.Overloads, device=device, on_failure="ignore")
    assert report.ok, str(report)


def test_a_frozen_scalar_diverges_on_cuda(device):
    report = gc.verify_replay(P.Timestamp, device=device, on_failure="ignore")
    assert set(report.kinds()) == {"scalar-drift", "replay-divergence"}, str(report)


def test_the_kit_on_cuda(device):
    assert gc.check_producer(P.Plain, device=device).ok
    assert set(gc.check_producer(P.ModuleCache, device=device, on_failure="ignore").kinds()) == {"shared-buffer"}
    report = gc.check_producer(P.EveryThirdCall, device=device, on_failure="ignore")
    assert set(report.kinds()) == {"launch-sequence-drift"}, str(report)


def test_eager_fallback_on_cuda(device):
    producer, twin = P.Reassigned(device), P.Reassigned(device)
    checked = gc.capture(producer.step, device=device, fallback="eager", on_failure="log")
    twin.step()
    producer.renew()
    twin.renew()
    for _ in range(3):
        checked.launch()
        twin.step()
    assert checked.fallback.report is not None
    np.testing.assert_array_equal(producer.x.numpy(), twin.x.numpy())

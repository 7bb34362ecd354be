"""Warp's fem examples' capture sites (heavy on the CPU: their kernels take a minute to build).

``example_shallow_water.Example.simulate`` is what the example captures (on CUDA with conditional
graphs); warp.fem allocates its integration and interpolation scratch on the device inside the
step, and the example's fields live inside warp.fem objects (spaces, fields, quadratures).
"""

import graphcheck as gc

from .twins import Twins, assert_no_finding, replay_against_twin


def test_shallow_water_simulate_replays_right_and_has_no_finding():
    # warp.fem allocates its quadratures once, in the reference call, and caches them in a
    # class-level cache: held by Warp, noted, neither foreign nor shifting the temporaries.
    from warp.examples.fem.example_shallow_water import Example

    twins = Twins(lambda: Example(quiet=True, resolution=8))
    example = twins.subject
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    assert replay_against_twin(checked, twins, lambda e: e.simulate(), replays=3) == []
    assert_no_finding(checked.report)

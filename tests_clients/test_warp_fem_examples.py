"""Warp's fem examples' capture sites (heavy on the CPU: their kernels take a minute to build).

``Example.simulate`` is what ``example_shallow_water`` and ``example_kelvin_helmholtz`` capture (on
CUDA with conditional graphs); warp.fem allocates its integration and interpolation scratch on the
device inside the step, and the example's fields live inside warp.fem objects (spaces, fields,
quadratures). Both replay bit-identically to eager stepping.

``example_taylor_green`` is not judged here: its captured step replays differently from eager
stepping on the CPU even without graphcheck (in the ``cg_solve`` part), for a reason not settled yet.
"""

import importlib

import pytest

import graphcheck as gc

from .twins import Twins, WrongVerdict, assert_no_finding, replay_against_twin

FEM_DEFECTS = (
    "graphcheck matches temporaries by allocation order over the whole call, so the quadrature arrays "
    "warp.fem allocates once in the reference call and caches (RegularQuadrature.CachedFormula._cache) shift "
    "the order: buffer-drift 'temporary #2 ... in the reference call, temporary #0 captured'; and it reports "
    "those cached arrays, held by a warp.fem class-level cache, as foreign-buffer (qp_arg.points/weights)"
)


@pytest.mark.xfail(strict=True, raises=WrongVerdict, reason=FEM_DEFECTS)
@pytest.mark.parametrize("module", ["example_shallow_water", "example_kelvin_helmholtz"])
def test_simulate_replays_right_and_has_no_finding(module):
    Example = importlib.import_module(f"warp.examples.fem.{module}").Example
    twins = Twins(lambda: Example(resolution=8))
    example = twins.subject
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    assert replay_against_twin(checked, twins, lambda e: e.simulate(), replays=3) == []
    assert_no_finding(checked.report)

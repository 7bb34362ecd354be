"""Warp's fem examples' capture sites (heavy on the CPU: their kernels take a minute to build).

``Example.simulate`` is what ``example_shallow_water`` and ``example_kelvin_helmholtz`` capture (on
CUDA with conditional graphs); warp.fem allocates its integration and interpolation scratch on the
device inside the step, and the example's fields live inside warp.fem objects (spaces, fields,
quadratures). Both replay bit-identically to eager stepping.

``example_taylor_green``'s captured step replays differently from eager stepping on the CPU, even
without graphcheck: Warp's CPU graph replays one of two overloads of ``warp.utils._array_cast_kernel``
(vec2f to vec2d and back, around its ``cg_solve``) writing only the first component of each vector.
``verify_replay`` shows the divergence by values, and graphcheck's capture reports it as a
capture-error (tests/test_warp_examples.py has the minimal case).
"""

import importlib

import pytest

import graphcheck as gc

from .twins import Twins, Unsafe, assert_no_finding, judge, replay_against_twin


def warm_quadrature_cache(Example):
    """Step a throwaway example once: warp.fem caches its quadrature formulas for the process."""
    Example(resolution=8).simulate()


def cold_quadrature_cache(Example):
    """Empty warp.fem's quadrature cache, so that the reference call makes (and caches) the formulas."""
    import warp.fem as fem

    fem.RegularQuadrature.CachedFormula._cache.clear()


@pytest.mark.parametrize(
    "cache",
    [
        # The quadratures made (and cached) in the reference call are no temporaries; those an
        # earlier call made are held by warp.fem's class-level cache for the process: Warp's, not foreign.
        pytest.param(cold_quadrature_cache, id="made-in-the-reference-call"),
        pytest.param(warm_quadrature_cache, id="cached-before"),
    ],
)
@pytest.mark.parametrize("module", ["example_shallow_water", "example_kelvin_helmholtz"])
def test_simulate_replays_right_and_has_no_finding(module, cache):
    Example = importlib.import_module(f"warp.examples.fem.{module}").Example
    cache(Example)
    twins = Twins(lambda: Example(resolution=8))
    example = twins.subject
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    assert replay_against_twin(checked, twins, lambda e: e.simulate(), replays=3) == []
    assert_no_finding(checked.report)


def test_taylor_green_replay_divergence_is_shown_by_values():
    from warp.examples.fem.example_taylor_green import Example

    cold_quadrature_cache(Example)
    report = gc.verify_replay(
        lambda: Example(quiet=True, resolution=6, degree=1), steps=3, method="simulate", on_failure="ignore"
    )
    assert "replay-divergence" in set(report.kinds())
    assert "producer._u_field._dof_values" in {f.detail["buffer"] for f in report.of_kind("replay-divergence")}


class TaylorGreen:
    """example_taylor_green's captured ``simulate``, at resolution 6 and degree 1."""

    def __init__(self):
        from warp.examples.fem.example_taylor_green import Example

        self.example = Example(quiet=True, resolution=6, degree=1)

    def step(self):
        self.example.simulate()


def test_taylor_green_capture_reports_the_overloads_its_cpu_replay_runs_wrong():
    from warp.examples.fem.example_taylor_green import Example

    cold_quadrature_cache(Example)
    judge(TaylorGreen, Unsafe("capture-error"))

"""Warp's optim examples' capture sites, judged on the CPU against eager twins.

Each example captures on CUDA only; here the same calls are captured with graphcheck on the CPU:

- ``example_fluid_checkpoint`` and ``example_fluid_checkpoint_custom_backward``: ``forward``,
  ``backward`` (a fresh ``wp.Tape`` per call, then ``tape.backward``) and ``tape.zero()``: clean.
- ``example_particle_repulsion.simulate``: clean (queries a ``wp.HashGrid`` built before the call).
- ``example_navier_stokes_perturbation``: forward + backward on a tape, and the projection with
  ``tape.zero()``: clean. ``Adam.step``, which the example leaves out of its graphs "because it
  increments a CPU-side bias-correction counter": scalar-drift on ``t``.

Gradients are compared too. The fluid examples and particle repulsion import Pillow.
"""

import pytest
import warp as wp

import graphcheck as gc

from .twins import Twins, assert_caught, assert_no_finding

SIZE = {"sim_steps": 4, "pressure_iterations": 4, "segment_size": 2}


def judge_safe(make, calls, replays=2):
    """Capture each call of a built example in turn, then replay them all against an eager twin."""
    twins = Twins(make)
    example = twins.subject
    checked = []
    for call in calls:
        checked.append(gc.capture(lambda call=call: call(example), owners=(example,), on_failure="ignore"))
        call(twins.twin)
    for _ in range(replays):
        for graph, call in zip(checked, calls):
            wp.capture_launch(graph.graph)
            call(twins.twin)
    assert twins.differing() == []
    for graph in checked:
        assert graph.check_replay(on_failure="ignore").ok
        assert_no_finding(graph.report)


@pytest.mark.parametrize("module", ["example_fluid_checkpoint", "example_fluid_checkpoint_custom_backward"])
def test_fluid_checkpoint_forward_backward_and_tape_zero_are_replay_safe(module):
    pytest.importorskip("PIL", reason="the example imports Pillow")
    example_module = pytest.importorskip(f"warp.examples.optim.{module}")
    judge_safe(
        lambda: example_module.Example(**SIZE),
        [lambda e: e.forward(), lambda e: e.backward(), lambda e: e.tape.zero()],
    )


def test_particle_repulsion_simulate_is_replay_safe():
    pytest.importorskip("PIL", reason="the example imports Pillow")
    from warp.examples.optim.example_particle_repulsion import Example

    def make():
        example = Example()
        example.grid.build(example.positions, example.grid_cell_size)  # what Example.step does before replaying
        return example

    judge_safe(make, [lambda e: e.simulate()])


def forward_backward(example):
    example.tape = wp.Tape()
    with example.tape:
        example.forward()
    example.tape.backward(example.loss)


def test_navier_stokes_perturbation_graphs_are_replay_safe():
    from warp.examples.optim import example_navier_stokes_perturbation as ns

    def project_and_reset(example):  # the example's second captured block
        example.delta_omega_norm_sq.zero_()
        wp.launch(
            ns.compute_delta_omega_norm_sq,
            dim=(ns.N_GRID, ns.N_GRID),
            inputs=[example.delta_omega],
            outputs=[example.delta_omega_norm_sq],
        )
        wp.launch(
            ns.clamp_delta_omega_norm,
            dim=(ns.N_GRID, ns.N_GRID),
            inputs=[example.delta_omega, example.delta_omega_norm_sq, example.epsilon],
        )
        example.tape.zero()

    judge_safe(lambda: ns.Example(spin_up_steps=2, lead_steps=2), [forward_backward, project_and_reset])


def test_adam_step_counts_on_the_host_scalar_drift():
    from warp.examples.optim.example_navier_stokes_perturbation import Example

    def make():
        example = Example(spin_up_steps=2, lead_steps=2)
        forward_backward(example)
        return example

    def adam_step(example):
        example.optimizer.step([example.delta_omega.grad.flatten()])

    twins = Twins(make)
    example = twins.subject
    checked = gc.capture(lambda: adam_step(example), owners=(example,), on_failure="ignore")
    adam_step(twins.twin)
    for _ in range(2):
        wp.capture_launch(checked.graph)
        adam_step(twins.twin)
    assert ".delta_omega" in twins.differing()  # the graph froze the bias correction of step 2
    assert_caught(checked.report, "scalar-drift", ["t"])

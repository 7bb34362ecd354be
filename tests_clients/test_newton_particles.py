"""Newton particles with SolverXPBD: a particle grid falling on the ground, particle-particle contacts.

``SolverXPBD.step`` rebuilds the model's ``wp.HashGrid`` from ``state_out.particle_q`` inside the
step (``particle_grid.build(..., radius=...)``) and queries it by id in
``solve_particle_particle_contacts``; it also keeps ``self.particle_q_init = wp.clone(...)`` of every
substep, a device temporary its owner still holds when the call ends. The capture site is a
``simulate`` written as Newton's examples write it (four substeps, a state swap each).
"""

import pytest
import warp as wp

import graphcheck as gc

from .twins import Twins, assert_caught, assert_no_finding, bytes_of, replay_against_twin

pytest.importorskip("newton", reason="needs newton: nox -s clients installs it")
import newton


class Particles:
    def __init__(self, substeps: int = 4):
        builder = newton.ModelBuilder()
        builder.add_particle_grid(
            pos=wp.vec3(0.0, 0.0, 0.5),
            rot=wp.quat_identity(),
            vel=wp.vec3(0.0, 0.0, 0.0),
            dim_x=4,
            dim_y=4,
            dim_z=4,
            cell_x=0.11,
            cell_y=0.11,
            cell_z=0.11,
            mass=0.1,
            jitter=0.0,
            radius_mean=0.05,
        )
        builder.add_ground_plane()
        self.model = builder.finalize()
        self.solver = newton.solvers.SolverXPBD(self.model, iterations=2)
        self.state_0, self.state_1 = self.model.state(), self.model.state()
        self.control = self.model.control()
        self.pipeline = newton.CollisionPipeline(self.model)
        self.contacts = self.pipeline.contacts()
        self.substeps, self.dt = substeps, 1.0 / 60.0 / substeps
        self.calls = 0

    def simulate(self):
        self.calls += 1
        for _ in range(self.substeps):
            self.state_0.clear_forces()
            self.pipeline.collide(self.state_0, self.contacts)
            self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.dt)
            self.state_0, self.state_1 = self.state_1, self.state_0


class CohesiveParticles(Particles):
    """Break: the cohesion (so the hash grid's search radius) ramps with a Python call counter."""

    def simulate(self):
        self.model.particle_cohesion = 0.02 * (self.calls + 1)  # the break: neighbours 0.11 apart start to cohere
        super().simulate()


def step(example):
    example.simulate()


def test_the_hash_grid_is_recorded():
    example = Particles()
    example.simulate()
    with gc.trace_launches(include_warp=True) as trace:
        example.simulate()
    assert sum(record.kernel == "hash_grid_update_host" for record in trace) == example.substeps


def test_simulate_replays_right_and_has_no_finding():
    twins = Twins(Particles)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=3) == []
    assert twins.count() > 100
    assert checked.check_replay(on_failure="ignore").ok
    assert_no_finding(checked.report)


def test_an_odd_substep_count_swaps_states_that_a_reset_between_replays_splits():
    # XPBD leaves state_in and state_out equal after each step, so the replay is right while
    # nothing writes them between replays; a reset of state_0 in place (as a program restarting
    # an episode does) changes the one eager stepping reads next, and the replay reads the
    # other: the odd swap is a buffer-drift.
    twins = Twins(lambda: Particles(substeps=3))
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert "buffer-drift" in checked.report.kinds(), str(checked.report)
    assert replay_against_twin(checked, twins, step, replays=2) == []  # alike while nothing writes the states
    for example in (twins.subject, twins.twin):
        example.state_0.particle_q.assign(example.state_0.particle_q.numpy() + 0.01)  # the reset
    assert replay_against_twin_once(checked, twins) != []


def replay_against_twin_once(checked, twins):
    wp.capture_launch(checked.graph)
    step(twins.twin)
    return twins.differing()


def test_a_cohesion_ramp_drifts_the_grid_radius_and_the_kernel():
    twins = Twins(CohesiveParticles)
    checked = gc.capture(twins.subject.simulate, owners=(twins.subject,), on_failure="ignore")
    assert replay_against_twin(checked, twins, step, replays=2) != []
    assert_caught(checked.report, "scalar-drift", ["radius", "k_cohesion"])


def test_particles_reallocated_after_capture_are_a_stale_pointer():
    example = Particles()
    checked = gc.capture(example.simulate, owners=(example,), on_failure="ignore")
    example.state_0.particle_q = wp.clone(example.state_0.particle_q)  # the break: a reset that reallocates
    before = bytes_of(example.state_0.particle_q)
    wp.capture_launch(checked.graph)
    assert bytes_of(example.state_0.particle_q) == before  # the replay moved the old buffer's particles
    assert_caught(checked.check_replay(on_failure="ignore"), "stale-pointer", ["particle_q"])

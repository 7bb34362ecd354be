"""Particles falling through gusting wind and bouncing on the ground, captured into a graph and replayed.

What it demonstrates:

* A replay-safe ``step()``: every buffer is allocated once in ``__init__`` and updated in place by the
  substep loop. The wind gusts with simulation time, and that time lives in a one-element device array
  advanced by a kernel, so each replay of the graph reads the current time instead of a frozen one.
* ``gc.capture(sim.step, owners=(sim,))`` validates the capture site (an eager reference call, the capture,
  launch-by-launch comparison, ownership of every address) and returns a graph whose first launch checks
  that every baked-in address is still a live buffer of ``sim``.
* The replayed frames equal the same frames run eagerly on a fresh simulator.
* ``--show-bug`` (or :func:`unsafe_variant`): the classic mistake, simulation time kept in a Python float and
  passed to the kernel as a scalar. The graph freezes the capture-time value, so replayed wind never changes;
  graphcheck reports ``scalar-drift`` on the kernel argument ``t``.

Run it (from the repository root)::

    PYTHONPATH=. python examples/particles.py --steps 120 --show-bug
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

import graphcheck as gc


@wp.struct
class ParticleParams:
    """Constants of the simulation: fixed for the simulator's life, so safe to bake into a graph."""

    gravity: wp.vec3
    wind: wp.vec3
    gust_frequency: float
    dt: float
    radius: float
    restitution: float
    friction: float


@wp.func
def advance_particle(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), i: int, t: float, p: ParticleParams):
    """Semi-implicit Euler for particle ``i`` at time ``t``, then contact with the ground plane ``y = 0``."""
    pos = x[i]
    # The gust sweeps along x: each particle feels it at its own phase, and the phase advances with time.
    gust = p.wind * (0.5 + 0.5 * wp.sin(p.gust_frequency * t + 0.5 * pos[0]))
    vel = v[i] + (p.gravity + gust) * p.dt
    pos = pos + vel * p.dt
    if pos[1] < p.radius:
        # Project back onto the plane; reflect the normal velocity with restitution, damp the tangential.
        pos = wp.vec3(pos[0], p.radius, pos[2])
        if vel[1] < 0.0:
            keep = 1.0 - p.friction
            vel = wp.vec3(vel[0] * keep, -p.restitution * vel[1], vel[2] * keep)
    x[i] = pos
    v[i] = vel


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    sim_time: wp.array(dtype=float),
    substep: int,
    p: ParticleParams,
):
    """One substep, reading the frame's start time from the device (``substep`` is the loop index)."""
    i = wp.tid()
    # The substep index is the same at the same launch of every call, so it is safe as a scalar.
    advance_particle(x, v, i, sim_time[0] + float(substep) * p.dt, p)


@wp.kernel
def advance_time(sim_time: wp.array(dtype=float), frame_dt: float):
    """Advance the device-side clock by one frame; inside the graph, so every replay moves it."""
    sim_time[0] = sim_time[0] + frame_dt


@wp.kernel
def integrate_at(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), t: float, p: ParticleParams):
    """The unsafe variant's substep: the time comes from the host, as a scalar the graph freezes."""
    i = wp.tid()
    advance_particle(x, v, i, t, p)


class Particles:
    """A block of particles dropped onto the ground through gusting wind.

    Args:
        count: the number of particles.
        device: the Warp device (None: Warp's default device).
        substeps: substeps per frame.
        fps: frames per second (one ``step()`` is one frame).
        seed: seed of the initial jitter (numpy, on the host, once).
    """

    def __init__(
        self, count: int = 2048, device: str | None = None, substeps: int = 4, fps: float = 60.0, seed: int = 7
    ) -> None:
        self.device = str(wp.get_device(device))
        self.count = count
        self.substeps = substeps
        self.frame_dt = 1.0 / fps
        self.params = ParticleParams()
        self.params.gravity = wp.vec3(0.0, -9.81, 0.0)
        self.params.wind = wp.vec3(6.0, 0.0, 1.5)
        self.params.gust_frequency = 4.0
        self.params.dt = self.frame_dt / substeps
        self.params.radius = 0.02
        self.params.restitution = 0.6
        self.params.friction = 0.05

        # The initial state is kept on the host so reset() can write it back in place.
        rng = np.random.default_rng(seed)
        side = int(np.ceil(count ** (1.0 / 3.0)))
        grid = np.stack(np.meshgrid(*(np.arange(side),) * 3, indexing="ij"), axis=-1).reshape(-1, 3)[:count]
        self._x0 = (grid * 0.05 + np.array([0.0, 1.0, 0.0]) + rng.uniform(-0.01, 0.01, (count, 3))).astype(np.float32)
        self._v0 = rng.normal(0.0, 0.2, (count, 3)).astype(np.float32)

        # Allocated once: a graph bakes in these addresses, so they must outlive every replay.
        self.x = wp.array(self._x0, dtype=wp.vec3, device=self.device)
        self.v = wp.array(self._v0, dtype=wp.vec3, device=self.device)
        self.sim_time = wp.zeros(1, dtype=float, device=self.device)

    def step(self) -> None:
        """Advance one frame: ``substeps`` in-place integrations, then the device clock."""
        for substep in range(self.substeps):
            wp.launch(
                integrate,
                dim=self.count,
                inputs=[self.x, self.v, self.sim_time, substep, self.params],
                device=self.device,
            )
        wp.launch(advance_time, dim=1, inputs=[self.sim_time, self.frame_dt], device=self.device)

    def reset(self) -> None:
        """Write the initial state back into the same buffers (in place, so a captured graph stays valid)."""
        self.x.assign(self._x0)
        self.v.assign(self._v0)
        self.sim_time.zero_()


class HostTimeParticles(Particles):
    """The unsafe variant: simulation time kept in a Python float and passed to each launch as a scalar."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.time = 0.0

    def step(self) -> None:
        """Advance one frame; ``self.time`` is read on the host, so a graph replays its capture-time value."""
        for substep in range(self.substeps):
            t = self.time + substep * self.params.dt
            wp.launch(integrate_at, dim=self.count, inputs=[self.x, self.v, t, self.params], device=self.device)
        self.time += self.frame_dt

    def reset(self) -> None:
        """Reset the state and the host clock."""
        super().reset()
        self.time = 0.0


@dataclass
class Result:
    """What :func:`main` did: the verdicts and how far the replay was from eager execution."""

    report: gc.Report
    replay_report: gc.Report
    max_error: float
    positions: np.ndarray
    bug: BugDemo | None = None


@dataclass
class BugDemo:
    """The unsafe variant's verdict, and how far its replay drifted from eager execution."""

    report: gc.Report
    divergence: float


def run_eager(sim: Particles, frames: int) -> None:
    """Run ``frames`` frames without a graph."""
    for _ in range(frames):
        sim.step()


def replay_vs_eager(
    sim_type: type[Particles], device: str | None, count: int, frames: int, on_failure: str
) -> tuple[gc.CheckedGraph, np.ndarray, np.ndarray]:
    """Capture ``sim_type().step`` with graphcheck, replay it ``frames`` times, and run a fresh copy eagerly.

    Returns:
        ``(checked, replayed positions, eager positions)``.
    """
    sim = sim_type(count, device=device)
    # The reference call runs one eager frame, then the capture records one (a capture does not execute).
    checked = gc.capture(sim.step, device=sim.device, owners=(sim,), on_failure=on_failure)
    # Start the replay from the initial state, written in place: the graph's buffers are unchanged.
    sim.reset()
    for _ in range(frames):
        checked.launch()  # the first launch checks every baked-in address first
    replayed = sim.x.numpy()

    eager = sim_type(count, device=device)
    run_eager(eager, frames)
    return checked, replayed, eager.x.numpy()


def unsafe_variant(device: str | None = None, count: int = 512, frames: int = 30) -> BugDemo:
    """Validate the host-time variant (``on_failure="ignore"``), print the report, and show the replay drifting.

    Returns:
        The report (``scalar-drift`` on ``t``) and the largest position difference, replay against eager.
    """
    checked, replayed, eager = replay_vs_eager(HostTimeParticles, device, count, frames, on_failure="ignore")
    divergence = float(np.max(np.abs(replayed - eager)))
    print("\n--- unsafe variant: sim time as a Python float ---")
    print(checked.report)
    print(f"replay vs eager after {frames} frames: max |dx| = {divergence:.3g} (the graph's wind never changes)")
    return BugDemo(checked.report, divergence)


def main(argv: Sequence[str] | None = None) -> Result:
    """Validate, capture and replay the particle step; compare with eager frames.

    Args:
        argv: command-line arguments (None: ``sys.argv``).

    Returns:
        The :class:`Result`.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    parser.add_argument("--steps", type=int, default=60, help="frames to replay")
    parser.add_argument("--count", type=int, default=2048, help="number of particles")
    parser.add_argument("--show-bug", action="store_true", help="also validate the unsafe host-time variant")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    checked, replayed, eager = replay_vs_eager(Particles, args.device, args.count, args.steps, on_failure="raise")
    print(checked.report)
    # Same kernels, same order, same inputs: the replay must reproduce the eager frames.
    np.testing.assert_allclose(replayed, eager, rtol=1e-5, atol=1e-6)
    max_error = float(np.max(np.abs(replayed - eager)))
    # After the replays: every address in the graph is still a buffer the simulator owns.
    replay_report = checked.check_replay()
    print(
        f"{args.steps} replayed frames of {args.count} particles match eager execution (max |dx| = {max_error:.3g}); "
        f"mean height {replayed[:, 1].mean():.3f} m; {time.perf_counter() - start:.2f} s"
    )
    bug = unsafe_variant(args.device, min(args.count, 512), args.steps) if args.show_bug else None
    return Result(checked.report, replay_report, max_error, replayed, bug)


if __name__ == "__main__":
    main()

"""A cloth pinned at two corners draping over a sphere: a Jacobi position solver captured into a graph.

What it demonstrates:

* The structure of warp.sim's examples: the state is double-buffered (``state_0`` / ``state_1``) and the
  substep loop swaps the two in Python after every substep. A graph replays the buffers of the call it
  captured, so each call must start and end in the same buffers: with an odd substep count the step swaps
  back and copies the result into place.
* A fixed number of Jacobi iterations per substep, each reading one scratch buffer and writing the other.
  Iterations run in pairs (``p0 -> p1 -> p0``), so no names are rebound and the count never depends on data.
* ``gc.capture(cloth.step, owners=(cloth,))`` validates the site; the replayed frames equal eager frames.
* ``--show-bug`` (or :func:`unsafe_variant`): the same loop with an odd substep count and no swap back. Eager
  calls alternate which buffer holds the state, but the graph always starts from the buffer it captured, so
  replay reads stale state; graphcheck reports ``buffer-drift`` for every launch whose buffers moved.

Run it (from the repository root)::

    PYTHONPATH=. python examples/cloth.py --steps 60 --show-bug
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
class ClothParams:
    """Constants of the solver, fixed for the cloth's life."""

    gravity: wp.vec3
    dt: float
    spacing: float
    stretch_stiffness: float
    shear_stiffness: float
    bend_stiffness: float
    damping: float
    sphere_center: wp.vec3
    sphere_radius: float


@wp.func
def push_out_of_sphere(p: wp.vec3, params: ClothParams) -> wp.vec3:
    """Project a point lying inside the collision sphere (inflated by a small thickness) onto its surface."""
    d = p - params.sphere_center
    length = wp.length(d)
    surface = params.sphere_radius + 0.5 * params.spacing
    if length < surface and length > 1.0e-6:
        return params.sphere_center + d * (surface / length)
    return p


# Warp kernels and functions take positional parameters: PLR0917 does not apply to them.
@wp.func
def distance_correction(
    pi: wp.vec3, pj: wp.vec3, wi: float, wj: float, rest: float, stiffness: float
) -> wp.vec3:
    """The move of particle ``i`` that restores its distance to ``j`` (split by inverse mass)."""
    d = pi - pj
    length = wp.length(d)
    if length < 1.0e-6 or wi + wj == 0.0:
        return wp.vec3(0.0)
    return d * (-stiffness * wi / (wi + wj) * (length - rest) / length)


@wp.kernel
def predict(
    x: wp.array2d(dtype=wp.vec3),
    v: wp.array2d(dtype=wp.vec3),
    inv_mass: wp.array2d(dtype=float),
    params: ClothParams,
    p: wp.array2d(dtype=wp.vec3),
):
    """Explicit prediction under gravity; pinned particles (inverse mass 0) stay put."""
    i, j = wp.tid()
    vel = v[i, j]
    if inv_mass[i, j] > 0.0:
        vel = vel + params.gravity * params.dt
    p[i, j] = x[i, j] + vel * params.dt


@wp.kernel
def jacobi_iteration(
    p_in: wp.array2d(dtype=wp.vec3),
    inv_mass: wp.array2d(dtype=float),
    params: ClothParams,
    p_out: wp.array2d(dtype=wp.vec3),
):
    """One Jacobi sweep over the grid's stretch, shear and bend constraints, then sphere contact.

    Each particle gathers the corrections from its neighbours and writes a new buffer: no atomics, so the
    result does not depend on thread order (eager and replayed frames are bit-identical).
    """
    i, j = wp.tid()
    rows = p_in.shape[0]
    cols = p_in.shape[1]
    pi = p_in[i, j]
    wi = inv_mass[i, j]
    delta = wp.vec3(0.0)
    count = float(0.0)  # noqa: UP018 (a typed constructor: Warp lets the variable change inside loops)
    for di in range(-2, 3):
        for dj in range(-2, 3):
            ni = i + di
            nj = j + dj
            offset = di * di + dj * dj  # 0, 1, 2, 4, 5 or 8
            # Neighbours: stretch (offset 1: 1 cell along a row or column), shear (2: 1 diagonal cell) and bend
            # (4: 2 cells along a row or column); not the particle itself, nor the far cells (5 and 8).
            if ni >= 0 and ni < rows and nj >= 0 and nj < cols and offset > 0 and offset <= 4:
                stiffness = params.stretch_stiffness
                if offset == 2:
                    stiffness = params.shear_stiffness
                elif offset == 4:
                    stiffness = params.bend_stiffness
                rest = params.spacing * wp.sqrt(float(offset))
                delta += distance_correction(pi, p_in[ni, nj], wi, inv_mass[ni, nj], rest, stiffness)
                count += 1.0
    if wi > 0.0:
        # Jacobi averaging: moving by the sum of all corrections would overshoot.
        pi = push_out_of_sphere(pi + delta / count, params)
    p_out[i, j] = pi


@wp.kernel
def update_state(
    x_in: wp.array2d(dtype=wp.vec3),
    p: wp.array2d(dtype=wp.vec3),
    params: ClothParams,
    x_out: wp.array2d(dtype=wp.vec3),
    v_out: wp.array2d(dtype=wp.vec3),
):
    """Velocities from the positions' change (position-based dynamics), with damping."""
    i, j = wp.tid()
    x_out[i, j] = p[i, j]
    v_out[i, j] = (p[i, j] - x_in[i, j]) * (params.damping / params.dt)


class ClothState:
    """Positions and velocities of every particle, on a ``rows x cols`` grid.

    Args:
        x: initial positions, shape ``(rows, cols, 3)``.
        device: the Warp device.
    """

    def __init__(self, x: np.ndarray, device: str) -> None:
        self.x = wp.array(x, dtype=wp.vec3, device=device)
        self.v = wp.zeros(x.shape[:2], dtype=wp.vec3, device=device)


class Cloth:
    """A square cloth, held at two corners, falling onto a sphere.

    Args:
        size: particles along each side.
        device: the Warp device (None: Warp's default device).
        substeps: substeps per frame (any count: an odd one is swapped back at the end of the step).
        iterations: Jacobi iterations per substep (even: they run in pairs).
        fps: frames per second (one ``step()`` is one frame).
    """

    def __init__(
        self, size: int = 24, device: str | None = None, substeps: int = 4, iterations: int = 8, fps: float = 60.0
    ) -> None:
        if iterations % 2:
            raise ValueError(f"iterations={iterations}: use an even count, the Jacobi sweeps run in pairs")
        self.device = str(wp.get_device(device))
        self.shape = (size, size)
        self.substeps = substeps
        self.iterations = iterations
        self.frame_dt = 1.0 / fps
        spacing = 1.0 / (size - 1)
        self.params = ClothParams()
        self.params.gravity = wp.vec3(0.0, -9.81, 0.0)
        self.params.dt = self.frame_dt / substeps
        self.params.spacing = spacing
        self.params.stretch_stiffness = 1.0
        self.params.shear_stiffness = 0.5
        self.params.bend_stiffness = 0.1
        self.params.damping = 0.995
        self.params.sphere_center = wp.vec3(0.5, 0.3, 0.6)
        self.params.sphere_radius = 0.25

        # A horizontal sheet at y = 0.8; the two corners of its first row are pinned.
        ii, jj = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
        self._x0 = np.stack([jj * spacing, np.full(ii.shape, 0.8), ii * spacing], axis=-1).astype(np.float32)
        inv_mass = np.ones(self.shape, dtype=np.float32)
        inv_mass[0, 0] = inv_mass[0, -1] = 0.0

        # Every buffer is allocated here, once: the graph bakes in their addresses.
        self.state_0 = ClothState(self._x0, self.device)
        self.state_1 = ClothState(self._x0, self.device)
        self.inv_mass = wp.array(inv_mass, dtype=float, device=self.device)
        self.p0 = wp.zeros(self.shape, dtype=wp.vec3, device=self.device)
        self.p1 = wp.zeros(self.shape, dtype=wp.vec3, device=self.device)

    def substep(self, state_in: ClothState, state_out: ClothState) -> None:
        """Predict, run the Jacobi iterations, and write the new positions and velocities into ``state_out``."""
        launch = {"dim": self.shape, "device": self.device}
        wp.launch(predict, inputs=[state_in.x, state_in.v, self.inv_mass, self.params], outputs=[self.p0], **launch)
        for _ in range(self.iterations // 2):
            # In pairs, so p0 holds the result and the same buffers are used in every call.
            wp.launch(jacobi_iteration, inputs=[self.p0, self.inv_mass, self.params], outputs=[self.p1], **launch)
            wp.launch(jacobi_iteration, inputs=[self.p1, self.inv_mass, self.params], outputs=[self.p0], **launch)
        wp.launch(update_state, inputs=[state_in.x, self.p0, self.params], outputs=[state_out.x, state_out.v], **launch)

    def step(self) -> None:
        """Advance one frame."""
        for _ in range(self.substeps):
            self.substep(self.state_0, self.state_1)
            # The new state becomes the current one, as in warp.sim's examples.
            self.state_0, self.state_1 = self.state_1, self.state_0
        if self.substeps % 2:
            # After an odd number of swaps state_0 would name the other buffer on every call, while a graph always
            # reads the buffer it captured. Swap back, and copy the result into the buffer every call starts from.
            self.state_0, self.state_1 = self.state_1, self.state_0
            wp.copy(self.state_0.x, self.state_1.x)
            wp.copy(self.state_0.v, self.state_1.v)

    def reset(self) -> None:
        """Write the initial state back into the current state's buffers (in place: a captured graph stays valid)."""
        self.state_0.x.assign(self._x0)
        self.state_0.v.zero_()


class NaiveOddSubstepCloth(Cloth):
    """The unsafe variant: the same loop with an odd substep count and no swap back."""

    def step(self) -> None:
        """Advance one frame, leaving ``state_0`` naming the other buffer after each call."""
        for _ in range(self.substeps):
            self.substep(self.state_0, self.state_1)
            self.state_0, self.state_1 = self.state_1, self.state_0


@dataclass
class BugDemo:
    """The unsafe variant's verdict, and how far its replay drifted from eager execution."""

    report: gc.Report
    divergence: float


@dataclass
class Result:
    """What :func:`main` did: the verdicts and how far the replay was from eager execution."""

    report: gc.Report
    replay_report: gc.Report
    max_error: float
    positions: np.ndarray
    bug: BugDemo | None = None


def replay_vs_eager(
    cloth_type: type[Cloth], frames: int, on_failure: str, **options: Any
) -> tuple[gc.CheckedGraph, np.ndarray, np.ndarray]:
    """Capture ``cloth_type(**options).step``, replay it ``frames`` times, and run a fresh cloth eagerly.

    Returns:
        ``(checked, replayed positions, eager positions)``.
    """
    cloth = cloth_type(**options)
    # The reference call runs one eager frame, then the capture records one (a capture does not execute).
    checked = gc.capture(cloth.step, device=cloth.device, owners=(cloth,), on_failure=on_failure)
    cloth.reset()
    for _ in range(frames):
        checked.launch()
    replayed = cloth.state_0.x.numpy()

    eager = cloth_type(**options)
    for _ in range(frames):
        eager.step()
    return checked, replayed, eager.state_0.x.numpy()


def unsafe_variant(device: str | None = None, size: int = 16, frames: int = 20) -> BugDemo:
    """Validate the odd-substep variant (``on_failure="ignore"``), print the report, and show the replay drifting.

    Returns:
        The report (``buffer-drift``) and the largest position difference, replay against eager.
    """
    checked, replayed, eager = replay_vs_eager(
        NaiveOddSubstepCloth, frames, on_failure="ignore", device=device, size=size, substeps=3
    )
    divergence = float(np.max(np.abs(replayed - eager)))
    print("\n--- unsafe variant: 3 substeps, state buffers swapped an odd number of times per call ---")
    print(checked.report)
    print(f"replay vs eager after {frames} frames: max |dx| = {divergence:.3g} (each replay starts from stale state)")
    return BugDemo(checked.report, divergence)


def main(argv: Sequence[str] | None = None) -> Result:
    """Validate, capture and replay the cloth step; compare with eager frames.

    Args:
        argv: command-line arguments (None: ``sys.argv``).

    Returns:
        The :class:`Result`.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    parser.add_argument("--steps", type=int, default=60, help="frames to replay")
    parser.add_argument("--size", type=int, default=24, help="particles along each side of the cloth")
    parser.add_argument("--substeps", type=int, default=4, help="substeps per frame")
    parser.add_argument("--iterations", type=int, default=8, help="Jacobi iterations per substep (even)")
    parser.add_argument("--show-bug", action="store_true", help="also validate the unsafe odd-substep variant")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    options = {"device": args.device, "size": args.size, "substeps": args.substeps, "iterations": args.iterations}
    checked, replayed, eager = replay_vs_eager(Cloth, args.steps, on_failure="raise", **options)
    print(checked.report)
    np.testing.assert_allclose(replayed, eager, rtol=1e-5, atol=1e-6)
    max_error = float(np.max(np.abs(replayed - eager)))
    replay_report = checked.check_replay()
    print(
        f"{args.steps} replayed frames of a {args.size}x{args.size} cloth match eager execution "
        f"(max |dx| = {max_error:.3g}); lowest point y = {replayed[..., 1].min():.3f}; "
        f"{time.perf_counter() - start:.2f} s"
    )
    bug = unsafe_variant(args.device, min(args.size, 16), args.steps) if args.show_bug else None
    return Result(checked.report, replay_report, max_error, replayed, bug)


if __name__ == "__main__":
    main()

"""The producer behind ``graphcheck demo``: a small particle simulation, with and without
the two most common capture bugs.

The planted bugs:

- the wind is driven by a Python frame counter passed to the kernel as a scalar: the
  graph freezes it at its capture-time value;
- a random gust is drawn on the host with numpy and uploaded with ``wp.array`` inside
  ``step``: the graph never uploads a new draw (it replays the capture-time gust).

The fixed version keeps the frame counter in a device array advanced by a kernel, and
draws its gusts from a table uploaded once, indexed by that counter. Both allocate their
drag scratch buffer with ``wp.zeros`` inside ``step``: that is fine, Warp makes memory
allocated during a capture graph-owned.
"""

from __future__ import annotations

import numpy as np
import warp as wp


@wp.kernel
def _wind(v: wp.array(dtype=wp.vec3), frame: int, strength: float):
    i = wp.tid()
    phase = float(frame) * 0.05
    v[i] = v[i] + wp.vec3(wp.sin(phase) * strength, 0.0, 0.0)


@wp.kernel
def _wind_from_device(v: wp.array(dtype=wp.vec3), frame: wp.array(dtype=int), strength: float):
    i = wp.tid()
    phase = float(frame[0]) * 0.05
    v[i] = v[i] + wp.vec3(wp.sin(phase) * strength, 0.0, 0.0)


@wp.kernel
def _advance_frame(frame: wp.array(dtype=int)):
    frame[0] = frame[0] + 1


@wp.kernel
def _gust(v: wp.array[wp.vec3], gust: wp.array[wp.vec3]):
    i = wp.tid()
    v[i] = v[i] + gust[0]


@wp.kernel
def _gust_from_table(v: wp.array[wp.vec3], table: wp.array[wp.vec3], frame: wp.array[int]):
    i = wp.tid()
    v[i] = v[i] + table[frame[0] % table.shape[0]]


@wp.kernel
def _drag(v: wp.array(dtype=wp.vec3), scratch: wp.array(dtype=wp.vec3), k: float):
    i = wp.tid()
    scratch[i] = v[i] * k


@wp.kernel
def _integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), drag: wp.array(dtype=wp.vec3), dt: float):
    i = wp.tid()
    vel = v[i] - drag[i] + wp.vec3(0.0, -9.8, 0.0) * dt
    pos = x[i] + vel * dt
    if pos[1] < 0.0:
        pos = wp.vec3(pos[0], 0.0, pos[2])
        vel = wp.vec3(vel[0], -0.5 * vel[1], vel[2])
    x[i] = pos
    v[i] = vel


class Particles:
    """A falling cloud of particles with wind and drag.

    Args:
        device: where it runs.
        fixed: False for the version with the two planted bugs.
        count: how many particles.
    """

    def __init__(self, device: str | None = None, fixed: bool = True, count: int = 1024) -> None:
        self.device = str(wp.get_device(device))
        self.fixed = fixed
        self.count = count
        self.dt = 1.0 / 60.0
        points = [(float(i % 32), 2.0 + float(i // 32) * 0.1, 0.0) for i in range(count)]
        self.x = wp.array(points, dtype=wp.vec3, device=self.device)
        self.v = wp.zeros(count, dtype=wp.vec3, device=self.device)
        self.frame_on_host = 0
        self.frame = wp.zeros(1, dtype=int, device=self.device)
        self.rng = np.random.default_rng(7)
        gusts = self.rng.normal(0.0, 0.01, size=(256, 3)).astype(np.float32)
        self.gusts = wp.array(gusts, dtype=wp.vec3, device=self.device) if fixed else None

    def step(self) -> None:
        """Advance one frame."""
        if self.fixed:
            wp.launch(_wind_from_device, dim=self.count, inputs=[self.v, self.frame, 0.1], device=self.device)
            wp.launch(_gust_from_table, dim=self.count, inputs=[self.v, self.gusts, self.frame], device=self.device)
            wp.launch(_advance_frame, dim=1, inputs=[self.frame], device=self.device)
        else:
            self.frame_on_host += 1
            wp.launch(_wind, dim=self.count, inputs=[self.v, self.frame_on_host, 0.1], device=self.device)
            gust = wp.array(
                self.rng.normal(0.0, 0.01, size=(1, 3)).astype(np.float32), dtype=wp.vec3, device=self.device
            )
            wp.launch(_gust, dim=self.count, inputs=[self.v, gust], device=self.device)
        scratch = wp.zeros(self.count, dtype=wp.vec3, device=self.device)  # graph-owned: fine
        wp.launch(_drag, dim=self.count, inputs=[self.v, scratch, 0.01], device=self.device)
        wp.launch(_integrate, dim=self.count, inputs=[self.x, self.v, scratch, self.dt], device=self.device)

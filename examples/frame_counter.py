"""A plain Warp program with a capture bug: its step passes a Python frame counter to a kernel.

The graph bakes the counter's value at capture, so every replay blows the gust of one frame,
while stepping eagerly would advance it. The program imports nothing of graphcheck:

    python examples/frame_counter.py                             # runs it
    graphcheck run examples/frame_counter.py                     # guarded, NOT compared: no finding
    graphcheck run --reference-call examples/frame_counter.py    # compared: scalar-drift on 'frame'

``graphcheck run`` checks each capture for buffers made during it, buffers no owner holds and,
before each replay, stale addresses; only ``--reference-call`` compares the capture with an
eager call of its block, which finds the frozen counter.
"""

import argparse

import warp as wp

N = 1024


@wp.kernel
def gust(v: wp.array(dtype=wp.vec3), frame: int, dt: float):
    i = wp.tid()
    v[i] = v[i] + wp.vec3(wp.sin(0.1 * float(frame)), 0.0, 0.0) * dt


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


class Particles:
    def __init__(self):
        self.x = wp.zeros(N, dtype=wp.vec3)
        self.v = wp.zeros(N, dtype=wp.vec3)
        self.frame = 0
        self.dt = 1.0 / 60.0

    def step(self):
        wp.launch(gust, dim=N, inputs=[self.v, self.frame, self.dt])  # the bug: a replay keeps this frame
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, self.dt])
        self.frame += 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="the Warp device (default: Warp's default device)")
    parser.add_argument("--frames", type=int, default=100, help="frames to replay")
    args = parser.parse_args()
    wp.config.log_level = wp.LOG_WARNING  # no start-up banner
    with wp.ScopedDevice(args.device):
        sim = Particles()
        sim.step()  # warm up before capturing, as Warp advises
        with wp.ScopedCapture() as capture:
            sim.step()
        for _ in range(args.frames):
            wp.capture_launch(capture.graph)
        print(f"replayed {args.frames} frames")

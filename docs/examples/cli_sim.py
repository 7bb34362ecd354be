"""A Warp program with a capture bug, for the command-line page.

    graphcheck run cli_sim.py            # runs it unchanged, every capture guarded
    graphcheck check cli_sim:make_sim    # validates Sim.step with a reference call
"""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no start-up banner

N = 64


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def blend(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = 0.5 * (a[i] + b[i])


class Sim:
    def __init__(self, device=None):
        self.device = device
        self.x = wp.ones(N, dtype=float, device=device)
        self.v = wp.ones(N, dtype=float, device=device)

    def step(self):
        noise = np.random.default_rng().random(N, dtype=np.float32)  # new host data every call
        jitter = wp.array(noise, dtype=float, device=self.device)  # uploaded in the call
        wp.launch(square, dim=N, inputs=[self.x, jitter], device=self.device)
        wp.launch(blend, dim=N, inputs=[jitter, self.v, self.x], device=self.device)


def make_sim(device=None):
    return Sim(device)


if __name__ == "__main__":
    sim = Sim()
    sim.step()  # warm up: load the module before capturing
    with wp.ScopedCapture() as capture:
        sim.step()
    for _ in range(10):
        wp.capture_launch(capture.graph)
    print("simulated 10 frames")

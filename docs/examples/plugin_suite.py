"""graphcheck's pytest plugin in a user's test suite (run: pytest docs/examples/plugin_suite.py)."""

import numpy as np
import pytest
import warp as wp

N = 64


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


class Sim:
    def __init__(self, device=None):
        self.x = wp.zeros(N, dtype=float, device=device)
        self.v = wp.ones(N, dtype=float, device=device)

    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01], device=self.x.device)


def test_step_is_replay_safe(graphcheck):
    sim = Sim(device=graphcheck.device)
    checked = graphcheck.validate(sim.step, owners=(sim,))  # raises GraphCheckError if unsafe
    checked.launch()


@pytest.mark.graphcheck
def test_training_loop():
    sim = Sim()
    sim.step()
    with wp.ScopedCapture() as capture:  # guarded: no per-call allocations, no foreign buffers
        sim.step()
        host = wp.array(np.linspace(0.0, 1.0, N, dtype=np.float32))  # host data uploaded in the call
        wp.launch(square, dim=N, inputs=[host, sim.x])
    wp.capture_launch(capture.graph)

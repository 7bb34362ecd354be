"""replay-divergence: two overloads of one generic kernel in one CPU capture."""

from typing import Any

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 4


@wp.kernel
def add_one(x: wp.array(dtype=Any)):  # generic: Warp builds one overload per dtype
    i = wp.tid()
    x[i] = x[i] + x.dtype(1)


class Sim:
    def __init__(self, device=None):
        self.single = wp.zeros(N, dtype=wp.float32, device=device)
        self.double = wp.zeros(N, dtype=wp.float64, device=device)

    def step(self):
        wp.launch(add_one, dim=N, inputs=[self.single])  # the float32 overload
        wp.launch(add_one, dim=N, inputs=[self.double])  # the float64 overload


# -- the fix


@wp.kernel
def add_one_single(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.kernel
def add_one_double(x: wp.array(dtype=wp.float64)):
    i = wp.tid()
    x[i] = x[i] + wp.float64(1.0)


class FixedSim(Sim):
    def step(self):
        wp.launch(add_one_single, dim=N, inputs=[self.single])  # one kernel per dtype
        wp.launch(add_one_double, dim=N, inputs=[self.double])


if __name__ == "__main__":
    sim = Sim()
    print(gc.capture(sim.step, on_failure="ignore").report)  # every launch, address and scalar matches
    print()

    try:
        gc.verify_replay(Sim, steps=4)
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    report = gc.verify_replay(FixedSim, steps=4)
    print(report)

"""dim-drift: the number of active particles is the launch dimension, and it grows."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def move(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] + 1.0


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.active = 8

    def step(self):
        self.active = min(self.active + 8, N)  # particles are emitted each call
        wp.launch(move, dim=self.active, inputs=[self.x])


# -- the fix


@wp.kernel
def move_active(x: wp.array(dtype=float), active: wp.array(dtype=int)):
    i = wp.tid()
    if i >= active[0]:
        return
    x[i] = x[i] + 1.0


@wp.kernel
def emit(active: wp.array(dtype=int), capacity: int):
    active[0] = wp.min(2 * active[0], capacity)


class FixedSim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.active = wp.array([8], dtype=int)  # the count lives on the device

    def step(self):
        wp.launch(emit, dim=1, inputs=[self.active, N])
        wp.launch(move_active, dim=N, inputs=[self.x, self.active])  # always the capacity


if __name__ == "__main__":
    sim = Sim()
    try:
        gc.capture(sim.step, owners=(sim,))
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    fixed = FixedSim()
    checked = gc.capture(fixed.step, owners=(fixed,))
    print(checked.report)
    print()
    checked.launch()

    # Intentional: the captured size is the one wanted from now on.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,), allow=[gc.Allow("dim-drift", kernel="move")])
    print(checked.report)

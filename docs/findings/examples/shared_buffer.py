"""shared-buffer: scratch memory from a module-level cache, one buffer for every producer."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64

_CACHE = {}  # size -> buffer, shared by every Sim in the process


def accumulator(n):
    if n not in _CACHE:
        _CACHE[n] = wp.zeros(n, dtype=float)
    return _CACHE[n]


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


@wp.kernel
def accumulate(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    total[i] = total[i] + x[i]


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)
        self.total = accumulator(N)  # held by the Sim, but the same buffer for every Sim

    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])
        wp.launch(accumulate, dim=N, inputs=[self.x, self.total])


# -- the fix


class FixedSim(Sim):
    def __init__(self):
        super().__init__()
        self.total = wp.zeros(N, dtype=float)  # each Sim owns its buffer


if __name__ == "__main__":
    sim = Sim()
    print(gc.capture(sim.step, owners=(sim,)).report)  # one producer alone is fine
    print()

    try:
        gc.check_producer(Sim, calls=3)
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    print(gc.check_producer(FixedSim, calls=3))

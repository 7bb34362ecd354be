"""foreign-buffer: scratch memory shared through a module global."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64

SCRATCH = {}  # shared by every Sim in the process


def scratch_for(n):
    if n not in SCRATCH:
        SCRATCH[n] = wp.zeros(n, dtype=float)
    return SCRATCH[n]


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def blend(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = 0.5 * (a[i] + b[i])


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)

    def step(self):
        scratch = scratch_for(N)
        wp.launch(square, dim=N, inputs=[self.x, scratch])
        wp.launch(blend, dim=N, inputs=[scratch, self.v, self.x])


# -- the fix


class FixedSim(Sim):
    def __init__(self):
        super().__init__()
        self.scratch = wp.zeros(N, dtype=float)  # each Sim owns its scratch

    def step(self):
        wp.launch(square, dim=N, inputs=[self.x, self.scratch])
        wp.launch(blend, dim=N, inputs=[self.scratch, self.v, self.x])


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

    # Intentional: the sharing is by design, so say who owns the shared buffer.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim, SCRATCH))
    print(checked.report)

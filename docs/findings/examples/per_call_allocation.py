"""per-call-allocation: scratch memory allocated with wp.zeros inside the captured call."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

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
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)

    def step(self):
        scratch = wp.zeros(N, dtype=float)  # a new buffer every call
        wp.launch(square, dim=N, inputs=[self.x, scratch])
        wp.launch(blend, dim=N, inputs=[scratch, self.v, self.x])


# -- the fix


class FixedSim(Sim):
    def __init__(self):
        super().__init__()
        self.scratch = wp.zeros(N, dtype=float)  # allocated once, owned by the producer

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

    # Accepting it is almost never right: the graph keeps the freed buffer's address.
    sim = Sim()
    allow = [gc.Allow("per-call-allocation", kernel="square", arg="y")]
    checked = gc.capture(sim.step, owners=(sim,), allow=allow)
    print(checked.report)

"""capture-error: a reduction read back to the host inside the captured call."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def damp(v: wp.array(dtype=float), factor: float):
    i = wp.tid()
    v[i] = v[i] * factor


class Sim:
    def __init__(self):
        self.x = wp.ones(N, dtype=float)
        self.v = wp.ones(N, dtype=float)

    def step(self):
        total = wp.utils.array_sum(self.x)  # returns a host float: a readback
        wp.launch(damp, dim=N, inputs=[self.v, 1.0 / (1.0 + abs(total))])


# -- the fix


@wp.kernel
def damp_by_total(v: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = v[i] / (1.0 + wp.abs(total[0]))


class FixedSim(Sim):
    def __init__(self):
        super().__init__()
        self.total = wp.zeros(1, dtype=float)

    def step(self):
        wp.utils.array_sum(self.x, out=self.total)  # the sum stays on the device
        wp.launch(damp_by_total, dim=N, inputs=[self.v, self.total])


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

    # Keep running instead of raising: there is no graph to launch.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,), on_failure="log")
    print(checked.graph, checked.ok)

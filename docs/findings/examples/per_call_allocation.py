"""per-call-allocation: host data uploaded with wp.array inside the captured call."""

import numpy as np
import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def push(v: wp.array[float], forces: wp.array[float], scratch: wp.array[float]):
    i = wp.tid()
    scratch[i] = forces[i] * 0.1
    v[i] = v[i] + scratch[i]


class Sim:
    def __init__(self):
        self.v = wp.zeros(N, dtype=float)
        self.rng = np.random.default_rng(0)

    def step(self):
        host = self.rng.normal(size=N).astype(np.float32)  # new host data every call
        forces = wp.array(host, dtype=float)  # uploaded inside the call
        scratch = wp.zeros(N, dtype=float)  # a device temporary: graph-owned, fine
        wp.launch(push, dim=N, inputs=[self.v, forces, scratch])


# -- the fix


class FixedSim(Sim):
    def __init__(self):
        super().__init__()
        self.forces = wp.zeros(N, dtype=float)  # the device buffer the graph reads, owned

    def upload(self):
        """Outside the graph, before each replay: new data into the owned buffer."""
        self.forces.assign(self.rng.normal(size=N).astype(np.float32))

    def step(self):
        scratch = wp.zeros(N, dtype=float)
        wp.launch(push, dim=N, inputs=[self.v, self.forces, scratch])


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
    for _ in range(3):
        fixed.upload()
        checked.launch()

    # Teams that want every buffer owned report device temporaries too:
    strict = gc.capture(fixed.step, owners=(fixed,), strict_ownership=True, on_failure="ignore")
    print(strict.report)

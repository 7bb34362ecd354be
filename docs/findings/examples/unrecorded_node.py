"""unrecorded-node (needs a CUDA device): work Warp did not issue, captured in the block."""

import warp as wp
from cuda.bindings import runtime as cudart

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
DEVICE = "cuda:0"  # the graph cross-check reads CUDA graphs only

N = 1024


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.v = wp.ones(N, dtype=float, device=DEVICE)
        self.force = wp.zeros(N, dtype=float, device=DEVICE)

    def step(self):
        stream = wp.get_stream(DEVICE)
        # Cleared with the CUDA runtime directly: a memset node Warp knows nothing about.
        (err,) = cudart.cudaMemsetAsync(self.force.ptr, 0, self.force.capacity, stream.cuda_stream)
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])


# -- the fix


class FixedSim(Sim):
    def step(self):
        self.force.zero_()  # Warp's own memset: recorded and cross-checked
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])


if __name__ == "__main__":
    sim = Sim()
    try:
        gc.capture(sim.step, device=DEVICE, owners=(sim,))
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    fixed = FixedSim()
    checked = gc.capture(fixed.step, device=DEVICE, owners=(fixed,))
    print(checked.report)
    print()

    # Intentional: this memset is meant to be in the graph, like any work of other libraries.
    sim = Sim()
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), allow_foreign_nodes=True)
    print(checked.report)

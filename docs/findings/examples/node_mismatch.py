"""node-mismatch (needs a CUDA device): a captured kernel node edited inside the block.

Ordinary Warp code does not produce this finding. This example provokes it on purpose,
the way a tool that patches launches behind Warp's back would.
"""

import warp as wp
from cuda.bindings import driver

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
DEVICE = "cuda:0"  # the graph cross-check reads CUDA graphs only

N = 1 << 16


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


def halve_last_launch(stream):
    """Edit the kernel node the stream's capture added last: half the grid."""
    err, status, _, _, deps, *_ = driver.cuStreamGetCaptureInfo(driver.CUstream(stream.cuda_stream))
    err, params = driver.cuGraphKernelNodeGetParams(deps[0])
    params.gridDimX = max(1, params.gridDimX // 2)
    (err,) = driver.cuGraphKernelNodeSetParams(deps[0], params)


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.v = wp.ones(N, dtype=float, device=DEVICE)

    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])
        stream = wp.get_stream(DEVICE)
        if stream.is_capturing:
            halve_last_launch(stream)  # the graph now updates half the particles


# -- the fix


class FixedSim(Sim):
    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])  # leave the node as Warp made it


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

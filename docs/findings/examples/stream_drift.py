"""stream-drift (needs a CUDA device): a launch sent to a side stream on some calls only."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
DEVICE = "cuda:0"  # streams exist on CUDA devices only

N = 1024


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float, device=DEVICE)
        self.v = wp.ones(N, dtype=float, device=DEVICE)
        self.side = wp.Stream(DEVICE)
        self.calls = 0

    def step(self):
        self.calls += 1
        # Every other call, the update goes to a side stream that is not part of the capture.
        stream = self.side if self.calls % 2 == 0 else wp.get_stream(DEVICE)
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01], stream=stream)


# -- the fix


class FixedSim(Sim):
    def step(self):
        main = wp.get_stream(DEVICE)
        self.side.wait_stream(main)  # fork: the side stream joins the capture
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01], stream=self.side)
        main.wait_stream(self.side)  # join it back before the capture ends


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
    checked.launch()

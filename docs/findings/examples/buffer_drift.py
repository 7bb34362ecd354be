"""buffer-drift: ping-pong buffers swapped in Python an odd number of times per call."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def relax(src: wp.array(dtype=float), dst: wp.array(dtype=float)):
    i = wp.tid()
    left = src[wp.max(i - 1, 0)]
    right = src[wp.min(i + 1, N - 1)]
    dst[i] = 0.5 * src[i] + 0.25 * (left + right)


class Sim:
    def __init__(self):
        self.src = wp.zeros(N, dtype=float)
        self.dst = wp.zeros(N, dtype=float)

    def step(self):
        wp.launch(relax, dim=N, inputs=[self.src, self.dst])
        self.src, self.dst = self.dst, self.src  # one swap per call


# -- the fix


class FixedSim(Sim):
    def step(self):
        for _ in range(2):  # an even number of swaps: every call starts from the same buffers
            wp.launch(relax, dim=N, inputs=[self.src, self.dst])
            self.src, self.dst = self.dst, self.src


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

    # Intentional: accept the swap at this one kernel (arg= names any one of the swapped buffers).
    sim = Sim()
    allow = [gc.Allow("buffer-drift", kernel="relax", arg="dst")]
    checked = gc.capture(sim.step, owners=(sim,), allow=allow)
    print(checked.report)

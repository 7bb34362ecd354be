"""scalar-drift: a Python frame counter passed to a kernel by value."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def advance(x: wp.array(dtype=float), frame: int):
    i = wp.tid()
    x[i] = x[i] + 0.1 * float(frame)


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(advance, dim=N, inputs=[self.x, self.frame])  # frozen at capture


# -- the fix


@wp.kernel
def advance_from_device(x: wp.array(dtype=float), frame: wp.array(dtype=int)):
    i = wp.tid()
    x[i] = x[i] + 0.1 * float(frame[0])


@wp.kernel
def next_frame(frame: wp.array(dtype=int)):
    frame[0] = frame[0] + 1


class FixedSim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.frame = wp.zeros(1, dtype=int)  # the counter lives on the device

    def step(self):
        wp.launch(next_frame, dim=1, inputs=[self.frame])
        wp.launch(advance_from_device, dim=N, inputs=[self.x, self.frame])


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

    # Intentional: accept this one argument of this one kernel.
    sim = Sim()
    allow = [gc.Allow("scalar-drift", kernel="advance", arg="frame")]
    checked = gc.capture(sim.step, owners=(sim,), allow=allow)
    print(checked.report)

"""stale-pointer: a buffer the graph uses is replaced after the capture."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)

    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])


if __name__ == "__main__":
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,))  # passes: the site is replay-safe
    sim.v = wp.full(N, 2.0, dtype=float)  # a new buffer; the graph still reads the old one
    try:
        checked.launch()  # checks before it replays
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    # Fixed: change the contents, keep the buffer.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,))
    sim.v.fill_(2.0)  # in place: the same buffer, new contents
    checked.launch()
    print(checked.check_replay())
    print()

    # Intentional (the old buffer is kept alive elsewhere): accept the finding.
    sim = Sim()
    keep = sim.v
    checked = gc.capture(sim.step, owners=(sim,), allow="stale-pointer")
    sim.v = wp.full(N, 2.0, dtype=float)
    checked.launch()  # checked, allowed, and replayed with `keep`
    print(checked.check_replay())

    # Or do not check before replays at all.
    sim = Sim()
    keep = sim.v
    checked = gc.capture(sim.step, owners=(sim,), replay_check="never")
    sim.v = wp.full(N, 2.0, dtype=float)
    checked.launch()  # replays with `keep`, unchecked

"""copy-drift: a copy into a history buffer at an offset that advances each call."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64
SLOTS = 8


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.history = wp.zeros(SLOTS * N, dtype=float)
        self.slot = 0

    def step(self):
        wp.copy(self.history, self.x, dest_offset=self.slot * N, count=N)
        self.slot = (self.slot + 1) % SLOTS


# -- the fix


@wp.kernel
def record(history: wp.array2d(dtype=float), x: wp.array(dtype=float), slot: wp.array(dtype=int)):
    i = wp.tid()
    history[slot[0], i] = x[i]


@wp.kernel
def next_slot(slot: wp.array(dtype=int), slots: int):
    slot[0] = (slot[0] + 1) % slots


class FixedSim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.history = wp.zeros((SLOTS, N), dtype=float)
        self.slot = wp.zeros(1, dtype=int)  # the slot lives on the device

    def step(self):
        wp.launch(record, dim=N, inputs=[self.history, self.x, self.slot])
        wp.launch(next_slot, dim=1, inputs=[self.slot, SLOTS])


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

    # Intentional: every replay is meant to write the captured slot.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,), allow=[gc.Allow("copy-drift", kernel="wp.copy", arg="dest_offset")])
    print(checked.report)

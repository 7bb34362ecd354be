"""Recording without capturing: trace two calls, compare them, check their addresses."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")

N = 64


@wp.kernel
def advance(x: wp.array(dtype=float), v: wp.array(dtype=float), frame: int):
    i = wp.tid()
    x[i] = x[i] + v[i] * 0.1 * float(frame)


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(advance, dim=N, inputs=[self.x, self.v, self.frame])


sim = Sim()
with gc.trace_launches() as first:
    sim.step()
with gc.trace_launches() as second:
    sim.step()

record = first[0]
print(first)
print(record)
print(record.args["frame"], record.args["x"].shape, record.site.short)

owned = gc.buffers_of(sim, root="sim")
print(owned.labels())
print(owned.locate(sim.x.ptr + 8))

gc.assert_pointers_within(first, owned)  # passes: every address is in sim's buffers
try:
    gc.assert_same_topology(first, second, buffers=owned)
except AssertionError as error:
    print(error)

for difference in first.differences(second, buffers=owned):  # the same, as data
    print(difference.what, difference.arg, difference.value_a, difference.value_b, difference.position())

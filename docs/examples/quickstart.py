"""The quickstart's producer: a particle step with two capture bugs, and its fixed version."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner


@wp.kernel
def wind(v: wp.array(dtype=wp.vec3), frame: int):
    i = wp.tid()
    v[i] = v[i] + wp.vec3(0.01 * wp.sin(0.05 * float(frame)), 0.0, 0.0)


@wp.kernel
def drag(v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = 0.01 * v[i]


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), drag: wp.array(dtype=wp.vec3), dt: float
):
    i = wp.tid()
    v[i] = v[i] - drag[i] + wp.vec3(0.0, -9.8, 0.0) * dt
    x[i] = x[i] + v[i] * dt


class Sim:
    def __init__(self, n=1024):
        self.n = n
        self.x = wp.zeros(n, dtype=wp.vec3)
        self.v = wp.zeros(n, dtype=wp.vec3)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(wind, dim=self.n, inputs=[self.v, self.frame])  # bug 1: a host counter
        scratch = wp.zeros(self.n, dtype=wp.vec3)  # bug 2: allocated in the call
        wp.launch(drag, dim=self.n, inputs=[self.v, scratch])
        wp.launch(integrate, dim=self.n, inputs=[self.x, self.v, scratch, 1.0 / 60.0])


# -- the fix


@wp.kernel
def wind_from_device(v: wp.array(dtype=wp.vec3), frame: wp.array(dtype=int)):
    i = wp.tid()
    v[i] = v[i] + wp.vec3(0.01 * wp.sin(0.05 * float(frame[0])), 0.0, 0.0)


@wp.kernel
def next_frame(frame: wp.array(dtype=int)):
    frame[0] = frame[0] + 1


class FixedSim:
    def __init__(self, n=1024):
        self.n = n
        self.x = wp.zeros(n, dtype=wp.vec3)
        self.v = wp.zeros(n, dtype=wp.vec3)
        self.frame = wp.zeros(1, dtype=int)  # fix 1: the counter lives on the device
        self.scratch = wp.zeros(n, dtype=wp.vec3)  # fix 2: allocated once

    def step(self):
        wp.launch(next_frame, dim=1, inputs=[self.frame])
        wp.launch(wind_from_device, dim=self.n, inputs=[self.v, self.frame])
        wp.launch(drag, dim=self.n, inputs=[self.v, self.scratch])
        wp.launch(integrate, dim=self.n, inputs=[self.x, self.v, self.scratch, 1.0 / 60.0])


if __name__ == "__main__":
    sim = Sim()
    try:
        checked = gc.capture(sim.step, owners=(sim,))
    except gc.GraphCheckError as error:
        print(error.report)
    print()

    sim = FixedSim()
    checked = gc.capture(sim.step, owners=(sim,))
    print(checked.report)
    for _ in range(100):
        checked.launch()
    print()

    sim = FixedSim()
    with gc.GraphGuard(device="cpu", reference=sim.step, owners=(sim,)) as guard:
        sim.step()
    print(guard.report)
    for _ in range(100):
        guard.launch()

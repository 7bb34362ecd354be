"""launch-sequence-drift: extra work on every other call, decided by a Python branch."""

import warp as wp

import graphcheck as gc

wp.config.log_level = wp.LOG_WARNING  # no start-up banner
wp.set_device("cpu")  # Warp's CPU device captures real graphs; use "cuda:0" on a GPU

N = 64


@wp.kernel
def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


@wp.kernel
def damp(v: wp.array(dtype=float), factor: float):
    i = wp.tid()
    v[i] = v[i] * factor


class Sim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)
        self.calls = 0

    def step(self):
        self.calls += 1
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])
        if self.calls % 2 == 0:  # decided on the host: the graph bakes in one answer
            wp.launch(damp, dim=N, inputs=[self.v, 0.99])


# -- the fix


@wp.kernel
def damp_on_even_calls(v: wp.array(dtype=float), calls: wp.array(dtype=int), factor: float):
    i = wp.tid()
    if calls[0] % 2 == 0:
        v[i] = v[i] * factor


@wp.kernel
def count_call(calls: wp.array(dtype=int)):
    calls[0] = calls[0] + 1


class FixedSim:
    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)
        self.calls = wp.zeros(1, dtype=int)  # the decision is made on the device

    def step(self):
        wp.launch(count_call, dim=1, inputs=[self.calls])
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])
        wp.launch(damp_on_even_calls, dim=N, inputs=[self.v, self.calls, 0.99])


# -- a loop the data decides: wp.capture_while


@wp.kernel
def flag_fast(v: wp.array(dtype=float), limit: float, fast: wp.array(dtype=int)):
    i = wp.tid()
    if wp.abs(v[i]) > limit:
        fast[0] = 1


class SettleSim:
    """Damps until every velocity is below a limit: the loop runs on the device."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float)
        self.v = wp.ones(N, dtype=float)
        self.fast = wp.zeros(1, dtype=int)  # the loop's condition lives on the device

    def damp_once(self):
        wp.launch(damp, dim=N, inputs=[self.v, 0.5])
        self.fast.zero_()
        wp.launch(flag_fast, dim=N, inputs=[self.v, 0.1, self.fast])

    def step(self):
        wp.launch(integrate, dim=N, inputs=[self.x, self.v, 0.01])
        self.fast.fill_(1)
        wp.capture_while(self.fast, self.damp_once)  # loops while fast[0] != 0


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

    settle = SettleSim()
    checked = gc.capture(settle.step, owners=(settle,))  # the reference call loops 4 times
    print(checked.report)
    print()
    checked.launch()

    # Intentional: the graph is meant to hold the captured call's sequence.
    sim = Sim()
    checked = gc.capture(sim.step, owners=(sim,), allow=[gc.Allow("launch-sequence-drift", kernel="damp")])
    print(checked.report)

"""The fixed library of kernels the generated step programs (tests/generator.py) launch.

Every program composes these, so Warp compiles this module once whatever the programs are.
Each kernel adds to its output: a program's state changes every step, so a replay that
computes other values, or none, shows by values.
"""

import warp as wp


@wp.kernel
def advance(out: wp.array[float], src: wp.array[float], s: float):
    i = wp.tid()
    out[i] = out[i] + 0.5 * src[i] + s


@wp.kernel
def advance_by_device(out: wp.array[float], src: wp.array[float], s: wp.array[float]):
    i = wp.tid()
    out[i] = out[i] + 0.5 * src[i] + s[0]


@wp.kernel
def count_up(counter: wp.array[float]):
    counter[0] = counter[0] + 1.0


@wp.struct
class Knobs:
    dt: float
    src: wp.array[float]


@wp.kernel
def advance_by_struct(out: wp.array[float], k: Knobs):
    i = wp.tid()
    out[i] = out[i] + 0.5 * k.src[i] + k.dt


@wp.kernel
def churn(a: wp.array[float]):
    i = wp.tid()
    a[i] = a[i] + 0.25


@wp.kernel
def ping(b: wp.array[float], a: wp.array[float]):
    # Not symmetric in a and b with the kernels above: which buffer plays which part shows.
    i = wp.tid()
    b[i] = 0.75 * b[i] + 0.5 * a[i] + 0.25

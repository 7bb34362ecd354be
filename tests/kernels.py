"""Kernels and structs the tests launch.

They live in one module on purpose: Warp compiles a module's kernels together, so the
whole suite pays for one CPU compile of these. Most are annotated ``wp.array[float]``,
the style most Warp code uses; a few keep ``wp.array(dtype=float)``: both must decode
alike.
"""

import warp as wp


@wp.struct
class Params:
    gravity: wp.vec3
    dt: float
    scratch: wp.array(dtype=float)


@wp.kernel
def scale(a: wp.array[float], b: wp.array[float], s: float, n: int):
    i = wp.tid()
    a[i] = b[i] * s + float(n)


@wp.kernel
def add_one(a: wp.array[float]):
    i = wp.tid()
    a[i] = a[i] + 1.0


@wp.kernel
def axpy(x: wp.array[float], y: wp.array[float], alpha: float):
    i = wp.tid()
    y[i] = y[i] + alpha * x[i]


@wp.kernel
def with_struct(out: wp.array(dtype=float), p: Params):
    i = wp.tid()
    out[i] = p.dt + p.scratch[i] + p.gravity[1]


@wp.kernel
def add_struct(out: wp.array(dtype=float), p: Params):
    # with_struct, adding to out: a producer proved safe by values changes its state every step.
    i = wp.tid()
    out[i] = out[i] + p.dt + p.scratch[i] + p.gravity[1]


@wp.kernel
def echo(
    out: wp.array(dtype=float),
    f: float,
    i: int,
    v: wp.vec3,
    m: wp.mat22,
    d: wp.float64,
    h: wp.float16,
    b: bool,
    p: Params,
):
    # Writes back what it received, to compare with what was recorded.
    out[0] = f
    out[1] = float(i)
    out[2] = v[0]
    out[3] = v[1]
    out[4] = v[2]
    out[5] = m[0, 1]
    out[6] = m[1, 0]
    out[7] = float(d)
    out[8] = float(h)
    out[9] = wp.where(b, 1.0, 0.0)
    out[10] = p.dt
    out[11] = p.gravity[1]


@wp.kernel
def tiled_sum(a: wp.array2d(dtype=float), out: wp.array[float]):
    i, lane = wp.tid()
    wp.atomic_add(out, i, a[i, lane])


@wp.kernel
def square(x: wp.array[float], y: wp.array[float]):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def counter_step(state: wp.array[float], step: int):
    i = wp.tid()
    state[i] = state[i] + float(step)


@wp.kernel
def device_counter(counter: wp.array[int], state: wp.array[float]):
    i = wp.tid()
    state[i] = state[i] + float(counter[0])
    if i == 0:
        counter[0] = counter[0] + 1


@wp.kernel
def nan_scale(a: wp.array[float], s: float):
    i = wp.tid()
    a[i] = wp.where(wp.isnan(s), a[i], a[i] * s)


@wp.kernel
def copy_kernel(src: wp.array[float], dst: wp.array[float]):
    i = wp.tid()
    dst[i] = src[i]


@wp.kernel
def decrement(residual: wp.array(dtype=float)):
    residual[0] = residual[0] - 1.0


@wp.kernel
def integrate(x: wp.array[float], v: wp.array[float], dt: float):
    i = wp.tid()
    x[i] = x[i] + v[i] * dt


@wp.kernel
def damp(v: wp.array(dtype=float), factor: float):
    i = wp.tid()
    v[i] = v[i] * factor


@wp.kernel
def blend(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = 0.5 * (a[i] + b[i])


@wp.kernel
def bump(count: wp.array[int]):
    count[0] = count[0] + 4


@wp.kernel
def decrement_int(counter: wp.array[int]):
    counter[0] = counter[0] - 1


@wp.kernel
def jitter_points(points: wp.array[wp.vec3]):
    i = wp.tid()
    points[i] = points[i] + wp.vec3(0.01, 0.0, 0.0)


@wp.kernel
def count_neighbors(grid: wp.uint64, points: wp.array[wp.vec3], counts: wp.array[float]):
    i = wp.tid()
    query = wp.hash_grid_query(grid, points[i], 0.25)
    n = wp.float32(0.0)  # a dynamic variable: the loop adds to it
    for _ in query:
        n += 1.0
    counts[i] = n


@wp.kernel
def add_one_tiled(a: wp.array[float]):
    i, _lane = wp.tid()
    a[i] = a[i] + 1.0

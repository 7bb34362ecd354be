"""Kernels, functions and structs the judgements (tests/test_judgements.py) launch.

One module, so Warp compiles them together once. They cover what tests/kernels.py does
not: generic kernels with declared overloads, kernels calling ``wp.func``, nested structs,
arrays of structs, a tiled kernel and a differentiable one.

Each adds to its output, and reads every value it is given: a judgement's state changes
every step, so a replay that computes other values, or none, shows by values.
"""

from typing import Any

import warp as wp

from tests.matrix_kernels import VALUE_TYPES


@wp.func
def doubled(x: float):
    return 2.0 * x


@wp.kernel
def with_func(a: wp.array[float], s: float):
    i = wp.tid()
    a[i] = doubled(a[i]) * s


@wp.kernel
def generic_scale(a: wp.array(dtype=Any), s: Any):
    i = wp.tid()
    a[i] = a[i] * s


wp.overload(generic_scale, {"a": wp.array[float], "s": float})
wp.overload(generic_scale, {"a": wp.array[wp.vec3], "s": float})
wp.overload(generic_scale, {"a": wp.array[wp.float64], "s": wp.float64})


@wp.struct
class Leaf:
    data: wp.array[float]
    k: float


@wp.struct
class Branch:
    leaf: Leaf
    scale: float
    count: int


@wp.kernel
def nested(out: wp.array[float], b: Branch):
    i = wp.tid()
    out[i] = out[i] + b.leaf.data[i] * b.leaf.k * b.scale + float(b.count)


@wp.struct
class Particle:
    pos: wp.vec3
    mass: float


@wp.kernel
def move_particles(ps: wp.array[Particle], dt: float):
    i = wp.tid()
    p = ps[i]
    p.pos = p.pos + wp.vec3(dt, 0.0, 0.0) * (p.mass + 1.0)
    ps[i] = p


@wp.kernel
def tile_copy(a: wp.array2d[float], b: wp.array2d[float]):
    i, lane = wp.tid()
    b[i, lane] = b[i, lane] + a[i, lane] + 1.0


@wp.kernel
def sum_squares(x: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


@wp.kernel
def add_vec(a: wp.array[wp.vec3], v: wp.vec3):
    i = wp.tid()
    a[i] = a[i] + v


@wp.kernel
def add_2d(a: wp.array2d[float], s: float):
    i, j = wp.tid()
    a[i, j] = a[i, j] + s


@wp.kernel
def add_indexed(a: wp.indexedarray[float]):
    i = wp.tid()
    a[i] = a[i] + 1.0


@wp.kernel
def deform(points: wp.array[wp.vec3], t: float):
    i = wp.tid()
    points[i] = points[i] * (1.0 + t)


@wp.kernel
def int_to_float(src: wp.array[int], dst: wp.array[float]):
    i = wp.tid()
    dst[i] = float(src[i])


@wp.kernel
def ignore_first(a: wp.array[float], out: wp.array[float]):
    # ``a`` may be empty or None: it is passed, never read.
    i = wp.tid()
    out[i] = out[i] + 1.0


@wp.kernel
def closest_distance(mesh: wp.uint64, points: wp.array[wp.vec3], out: wp.array[float]):
    i = wp.tid()
    q = wp.mesh_query_point(mesh, points[i], 10.0)
    d = -1.0
    if q.result:
        d = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - points[i])
    out[i] = out[i] + d


@wp.kernel
def fabric_add(a: wp.fabricarray[float], out: wp.array[float]):
    i = wp.tid()
    out[i] = out[i] + a[i]


@wp.struct
class Scene:
    mesh: wp.uint64
    radius: float


@wp.kernel
def scene_distance(scene: Scene, points: wp.array[wp.vec3], out: wp.array[float]):
    i = wp.tid()
    q = wp.mesh_query_point(scene.mesh, points[i], scene.radius)
    d = -1.0
    if q.result:
        d = wp.length(wp.mesh_eval_position(scene.mesh, q.face, q.u, q.v) - points[i])
    out[i] = out[i] + d


@wp.kernel
def bvh_count(bvh: wp.uint64, lower: wp.vec3, upper: wp.vec3, out: wp.array[float]):
    query = wp.bvh_query_aabb(bvh, lower, upper)
    n = wp.float32(0.0)  # dynamic variables: the loop changes them
    index = wp.int32(0)
    while wp.bvh_query_next(query, index):
        n += 1.0
    out[0] = out[0] + n


@wp.kernel
def particles_into(ps: wp.array[Particle], out: wp.array[float]):
    i = wp.tid()
    out[i] = out[i] + ps[i].pos[0]


@wp.kernel
def scale_add(a: wp.array[float], b: wp.array[float], s: float, n: int):
    # tests.kernels.scale, adding to ``a``: its parameters, and so the findings' names, are scale's.
    i = wp.tid()
    a[i] = a[i] + b[i] * s + float(n)


@wp.kernel
def add_one_int(a: wp.array[int]):
    i = wp.tid()
    a[i] = a[i] + 1


@wp.kernel
def count_neighbors_into(grid: wp.uint64, points: wp.array[wp.vec3], counts: wp.array[float]):
    i = wp.tid()
    query = wp.hash_grid_query(grid, points[i], 0.25)
    n = wp.float32(0.0)  # a dynamic variable: the loop adds to it
    for _ in query:
        n += 1.0
    counts[i] = counts[i] + n


# A host value of each type a kernel takes, read and added to ``out``: a scalar, a bool, the
# first component of a vector (quaternions, transforms and spatial vectors too), or the first
# element of a matrix.
@wp.kernel
def add_scalar_value(out: wp.array[float], v: Any):
    out[0] = out[0] + 1.0 + float(v)


@wp.kernel
def add_bool_value(out: wp.array[float], v: Any):
    out[0] = out[0] + wp.where(v, 2.0, 1.0)


@wp.kernel
def add_vector_value(out: wp.array[float], v: Any):
    out[0] = out[0] + 1.0 + float(v[0])


@wp.kernel
def add_matrix_value(out: wp.array[float], v: Any):
    out[0] = out[0] + 1.0 + float(v[0, 0])


def add_value(dtype):
    """The kernel of ``add_*_value`` that reads a value of ``dtype``."""
    shape = getattr(dtype, "_shape_", ())
    if dtype is wp.bool:
        return add_bool_value
    return (add_scalar_value, add_vector_value, add_matrix_value)[len(shape)]


for _dtype in VALUE_TYPES.values():
    wp.overload(add_value(_dtype), {"out": wp.array[float], "v": _dtype})

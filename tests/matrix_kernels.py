"""Kernels for the argument-type matrix (tests/test_matrix.py).

Every Warp value type reaches a kernel through one generic kernel whose overloads are
declared here, so Warp builds them all in one compile. Arrays come in both annotation
syntaxes (``wp.array(dtype=float, ndim=2)`` and ``wp.array2d[float]``), every rank, and
indexed; a struct carries a field of each value type and arrays in both syntaxes.
"""

from typing import Any

import warp as wp

#: Every value type a kernel argument can have, with two distinct values of it.
VALUE_TYPES = {
    "int8": wp.int8,
    "uint8": wp.uint8,
    "int16": wp.int16,
    "uint16": wp.uint16,
    "int32": wp.int32,
    "uint32": wp.uint32,
    "int64": wp.int64,
    "uint64": wp.uint64,
    "float16": wp.float16,
    "bfloat16": wp.bfloat16,
    "float32": wp.float32,
    "float64": wp.float64,
    "bool": wp.bool,
    "vec2": wp.vec2,
    "vec3": wp.vec3,
    "vec4": wp.vec4,
    "vec3d": wp.vec3d,
    "vec3h": wp.vec3h,
    "vec3i": wp.vec3i,
    "vec3ub": wp.vec3ub,
    "mat22": wp.mat22,
    "mat33": wp.mat33,
    "mat44": wp.mat44,
    "mat33d": wp.mat33d,
    "mat22h": wp.mat22h,
    "quat": wp.quat,
    "quatd": wp.quatd,
    "quath": wp.quath,
    "transform": wp.transform,
    "transformd": wp.transformd,
    "spatial_vector": wp.spatial_vector,
    "spatial_matrix": wp.spatial_matrix,
}


@wp.kernel
def value_arg(out: wp.array[float], v: Any):
    out[0] = 1.0


for _dtype in VALUE_TYPES.values():
    wp.overload(value_arg, {"out": wp.array[float], "v": _dtype})


@wp.struct
class Inner:
    k: wp.int32
    data: wp.array[float]


@wp.struct
class AllFields:
    f_int8: wp.int8
    f_uint16: wp.uint16
    f_int64: wp.int64
    f_uint64: wp.uint64
    f_float16: wp.float16
    f_float32: float
    f_float64: wp.float64
    f_bool: wp.bool
    f_vec3: wp.vec3
    f_vec3h: wp.vec3h
    f_mat33: wp.mat33
    f_quat: wp.quat
    f_transform: wp.transform
    f_spatial: wp.spatial_vector
    a_new: wp.array[float]
    a_new2d: wp.array2d[wp.vec3]
    a_old: wp.array(dtype=float)
    a_old3d: wp.array(dtype=wp.vec3, ndim=3)
    inner: Inner


@wp.kernel
def struct_arg(out: wp.array[float], s: AllFields):
    out[0] = s.f_float32


# One kernel per array kind, rank and annotation syntax.
@wp.kernel
def new_1d(a: wp.array[float], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def new_2d(a: wp.array2d[float], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def new_3d(a: wp.array3d[float], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def new_4d(a: wp.array4d[float], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def new_vec3(a: wp.array[wp.vec3], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def new_transform2d(a: wp.array2d[wp.transform], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def old_1d(a: wp.array(dtype=float), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def old_2d(a: wp.array(dtype=float, ndim=2), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def old_3d(a: wp.array(dtype=float, ndim=3), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def old_4d(a: wp.array(dtype=float, ndim=4), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def old_mat33(a: wp.array(dtype=wp.mat33), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def indexed_new(a: wp.indexedarray[float], out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def indexed_new_2d(a: wp.indexedarray(dtype=float, ndim=2), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def indexed_old(a: wp.indexedarray(dtype=float), out: wp.array[float]):
    out[0] = 1.0


@wp.kernel
def generic_array(a: Any, out: wp.array[float]):
    out[0] = 1.0


wp.overload(generic_array, {"a": wp.array[float], "out": wp.array[float]})
wp.overload(generic_array, {"a": wp.array2d[wp.vec3], "out": wp.array[float]})

#: kernel -> (shape of the array it takes, dtype, indexed)
ARRAY_KERNELS = {
    "new_1d": (new_1d, (8,), float, False),
    "new_2d": (new_2d, (2, 4), float, False),
    "new_3d": (new_3d, (2, 2, 2), float, False),
    "new_4d": (new_4d, (2, 2, 2, 1), float, False),
    "new_vec3": (new_vec3, (8,), wp.vec3, False),
    "new_transform2d": (new_transform2d, (2, 4), wp.transform, False),
    "old_1d": (old_1d, (8,), float, False),
    "old_2d": (old_2d, (2, 4), float, False),
    "old_3d": (old_3d, (2, 2, 2), float, False),
    "old_4d": (old_4d, (2, 2, 2, 1), float, False),
    "old_mat33": (old_mat33, (8,), wp.mat33, False),
    "indexed_new": (indexed_new, (8,), float, True),
    "indexed_new_2d": (indexed_new_2d, (2, 4), float, True),
    "indexed_old": (indexed_old, (8,), float, True),
    "generic_1d": (generic_array, (8,), float, False),
    "generic_vec3_2d": (generic_array, (2, 4), wp.vec3, False),
}

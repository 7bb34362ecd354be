"""Kernels and arguments that only the GPU run launches: every kind of argument a kernel
node's parameter bytes hold (indexed, fabric and 3-D arrays, structs with half and bool
fields, half vectors, double matrices), a tile kernel and a generic kernel.

They live apart from tests/kernels.py so that the CPU suite does not compile them.
"""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.struct
class Mixed:
    data: wp.array(dtype=float)
    h: wp.float16
    flag: bool


@wp.kernel
def exotic(
    a: wp.indexedarray(dtype=float),
    s: Mixed,
    h: wp.float16,
    v: wp.vec3h,
    m: wp.mat33d,
    f: bool,
    y: wp.array3d(dtype=float),
):
    i, j, k = wp.tid()
    if f and i == 0 and j == 0 and k == 0:
        y[i, j, k] = a[0] + s.data[0] + float(s.h) + float(h) + float(v[0]) + float(m[0, 0])


@wp.kernel
def through_fabric(fa: wp.fabricarray(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = fa[i] * 2.0


@wp.kernel
def doubled(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def generic_fill(out: wp.array(dtype=Any), value: Any):
    i = wp.tid()
    out[i] = value


TILE = 32


@wp.kernel
def tile_sum(a: wp.array2d(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(a[i], shape=TILE)
    s = wp.tile_sum(t)
    wp.tile_store(out, s, offset=i)


def exotic_inputs(device: str) -> list[Any]:
    """One value of each argument of :func:`exotic` on ``device`` (``y`` is 4x4x4)."""
    base = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, device=device)
    indices = wp.array([3, 1], dtype=int, device=device)
    s = Mixed()
    s.data = wp.ones(4, dtype=float, device=device)
    s.h = 1.5
    s.flag = True
    m = wp.mat33d(*[float(i) for i in range(9)])
    y = wp.zeros((4, 4, 4), dtype=float, device=device)
    return [wp.indexedarray(base, [indices]), s, 0.5, wp.vec3h(1.0, 2.0, 3.0), m, True, y]


def fabric_of(data: wp.array, attrib: str = "values") -> wp.fabricarray:
    """A fabric array over ``data`` in one bucket (the interface Omniverse Fabric hands Warp)."""
    iface = {
        "version": 1,
        "device": str(data.device),
        "attribs": {
            attrib: {"type": (True, "f4", 1, 0, ""), "access": 2, "pointers": [data.ptr], "counts": [data.size]}
        },
        "_ref": data,
    }
    return wp.fabricarray(data=iface, attrib=attrib)

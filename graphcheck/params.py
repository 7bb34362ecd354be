"""Kernel parameter blocks: their layout, and the values inside them.

A Warp kernel launch passes one parameter block: the launch bounds, then every
argument by value, as Warp packs it (arrays as ``array_t`` descriptors, structs as
their ctypes image, scalars, vectors and matrices as their bytes). A CUDA graph bakes
exactly these bytes into each kernel node.

This module is pure data: :class:`ParamSpec` trees (built from a kernel by
:func:`graphcheck.packing.kernel_layout`), a decoder from bytes back to named values
(:func:`decode`), the name of the field that holds a given byte (:func:`field_at`),
and the launch configuration the CUDA driver receives for a launch
(:func:`expected_cuda_config`, Warp's own formula, which Warp computes in C++).
"""

from __future__ import annotations

import ctypes
import enum
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ._memo import remember

__all__ = [
    "Address",
    "ArrayRef",
    "Opaque",
    "ParamKind",
    "ParamSpec",
    "decode",
    "expected_cuda_config",
    "field_at",
    "values_equal",
]


class ParamKind(enum.Enum):
    """How a parameter (or struct field) is laid out."""

    BOUNDS = "bounds"
    ARRAY = "array"
    INDEXED_ARRAY = "indexedarray"
    FABRIC_ARRAY = "fabricarray"
    INDEXED_FABRIC_ARRAY = "indexedfabricarray"
    STRUCT = "struct"
    SCALAR = "scalar"
    BOOL = "bool"
    HALF = "float16"
    BFLOAT16 = "bfloat16"
    VECTOR = "vector"
    HALF_VECTOR = "float16 vector"
    BFLOAT16_VECTOR = "bfloat16 vector"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a kernel, or one field of a struct parameter.

    Attributes:
        name: the argument's name (``"dt"``), a struct field's name (``"gravity"``), or
            ``"dim"`` for the launch bounds.
        kind: how its bytes are laid out.
        ctype: the ctypes class Warp packs it as.
        size: its size in bytes.
        offset: its offset inside the enclosing struct (0 for a parameter).
        elem_size: bytes per element, for arrays.
        dtype: the element type's name for arrays; the numpy dtype for scalars and vectors;
            the type's name for an opaque parameter (one graphcheck cannot decode).
        shape: the shape of a vector or matrix.
        children: struct fields (or the ``data`` array of an indexed array).
    """

    name: str
    kind: ParamKind
    ctype: Any
    size: int
    offset: int = 0
    elem_size: int = 0
    dtype: Any = None
    shape: tuple[int, ...] = ()
    children: tuple[ParamSpec, ...] = field(default=())


@dataclass(frozen=True)
class ArrayRef:
    """An array argument as a kernel sees it.

    Attributes:
        ptr: address of its first element (0 for a null array).
        nbytes: bytes from the lowest to one past the highest address it may touch.
        shape: its shape.
        strides: its strides, in bytes.
        grad: address of its gradient (0 when it has none).
        dtype: its element type's name, where known.
    """

    ptr: int
    nbytes: int
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    grad: int = 0
    dtype: str = ""

    def __init__(
        self,
        ptr: int,
        nbytes: int,
        shape: tuple[int, ...] = (),
        strides: tuple[int, ...] = (),
        grad: int = 0,
        dtype: str = "",
    ) -> None:
        # The fields in one call instead of the frozen dataclass's setattr per field (half
        # the time): every recorded memset, copy and conditional makes one or two.
        self.__dict__.update(ptr=ptr, nbytes=nbytes, shape=shape, strides=strides, grad=grad, dtype=dtype)

    @property
    def start(self) -> int:
        """The lowest address the array may touch (below ``ptr`` for negative strides)."""
        strides = self.strides
        if not strides or min(strides) >= 0:  # the common case, without a loop
            return self.ptr
        low = sum((s - 1) * st for s, st in zip(self.shape, strides) if st < 0 and s > 0)
        return self.ptr + low

    def __str__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        kind = f"{self.dtype}[{shape}]" if self.dtype else f"[{shape}]"
        return f"{kind} @ {self.ptr:#x}" if self.ptr else f"{kind} @ null"

    def addresses(self, name: str) -> tuple[Address, ...]:
        """The ranges a kernel handed this array may touch: its data and its gradient
        (``"<name>.grad"``, laid out like the data). A tuple, not a generator: the checks
        read every array argument of every operation."""
        ptr = self.ptr
        if not ptr:
            return ()
        start, nbytes = self.start, max(self.nbytes, 1)
        if not self.grad:
            return (Address(name, start, nbytes),)
        return Address(name, start, nbytes), Address(f"{name}.grad", self.grad + (start - ptr), nbytes)


class Address(NamedTuple):
    """One address range an operation hands the device.

    Attributes:
        arg: the argument it comes from (``"x"``, ``"x.grad"``, ``"state.q"``,
            ``"idx.indices[0]"``, ``"keys"``).
        start: the lowest address the operation may touch.
        nbytes: how many bytes from there (at least 1).
    """

    arg: str
    start: int
    nbytes: int

    @property
    def end(self) -> int:
        """One past the last address."""
        return self.start + self.nbytes


@dataclass(frozen=True)
class Opaque:
    """The bytes of an argument whose type graphcheck cannot decode, compared as they are.

    Attributes:
        raw: the bytes Warp passed.
        type_name: the argument's type, as Warp names it.
    """

    raw: bytes
    type_name: str

    def __str__(self) -> str:
        text = self.raw.hex()
        shown = text if len(text) <= 24 else f"{text[:16]}...{text[-8:]}"
        return f"<{self.type_name}: {len(self.raw)} bytes {shown}>"

    __repr__ = __str__


# The array_t layout Warp 1.19 passes (graphcheck._warp.check_warp checks it): data, grad,
# shape[4], strides[4], ndim, flags. Unpacking it with struct is several times faster
# than a ctypes round trip, and decoding runs for every operation a check looks at.
_ARRAY_T = struct.Struct("=QQ4i4iHH")


# (descriptor bytes, element size, element type) -> its ArrayRef. A step hands the same
# arrays to many launches, and its reference call and capture hand them again: each
# descriptor is read once (an ArrayRef is immutable, so one serves every launch). Bounded:
# emptied when it holds ARRAY_REFS entries.
_array_refs: dict[tuple[bytes, int, Any], ArrayRef] = {}
#: How many array descriptors a cache of their ArrayRefs holds (a step hands out hundreds).
ARRAY_REFS = 8192


def _array_ref(spec: ParamSpec, raw: bytes) -> ArrayRef:
    if len(raw) >= _ARRAY_T.size:
        key = (raw, spec.elem_size, spec.dtype)
        known = _array_refs.get(key)
        if known is not None:
            return known
        data, grad, s0, s1, s2, s3, t0, t1, t2, t3, ndim, _ = _ARRAY_T.unpack_from(raw)
        shape = (s0, s1, s2, s3)[:ndim]
        strides = (t0, t1, t2, t3)[:ndim]
        return remember(_array_refs, key, _array_ref_of(spec, data, grad, shape, strides), ARRAY_REFS)
    # a layout graphcheck does not know: let ctypes read it
    value = spec.ctype.from_buffer_copy(raw)
    ndim = int(value.ndim)
    shape = tuple(int(s) for s in value.shape[:ndim])
    strides = tuple(int(s) for s in value.strides[:ndim])
    return _array_ref_of(spec, int(value.data), int(value.grad), shape, strides)


def _array_ref_of(spec: ParamSpec, data: int, grad: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> ArrayRef:
    nbytes = sum((s - 1) * abs(st) for s, st in zip(shape, strides)) + spec.elem_size if shape and 0 not in shape else 0
    return ArrayRef(data, nbytes, shape, strides, grad, str(spec.dtype or ""))


_scalar_formats: dict[Any, struct.Struct | None] = {}


def _scalar_format(ctype: Any) -> struct.Struct | None:
    fmt = _scalar_formats.get(ctype, 0)
    if fmt == 0:
        code = getattr(ctype, "_type_", None)
        try:
            fmt = struct.Struct("@" + code) if isinstance(code, str) and len(code) == 1 else None
        except struct.error:
            fmt = None
        if fmt is not None and fmt.size != ctypes.sizeof(ctype):
            fmt = None
        _scalar_formats[ctype] = fmt
    return fmt  # type: ignore[return-value]


def _scalar(spec: ParamSpec, raw: bytes) -> Any:
    if spec.kind is ParamKind.HALF:
        return float(np.frombuffer(raw, dtype=np.float16)[0])
    if spec.kind is ParamKind.BFLOAT16:
        return float(_bfloat16(np.frombuffer(raw[:2], dtype=np.uint16))[0])
    if spec.kind is ParamKind.BOOL:
        return bool(raw[0])
    fmt = _scalar_format(spec.ctype)
    value = fmt.unpack_from(raw)[0] if fmt is not None else spec.ctype.from_buffer_copy(raw).value
    if isinstance(value, float):
        return _shortest(value, spec.size)
    return int(value)


_F32 = struct.Struct("=f")


def _shortest(value: float, size: int) -> float:
    # A float32 read into a Python float prints as 0.009999999776482582; its shortest
    # float32 representation (0.01) names the same bits and reads as the user wrote it.
    if size != 4 or value != value or value in (float("inf"), float("-inf")):
        return float(value)
    bits = _F32.pack(value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if _F32.pack(candidate) == bits:
            return candidate
    return float(value)


def _bfloat16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _vector(spec: ParamSpec, raw: bytes) -> tuple[Any, ...]:
    if spec.kind is ParamKind.BFLOAT16_VECTOR:
        values = _bfloat16(np.frombuffer(raw, dtype=np.uint16))
    else:
        dtype = np.float16 if spec.kind is ParamKind.HALF_VECTOR else spec.dtype
        if dtype is None:
            return tuple(spec.ctype.from_buffer_copy(raw))
        values = np.frombuffer(raw, dtype=dtype)
    items = [float(str(v)) if values.dtype.kind == "f" and v == v else v.item() for v in values]
    if len(spec.shape) == 2:
        rows, cols = spec.shape
        return tuple(tuple(items[r * cols : (r + 1) * cols]) for r in range(rows))
    return tuple(items)


# An indexed array's index arrays hold int32; a fabric array's bucket descriptors are
# {index_start, index_end, ptr, lengths}: 32 bytes each.
_INDEX_SIZE = 4
_FABRIC_BUCKET_SIZE = 32
_FABRIC_T = struct.Struct("=QQQ")  # buckets, nbuckets, size
_INDEXED_FABRIC_T = struct.Struct("=QQQQQ")  # fa (buckets, nbuckets, size), indices, size


def _indices(name: str, pointers: Sequence[int], extents: Sequence[int]) -> Iterator[tuple[str, Any]]:
    for i, (ptr, count) in enumerate(zip(pointers, extents)):
        if ptr:
            nbytes = max(int(count), 0) * _INDEX_SIZE
            yield f"{name}.indices[{i}]", ArrayRef(int(ptr), nbytes, (int(count),), (_INDEX_SIZE,), 0, "int32")


def _fabric(spec: ParamSpec, raw: bytes, name: str) -> Iterator[tuple[str, Any]]:
    dtype = str(spec.dtype or "")
    if spec.kind is ParamKind.FABRIC_ARRAY:
        buckets, nbuckets, size = _FABRIC_T.unpack_from(raw)
        indices = 0
    else:
        buckets, nbuckets, _, indices, size = _INDEXED_FABRIC_T.unpack_from(raw)
    # The data lives in the buckets, which only the device reads; the bucket table is
    # the address the kernel is handed.
    yield name, ArrayRef(buckets, nbuckets * _FABRIC_BUCKET_SIZE, (size,), (), 0, dtype)
    if indices:
        yield f"{name}.indices", ArrayRef(indices, size * _INDEX_SIZE, (size,), (_INDEX_SIZE,), 0, "int32")


def _walk(spec: ParamSpec, raw: bytes, prefix: str) -> Iterator[tuple[str, Any]]:
    name = f"{prefix}{spec.name}"
    kind = spec.kind
    if kind is ParamKind.ARRAY:
        yield name, _array_ref(spec, raw)
    elif kind is ParamKind.INDEXED_ARRAY:
        data = spec.children[0]
        ref = _array_ref(data, raw[: data.size])
        yield name, ref
        value = spec.ctype.from_buffer_copy(raw)
        yield from _indices(name, [int(p or 0) for p in value.indices], list(value.shape)[: len(ref.shape)])
    elif kind in (ParamKind.FABRIC_ARRAY, ParamKind.INDEXED_FABRIC_ARRAY):
        yield from _fabric(spec, raw, name)
    elif kind is ParamKind.STRUCT:
        for child in spec.children:
            yield from _walk(child, raw[child.offset : child.offset + child.size], f"{name}.")
    elif kind in (ParamKind.VECTOR, ParamKind.HALF_VECTOR, ParamKind.BFLOAT16_VECTOR):
        yield name, _vector(spec, raw)
    elif kind in (ParamKind.SCALAR, ParamKind.BOOL, ParamKind.HALF, ParamKind.BFLOAT16):
        yield name, _scalar(spec, raw)
    else:
        yield name, Opaque(raw, str(spec.dtype or "?"))


# (id of a parameter's spec, its bytes) -> (the spec, its (name, value) pairs). A step hands
# the same scalars, vectors and structs to many launches (a time step, gravity, a model's
# struct), in its reference call and its capture alike, and reading a float32 back as the
# user wrote it tries up to nine formats: each parameter is read once. The entry holds the
# spec, so its id is not reused while the entry lives. Bounded like _array_refs.
_params_read: dict[tuple[int, bytes], tuple[ParamSpec, tuple[tuple[str, Any], ...]]] = {}


def _read_param(spec: ParamSpec, raw: bytes) -> tuple[tuple[str, Any], ...]:
    key = (id(spec), raw)
    entry = _params_read.get(key)
    if entry is not None and entry[0] is spec:
        return entry[1]
    items = tuple(_walk(spec, raw, ""))  # immutable values (numbers, tuples, ArrayRef, Opaque): shared safely
    remember(_params_read, key, (spec, items), ARRAY_REFS)
    return items


def decode(layout: Sequence[ParamSpec], params: Sequence[bytes]) -> dict[str, Any]:
    """Every argument of a parameter block by name, struct fields flattened.

    The launch bounds (the first parameter) are left out: they are the launch's ``dim``.
    Parameters beyond the layout (Warp's hidden extras) come out as ``param<i>``, and an
    argument of a type graphcheck cannot decode as :class:`Opaque` bytes.

    Args:
        layout: the kernel's parameter layout, launch bounds first.
        params: the bytes of each parameter, in the same order.

    Returns:
        ``{"x": ArrayRef(...), "dt": 0.01, "state.gravity": (0.0, -9.8, 0.0), ...}``
    """
    out: dict[str, Any] = {}
    known = len(layout)
    for i, raw in enumerate(params):
        if i == 0:
            continue
        if i < known:
            spec = layout[i]
            if spec.kind is ParamKind.ARRAY:  # most parameters of a solver's kernels: read without _walk
                out[spec.name] = _array_ref(spec, raw)
            else:
                for name, value in _read_param(spec, raw):
                    out[name] = value
        else:
            out[f"param{i}"] = Opaque(raw, "hidden parameter")
    return out


def decode_like(
    layout: Sequence[ParamSpec], params: Sequence[bytes], like: Sequence[bytes], like_args: Mapping[str, Any]
) -> dict[str, Any] | None:
    """:func:`decode` of ``params``, worked out from another block of the same layout that
    decodes as ``like_args``: only the parameters whose bytes differ are read. A step's
    reference call and its capture pass the same arguments to a launch but for their
    temporaries, in one or two of its parameters.

    Returns None where that cannot be: another number of parameters, parameters beyond the
    layout, or a parameter that decodes to other names (an indexed array names its index
    arrays only when they are set). :func:`decode` then reads the block whole.
    """
    count = len(params)
    if count != len(like) or count != len(layout):
        return None
    out = dict(like_args)  # the same names in the same order: only values change
    for i in range(1, count):
        raw, other = params[i], like[i]
        if raw is other or raw == other:
            continue
        spec = layout[i]
        if spec.kind is ParamKind.ARRAY:
            out[spec.name] = _array_ref(spec, raw)
            continue
        items = _read_param(spec, raw)
        if [name for name, _ in items] != [name for name, _ in _read_param(spec, other)]:
            return None
        out.update(items)
    return out


# (bounds type, its bytes) -> the launch dimensions. A step launches with a few sizes
# only, and the comparison asks the dims of every pair of launches it compares: each is
# read with ctypes once. Bounded like _array_refs.
_launch_dims: dict[tuple[Any, bytes], tuple[int, ...]] = {}


def launch_dim(spec: ParamSpec, raw: bytes) -> tuple[int, ...]:
    """The launch dimensions a ``launch_bounds_t`` parameter encodes.

    Extents beyond the kernel's dimensionality, which Warp folds into ``coord_mult``,
    come back as one trailing extent.
    """
    key = (spec.ctype, raw)
    dims = _launch_dims.get(key)
    if dims is None:
        value = spec.ctype.from_buffer_copy(raw)
        dims = tuple(int(s) for s in value.shape)
        if int(value.coord_mult) > 1:
            dims += (int(value.coord_mult),)
        remember(_launch_dims, key, dims, ARRAY_REFS)
    return dims


_ARRAY_FIELDS = ("data", "grad", "shape", "strides", "ndim", "flags")


def field_at(layout: Sequence[ParamSpec], index: int, offset: int) -> str:
    """The name of the field holding byte ``offset`` of parameter ``index``.

    ``field_at(layout, 2, 16)`` on an array parameter ``x`` is ``"x.shape[0]"``; on a
    struct it descends into the struct's fields. Padding is named ``"<name>+<offset>"``.
    """
    if index >= len(layout):
        return f"param{index}+{offset}"
    spec = layout[index]
    return _field_name(spec, offset, "")


def _field_name(spec: ParamSpec, offset: int, prefix: str) -> str:
    name = f"{prefix}{spec.name}"
    if spec.kind in (ParamKind.ARRAY, ParamKind.BOUNDS) and spec.ctype is not None:
        for fname, ftype in spec.ctype._fields_:
            desc = getattr(spec.ctype, fname)
            if desc.offset <= offset < desc.offset + desc.size:
                if issubclass(ftype, ctypes.Array):
                    item = ctypes.sizeof(ftype._type_)
                    return f"{name}.{fname}[{(offset - desc.offset) // item}]"
                return f"{name}.{fname}"
        return f"{name}+{offset}"
    if spec.kind in (ParamKind.STRUCT, ParamKind.INDEXED_ARRAY):
        for child in spec.children:
            if child.offset <= offset < child.offset + child.size:
                return _field_name(child, offset - child.offset, f"{name}.")
        if spec.kind is ParamKind.INDEXED_ARRAY:
            return f"{name}.indices" if offset < spec.size - 16 else f"{name}.shape"
        return f"{name}+{offset}"
    if spec.kind in (ParamKind.VECTOR, ParamKind.HALF_VECTOR) and spec.shape:
        item = max(spec.size // max(math.prod(spec.shape), 1), 1)
        flat = offset // item
        if len(spec.shape) == 2:
            return f"{name}[{flat // spec.shape[1]}][{flat % spec.shape[1]}]"
        return f"{name}[{flat}]"
    return name


def canonical(value: Any) -> Any:
    """A decoded value as a comparable key, equal exactly when a kernel sees the same bits.

    NaN (also inside vectors) equals NaN; ``-0.0`` and ``0.0`` differ (a kernel can see
    the sign, through ``1.0 / x`` or ``copysign``).
    """
    if isinstance(value, float):
        if value != value:
            return "nan"
        return (value, math.copysign(1.0, value)) if value == 0.0 else value
    if isinstance(value, tuple):
        return tuple(canonical(v) for v in value)
    return value


def values_equal(a: Any, b: Any) -> bool:
    """Equality of two decoded values as a kernel sees them: NaN equals NaN, ``-0.0`` is
    not ``0.0`` (also inside vectors)."""
    if a is b:
        return True
    return bool(canonical(a) == canonical(b))


def expected_cuda_config(
    dim_size: int, block_dim: int, max_blocks: int = 0, grid_stride: bool = True, cluster_dim: int = 1
) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """Grid and block the CUDA driver receives for a Warp launch, or None for no launch.

    This is Warp's own formula from ``wp_cuda_launch_kernel`` (warp/native/warp.cu),
    which Warp evaluates in C++ only: a grid-stride kernel gets a 1-D grid of
    ``min(ceil(n / block), max_blocks or 2**31 - 1)`` blocks; a lean kernel
    (``grid_stride=False``) a 3-D grid capped at ``2**24 / block`` by 65535 by 65535.

    Args:
        dim_size: total threads (the launch bounds' ``size``).
        block_dim: threads per block (0 or less: Warp's default, 256).
        max_blocks: the launch's ``max_blocks`` (0: no cap).
        grid_stride: whether the kernel uses a grid-stride loop.
        cluster_dim: thread-block cluster size of the kernel.

    Returns:
        ``((gx, gy, gz), (bx, by, bz))``, or None when ``dim_size`` is 0 (Warp then
        enqueues nothing).
    """
    if block_dim <= 0:
        block_dim = 256
    if dim_size <= 0:
        return None
    if grid_stride:
        natural = (dim_size + block_dim - 1) // block_dim
        natural = ((natural + 2**31) % 2**32) - 2**31  # Warp stores the count in a C int
        cap = max_blocks if max_blocks > 0 else 2**31 - 1
        grid = natural if 0 <= natural <= cap else cap
        if cluster_dim > 1 and grid > 0 and grid != natural:
            grid = grid // cluster_dim * cluster_dim
        return (max(grid, 1), 1, 1), (block_dim, 1, 1)
    total = (dim_size + block_dim - 1) // block_dim
    max_x = (1 << 24) // block_dim
    if cluster_dim > 1:
        max_x = (max_x // cluster_dim) * cluster_dim or cluster_dim
    gx = min(total, max_x) or 1
    rest = (total + gx - 1) // gx
    gy = min(rest, 65535) or 1
    gz = min((rest + gy - 1) // gy, 65535) or 1
    return (gx, gy, gz), (block_dim, 1, 1)

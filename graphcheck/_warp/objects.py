"""Small questions about Warp objects: is this an array, where does its memory lie, which
device and stream, is this code Warp's own, what did a native helper get.

It is longer than most modules on purpose: each answer is a few lines over Warp's
internals, and keeping them together in the Warp adapter is what lets a Warp release that
moves one internal change graphcheck in one place.
"""

from __future__ import annotations

import ctypes
import operator
import os
import sys
import types
import zlib
from collections.abc import Callable
from typing import Any

import warp as wp
import warp._src.context as _context
import warp._src.types as _types
from warp._src import codegen as _codegen

from ..params import ArrayRef
from ..site import CodeKind, qualified_name
from .version import _NATIVE_HELPER, _add_overload, _resolve_launch_block_dim, _runtime

_WARP_DIR = os.path.dirname(os.path.abspath(wp.__file__)) + os.sep
_GRAPHCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# graphcheck's bundled demo producer plays the user's part.
_GRAPHCHECK_DEMO = _GRAPHCHECK_DIR + "demo.py"
# Code that ships inside the warp package but is user code: its examples and tests.
_WARP_USER_DIRS = (_WARP_DIR + "examples" + os.sep, _WARP_DIR + "tests" + os.sep)


_TYPE_SIZES = {"int": 4, "uint": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8, None: 4}


def _extent(index: int, scale: int = 1, width: int | None = None) -> Callable[[tuple[Any, ...], int], int]:
    """Bytes a pointer argument covers: argument ``index`` (a count) times ``scale`` elements
    of the helper's element size (or of argument ``width``, a size in bytes)."""
    return lambda args, size: max(int(args[index]), 0) * scale * (int(args[width]) if width is not None else size)


# helper -> the name of each argument, and for pointers how many bytes they cover. The
# signatures are Warp's own calls in warp/_src/utils.py and types.py (HashGrid, Mesh, Bvh).
_POINTER, _DESCRIPTOR, _VALUE = "pointer", "descriptor", "value"
_NATIVE_ROLES: dict[str, tuple[tuple[str, str, Any], ...]] = {
    # Radix sort needs keys and values of twice the count: it sorts through the upper half.
    "radix_sort_pairs": (("keys", _POINTER, _extent(2, 2)), ("values", _POINTER, _extent(2, 2, 5)),
                         ("count", _VALUE, None), ("begin_bit", _VALUE, None), ("end_bit", _VALUE, None),
                         ("value_size", _VALUE, None)),
    "segmented_sort_pairs": (("keys", _POINTER, _extent(2, 2)), ("values", _POINTER, _extent(2, 2)),
                             ("count", _VALUE, None), ("segment_starts", _POINTER, _extent(5)),
                             ("segment_ends", _POINTER, _extent(5)), ("segments", _VALUE, None)),
    "runlength_encode": (("values", _POINTER, _extent(4)), ("run_values", _POINTER, _extent(4)),
                         ("run_lengths", _POINTER, _extent(4)), ("run_count", _POINTER, lambda a, s: 4),
                         ("count", _VALUE, None)),
    "array_scan": (("src", _POINTER, _extent(2, 1, 3)), ("dest", _POINTER, _extent(2, 1, 4)), ("count", _VALUE, None),
                   ("src_stride", _VALUE, None), ("dest_stride", _VALUE, None), ("type_length", _VALUE, None),
                   ("inclusive", _VALUE, None)),
    "array_sum": (("values", _POINTER, _extent(2, 1, 3)), ("out", _POINTER, lambda a, s: int(a[4]) * s),
                  ("count", _VALUE, None), ("stride", _VALUE, None), ("type_length", _VALUE, None)),
    "array_inner": (("a", _POINTER, _extent(3, 1, 4)), ("b", _POINTER, _extent(3, 1, 5)),
                    ("out", _POINTER, lambda a, s: s), ("count", _VALUE, None), ("stride_a", _VALUE, None),
                    ("stride_b", _VALUE, None), ("type_length", _VALUE, None)),
    "hash_grid_update": (("grid", _VALUE, None), ("type_id", _VALUE, None), ("radius", _VALUE, None),
                         ("points", _DESCRIPTOR, None), ("groups", _DESCRIPTOR, None)),
    "hash_grid_reserve": (("grid", _VALUE, None), ("type_id", _VALUE, None), ("count", _VALUE, None),
                          ("with_groups", _VALUE, None)),
    "mesh_refit": (("mesh", _VALUE, None),),
    "mesh_set_points": (("mesh", _VALUE, None), ("points", _DESCRIPTOR, None)),
    "mesh_set_velocities": (("mesh", _VALUE, None), ("velocities", _DESCRIPTOR, None)),
    "bvh_refit": (("bvh", _VALUE, None),),
    # warp.sparse's topology from triplets (bsr_set_from_triplets): nnz is argument 4, the row count 2.
    # Warp 1.15 to 1.17 pass two more: the matrix's nnz transfer buffer (one host int the
    # helper writes the block count into) and its event (None on the CPU).
    "bsr_matrix_from_triplets": (("block_size", _VALUE, None), ("scalar_size", _VALUE, None),
                                 ("nrow", _VALUE, None), ("ncol", _VALUE, None), ("nnz", _VALUE, None),
                                 ("count", _POINTER, lambda a, s: 4), ("rows", _POINTER, _extent(4)),
                                 ("columns", _POINTER, _extent(4)),
                                 ("values", _POINTER, lambda a, s: int(a[4]) * int(a[0]) * int(a[1])),
                                 ("zero_value_mask", _VALUE, None), ("masked", _VALUE, None),
                                 ("summed_triplet_offsets", _POINTER, _extent(4)),
                                 ("summed_triplet_indices", _POINTER, _extent(4)),
                                 ("dest_offsets", _POINTER, lambda a, s: (int(a[2]) + 1) * 4),
                                 ("dest_row_counts", _POINTER, lambda a, s: int(a[2]) * 4),
                                 ("dest_columns", _POINTER, _extent(4)),
                                 ("nnz_buf", _POINTER, lambda a, s: 4), ("nnz_event", _VALUE, None)),
    "bvh_rebuild": (("bvh", _VALUE, None), ("constructor", _VALUE, None)),
}  # fmt: skip


def native_args(label: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """A native helper's arguments by role: buffers as :class:`~graphcheck.params.ArrayRef`
    (with the bytes the helper may touch), the rest as plain values.

    Args:
        label: the helper without its ``wp_`` prefix (``"radix_sort_pairs_int_host"``).
        args: what Warp passed it.
    """
    match = _NATIVE_HELPER.match(f"wp_{label}")
    roles = _NATIVE_ROLES.get(match["stem"]) if match else None
    if roles is None or len(args) > len(roles):
        return {f"arg{i}": plain_value(a) for i, a in enumerate(args)}
    size = _TYPE_SIZES[match["type"]] if match else 4
    out: dict[str, Any] = {}
    for (name, role, extent), value in zip(roles, args):
        if role == _POINTER:
            ptr = as_address(value)
            out[name] = ArrayRef(ptr, extent(args, size) if ptr else 0)
        elif role == _DESCRIPTOR:
            raw = _descriptor_bytes(value)
            out[name] = descriptor_ref(raw) if raw is not None else None
        else:
            out[name] = plain_value(value)
    return out


def _descriptor_bytes(value: Any) -> bytes | None:
    obj = getattr(value, "_obj", value)  # ctypes.byref(array_t) or the array_t itself
    return bytes(obj) if isinstance(obj, _types.array_t) else None


def descriptor_ref(raw: bytes) -> ArrayRef:
    """An ``array_t`` a native helper was handed, as an :class:`~graphcheck.params.ArrayRef`."""
    value = _types.array_t.from_buffer_copy(raw)
    ndim = int(value.ndim)
    shape = tuple(int(s) for s in value.shape[:ndim])
    strides = tuple(int(s) for s in value.strides[:ndim])
    elem = abs(strides[-1]) if strides else 1
    return ArrayRef(int(value.data or 0), span_bytes(shape, strides, elem), shape, strides, int(value.grad or 0))


def plain_value(value: Any) -> Any:
    """A fill value or native argument as a plain, comparable Python value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ctypes._SimpleCData):
        return plain_value(value.value)
    if isinstance(value, ctypes.Array):
        return tuple(plain_value(v) for v in value)
    if isinstance(value, ctypes._Pointer):
        return bytes(value.contents).hex()
    obj = getattr(value, "_obj", None)  # ctypes.byref(...)
    if isinstance(obj, (ctypes.Structure, ctypes.Array, ctypes._SimpleCData)):
        return bytes(obj).hex()
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "shape", None) == ():
        return plain_value(item())
    inner = getattr(value, "value", None)  # wp.float32(1.0)...
    if isinstance(inner, (bool, int, float)):
        return inner
    if is_struct_instance(value):
        return struct_bytes(value).hex()
    try:
        return tuple(plain_value(v) for v in value)
    except TypeError:
        return repr(value)


# --------------------------------------------------------------------------------------
# Questions about Warp objects
# --------------------------------------------------------------------------------------


_WARP_CAPTURE_DIR = _WARP_DIR + os.path.join("_src", "apic") + os.sep


def in_capture_machinery(code: types.CodeType) -> bool:
    """Whether ``code`` is Warp's own capture machinery (its CPU graph recorder, ``warp._src.apic``)."""
    return code.co_filename.startswith(_WARP_CAPTURE_DIR)


def code_kind(code: types.CodeType) -> CodeKind:
    """Whose code ``code`` is: the user's, Warp's own, or graphcheck's (its generated code too)."""
    filename = code.co_filename
    if filename.startswith(_WARP_DIR):
        return CodeKind.USER if filename.startswith(_WARP_USER_DIRS) else CodeKind.WARP
    if filename.startswith(_GRAPHCHECK_DIR) or filename.startswith("<graphcheck"):
        return CodeKind.USER if filename == _GRAPHCHECK_DEMO else CodeKind.GRAPHCHECK
    return CodeKind.USER


#: Warp functions whose device work is fully decided by the memory they allocate (the
#: zeros of wp.zeros, the ones of wp.ones), or that read back to the host: work they issue
#: is "internal" (left out of traces by default). Work that carries the user's values is
#: not: the fill of ``wp.full(value)``, the copy of ``wp.clone(src)``, ``contiguous()`` and
#: ``to()`` are compared like the user's own. ``wp.array(data)``'s upload is internal: the
#: ``per-call-allocation`` of the buffer it fills is its finding.
ALLOCATING_FUNCTIONS = frozenset(
    {
        "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "_alloc_grad", "_init_from_data",
        "numpy", "list",
    }
)  # fmt: skip


#: The Warp functions a user calls to make an array: an allocation made under any other
#: Warp function (``wp.fem.integrate``, ``HashGrid.build``) is Warp's own, for its caches
#: and scratch.
USER_ALLOCATORS = frozenset(
    {
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "empty", "empty_like", "clone",
        "array", "from_numpy", "contiguous", "to", "assign", "copy", "_alloc_grad", "grad", "requires_grad",
        "indexedarray", "reshape", "view", "flatten", "transpose",
        # Structures, recorded as allocations of their id (see Session.on_structure).
        "Mesh", "HashGrid", "Bvh", "Volume", "Texture", "Texture1D", "Texture2D", "Texture3D",
    }
)  # fmt: skip


def is_array(value: Any) -> bool:
    """Whether ``value`` is any kind of Warp array (dense, indexed, fabric)."""
    return isinstance(value, _types.Array)


def is_dense_array(value: Any) -> bool:
    return isinstance(value, _types.array)


def is_struct_instance(value: Any) -> bool:
    """Whether ``value`` is an instance of a ``@wp.struct`` class."""
    return isinstance(value, _codegen.StructInstance)


def struct_fields(value: Any) -> list[str] | None:
    """Field names of a ``@wp.struct`` instance, else None."""
    if not isinstance(value, _codegen.StructInstance):
        return None
    return list(type(value)._cls.vars)  # type: ignore[attr-defined]


def struct_attributes(value: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of a ``@wp.struct`` instance's fields, then of the Warp arrays it
    keeps besides them, alone or in a tuple: a struct class of Warp's own keeps buffers
    there, such as the host int warp.sparse's matrices on Warp 1.15 to 1.17 have their block
    count written into (``_nnz_transfer``: the array and its event). Its other attributes
    (its ctypes mirror, a capture it is marked with) are Warp's bookkeeping, not its
    buffers. Empty for any other value."""
    fields = struct_fields(value)
    if fields is None:
        return []
    own = set(fields)
    kept = [
        (name, item)
        for name, item in vars(value).items()
        if name not in own and (is_array(item) or (type(item) is tuple and any(is_array(member) for member in item)))
    ]
    return [(name, getattr(value, name, None)) for name in fields] + kept


def is_warp_handle(value: Any) -> bool:
    """Whether ``value`` is a Warp handle that holds no producer's buffers (a device,
    stream, event, kernel, function, module or graph): :func:`graphcheck.buffers_of`
    never enters one. Warp's containers (optimizers, fem fields, sparse matrices, meshes,
    hash grids, BVHs, volumes) are entered like any other object."""
    return isinstance(value, _HANDLE_TYPES)


_HANDLE_TYPES = tuple(
    cls
    for cls in (getattr(_context, name, None) for name in (
        "Device", "Stream", "Event", "Kernel", "Function", "Module", "ModuleExec", "ModuleBuilder", "Graph",
        "Runtime", "KernelHooks",
    ))
    if isinstance(cls, type)
)  # fmt: skip


def _texture_class() -> type | None:
    try:  # Warp 1.15 to 1.19 all have it
        from warp._src.texture import Texture
    except ImportError:
        return None
    return Texture


#: Warp's structures, which reach kernels by an id (a texture inside its descriptor, as the
#: field ``tex``): meshes, hash grids, BVHs, volumes and textures.
_STRUCTURES = tuple(
    cls for cls in (*(getattr(_types, n, None) for n in ("Mesh", "HashGrid", "Bvh", "Volume")), _texture_class()) if cls
)


def structure_handle(value: Any) -> int | None:
    """The ``id`` a kernel is handed for a Warp mesh, hash grid, BVH, volume or texture, else None."""
    if isinstance(value, _STRUCTURES):
        handle = getattr(value, "id", None)
        return int(handle) if handle else None
    return None


def structure_memory(value: Any) -> list[tuple[int, int, str]]:
    """``(start, end, dtype)`` of the memory a structure's operations reach besides its id:
    a host texture's texels (Warp copies data into them with ``wp.copy``)."""
    ptr = getattr(value, "_host_ptr", None)
    if not ptr or not getattr(value, "device", None) or not value.device.is_cpu:
        return []
    try:
        count = 1
        for extent in value._get_shape():
            count *= int(extent)
        nbytes = count * _types.type_size_in_bytes(value.dtype)
    except (AttributeError, TypeError):
        return []
    return [(int(ptr), int(ptr) + nbytes, _type_name(value.dtype))]


def structure_classes() -> tuple[type, ...]:
    """Warp's structure classes (mesh, hash grid, BVH, volume, texture)."""
    return _STRUCTURES


def array_range(arr: Any) -> tuple[int, int] | None:
    """``(start, end)`` of the memory an array may address, or None for a null array.

    A contiguous array spans its capacity; a strided or transposed view the span its
    strides reach (Warp's ``capacity`` of a transposed view counts only its first row).
    An indexed array is its data array's range.
    """
    if isinstance(arr, _types.array):
        ptr = getattr(arr, "ptr", None)  # a wp.fixedarray is a kernel's type annotation: it has no memory, no ptr
        if not ptr:
            return None
        ptr = int(ptr)
        if arr.is_contiguous:
            return ptr, ptr + max(int(arr.capacity or arr.size * _types.type_size_in_bytes(arr.dtype)), 1)
        shape, strides = tuple(arr.shape), tuple(arr.strides)
        if not shape or 0 in shape:
            return ptr, ptr + 1
        low = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
        high = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
        return ptr + low, ptr + high + _types.type_size_in_bytes(arr.dtype)
    data = getattr(arr, "data", None)
    if isinstance(data, _types.array):
        return array_range(data)
    return None


def array_span(arr: Any) -> tuple[int, int] | None:
    """``(start, end)`` of a dense array's memory (the fast path of :func:`array_range`)."""
    if type(arr) is _types.array:
        ptr = arr.ptr
        if not ptr:  # a null array (an empty one: a simulator holds hundreds), which is not contiguous
            return None
        if arr.is_contiguous:
            return ptr, ptr + max(arr.capacity, 1)
    return array_range(arr)


def array_parts(arr: Any) -> list[tuple[str, Any]]:
    """The arrays an array holds on to: its gradient, an indexed array's base and indices."""
    if type(arr) is _types.array:  # a dense array has no base or indices: a simulator's state holds hundreds
        grad = getattr(arr, "_grad", None)
        return [("grad", grad)] if grad is not None else []
    parts = []
    grad = getattr(arr, "_grad", None)
    if grad is not None:
        parts.append(("grad", grad))
    data = getattr(arr, "data", None)
    if isinstance(data, _types.Array):
        parts.append(("data", data))
    indices = getattr(arr, "indices", None)
    if isinstance(indices, (list, tuple)):
        parts.extend((f"indices[{i}]", idx) for i, idx in enumerate(indices) if isinstance(idx, _types.Array))
    return parts


def array_grad(arr: Any) -> Any:
    """The gradient array of a dense array, or None."""
    return getattr(arr, "_grad", None) if isinstance(arr, _types.array) else None


def array_descriptor(arr: Any) -> bytes:
    """The bytes of the descriptor Warp hands a kernel for a dense array (its ``array_t``:
    data and gradient pointers, shape, strides, flags), as Warp builds and caches it for the
    array's launches (Warp builds it anew whenever the gradient changes)."""
    return bytes(arr.__ctype__())


def array_label(arr: Any) -> str:
    """A short description: ``float32[64, 3] on cpu``."""
    dtype = getattr(arr, "dtype", None)
    name = getattr(dtype, "__name__", None)
    if name is None:  # str() only when needed: a dtype's str is slow
        name = str(dtype)
    shape = ", ".join(map(str, getattr(arr, "shape", ())))  # map: every recorded allocation is labelled
    return f"{name}[{shape}] on {getattr(arr, 'device', '?')}"


def array_extent(arr: Any) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """``(ptr, nbytes spanned, shape, strides)`` of a dense array (views included)."""
    # map, not a generator: every recorded memset and copy reads its arrays' extents here.
    ptr = int(arr.ptr or 0)
    shape = tuple(map(int, arr.shape))
    strides = tuple(map(int, arr.strides))
    return ptr, span_bytes(shape, strides, _types.type_size_in_bytes(arr.dtype)), shape, strides


#: Host contents kept whole up to this size; a digest of larger ones.
_HOST_CONTENTS_KEPT = 1 << 16


def host_contents(arr: Any) -> bytes | None:
    """What a host (CPU or pinned) array holds now: its bytes (up to 64 KiB), else a CRC-32
    of them; None for device memory or an array that is not contiguous.

    Every recorded copy from host memory takes this (on Warp's CPU device, every copy), so
    larger arrays get a checksum, not a cryptographic digest: the question is only whether
    the call wrote other bytes there than the reference call did, and CRC-32 answers it
    about five times faster than blake2b (a missed change is a 1-in-4-billion chance)."""
    if not isinstance(arr, _types.array) or arr.device is None or not arr.device.is_cpu:
        return None
    if not arr.is_contiguous or not arr.ptr:
        return None
    nbytes = int(arr.size) * _types.type_size_in_bytes(arr.dtype)
    view = (ctypes.c_char * nbytes).from_address(int(arr.ptr))
    if nbytes <= _HOST_CONTENTS_KEPT:
        return bytes(view)
    return b"digest:crc32:%d" % zlib.crc32(view)


def span_bytes(shape: tuple[int, ...], strides: tuple[int, ...], elem_size: int) -> int:
    """Bytes between the first and one past the last element a strided view touches."""
    if len(shape) == 1 == len(strides):  # the commonest, without a loop
        return (shape[0] - 1) * abs(strides[0]) + elem_size if shape[0] else 0
    if not shape or 0 in shape:
        return 0
    return sum([(s - 1) * abs(st) for s, st in zip(shape, strides)]) + elem_size


def get_device(device: Any = None) -> Any:
    """Warp's Device for a device-like value (None: the default device)."""
    return _context.get_device(device)


def cuda_available() -> bool:
    return bool(_context.is_cuda_available())


def as_address(value: Any) -> int:
    """An address Warp passes as an int, a ``ctypes.c_void_p`` or a typed ctypes pointer
    (``ctypes.cast(a.ptr, ctypes.POINTER(ctypes.c_int32))``), as an int (0 for null)."""
    if isinstance(value, ctypes.c_void_p):
        return int(value.value or 0)
    if isinstance(value, ctypes._Pointer):
        return int(ctypes.cast(value, ctypes.c_void_p).value or 0)
    return int(value or 0)


def stream_handle(stream: Any) -> int | None:
    """The integer CUDA stream handle of a Warp Stream or raw handle; None when there is none."""
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", stream)
    if isinstance(handle, ctypes.c_void_p):
        handle = handle.value
    try:
        return int(handle or 0)
    except (TypeError, ValueError):
        return None


def array_device(arr: Any) -> Any:
    """The Warp device an array (or a condition of ``wp.capture_if``) lives on; None when it has none."""
    return getattr(arr, "device", None)


def device_stream_handle(device: Any) -> int | None:
    """The handle of a device's current stream (None on the CPU)."""
    device = _runtime().get_device(device)
    return stream_handle(device.stream) if device.is_cuda else None


def capturing_streams(device: Any) -> tuple[int, ...]:
    """The handles of the streams of ``device`` Warp has a capture open on (none on the CPU,
    nor while the user paused the capture)."""
    try:
        device = _runtime().get_device(device)
    except (RuntimeError, ValueError, TypeError):  # no device name to go by ("?")
        return ()
    if not device.is_cuda:
        return ()
    return tuple(handle for handle in (stream_handle(s) for s in list(device.captures)) if handle)


def capture_open_anywhere() -> bool:
    """Whether Warp has a CUDA capture open on any device. Warp registers a capture in its
    runtime's ``captures`` and in its device's ``captures`` together, and removes it from
    both together (at the end and while paused), so that without one open no device has
    capturing streams to ask :func:`capturing_streams` about. (CPU captures register in
    neither.)"""
    return bool(_runtime().captures)


def current_cuda_device() -> Any:
    """The device of the current CUDA context: where Warp's native device helpers (sort,
    scan, hash grids) enqueue, on its current stream."""
    return _runtime().get_current_cuda_device()


def stream_is_capturing(handle: int | None) -> bool:
    """Whether a CUDA stream is capturing right now."""
    if not handle:
        return False
    return bool(_runtime().core.wp_cuda_stream_is_capturing(ctypes.c_void_p(handle)))


def resolve_block_dim(device: Any, block_dim: Any) -> int:
    """The block size Warp launches with for a requested ``block_dim`` on ``device``."""
    return int(_resolve_launch_block_dim(_runtime().get_device(device), block_dim))


def struct_bytes(value: Any) -> bytes:
    """The bytes a ``@wp.struct`` instance is passed to kernels as."""
    return bytes(value.__ctype__())


def _type_name(dtype: Any) -> str:
    name = getattr(dtype, "__name__", None)
    return name if name is not None else str(dtype)  # str() only when needed: a dtype's str is slow


def dtype_name(arr: Any) -> str:
    """The element type's name of an array (``"float32"``, ``"vec3f"``)."""
    return _type_name(getattr(arr, "dtype", None))


def baked_by_value(value: Any) -> tuple[str, Any] | None:
    """Where a graph takes bytes from ``value`` by value: ``("struct", [its ctypes struct])``
    for a ``@wp.struct`` instance (the struct Warp keeps and updates in place on every field
    set, nested structs included), ``("launch", <its params>)`` for a ``wp.Launch`` command
    (the live list of packed parameters, launch bounds first, that ``set_param_*`` and
    ``set_dim`` replace items of); else None."""
    if isinstance(value, _codegen.StructInstance):
        return "struct", [value.__ctype__()]
    if isinstance(value, _context.Launch):
        return "launch", value.params
    return None


#: The live list of packed parameters of a ``wp.Launch`` command (see :func:`baked_by_value`).
command_params = operator.attrgetter("params")


def replay_config(cmd: Any) -> tuple[Any, str, int, int, bool]:
    """``(kernel, device, block_dim, max_blocks, adjoint)`` of a ``wp.Launch`` command."""
    return cmd.kernel, str(cmd.device), int(cmd.block_dim), int(cmd.max_blocks), bool(cmd.adjoint)


def resolve_overload(kernel: Any, inputs: Any, outputs: Any) -> Any:
    """The concrete overload a launch of a generic kernel ran (the kernel itself otherwise)."""
    if not getattr(kernel, "is_generic", False):
        return kernel
    launched = _overload_launching(kernel)
    if launched is not None:
        return launched
    try:
        return _add_overload(kernel, kernel.infer_argument_types([*(inputs or ()), *(outputs or ())]))
    except Exception:  # Warp's own launch raised already or will raise; keep the generic one
        return kernel


# Where wp.launch is compiled from (graphcheck's woven launch keeps Warp's file and name).
_LAUNCH_FILE = _context.launch.__code__.co_filename
# How many frames up from here a wp.launch running now may be: graphcheck's own hook and
# session methods stand between it and resolve_overload.
_LAUNCH_FRAME_DEPTH = 8


def _overload_launching(generic: Any) -> Any:
    """The overload of ``generic`` that the ``wp.launch`` call running now launches, or None.

    ``wp.launch`` binds its ``kernel`` to the overload it resolved from the arguments before
    it launches: reading it there (one read of that call's locals, a few microseconds) spares
    resolving it again, which costs what Warp's own resolution costs (hundreds of
    microseconds for a kernel of many arguments, on every recorded launch of it).
    """
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(_LAUNCH_FRAME_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_filename == _LAUNCH_FILE and qualified_name(code) == "launch":  # (3.10: Launch.launch too)
            candidate = frame.f_locals.get("kernel")
            overloads = getattr(generic, "overloads", None)
            if isinstance(overloads, dict) and any(candidate is overload for overload in overloads.values()):
                return candidate
            return None  # not resolved yet, or another kernel's launch: infer it
        frame = frame.f_back
    return None


def device_of_context(context: Any) -> str | None:
    """The CUDA device of a context Warp launched in (``wp_cuda_launch_kernel``'s first
    argument), or None when Warp does not know it.

    Read from Warp's own table of the contexts it holds (``runtime.context_map``, where a
    device enters once its context is acquired): no device is asked, so no context is
    acquired on a device the program never used.
    """
    device = _runtime().context_map.get(as_address(context) or None)
    return str(device) if device is not None and device.is_cuda else None


def process_caches() -> list[tuple[str, Any]]:
    """``(name, cache)`` of Warp's own process-wide caches that keep device arrays made in one
    call for every later call: warp.fem's quadrature formulas (their points and weights per
    element, order and family, in ``RegularQuadrature.CachedFormula._cache``, which nothing in
    Warp clears). Only those of Warp's modules already imported: none is imported here."""
    module = sys.modules.get("warp._src.fem.quadrature.quadrature")
    formula = getattr(getattr(module, "RegularQuadrature", None), "CachedFormula", None)
    cache = getattr(formula, "_cache", None)
    return [("warp.fem's quadrature cache", cache)] if isinstance(cache, dict) else []


# --------------------------------------------------------------------------------------
# Guarding every capture of a program (graphcheck run, the pytest marker)
# --------------------------------------------------------------------------------------

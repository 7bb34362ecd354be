"""A kernel's parameter block as Warp packs it: launch bounds, then every argument, as
plain :class:`graphcheck.params.ParamSpec` trees (decided by the type Warp resolved,
never by how the annotation was spelt)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import warp._src.context as _context
import warp._src.types as _types
from warp._src import codegen as _codegen

from ..params import ParamKind, ParamSpec
from .objects import _type_name, resolve_overload
from .version import _runtime

_layout_cache: dict[tuple[int, bool], tuple[ParamSpec, ...]] = {}

_HALF_TYPES: dict[Any, ParamKind] = {_types.float16: ParamKind.HALF}
if hasattr(_types, "bfloat16"):
    _HALF_TYPES[_types.bfloat16] = ParamKind.BFLOAT16


def kernel_dim(kernel: Any) -> int:
    dim = getattr(kernel.adj, "kernel_dim", None)
    if dim is None:
        return 1
    return int(dim)


def bounds_spec(kernel: Any) -> ParamSpec:
    """The launch-bounds parameter (always first) of a kernel."""
    ctype = type(_types.launch_bounds_t((1,) * max(kernel_dim(kernel), 1)))
    return ParamSpec("dim", ParamKind.BOUNDS, ctype, ctypes.sizeof(ctype))


def kernel_layout(kernel: Any, adjoint: bool = False) -> tuple[ParamSpec, ...]:
    """The parameter block of a kernel launch as Warp packs it.

    Launch bounds first, then every forward argument, then (adjoint launches) every
    adjoint argument named ``adj_<name>``. Cached per kernel.
    """
    layout = _layout_cache.get((id(kernel), adjoint))
    if layout is None:
        layout = _build_layout(kernel, adjoint)
    return layout


def _build_layout(kernel: Any, adjoint: bool) -> tuple[ParamSpec, ...]:
    specs = [bounds_spec(kernel)]
    for arg in kernel.adj.args:
        specs.append(_spec(arg.label, arg.type))
    if adjoint:
        for arg in kernel.adj.args:
            arg_type = arg.type
            if array_family(arg_type) is _types.indexedarray:
                # Warp passes the gradient of an indexed array as a plain array.
                arg_type = _types.array(dtype=arg_type.dtype, ndim=arg_type.ndim)
            specs.append(_spec(f"adj_{arg.label}", arg_type))
    layout = tuple(specs)
    if getattr(kernel.adj, "kernel_dim", None) is not None:
        # Only cache once Warp has built the kernel: the bounds type depends on its dim.
        _layout_cache[(id(kernel), adjoint)] = layout
        _layout_owners[(id(kernel), adjoint)] = kernel  # keeps id() from being reused
    return layout


_layout_owners: dict[tuple[int, bool], Any] = {}


def _np_dtype(scalar_type: Any) -> np.dtype | None:
    table = getattr(_types, "warp_type_to_np_dtype", {})
    dtype = table.get(scalar_type)
    return np.dtype(dtype) if dtype is not None else None


def array_family(arg_type: Any) -> Any:
    """The array class an argument type stands for, or None when it is no array type.

    Warp resolves ``wp.array[float]`` and ``wp.array2d[wp.vec3]`` annotations to light
    annotation objects and ``wp.array(dtype=float)`` to array instances; both are the
    same parameter to a kernel. The family decides the layout: ``array``,
    ``indexedarray``, ``fabricarray`` or ``indexedfabricarray``.
    """
    if not _types.is_array(arg_type):
        return None
    family = _concrete_array_type(arg_type)
    for cls in _ARRAY_FAMILIES:
        if isinstance(family, type) and issubclass(family, cls):
            return cls
    return None


def _dense_spec(name: str, arg_type: Any, offset: int) -> ParamSpec:
    dtype = arg_type.dtype
    return ParamSpec(
        name, ParamKind.ARRAY, _types.array_t, ctypes.sizeof(_types.array_t), offset,
        elem_size=_types.type_size_in_bytes(dtype), dtype=_type_name(dtype),
    )  # fmt: skip


def _spec(name: str, arg_type: Any, offset: int = 0) -> ParamSpec:
    """How Warp packs one argument (or struct field) of type ``arg_type``: decided by the
    type Warp resolved, never by how the annotation was spelt."""
    ctype: Any
    family = array_family(arg_type)
    if family is _types.array:
        return _dense_spec(name, arg_type, offset)
    if family is _types.indexedarray:
        ctype = _types.indexedarray_t
        data = _dense_spec("data", arg_type, 0)
        return ParamSpec(name, ParamKind.INDEXED_ARRAY, ctype, ctypes.sizeof(ctype), offset, children=(data,))
    if family is _types.fabricarray or family is _types.indexedfabricarray:
        ctype = type(arg_type.__ctype__())
        kind = ParamKind.FABRIC_ARRAY if family is _types.fabricarray else ParamKind.INDEXED_FABRIC_ARRAY
        return ParamSpec(name, kind, ctype, ctypes.sizeof(ctype), offset, dtype=_type_name(arg_type.dtype))
    if family is not None:  # an array family this Warp added after graphcheck was written
        ctype = type(arg_type.__ctype__())
        return ParamSpec(name, ParamKind.OPAQUE, ctype, ctypes.sizeof(ctype), offset, dtype=repr(arg_type))
    if isinstance(arg_type, _codegen.Struct):
        ctype = arg_type.ctype
        children = tuple(_spec(field, var.type, getattr(ctype, field).offset) for field, var in arg_type.vars.items())
        return ParamSpec(name, ParamKind.STRUCT, ctype, ctypes.sizeof(ctype), offset, children=children)
    if arg_type in _HALF_TYPES:
        return ParamSpec(name, _HALF_TYPES[arg_type], ctypes.c_uint16, 2, offset)
    if isinstance(arg_type, type) and issubclass(arg_type, ctypes.Array):
        # Vectors, matrices, quaternions, transforms, spatial vectors: flat scalars.
        scalar = getattr(arg_type, "_wp_scalar_type_", None)
        shape = tuple(getattr(arg_type, "_shape_", (arg_type._length_,)))
        kind = ParamKind.VECTOR
        if scalar in _HALF_TYPES:
            kind = ParamKind.HALF_VECTOR if _HALF_TYPES[scalar] is ParamKind.HALF else ParamKind.BFLOAT16_VECTOR
        return ParamSpec(name, kind, arg_type, ctypes.sizeof(arg_type), offset, dtype=_np_dtype(scalar), shape=shape)
    ctype = getattr(arg_type, "_type_", None)
    if isinstance(ctype, type) and issubclass(ctype, ctypes._SimpleCData):
        kind = ParamKind.BOOL if ctype is ctypes.c_bool else ParamKind.SCALAR
        return ParamSpec(name, kind, ctype, ctypes.sizeof(ctype), offset, dtype=_np_dtype(arg_type))
    ctype = (
        getattr(arg_type, "_wp_ctype_", None) or getattr(arg_type, "ctype", None) or getattr(arg_type, "_ctype_", None)
    )
    if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure) and _plain_fields(ctype):
        # A handle struct (a texture: its object handle and extents), field by field.
        children = tuple(
            ParamSpec(field[0], ParamKind.SCALAR, field[1], ctypes.sizeof(field[1]), getattr(ctype, field[0]).offset)
            for field in ctype._fields_
        )
        return ParamSpec(name, ParamKind.STRUCT, ctype, ctypes.sizeof(ctype), offset, children=children)
    size = ctypes.sizeof(ctype) if isinstance(ctype, type) and hasattr(ctype, "_fields_") else 0
    return ParamSpec(name, ParamKind.OPAQUE, ctype if size else None, size, offset, dtype=_type_repr(arg_type))


def _plain_fields(ctype: Any) -> bool:
    return all(isinstance(f, type) and issubclass(f, ctypes._SimpleCData) for _, f in ctype._fields_)


def _type_repr(arg_type: Any) -> str:
    return getattr(arg_type, "__name__", None) or repr(arg_type)


_concrete_array_type = getattr(_types, "concrete_array_type", type)
_ARRAY_FAMILIES = (_types.indexedarray, _types.fabricarray, _types.indexedfabricarray, _types.array)


_struct_field_cache: dict[type, tuple[tuple[int, int], ...]] = {}


def struct_param_slices(struct_type: type) -> tuple[tuple[int, int], ...]:
    """``(offset, size)`` of each field of a ctypes Structure (an ArgsStruct of a CPU launch)."""
    slices = _struct_field_cache.get(struct_type)
    if slices is None:
        slices = tuple(
            (getattr(struct_type, name).offset, getattr(struct_type, name).size)
            for name, _ in struct_type._fields_  # type: ignore[attr-defined]
        )
        _struct_field_cache[struct_type] = slices
    return slices


def pack_params(
    kernel: Any,
    dim: Any,
    inputs: Any = (),
    outputs: Any = (),
    device: Any = None,
    adjoint: bool = False,
    adj_inputs: Any = (),
    adj_outputs: Any = (),
) -> tuple[bytes, ...]:
    """The parameter block a launch with these arguments passes, packed by Warp's own
    ``pack_arg`` (no launch happens): launch bounds, then each argument's bytes."""
    device = _runtime().get_device(device)
    fwd = [*inputs, *outputs]
    kernel = resolve_overload(kernel, inputs, outputs)
    if getattr(kernel.adj, "kernel_dim", None) is None:
        kernel.module.load(device)  # Warp learns a kernel's dimensionality when it builds it
    dims, _ = _context._normalize_launch_dim(dim)
    params = [_context._build_launch_bounds_from_tuple(dims, kernel.adj.kernel_dim)]
    params += [_context.pack_arg(kernel, a.type, a.label, v, device, False) for a, v in zip(kernel.adj.args, fwd)]
    if adjoint:
        adj = [*adj_inputs, *adj_outputs]
        params += [_context.pack_arg(kernel, a.type, a.label, v, device, True) for a, v in zip(kernel.adj.args, adj)]
    return tuple(bytes(p) for p in params)

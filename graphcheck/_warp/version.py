"""The Warp releases graphcheck supports, and the internals each has (checked once).

Everything that differs between the supported releases lives here: the table of
internals, and what graphcheck does on a release that predates one of them.
"""

from __future__ import annotations

import inspect
import re
import types
import warnings
from collections.abc import Callable
from typing import Any

import warp as wp
import warp._src.context as _context
import warp._src.types as _types
from warp._src import codegen as _codegen

from .._warnings import GraphCheckWarning


def _runtime() -> Any:
    """Warp's runtime (Warp types it as optional: it exists once ``wp.init()`` ran)."""
    return _context.runtime


class UnsupportedWarpError(RuntimeError):
    """The installed Warp lacks an internal that graphcheck needs.

    The message names the missing piece, the installed version and the versions
    graphcheck was tested against.
    """


# --------------------------------------------------------------------------------------
# The Warp releases graphcheck supports, and the internals each has (checked once)
# --------------------------------------------------------------------------------------
# Everything that differs between the supported releases lives in this block: the table of
# internals, and what graphcheck does on a release that predates one of them.

#: Warp releases graphcheck's test suite has run against (``nox -s warp``), oldest first.
TESTED_WARP_VERSIONS = ("1.15.0", "1.16.0", "1.17.0", "1.18.0", "1.19.0")

WARP_VERSION: str = wp.__version__

_EVERY_RELEASE = (1, 15)

#: Every Warp internal graphcheck reaches by name, with the first release that has it.
#: Paths start at ``warp._src.context``, ``warp._src.types``, ``warp._src.codegen`` or
#: Warp's native library (``core``); the last name of a class path is the class's own
#: attribute (graphcheck replaces it there). :func:`check_warp` checks, once, that the
#: installed Warp has each one its release calls for.
WARP_INTERNALS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        (
            "context.launch", "context.copy", "context.invoke", "context.Launch.launch", "context.pack_arg",
            "context.runtime", "context.runtime.context_map", "context.init", "context.capture_if",
            "context.capture_while",
            "context._normalize_launch_dim", "context._build_launch_bounds_from_tuple", "context.Kernel.add_overload",
            "context.synchronize", "context.synchronize_device", "context.synchronize_stream",
            "context.synchronize_event", "context.get_device", "context.is_cuda_available",
            "types.array._init_new", "types.array._init_from_data", "types.array.zero_", "types.array.fill_",
            "types.array.numpy", "types.array.__ctype__", "types.noncontiguous_array_base.zero_",
            "types.noncontiguous_array_base.fill_", "types.noncontiguous_array_base.numpy",
            "types.Array", "types.indexedarray", "types.fabricarray", "types.indexedfabricarray", "types.is_array",
            "types.array_t", "types.indexedarray_t", "types.launch_bounds_t", "types.type_size_in_bytes",
            "codegen.Struct", "codegen.StructInstance",
            "core.wp_cpu_launch_kernel", "core.wp_cuda_launch_kernel", "core.wp_cuda_stream_is_capturing",
        ),
        _EVERY_RELEASE,
    ),
    # Cooperative CPU blocks. Before 1.18 every CPU launch runs one thread a block, through invoke.
    "context.invoke_cpu_blocks": (1, 18),
    # Before 1.18 wp.launch resolved block_dim itself: 1 on the CPU, 256 for block_dim <= 0.
    "context._resolve_launch_block_dim": (1, 18),
    # Before 1.19 wp.launch made a generic kernel's overload with Kernel.add_overload.
    "context.Kernel._add_normalized_overload": (1, 19),
}  # fmt: skip


def release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a Warp version string: ``"1.20.0.dev20260101"`` is ``(1, 20)``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise UnsupportedWarpError(f"graphcheck cannot read the warp-lang version {version!r}: expected 'X.Y...'")
    return int(match[1]), int(match[2])


def _tested_range() -> str:
    oldest, newest = release(TESTED_WARP_VERSIONS[0]), release(TESTED_WARP_VERSIONS[-1])
    return f"{oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]}"


def required_internals(version: str) -> list[str]:
    """The paths in :data:`WARP_INTERNALS` that Warp release ``version`` has."""
    ours = release(version)
    return [path for path, since in WARP_INTERNALS.items() if ours >= since]


def newer_release_warning(version: str) -> str | None:
    """The warning for a Warp release newer than the newest tested one, else None.

    Patch releases of a tested minor release count as tested.
    """
    if release(version) <= release(TESTED_WARP_VERSIONS[-1]):
        return None
    return f"warp-lang {version} is newer than the releases graphcheck was tested with ({_tested_range()})"


_INTERNAL_ROOTS = {"context": _context, "types": _types, "codegen": _codegen}


def _internal(path: str) -> Any:
    """The Warp object at ``path`` (see :data:`WARP_INTERNALS`), or None when it is missing."""
    root, *names, last = path.split(".")
    owner: Any = _runtime().core if root == "core" else _INTERNAL_ROOTS[root]
    for name in names:
        owner = getattr(owner, name, None)
    # A class's own attribute: graphcheck replaces it on that class.
    return vars(owner).get(last) if isinstance(owner, type) else getattr(owner, last, None)


#: The internals ``wp.init()`` makes: its runtime and the native library it loads.
_MADE_BY_INIT = ("core.", "context.runtime")


def missing_internals(version: str = WARP_VERSION, *, native: bool = True) -> list[str]:
    """The internals Warp release ``version`` calls for that the installed Warp lacks
    (``native``: those of its native library too, which initialises Warp to load it)."""
    if native:
        _context.init()  # loads Warp's native library (core)
    paths = [path for path in required_internals(version) if native or not path.startswith(_MADE_BY_INIT)]
    return [path for path in paths if _internal(path) is None]


def _fail(what: str) -> UnsupportedWarpError:
    return UnsupportedWarpError(
        f"graphcheck cannot record on warp-lang {WARP_VERSION}: {what}. graphcheck was tested with "
        f"warp-lang {_tested_range()} ({', '.join(TESTED_WARP_VERSIONS)}); install one of those "
        f"(pip install 'warp-lang=={TESTED_WARP_VERSIONS[-1]}') or a graphcheck release that supports your Warp."
    )


_NATIVE_HELPER = re.compile(
    r"^wp_(?P<stem>radix_sort_pairs|segmented_sort_pairs|runlength_encode|array_scan|array_sum|array_inner"
    r"|hash_grid_(?:reserve|update)|bvh_(?:refit|rebuild)|mesh_(?:refit|set_points|set_velocities)"
    r"|bsr_matrix_from_triplets)"
    r"(?:_(?P<type>int|uint|int64|uint64|float|double))?_(?P<where>host|device)$"
)


_checked = False
_warned = False

# What the hooks take from a wp.launch / wp.copy call: the trampolines pass these first.
_LAUNCH_INTENT = ("kernel", "inputs", "outputs", "device", "stream", "max_blocks", "block_dim", "adjoint")
_COPY_INTENT = ("dest", "src", "dest_offset", "src_offset", "count", "stream")


def check_warp(*, initialise: bool = True) -> None:
    """Check, once, that the installed Warp has every internal the hooks rely on.

    A release older than the oldest tested one fails; one newer than the newest tested
    one warns (:class:`GraphCheckWarning`, once) and runs while it has every internal.

    Args:
        initialise: initialise Warp, if it is not yet, to check its native library too.
            Without it (``graphcheck run`` leaves Warp's initialisation, and its banner, to
            the program) the native library is checked by the next check once Warp is
            initialised: the hooks check before each recording.

    Raises:
        UnsupportedWarpError: naming the first missing or changed internal.
    """
    global _checked, _warned
    if _checked:
        return
    native = initialise or _runtime() is not None
    if release(WARP_VERSION) < release(TESTED_WARP_VERSIONS[0]):
        raise _fail("it is older than the releases graphcheck supports")
    missing = missing_internals(WARP_VERSION, native=native)
    if missing:
        raise _fail(f"warp._src.{missing[0]} is missing")
    for fn in (_context.launch, _context.copy):
        if not isinstance(fn, types.FunctionType) or fn.__closure__:
            raise _fail(f"warp._src.context.{fn.__name__} is no longer a plain function")
    launch_params = inspect.signature(_context.launch).parameters
    missing = [name for name in _LAUNCH_INTENT if name not in launch_params]
    if missing:
        raise _fail(f"wp.launch() has no parameter(s) {missing}")
    copy_params = tuple(inspect.signature(_context.copy).parameters)
    if copy_params != _COPY_INTENT:
        raise _fail(f"wp.copy() parameters changed to {copy_params}")
    if tuple(inspect.signature(_context.Launch.launch).parameters) != ("self", "stream"):
        raise _fail("wp.Launch.launch() parameters changed")
    for fn in (_context.launch, _context.copy):
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY)
               for p in inspect.signature(fn).parameters.values()):  # fmt: skip
            raise _fail(f"wp.{fn.__name__}() now takes variable or keyword-only arguments")
    if [f for f, _ in _types.array_t._fields_] != ["data", "grad", "shape", "strides", "ndim", "flags"]:
        raise _fail("the array_t parameter layout changed")
    newer = newer_release_warning(WARP_VERSION)
    if newer is not None and not _warned:
        warnings.warn(newer, GraphCheckWarning, stacklevel=2)
        _warned = True
    _checked = native


# What graphcheck does on a release that predates an internal (see WARP_INTERNALS).


def _block_dim_before_1_18(device: Any, block_dim: Any) -> int:
    """The block size ``wp.launch`` of Warp 1.15 to 1.17 runs with."""
    if device.is_cpu:
        return 1
    return 256 if block_dim is None or block_dim <= 0 else int(block_dim)


_resolve_launch_block_dim: Callable[[Any, Any], int] = getattr(
    _context, "_resolve_launch_block_dim", _block_dim_before_1_18
)

#: Warp's CPU launch functions, each with whether it runs cooperative blocks (Warp 1.18+).
_CPU_INVOKERS = tuple((name, name == "invoke_cpu_blocks") for name in ("invoke", "invoke_cpu_blocks")
                      if hasattr(_context, name))  # fmt: skip


def _add_overload(kernel: Any, arg_types: list[Any]) -> Any:
    """The overload ``wp.launch`` makes of a generic kernel for these inferred types."""
    add = getattr(kernel, "_add_normalized_overload", None) or kernel.add_overload
    return add(arg_types)

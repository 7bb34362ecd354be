"""Everything graphcheck knows about Warp's internals, in one package.

No other part of graphcheck imports ``warp._src`` or reaches into a Warp object's
private attributes. Its modules, each importing only those above it:

- :mod:`~graphcheck._warp.version`: the supported releases and the internals each has,
  checked once, with one clear error naming the tested versions when one is missing;
- :mod:`~graphcheck._warp.objects`: small questions about Warp objects (is this an
  array, where does it live, which device and stream, is this code Warp's own);
- :mod:`~graphcheck._warp.layouts`: a kernel's parameter block as Warp packs it, as
  plain :class:`graphcheck.params.ParamSpec` trees;
- :mod:`~graphcheck._warp.capture`: Warp's own capture API and what a graph holds;
- :mod:`~graphcheck._warp.hooks`: the hooks that report every operation Warp enqueues to
  the recording session of the current context, and :data:`HOOKS`, the one object that
  installs and removes them.

The rest of graphcheck uses the names this module re-exports.
"""

from .capture import (
    ORIGINAL_CAPTURE_BEGIN,
    ORIGINAL_CAPTURE_END,
    ORIGINAL_CAPTURE_LAUNCH,
    ORIGINAL_SCOPED_CAPTURE,
    abort_capture,
    capture_in_progress,
    capture_launch,
    cuda_function_map,
    graph_device,
    graph_handle,
    graph_module_execs,
    kernel_function,
    patch_capture_api,
    scoped_capture,
)
from .hooks import ACTIVE, HOOKS, LAUNCH, REPLAY, current_session, hooks_installed
from .layouts import array_family, kernel_layout, pack_params, struct_param_slices
from .objects import (
    ALLOCATING_FUNCTIONS,
    USER_ALLOCATORS,
    array_extent,
    array_grad,
    array_label,
    array_parts,
    array_range,
    array_span,
    as_address,
    code_kind,
    cuda_available,
    device_of_stream,
    device_stream_handle,
    dtype_name,
    get_device,
    is_array,
    is_dense_array,
    is_struct_instance,
    is_warp_handle,
    kernel_name,
    native_args,
    plain_value,
    replay_config,
    resolve_block_dim,
    resolve_overload,
    stream_handle,
    stream_is_capturing,
    struct_bytes,
    struct_fields,
    structure_handle,
)
from .version import (
    TESTED_WARP_VERSIONS,
    WARP_INTERNALS,
    WARP_VERSION,
    UnsupportedWarpError,
    check_warp,
    cpu_graph_replays,
    missing_internals,
    newer_release_warning,
    release,
    required_internals,
)

__all__ = [
    "ACTIVE", "ALLOCATING_FUNCTIONS", "HOOKS", "LAUNCH", "ORIGINAL_CAPTURE_BEGIN", "ORIGINAL_CAPTURE_END",
    "ORIGINAL_CAPTURE_LAUNCH", "ORIGINAL_SCOPED_CAPTURE", "REPLAY", "TESTED_WARP_VERSIONS", "USER_ALLOCATORS",
    "WARP_INTERNALS", "WARP_VERSION",
    "UnsupportedWarpError", "abort_capture", "array_extent", "array_family", "array_grad", "array_label",
    "array_parts", "array_range", "array_span", "as_address", "capture_in_progress", "capture_launch", "check_warp",
    "code_kind", "cpu_graph_replays", "cuda_available", "cuda_function_map", "current_session", "device_of_stream",
    "device_stream_handle", "dtype_name", "get_device", "graph_device", "graph_handle", "graph_module_execs",
    "hooks_installed", "is_array", "is_dense_array", "is_struct_instance", "is_warp_handle", "kernel_function",
    "kernel_layout", "kernel_name", "missing_internals", "native_args", "newer_release_warning", "pack_params",
    "patch_capture_api", "plain_value", "release", "replay_config", "required_internals", "resolve_block_dim",
    "resolve_overload", "scoped_capture", "stream_handle", "stream_is_capturing", "struct_bytes", "struct_fields",
    "struct_param_slices", "structure_handle",
]  # fmt: skip

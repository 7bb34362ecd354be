"""Captures and graphs: Warp's own capture API, whatever a front end has patched in its
place, and what a captured graph holds."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from typing import Any

import warp as wp

from .version import _runtime

# Captures and graphs
# --------------------------------------------------------------------------------------


#: Warp's own ScopedCapture and capture_launch, whatever :func:`patch_capture_api` has put
#: in their place.
ORIGINAL_SCOPED_CAPTURE = wp.ScopedCapture
ORIGINAL_CAPTURE_LAUNCH = wp.capture_launch


def scoped_capture(device: Any, **options: Any) -> Any:
    """A real ``wp.ScopedCapture`` on ``device`` with the caller's options."""
    return ORIGINAL_SCOPED_CAPTURE(device=device, **options)


def capture_launch(graph: Any, stream: Any = None) -> None:
    """Replay a graph with Warp's own ``wp.capture_launch``, even while the capture API is
    patched (:func:`patch_capture_api`)."""
    ORIGINAL_CAPTURE_LAUNCH(graph, stream=stream)


def replay_once(graph: Any, stream: Any = None) -> None:
    """Replay ``graph`` once with Warp's own ``wp.capture_launch`` and wait for it, so that
    what runs next on any stream of its device comes after it."""
    ORIGINAL_CAPTURE_LAUNCH(graph, stream=stream)
    wp.synchronize_device(graph.device)


def capture_in_progress(device: Any) -> bool:
    """Whether a Warp capture is open on ``device`` (its current stream for CUDA)."""
    device = _runtime().get_device(device)
    if device.is_cpu:
        return _runtime()._apic_capture is not None
    return bool(device.captures)


def capturing_now(device: str, stream: int | None) -> bool:
    """Whether an operation on ``device`` (``stream`` on CUDA) goes into a graph being
    captured rather than running now."""
    if device.startswith("cpu"):
        return getattr(_runtime(), "_apic_capture", None) is not None
    return bool(stream) and bool(_runtime().core.wp_cuda_stream_is_capturing(ctypes.c_void_p(stream)))


def cpu_graph_shares_overload_code() -> bool:
    """Whether this Warp's CPU graphs register a launched kernel's code by module hash and key
    (``wp_apic_register_cpu_kernel``), which the overloads of a generic kernel share."""
    return hasattr(_runtime().core, "wp_apic_register_cpu_kernel")


def cpu_kernel_code(kernel: Any) -> Any:
    """What a CPU graph runs for a launch of ``kernel``: its code's hash, with which Warp names
    the compiled function (``Kernel.get_mangled_name``), or the kernel itself where it has none.

    Two kernels with one key in one module share one entry of a CPU graph
    (:func:`cpu_graph_shares_overload_code`), which is harmless when they are the same code: a
    kernel factory called twice with the same options makes two kernel objects, and Warp gives
    both one compiled function."""
    code = getattr(kernel, "hash", None)
    return code if isinstance(code, bytes) else kernel


def abort_capture(device: Any) -> None:
    """End a capture a failed block left open, discarding its graph."""
    device = _runtime().get_device(device)
    if capture_in_progress(device):
        try:
            wp.capture_end(device=device)
        except Exception:  # the capture was already invalid: ending it is all we want
            pass


#: Warp's own capture_begin and capture_end, whatever :func:`patch_capture_api` has put in their place.
ORIGINAL_CAPTURE_BEGIN = wp.capture_begin
ORIGINAL_CAPTURE_END = wp.capture_end


def patch_capture_api(
    scoped_capture: type,
    capture_launch: Callable[..., Any],
    capture_begin: Callable[..., Any] | None = None,
    capture_end: Callable[..., Any] | None = None,
) -> Callable[[], None]:
    """Put ``scoped_capture``, ``capture_launch`` (and ``capture_begin`` / ``capture_end``)
    where programs look them up.

    Replaces ``wp.ScopedCapture`` (also ``warp.utils.ScopedCapture``), ``wp.capture_launch``,
    ``wp.capture_begin`` and ``wp.capture_end``; code that bound them before the patch is
    not reached.

    Returns:
        A function that puts Warp's own back.
    """
    import warp.utils as public_utils
    from warp._src import utils as private_utils

    targets = [(wp, "ScopedCapture", scoped_capture), (wp, "capture_launch", capture_launch)]
    if capture_begin is not None and capture_end is not None:
        targets += [(wp, "capture_begin", capture_begin), (wp, "capture_end", capture_end)]
    for module in (public_utils, private_utils):
        if getattr(module, "ScopedCapture", None) is ORIGINAL_SCOPED_CAPTURE:
            targets.append((module, "ScopedCapture", scoped_capture))
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    for owner, name, value in targets:
        setattr(owner, name, value)

    def restore() -> None:
        for owner, name, value in saved:
            setattr(owner, name, value)

    return restore


def graph_handle(graph: Any) -> int | None:
    """The raw ``cudaGraph_t`` of a Warp Graph, or None (CPU graphs, external captures)."""
    handle = getattr(graph, "graph", None)
    if isinstance(handle, ctypes.c_void_p):
        return handle.value
    return None


def graph_device(graph: Any) -> Any:
    return getattr(graph, "device", None)


def graph_module_execs(graph: Any) -> list[Any]:
    return list(getattr(graph, "module_execs", ()) or ())


def cuda_function_map(graph: Any) -> dict[int, tuple[str, bool]]:
    """CUfunction handle -> (kernel name, adjoint) for every kernel a graph retains."""
    return {
        function: (str(key), adjoint)
        for module_exec in graph_module_execs(graph)
        for function, key, adjoint in _kernel_functions(module_exec)
    }


def _kernel_functions(module_exec: Any) -> Iterator[tuple[int, Any, bool]]:
    """``(CUfunction, key, adjoint)`` of every kernel a loaded module holds, keyed as Warp
    keys its hooks: by mangled name in Warp 1.19, by kernel before."""
    for key, hooks in list(getattr(module_exec, "kernel_hooks", {}).items()):
        for function, adjoint in ((hooks.forward, False), (hooks.backward, True)):
            if isinstance(function, int) and function:
                yield function, key, adjoint


def kernel_function(kernel: Any, device: Any, block_dim: int, adjoint: bool = False) -> int | None:
    """The CUfunction a launch of ``kernel`` at ``block_dim`` uses on a CUDA device."""
    device = _runtime().get_device(device)
    if not device.is_cuda:
        return None
    module_exec = kernel.module.load(device, block_dim)
    hooks = module_exec.get_kernel_hooks(kernel)
    handle = hooks.backward if adjoint else hooks.forward
    return int(handle) if handle else None


def loaded_cuda_kernels() -> dict[int, tuple[Any, bool]]:
    """CUfunction -> (kernel, adjoint) of the Warp kernels loaded on CUDA devices, as far as
    Warp's loaded modules say which kernel each function runs: the kernels of a graph
    captured earlier and embedded in another (a ``wp.capture_if`` Graph branch)."""
    from warp._src import context as _context

    out: dict[int, tuple[Any, bool]] = {}
    for module in list(getattr(_context, "user_modules", {}).values()):
        for module_exec in list(getattr(module, "execs", {}).values()):
            # A mangled name (Warp 1.19) is the kernel's by kernel_names: kernel -> name.
            kernels = {name: kernel for kernel, name in list(getattr(module_exec, "kernel_names", {}).items())}
            for function, key, adjoint in _kernel_functions(module_exec):
                kernel = kernels.get(key) if isinstance(key, str) else key
                if kernel is not None:
                    out[function] = (kernel, adjoint)
    return out

"""Everything graphcheck asks the CUDA driver, through cuda-python, in one place.

No other module imports ``cuda.bindings``, and this one does so lazily, on the first
question: importing graphcheck never needs cuda-python or a driver. Without them, the
first question raises one :class:`GraphInspectError` that says what to install.

Two kinds of function live here:

- questions to the driver (:func:`capture_tail`, :func:`walk`, :func:`param_layout`...),
  each turning a driver error code into a sentence;
- readers that turn one node's cuda-python struct into plain Python values
  (:func:`kernel_from_params`, :func:`memcpy_from_params`, :func:`memset_from_params`);
  they need no driver, so they are tested on any machine with real structs.

Driver versions gate what can be asked (``cuDriverGetVersion``): parameter layouts need
12.4 (``cuFuncGetParamInfo``); the bodies of conditional nodes can be read from the
graph only from 13.2 (``cuGraphNodeGetParams``); before that they are known from
capture time (:func:`capture_tail` inside ``wp.capture_if``/``capture_while`` reports
the body graph being captured).
"""

from __future__ import annotations

import ctypes
import heapq
from collections.abc import Iterator
from typing import Any

from .graph import GraphNode

__all__ = [
    "GraphInspectError",
    "capture_tail",
    "driver_version",
    "kernel_from_params",
    "memcpy_from_params",
    "memset_from_params",
    "param_layout",
    "walk",
]


class GraphInspectError(RuntimeError):
    """The CUDA graph cannot be read: cuda-python or the NVIDIA driver is missing, or a
    driver call failed. The message says which, and what to do."""


_driver: Any = None
_version: int | None = None


def _load() -> Any:
    global _driver, _version
    if _driver is not None:
        return _driver
    try:
        from cuda.bindings import driver
    except ImportError as error:
        raise GraphInspectError(
            "reading CUDA graphs needs cuda-python's driver bindings (cuda.bindings, 12.6.1 or newer): "
            f"pip install 'cuda-python>=12.6.1' ({error})"
        ) from error
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as error:  # cuda.pathfinder's DynamicLibNotFoundError: no libcuda
        raise GraphInspectError(f"no NVIDIA driver could be loaded to read the CUDA graph: {error}") from error
    if err != driver.CUresult.CUDA_SUCCESS:
        raise GraphInspectError(f"the CUDA driver failed to initialise: {_sentence(driver, err)}")
    err, version = driver.cuDriverGetVersion()
    _version = int(version) if err == driver.CUresult.CUDA_SUCCESS else 0
    _driver = driver
    return driver


def driver_version() -> int:
    """The driver's CUDA version as an int (13000 for CUDA 13.0)."""
    _load()
    return int(_version or 0)


def _sentence(driver: Any, err: Any) -> str:
    try:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        return f"{name.decode()} ({text.decode()})"
    except Exception:  # an error code this driver cannot name
        return str(err)


def _ok(result: Any, what: str) -> Any:
    driver = _load()
    err, *out = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise GraphInspectError(f"{what} failed: {_sentence(driver, err)}")
    return out[0] if len(out) == 1 else out


# -- capture-time attribution -------------------------------------------------------------


def capture_tail(stream: int) -> tuple[int, tuple[int, ...]] | None:
    """``(graph, nodes)``: the graph a capturing stream records into, and the nodes the
    last operation on it added (its current dependencies). None when not capturing.

    Inside ``wp.capture_if`` / ``capture_while`` the graph is the conditional body being
    captured, so an operation learns the (sub)graph it belongs to.
    """
    driver = _load()
    result = driver.cuStreamGetCaptureInfo(driver.CUstream(stream))
    err, status = result[0], result[1]
    if err != driver.CUresult.CUDA_SUCCESS or status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
        return None
    graph, deps, count = result[3], result[4], result[-1]
    return int(graph), tuple(int(n) for n in list(deps or ())[: int(count)])


# -- reading structs (no driver needed) -----------------------------------------------------


def kernel_from_params(params: Any, layout: list[tuple[int, int]] | None) -> dict[str, Any]:
    """A ``CUDA_KERNEL_NODE_PARAMS`` as plain values, its parameters split by ``layout``.

    Args:
        params: the struct ``cuGraphKernelNodeGetParams`` returned (or one built by hand).
        layout: ``(offset, size)`` of each parameter (:func:`param_layout`); None when
            unknown (the parameters are then not read).

    Returns:
        ``func``, ``grid``, ``block``, ``smem``, and ``params`` (one ``bytes`` per
        parameter; never more bytes than the layout says), ``source`` (``"kernelParams"``
        or ``"extra"``).
    """
    func = int(params.func) or int(params.kern)
    out: dict[str, Any] = {
        "func": func,
        "grid": (int(params.gridDimX), int(params.gridDimY), int(params.gridDimZ)),
        "block": (int(params.blockDimX), int(params.blockDimY), int(params.blockDimZ)),
        "smem": int(params.sharedMemBytes),
        "params": None,
        "source": None,
    }
    if layout is None:
        return out
    if params.kernelParams:
        pointers = (ctypes.c_void_p * len(layout)).from_address(int(params.kernelParams))
        out["params"] = tuple(
            ctypes.string_at(pointers[i] or 0, size) if pointers[i] else b"" for i, (_, size) in enumerate(layout)
        )
        out["source"] = "kernelParams"
    elif params.extra:
        buffer, length = _extra_buffer(int(params.extra))
        if buffer:
            out["params"] = tuple(
                ctypes.string_at(buffer + offset, size) if offset + size <= length else b"" for offset, size in layout
            )
            out["source"] = "extra"
    return out


_PARAM_END, _PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE = 0, 1, 2


def _extra_buffer(extra: int) -> tuple[int, int]:
    # `extra` is a void* list of key/value pairs ending with CU_LAUNCH_PARAM_END.
    words = ctypes.cast(extra, ctypes.POINTER(ctypes.c_void_p))
    buffer, length = 0, 0
    for i in range(0, 64, 2):
        key = words[i] or 0
        if key == _PARAM_END:
            break
        value = words[i + 1] or 0
        if key == _PARAM_BUFFER_POINTER:
            buffer = value
        elif key == _PARAM_BUFFER_SIZE and value:
            length = ctypes.c_size_t.from_address(value).value
    return buffer, length


def _address(device: Any, host: Any) -> int:
    return int(device) or int(host or 0)


def memcpy_from_params(params: Any) -> dict[str, Any]:
    """A ``CUDA_MEMCPY3D`` as ``dst``, ``src`` (addresses) and ``nbytes``."""
    width, height, depth = int(params.WidthInBytes), int(params.Height) or 1, int(params.Depth) or 1
    return {
        "dst": _address(params.dstDevice, params.dstHost),
        "src": _address(params.srcDevice, params.srcHost),
        "nbytes": width * height * depth,
    }


def memset_from_params(params: Any) -> dict[str, Any]:
    """A ``CUDA_MEMSET_NODE_PARAMS`` as ``dst``, ``value``, ``element_size`` and ``nbytes``."""
    element = int(params.elementSize)
    return {
        "dst": int(params.dst),
        "value": int(params.value),
        "element_size": element,
        "nbytes": element * int(params.width) * (int(params.height) or 1),
    }


# -- questions to the driver ------------------------------------------------------------------

_layouts: dict[int, list[tuple[int, int]] | None] = {}
_names: dict[int, str] = {}


def param_layout(func: int) -> list[tuple[int, int]] | None:
    """``(offset, size)`` of each parameter of a CUfunction (None before CUDA 12.4)."""
    if func in _layouts:
        return _layouts[func]
    driver = _load()
    if driver_version() < 12040 or not hasattr(driver, "cuFuncGetParamInfo"):
        _layouts[func] = None
        return None
    layout: list[tuple[int, int]] = []
    handle = driver.CUfunction(func)
    while True:
        err, offset, size = driver.cuFuncGetParamInfo(handle, len(layout))
        if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
            break  # past the last parameter
        if err != driver.CUresult.CUDA_SUCCESS:
            raise GraphInspectError(f"cuFuncGetParamInfo failed: {_sentence(driver, err)}")
        layout.append((int(offset), int(size)))
    _layouts[func] = layout
    return layout


def function_name(func: int) -> str:
    """The symbol of a CUfunction (``"integrate_3f2a1b_cuda_kernel_forward"``)."""
    if func in _names:
        return _names[func]
    driver = _load()
    name = ""
    if hasattr(driver, "cuFuncGetName"):
        err, raw = driver.cuFuncGetName(driver.CUfunction(func))
        if err == driver.CUresult.CUDA_SUCCESS and raw:
            name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    _names[func] = name
    return name


def _nodes(graph: Any) -> list[Any]:
    driver = _load()
    _, count = _ok(driver.cuGraphGetNodes(graph), "cuGraphGetNodes")
    if not count:
        return []
    nodes, count = _ok(driver.cuGraphGetNodes(graph, count), "cuGraphGetNodes")
    return list(nodes[: int(count)])


def _edges(graph: Any) -> list[tuple[int, int]]:
    driver = _load()
    out = _ok(driver.cuGraphGetEdges(graph), "cuGraphGetEdges")
    count = int(out[-1])
    if not count:
        return []
    out = _ok(driver.cuGraphGetEdges(graph, count), "cuGraphGetEdges")
    # 13.x returns (from, to, edge data, count); 12.x (from, to, count).
    sources, targets, count = out[0], out[1], int(out[-1])
    return [(int(s), int(t)) for s, t in zip(list(sources)[:count], list(targets)[:count])]


def _topological(graph: Any) -> list[tuple[Any, tuple[int, ...]]]:
    # Kahn's algorithm, ties broken by cuGraphGetNodes' order, so the order is stable.
    nodes = _nodes(graph)
    index = {int(n): i for i, n in enumerate(nodes)}
    deps: list[list[int]] = [[] for _ in nodes]
    successors: list[list[int]] = [[] for _ in nodes]
    indegree = [0] * len(nodes)
    for source, target in _edges(graph):
        if source in index and target in index:
            successors[index[source]].append(index[target])
            deps[index[target]].append(source)
            indegree[index[target]] += 1
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append((nodes[i], tuple(deps[i])))
        for j in successors[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(ready, j)
    return out


def walk(graph_handle: int, extra_graphs: tuple[int, ...] = ()) -> Iterator[GraphNode]:
    """Every node of a graph in topological order, the nodes of a child graph or
    conditional body right after the node that holds them.

    Args:
        graph_handle: the ``cudaGraph_t`` (``wp.Graph.graph.value``).
        extra_graphs: more graphs to walk after it, at depth 1: the bodies of conditional
            nodes known from capture time, which drivers before CUDA 13.2 cannot reach
            from the graph.
    """
    seen: set[int] = set()
    yield from _walk(graph_handle, 0, seen)
    for graph in extra_graphs:
        yield from _walk(graph, 1, seen)


def _walk(graph: int, depth: int, seen: set[int]) -> Iterator[GraphNode]:
    driver = _load()
    types = driver.CUgraphNodeType
    if graph in seen:
        return
    seen.add(graph)
    for node, deps in _topological(driver.CUgraph(graph)):
        try:
            kind = _ok(driver.cuGraphNodeGetType(node), "cuGraphNodeGetType")
            name = kind.name.removeprefix("CU_GRAPH_NODE_TYPE_")
        except ValueError:  # a node type newer than these bindings
            kind, name = None, "UNKNOWN"
        raw = GraphNode(-1, int(node), graph, depth, name, deps)  # read_graph numbers the walk
        children: list[int] = []
        if kind == types.CU_GRAPH_NODE_TYPE_KERNEL:
            params = _ok(driver.cuGraphKernelNodeGetParams(node), "cuGraphKernelNodeGetParams")
            func = int(params.func) or int(params.kern)
            raw.fields = kernel_from_params(params, param_layout(func) if func else None)
            raw.fields["name"] = function_name(func) if func else ""
        elif kind == types.CU_GRAPH_NODE_TYPE_MEMCPY:
            raw.fields = memcpy_from_params(_ok(driver.cuGraphMemcpyNodeGetParams(node), "memcpy params"))
        elif kind == types.CU_GRAPH_NODE_TYPE_MEMSET:
            raw.fields = memset_from_params(_ok(driver.cuGraphMemsetNodeGetParams(node), "memset params"))
        elif kind == types.CU_GRAPH_NODE_TYPE_MEM_ALLOC:
            alloc = _ok(driver.cuGraphMemAllocNodeGetParams(node), "mem alloc params")
            raw.fields = {"dst": int(alloc.dptr), "nbytes": int(alloc.bytesize)}
        elif kind == types.CU_GRAPH_NODE_TYPE_MEM_FREE:
            raw.fields = {"dst": int(_ok(driver.cuGraphMemFreeNodeGetParams(node), "mem free params"))}
        elif kind == types.CU_GRAPH_NODE_TYPE_GRAPH:
            child = int(_ok(driver.cuGraphChildGraphNodeGetGraph(node), "cuGraphChildGraphNodeGetGraph"))
            raw.fields = {"graphs": (child,)}
            children = [child]
        elif kind == types.CU_GRAPH_NODE_TYPE_CONDITIONAL:
            if driver_version() >= 13020 and hasattr(driver, "cuGraphNodeGetParams"):
                cond = _ok(driver.cuGraphNodeGetParams(node), "cuGraphNodeGetParams").conditional
                children = [int(g) for g in list(cond.phGraph_out)[: int(cond.size)]]
            raw.fields = {"graphs": tuple(children)}
        yield raw
        for child in children:
            yield from _walk(child, depth + 1, seen)


def set_kernel_params(node: int, params: Any) -> None:
    """Replace a kernel node's parameters (tests use it to corrupt a node on purpose)."""
    driver = _load()
    _ok(driver.cuGraphKernelNodeSetParams(driver.CUgraphNode(node), params), "cuGraphKernelNodeSetParams")


def kernel_params(node: int) -> Any:
    """The ``CUDA_KERNEL_NODE_PARAMS`` of a kernel node."""
    driver = _load()
    return _ok(driver.cuGraphKernelNodeGetParams(driver.CUgraphNode(node)), "cuGraphKernelNodeGetParams")

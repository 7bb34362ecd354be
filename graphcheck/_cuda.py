"""Everything graphcheck asks the CUDA driver, through cuda-python, in one place.

No other module imports ``cuda.bindings``, and this one does so lazily, on the first
question: importing graphcheck never needs cuda-python or a driver. Without them, the
first question raises one :class:`GraphInspectError` that says what to install.

Three kinds of code live here:

- :func:`capture_state`, asked around every operation recorded during a CUDA capture:
  the graph the stream captures into and its current dependencies;
- a :class:`Reader` that reads the nodes of one graph for one walk (its caches of
  parameter layouts and function names live as long as the walk: modules unload and
  CUfunction addresses are reused); a node it cannot read carries the reason and the
  walk goes on;
- readers that turn one node's cuda-python struct into plain Python values
  (:func:`kernel_from_params`, :func:`memcpy_from_params`, :func:`memset_from_params`);
  they need no driver, so they are tested on any machine with real structs.

Every failure, whether a driver result code or an exception the bindings raise (a
missing entry point on an older driver, a value they cannot convert), becomes a
:class:`GraphInspectError` with a sentence. Driver versions gate what can be asked
(``cuDriverGetVersion``): function names need 12.3 (``cuFuncGetName``), parameter
layouts 12.4 (``cuFuncGetParamInfo``); the bodies of conditional nodes can be read from
the graph only from 13.2 (``cuGraphNodeGetParams``), before that they are learnt at
capture time (see :class:`graphcheck.nodes.CaptureSpan`).
"""

from __future__ import annotations

import ctypes
import heapq
from typing import Any

from .nodes import GraphNode, GraphReadError

__all__ = [
    "GraphInspectError",
    "Reader",
    "capture_state",
    "driver_version",
    "kernel_from_params",
    "memcpy_from_params",
    "memset_from_params",
]

#: More parameters than a kernel can take (CUDA allows 32764 bytes of them): a driver
#: answering past this many is not describing a kernel.
_MAX_PARAMS = 32768

#: First driver versions that answer a question (``cuDriverGetVersion`` numbering).
FUNCTION_NAMES = 12030
PARAM_LAYOUTS = 12040
CONDITIONAL_BODIES = 13020


class GraphInspectError(GraphReadError):
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
    try:
        err, version = driver.cuDriverGetVersion()
    except RuntimeError as error:
        raise GraphInspectError(f"cuDriverGetVersion could not be asked: {error}") from error
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


def _version_text(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def _ask(driver: Any, version: int, name: str, *args: Any) -> tuple[Any, list[Any]]:
    """``(result code, outputs)`` of ``driver.<name>(*args)``; an exception the bindings
    raise (a missing entry point, a value they cannot convert) as a :class:`GraphInspectError`."""
    function = getattr(driver, name, None)
    if function is None:
        raise GraphInspectError(f"{name} is missing from the installed cuda-python: upgrade cuda-python")
    try:
        err, *out = function(*args)
    except RuntimeError as error:  # cuda.bindings' FunctionNotFoundError: an older driver
        raise GraphInspectError(
            f"{name} is not available with this driver (CUDA {_version_text(version)}): {error}"
        ) from error
    except (TypeError, ValueError) as error:
        raise GraphInspectError(f"{name} could not be asked: {type(error).__name__}: {error}") from error
    return err, out


def _call(driver: Any, version: int, name: str, *args: Any) -> Any:
    """``driver.<name>(*args)``'s outputs (one value, or a list of them).

    Raises:
        GraphInspectError: the result code is not ``CUDA_SUCCESS``, or the bindings raised.
    """
    err, out = _ask(driver, version, name, *args)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise GraphInspectError(f"{name} failed: {_sentence(driver, err)}")
    return out[0] if len(out) == 1 else out


# -- capture-time attribution -------------------------------------------------------------


def capture_state(stream: int) -> tuple[int, tuple[int, ...]] | None:
    """``(graph, dependencies)`` of a capturing stream: the graph it records into and the
    nodes the next operation will depend on. None when the stream is not capturing.

    Inside ``wp.capture_if`` / ``capture_while`` the graph is the conditional body being
    captured. Asked before and after each recorded operation, the two answers delimit
    the nodes the operation added (:class:`graphcheck.nodes.CaptureSpan`).
    """
    driver = _load()
    out = _call(driver, driver_version(), "cuStreamGetCaptureInfo", driver.CUstream(stream))
    # 13.x: (status, id, graph, dependencies, edge data, count); 12.x (status, id, graph, dependencies, count).
    status, graph, deps, count = out[0], out[2], out[3], out[-1]
    if status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
        return None
    return int(graph), tuple(int(n) for n in list(deps or ())[: int(count)])


# -- reading structs (no driver needed) -----------------------------------------------------


def kernel_from_params(params: Any, layout: list[tuple[int, int]] | None) -> dict[str, Any]:
    """A ``CUDA_KERNEL_NODE_PARAMS`` as plain values, its parameters split by ``layout``.

    Args:
        params: the struct ``cuGraphKernelNodeGetParams`` returned (or one built by hand).
        layout: ``(offset, size)`` of each parameter, as many as the driver reports
            (:meth:`Reader.layout`); None when unknown (the parameters are then not read).

    Returns:
        ``func``, ``grid``, ``block``, ``smem``, and ``params`` (one ``bytes`` per
        parameter; never more parameters nor bytes than the layout says), ``source``
        (``"kernelParams"`` or ``"extra"``).
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
        addresses = [pointers[i] or 0 for i in range(len(layout))]
        out["params"] = tuple(
            ctypes.string_at(address, size) if address else b"" for address, (_, size) in zip(addresses, layout)
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


def _memory_kind(params: Any, field: str) -> str:
    # The getter raises ValueError on a type the bindings do not know (0 when unset).
    try:
        return str(getattr(params, field).name).removeprefix("CU_MEMORYTYPE_").lower()
    except ValueError:
        return "unknown"


def _memcpy_side(params: Any, side: str, width: int, height: int, depth: int) -> tuple[int | None, int, str]:
    """``(address, extent, kind)`` of one side of a ``CUDA_MEMCPY3D``."""
    kind = _memory_kind(params, f"{side}MemoryType")
    device, host = int(getattr(params, f"{side}Device")), int(getattr(params, f"{side}Host") or 0)
    base: int | None
    if kind == "host":
        base = host
    elif kind in ("device", "unified"):
        base = device
    elif kind == "array":
        base = None  # a CUDA array has no linear address
    else:
        base = device or host
    pitch = int(getattr(params, f"{side}Pitch")) or width
    rows = int(getattr(params, f"{side}Height")) or height
    x, y, z = (int(getattr(params, f"{side}{axis}")) for axis in ("XInBytes", "Y", "Z"))
    extent = (depth - 1) * pitch * rows + (height - 1) * pitch + width
    address = base + x + y * pitch + z * pitch * rows if base is not None else None
    return address, extent, kind


def memcpy_from_params(params: Any) -> dict[str, Any]:
    """A ``CUDA_MEMCPY3D`` as plain values, addresses computed from every field.

    Each side's address is its pointer (``*Device`` or ``*Host``, by its memory type)
    plus ``XInBytes + Y * pitch + Z * pitch * height``.

    Returns:
        ``dst``, ``src`` (addresses; None for a CUDA array), ``nbytes`` (bytes copied),
        ``dst_extent``, ``src_extent`` (bytes spanned from each address: more than
        ``nbytes`` for a pitched copy), ``dst_kind``, ``src_kind`` (``"device"``,
        ``"host"``, ``"unified"``, ``"array"`` or ``"unknown"``).
    """
    width, height, depth = int(params.WidthInBytes), int(params.Height) or 1, int(params.Depth) or 1
    dst, dst_extent, dst_kind = _memcpy_side(params, "dst", width, height, depth)
    src, src_extent, src_kind = _memcpy_side(params, "src", width, height, depth)
    return {
        "dst": dst,
        "src": src,
        "nbytes": width * height * depth,
        "dst_extent": dst_extent,
        "src_extent": src_extent,
        "dst_kind": dst_kind,
        "src_kind": src_kind,
    }


def memset_from_params(params: Any) -> dict[str, Any]:
    """A ``CUDA_MEMSET_NODE_PARAMS`` as ``dst``, ``value``, ``element_size``, ``nbytes``
    (bytes set) and ``extent`` (bytes spanned from ``dst``: more for a pitched memset)."""
    element, width, height = int(params.elementSize), int(params.width), int(params.height) or 1
    row = element * width
    return {
        "dst": int(params.dst),
        "value": int(params.value),
        "element_size": element,
        "nbytes": row * height,
        "extent": (height - 1) * (int(params.pitch) or row) + row,
    }


# -- reading a graph ---------------------------------------------------------------------------


class Reader:
    """Reads the nodes of CUDA graphs for one walk.

    Parameter layouts and function names are cached by CUfunction for the life of the
    reader only: a module unloaded later may leave its address to another function.

    Args:
        driver: the ``cuda.bindings.driver`` module (default: loaded now); tests pass an
            object answering with recorded driver values.
        version: the driver's version (default: asked now).
    """

    def __init__(self, driver: Any = None, version: int | None = None) -> None:
        self.driver = driver if driver is not None else _load()
        self.version = version if version is not None else driver_version()
        self._layouts: dict[tuple[int, bool], tuple[list[tuple[int, int]] | None, str]] = {}
        self._names: dict[tuple[int, bool], str] = {}

    def call(self, name: str, *args: Any) -> Any:
        """``driver.<name>(*args)``'s outputs; any failure as a :class:`GraphInspectError`."""
        return _call(self.driver, self.version, name, *args)

    # -- functions ---------------------------------------------------------------------------

    def layout(self, handle: int, is_kernel: bool = False) -> tuple[list[tuple[int, int]] | None, str]:
        """``(layout, why)``: ``(offset, size)`` of each parameter of a CUfunction (a
        CUkernel with ``is_kernel``), or None and the reason it is unknown."""
        key = (handle, is_kernel)
        if key not in self._layouts:
            self._layouts[key] = self._read_layout(handle, is_kernel)
        return self._layouts[key]

    def _read_layout(self, handle: int, is_kernel: bool) -> tuple[list[tuple[int, int]] | None, str]:
        if self.version < PARAM_LAYOUTS:
            version = _version_text(self.version)
            return None, f"parameter layouts need a CUDA 12.4 driver (cuFuncGetParamInfo); this one is {version}"
        driver = self.driver
        name = "cuKernelGetParamInfo" if is_kernel else "cuFuncGetParamInfo"
        target = driver.CUkernel(handle) if is_kernel else driver.CUfunction(handle)
        layout: list[tuple[int, int]] = []
        while len(layout) <= _MAX_PARAMS:
            try:
                err, out = _ask(driver, self.version, name, target, len(layout))
            except GraphInspectError as error:
                return None, str(error)
            if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
                break  # past the last parameter
            if err != driver.CUresult.CUDA_SUCCESS:
                return None, f"{name} failed: {_sentence(driver, err)}"
            layout.append((int(out[0]), int(out[1])))
        else:
            return None, f"{name} answered past {_MAX_PARAMS} parameters for function {handle:#x}"
        if not layout:
            # Every Warp kernel has at least its launch bounds: no parameter at all means
            # the driver cannot describe this function, not that it takes none.
            return None, f"{name} reports no parameters for function {handle:#x}"
        return layout, ""

    def name(self, handle: int, is_kernel: bool = False) -> str:
        """The symbol of a CUfunction (``"integrate_3f2a1b_cuda_kernel_forward"``); ''
        when the driver cannot say (before CUDA 12.3)."""
        key = (handle, is_kernel)
        if key not in self._names:
            name = ""
            if self.version >= FUNCTION_NAMES:
                what = "cuKernelGetName" if is_kernel else "cuFuncGetName"
                target = self.driver.CUkernel(handle) if is_kernel else self.driver.CUfunction(handle)
                try:
                    raw = self.call(what, target)
                    name = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "")
                except GraphInspectError:
                    name = ""  # a name only labels the node; the checks do not depend on it
            self._names[key] = name
        return self._names[key]

    # -- graphs --------------------------------------------------------------------------------

    def _handles(self, graph: Any) -> list[Any]:
        count = int(self.call("cuGraphGetNodes", graph)[1])
        if not count:
            return []
        nodes, count = self.call("cuGraphGetNodes", graph, count)
        return list(nodes)[: int(count)]

    def _edges(self, graph: Any) -> list[tuple[int, int]]:
        count = int(self.call("cuGraphGetEdges", graph)[-1])
        if not count:
            return []
        out = self.call("cuGraphGetEdges", graph, count)
        # 13.x returns (from, to, edge data, count); 12.x (from, to, count).
        sources, targets, count = out[0], out[1], int(out[-1])
        return [(int(s), int(t)) for s, t in zip(list(sources)[:count], list(targets)[:count])]

    def nodes(self, graph: int, depth: int = 0) -> list[GraphNode]:
        """Every node of one graph (not its children) in topological order, each read
        as far as the driver answers; a node it cannot read has its ``error`` set.

        Raises:
            GraphInspectError: the graph's nodes or edges cannot be listed.
        """
        handle = self.driver.CUgraph(graph)
        nodes = self._handles(handle)
        index = {int(n): i for i, n in enumerate(nodes)}
        deps: list[list[int]] = [[] for _ in nodes]
        successors: list[list[int]] = [[] for _ in nodes]
        indegree = [0] * len(nodes)
        for source, target in self._edges(handle):
            if source in index and target in index:
                successors[index[source]].append(index[target])
                deps[index[target]].append(source)
                indegree[index[target]] += 1
        # Kahn's algorithm, ties broken by cuGraphGetNodes' order, so the order is stable.
        ready = [i for i, d in enumerate(indegree) if d == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            i = heapq.heappop(ready)
            out.append(self.node(nodes[i], graph, depth, tuple(deps[i])))
            for j in successors[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    heapq.heappush(ready, j)
        return out

    def node(self, handle: Any, graph: int, depth: int, deps: tuple[int, ...]) -> GraphNode:
        """One node, read by its type; the reason in ``error`` when it cannot be."""
        node = GraphNode(-1, int(handle), graph, depth, "UNKNOWN", deps)
        try:
            kind = self.call("cuGraphNodeGetType", handle)
            node.type = str(kind.name).removeprefix("CU_GRAPH_NODE_TYPE_")
        except GraphInspectError as error:  # a node type newer than these bindings, or a failure
            node.error = f"its type could not be read: {error}"
            return node
        try:
            node.fields = self._fields(handle, node.type)
        except GraphInspectError as error:
            node.error = str(error)
        return node

    def _fields(self, handle: Any, kind: str) -> dict[str, Any]:
        if kind == "KERNEL":
            params = self.call("cuGraphKernelNodeGetParams", handle)
            func, kern = int(params.func), int(params.kern)
            target, is_kernel = (func, False) if func else (kern, True)
            layout, why = self.layout(target, is_kernel) if target else (None, "the node names no function")
            fields = kernel_from_params(params, layout)
            fields["name"] = self.name(target, is_kernel) if target else ""
            if fields["params"] is None:
                fields["params_unread"] = why or "the node holds neither kernelParams nor an extra buffer"
            return fields
        if kind == "MEMCPY":
            return memcpy_from_params(self.call("cuGraphMemcpyNodeGetParams", handle))
        if kind == "MEMSET":
            return memset_from_params(self.call("cuGraphMemsetNodeGetParams", handle))
        if kind == "MEM_ALLOC":
            alloc = self.call("cuGraphMemAllocNodeGetParams", handle)
            return {"dst": int(alloc.dptr), "nbytes": int(alloc.bytesize)}
        if kind == "MEM_FREE":
            return {"dst": int(self.call("cuGraphMemFreeNodeGetParams", handle))}
        if kind == "GRAPH":
            return {"graphs": (int(self.call("cuGraphChildGraphNodeGetGraph", handle)),)}
        if kind == "CONDITIONAL":
            bodies = self.conditional_bodies(handle)
            return {"graphs": bodies} if bodies is not None else {}
        return {}

    def conditional_bodies(self, handle: Any) -> tuple[int, ...] | None:
        """The body graphs of a conditional node; None before CUDA 13.2, whose drivers
        cannot say (the bodies are then known from capture time)."""
        if self.version < CONDITIONAL_BODIES:
            return None
        conditional = self.call("cuGraphNodeGetParams", handle).conditional
        return tuple(int(g) for g in list(conditional.phGraph_out)[: int(conditional.size)])


# -- questions tests and the probe ask ------------------------------------------------------


def kernel_params(node: int) -> Any:
    """The ``CUDA_KERNEL_NODE_PARAMS`` of a kernel node."""
    driver = _load()
    return _call(driver, driver_version(), "cuGraphKernelNodeGetParams", driver.CUgraphNode(node))


def set_kernel_params(node: int, params: Any) -> None:
    """Replace a kernel node's parameters (tests use it to corrupt a node on purpose)."""
    driver = _load()
    _call(driver, driver_version(), "cuGraphKernelNodeSetParams", driver.CUgraphNode(node), params)

"""A CUDA driver that answers from a recorded session, for the graph tests without a GPU.

No driver runs: every answer is a value the real ``cuda.bindings.driver`` returns, built
with the real bindings (``CUresult`` and ``CUgraphNodeType`` members, ``CUgraph`` /
``CUgraphNode`` handles, ``CUDA_KERNEL_NODE_PARAMS``, ``CUDA_MEMCPY3D`` and
``CUDA_MEMSET_NODE_PARAMS`` structs, ``CUgraphEdgeData``), in the tuple shapes the 13.x
bindings return. Anything not recorded (the types and enums) is the real module's.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

driver = pytest.importorskip("cuda.bindings.driver", reason="needs cuda-python's bindings (no driver needed)")

SUCCESS = driver.CUresult.CUDA_SUCCESS
INVALID_VALUE = driver.CUresult.CUDA_ERROR_INVALID_VALUE
TYPES = driver.CUgraphNodeType


class Keep:
    """Keeps the ctypes buffers a struct points into alive for the test's duration."""

    def __init__(self) -> None:
        self.objects: list[Any] = []

    def __call__(self, obj: Any) -> Any:
        self.objects.append(obj)
        return obj


def kernel_struct(param_bytes, keep, *, grid=(1, 1, 1), block=(256, 1, 1), smem=0, func=0x7F00_1000):
    """A CUDA_KERNEL_NODE_PARAMS holding ``param_bytes`` through ``kernelParams``, as the
    driver fills it for a node captured from ``cuLaunchKernel(func, ..., args, extra=0)``."""
    buffers = [keep(ctypes.create_string_buffer(bytes(b), max(len(b), 1))) for b in param_bytes]
    pointers = keep((ctypes.c_void_p * max(len(buffers), 1))(*[ctypes.addressof(b) for b in buffers]))
    p = driver.CUDA_KERNEL_NODE_PARAMS()
    p.func = driver.CUfunction(func)
    p.gridDimX, p.gridDimY, p.gridDimZ = grid
    p.blockDimX, p.blockDimY, p.blockDimZ = block
    p.sharedMemBytes = smem
    p.kernelParams = ctypes.addressof(pointers)
    return p


def memcpy_struct(dst, src, nbytes, *, dst_type="DEVICE", src_type="DEVICE", **offsets):
    """A 1-D CUDA_MEMCPY3D; ``offsets`` sets any other field (``dstXInBytes=16``...)."""
    m = driver.CUDA_MEMCPY3D()
    m.dstMemoryType = getattr(driver.CUmemorytype, f"CU_MEMORYTYPE_{dst_type}")
    m.srcMemoryType = getattr(driver.CUmemorytype, f"CU_MEMORYTYPE_{src_type}")
    if dst_type == "HOST":
        m.dstHost = dst
    else:
        m.dstDevice = driver.CUdeviceptr(dst)
    if src_type == "HOST":
        m.srcHost = src
    else:
        m.srcDevice = driver.CUdeviceptr(src)
    m.WidthInBytes, m.Height, m.Depth = nbytes, 1, 1
    for name, value in offsets.items():
        setattr(m, name, value)
    return m


def memset_struct(dst, nbytes, value=0, *, element_size=1):
    """A 1-D CUDA_MEMSET_NODE_PARAMS setting ``nbytes`` in elements of ``element_size``
    bytes (4: what ``cuMemsetD32`` captures)."""
    s = driver.CUDA_MEMSET_NODE_PARAMS()
    s.dst = driver.CUdeviceptr(dst)
    s.value, s.elementSize, s.width, s.height = value, element_size, nbytes // element_size, 1
    return s


class RecordedDriver:
    """Answers the graph questions from recorded values (see the module docstring).

    Args:
        version: what ``cuDriverGetVersion`` answered (13000: driver R580, CUDA 13.0).
    """

    def __init__(self, version: int = 13000) -> None:
        self.version = version
        self.graphs: dict[int, list[int]] = {}  # graph -> its nodes, in cuGraphGetNodes' order
        self.edges: dict[int, list[tuple[int, int]]] = {}
        self.types: dict[int, Any] = {}
        self.params: dict[int, Any] = {}  # node -> the struct its getter returns
        self.children: dict[int, int] = {}  # child graph node -> its graph
        self.layouts: dict[int, list[tuple[int, int]]] = {}  # function -> cuFuncGetParamInfo answers
        self.names: dict[int, bytes] = {}
        self.failures: dict[tuple[str, int], Any] = {}  # (function, handle) -> a CUresult or an exception
        self.calls: list[tuple[str, int]] = []

    # -- building the recorded graph --------------------------------------------------------

    def node(self, graph: int, handle: int, kind: str, params: Any = None, deps: tuple[int, ...] = ()) -> int:
        self.graphs.setdefault(graph, []).append(handle)
        self.edges.setdefault(graph, []).extend((d, handle) for d in deps)
        self.types[handle] = getattr(TYPES, f"CU_GRAPH_NODE_TYPE_{kind}")
        if params is not None:
            self.params[handle] = params
        return handle

    def kernel(self, graph, handle, struct, layout, name=b"", deps=()):
        self.node(graph, handle, "KERNEL", struct, deps)
        func = int(struct.func)
        self.layouts[func] = layout
        self.names[func] = name
        return handle

    def child(self, graph, handle, child_graph, deps=()):
        self.node(graph, handle, "GRAPH", None, deps)
        self.children[handle] = child_graph
        self.graphs.setdefault(child_graph, [])
        return handle

    # -- the answers ------------------------------------------------------------------------

    def _answer(self, name: str, handle: Any, *out: Any) -> tuple[Any, ...]:
        self.calls.append((name, int(handle)))
        failure = self.failures.get((name, int(handle)))
        if isinstance(failure, Exception):
            raise failure
        if failure is not None:
            return (failure, *(None for _ in out))
        return (SUCCESS, *out)

    def cuGraphGetNodes(self, graph: Any, count: int = 0) -> tuple[Any, ...]:
        nodes = self.graphs[int(graph)]
        listed = [driver.CUgraphNode(n) for n in nodes[:count]] if count else []
        return self._answer("cuGraphGetNodes", graph, listed, len(nodes))

    def cuGraphGetEdges(self, graph: Any, count: int = 0) -> tuple[Any, ...]:
        edges = self.edges.get(int(graph), [])
        if not count:
            return self._answer("cuGraphGetEdges", graph, [], [], [], len(edges))
        sources = [driver.CUgraphNode(s) for s, _ in edges[:count]]
        targets = [driver.CUgraphNode(t) for _, t in edges[:count]]
        data = [driver.CUgraphEdgeData() for _ in edges[:count]]
        return self._answer("cuGraphGetEdges", graph, sources, targets, data, len(edges))

    def cuGraphNodeGetType(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphNodeGetType", node, self.types[int(node)])

    def cuGraphKernelNodeGetParams(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphKernelNodeGetParams", node, self.params[int(node)])

    def cuGraphMemcpyNodeGetParams(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphMemcpyNodeGetParams", node, self.params[int(node)])

    def cuGraphMemsetNodeGetParams(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphMemsetNodeGetParams", node, self.params[int(node)])

    def cuGraphMemAllocNodeGetParams(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphMemAllocNodeGetParams", node, self.params[int(node)])

    def cuGraphChildGraphNodeGetGraph(self, node: Any) -> tuple[Any, ...]:
        return self._answer("cuGraphChildGraphNodeGetGraph", node, driver.CUgraph(self.children[int(node)]))

    def cuGraphNodeGetParams(self, node: Any) -> tuple[Any, ...]:
        if self.version < 13020:  # what the 13.x bindings raise on an older driver
            from cuda.bindings._internal.utils import FunctionNotFoundError

            raise FunctionNotFoundError("function cuGraphNodeGetParams is not found")
        return self._answer("cuGraphNodeGetParams", node, self.params[int(node)])

    def cuFuncGetParamInfo(self, func: Any, index: int) -> tuple[Any, ...]:
        layout = self.layouts.get(int(func), [])
        self.calls.append(("cuFuncGetParamInfo", int(func)))
        failure = self.failures.get(("cuFuncGetParamInfo", int(func)))
        if isinstance(failure, Exception):
            raise failure
        if index >= len(layout):
            return INVALID_VALUE, 0, 0
        return SUCCESS, *layout[index]

    def cuFuncGetName(self, func: Any) -> tuple[Any, ...]:
        return self._answer("cuFuncGetName", func, self.names.get(int(func), b""))

    def __getattr__(self, name: str) -> Any:
        return getattr(driver, name)  # the real types and enums

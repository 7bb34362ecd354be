"""Stage 4a of the pipeline: read a captured CUDA graph's nodes as plain records.

:func:`read_graph` walks a ``wp.Graph`` (its raw ``cudaGraph_t``) with cuda-python and
returns one :class:`GraphNode` per node, in topological order, with child graphs and
conditional bodies walked: kernel nodes with their function, name, grid, block,
shared memory and parameter bytes (split per parameter with ``cuFuncGetParamInfo``);
memcpy, memset, memory alloc and free nodes with their addresses; the rest by type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import _warp

__all__ = ["GraphNode", "read_graph"]


@dataclass
class GraphNode:
    """One node of a captured CUDA graph.

    Attributes:
        index: position in the walk (topological order, bodies after their node).
        handle: the ``CUgraphNode``.
        graph: the ``CUgraph`` holding it.
        depth: 0 in the top graph, 1 inside a child graph or conditional body...
        type: ``"KERNEL"``, ``"MEMCPY"``, ``"MEMSET"``, ``"MEM_ALLOC"``, ``"MEM_FREE"``,
            ``"GRAPH"`` (child graph), ``"CONDITIONAL"``, ``"EVENT_RECORD"``,
            ``"WAIT_EVENT"``, ``"EMPTY"``, ``"HOST"``...
        deps: handles of the nodes it depends on.
        fields: for a kernel ``func``, ``name``, ``grid``, ``block``, ``smem``, ``params``
            (bytes per parameter); for a memcpy ``dst``, ``src``, ``nbytes``; for a memset
            ``dst``, ``value``, ``element_size``, ``nbytes``; for alloc and free ``dst``
            (and ``nbytes``); for child graphs and conditionals ``graphs``.
        record: index of the recorded operation that made it, once matched (or None).
        role: what the cross-check decided it is: ``"recorded"``, ``"warp-native"``,
            ``"warp-conditional"``, ``"allocation"``, ``"synchronization"``,
            ``"embedded"``, ``"foreign"`` or ``"unrecorded"``.
    """

    index: int
    handle: int
    graph: int
    depth: int
    type: str
    deps: tuple[int, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    record: int | None = None
    role: str = ""

    @property
    def name(self) -> str:
        """A kernel node's function name ('' for other nodes)."""
        return str(self.fields.get("name", ""))


def read_graph(graph: Any, extra_graphs: Iterable[int] = ()) -> list[GraphNode]:
    """Every node of a captured ``wp.Graph``, in topological order.

    Args:
        graph: a ``wp.Graph`` from a CUDA capture (kept alive while reading).
        extra_graphs: more graphs to walk: bodies of conditional nodes known from
            capture time (drivers before CUDA 13.2 cannot reach them from the graph).

    Raises:
        ValueError: for a CPU graph or an external capture (no CUDA graph to read).
        graphcheck._cuda.GraphInspectError: without cuda-python or a driver, or when
            the driver refuses a question (the message says which and why).
    """
    from . import _cuda

    handle = _warp.graph_handle(graph)
    if not handle:
        raise ValueError(
            "this graph has no CUDA graph to read: it was captured on the CPU or by an external capture "
            f"(device {_warp.graph_device(graph)})"
        )
    nodes = list(_cuda.walk(handle, tuple(extra_graphs)))
    for index, node in enumerate(nodes):
        node.index = index
    return nodes

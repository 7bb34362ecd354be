"""Leaf value types of a CUDA launch and a captured CUDA graph: what Warp asked the driver
for, a node as read, and where an operation stood.

Plain data, with no import of Warp or cuda-python: the driver adapter
(:mod:`graphcheck._cuda`) makes the nodes, the recording session stores a
:class:`CudaLaunch` and a :class:`CaptureSpan` on each CUDA operation it records, and the
graph layer (:mod:`graphcheck.graph`) matches one against the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["CaptureSpan", "CudaLaunch", "GraphNode"]


class CudaLaunch(NamedTuple):
    """The native launch arguments of one CUDA kernel launch (``wp_cuda_launch_kernel``).

    Attributes:
        function: the ``CUfunction`` launched.
        dim_size: the launch's total thread count.
        max_blocks: the cap on blocks Warp was asked for (0: none).
        block_dim: threads per block.
        grid_stride: whether the kernel loops with a grid stride (1) or not (0).
        cluster_dim: the thread block cluster size.
        smem_bytes: dynamic shared memory per block.
    """

    function: int
    dim_size: int
    max_blocks: int
    block_dim: int
    grid_stride: int
    cluster_dim: int
    smem_bytes: int


class CaptureSpan(NamedTuple):
    """Where a capturing stream stood around one operation (``cuStreamGetCaptureInfo``).

    The nodes an operation added are those on the paths from ``before`` to ``after``:
    the ancestors of ``after`` (themselves included) that descend from ``before``; every
    ancestor of ``after`` when ``before`` is empty (the graph was empty). An operation
    that added nothing leaves ``after == before``.

    Attributes:
        graph: the ``CUgraph`` the stream captured into (a conditional body inside
            ``wp.capture_if`` / ``capture_while``).
        before: the stream's capture dependencies just before the operation.
        after: its capture dependencies just after.
        bodies: for a ``wp.capture_if`` / ``capture_while``, the body graphs it
            captured into, in the order Warp captured them (the ``if`` branch first).
    """

    graph: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    bodies: tuple[int, ...] = ()


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
            ``"WAIT_EVENT"``, ``"EMPTY"``, ``"HOST"``... ``"UNKNOWN"`` when unreadable.
        deps: handles of the nodes it depends on.
        fields: for a kernel ``func``, ``name``, ``grid``, ``block``, ``smem``, ``params``
            (bytes per parameter, None when they could not be read) and
            ``params_unread`` (why not); for a memcpy ``dst``, ``src``, ``nbytes``,
            ``dst_extent`` and ``src_extent`` (bytes spanned from each address), ``dst_kind``
            and ``src_kind`` (``"device"``, ``"host"``...); for a memset ``dst``,
            ``value``, ``element_size``, ``nbytes``, ``extent``; for alloc and free ``dst``
            (and ``nbytes``); for child graphs and conditionals ``graphs`` (the bodies).
        error: why the node could not be read ('' when it was).
        record: index of the recorded operation that made it, once matched (or None).
        role: what the matching decided it is: ``"recorded"`` (the node an operation
            is checked against), ``"warp-native"`` (more nodes of the same Warp
            operation), ``"warp-conditional"``, ``"allocation"``, ``"synchronization"``,
            ``"structure"`` (child graph and conditional nodes no operation claims),
            ``"embedded"`` (inside a child graph), ``"unread"``, ``"unrecorded"`` (a Warp
            kernel no recorded launch made) or ``"foreign"`` (from outside Warp).
    """

    index: int
    handle: int
    graph: int
    depth: int
    type: str
    deps: tuple[int, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    record: int | None = None
    role: str = ""

    @property
    def name(self) -> str:
        """A kernel node's function name ('' for other nodes, or when unknown)."""
        return str(self.fields.get("name", "") or "")

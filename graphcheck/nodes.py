"""Leaf value types of a launch and a captured graph: what Warp asked the driver for, a
node as read, where an operation stood, and what a graph left out.

Plain data, with no import of Warp or cuda-python: the driver adapter
(:mod:`graphcheck._cuda`) makes the nodes of a CUDA graph, the Warp adapter
(:mod:`graphcheck._warp`) those of a CPU graph (one node per operation its stream
holds), the recording session stores a :class:`CudaLaunch` and a :class:`CaptureSpan` on
each CUDA operation it records, and the graph layer (:mod:`graphcheck.graph`) matches
one against the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["CaptureSpan", "CudaLaunch", "Dropped", "GraphNode", "GraphReadError", "node_text"]


class GraphReadError(RuntimeError):
    """A captured graph cannot be read: on CUDA, cuda-python or the driver is missing or a
    driver call failed; on the CPU, Warp's operation stream is in a format or layout
    graphcheck does not read. The message says which, and what to do."""


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


@dataclass(slots=True)
class GraphNode:
    """One node of a captured graph: a CUDA graph node, or one operation of a CPU graph.

    Attributes:
        index: position in the walk (topological order, bodies after their node).
        handle: the ``CUgraphNode``; on the CPU, where the operation starts in the graph's
            operation stream, plus one.
        graph: the ``CUgraph`` holding it; on the CPU, the stream holding it (the graph's,
            or a ``wp.capture_if`` / ``capture_while`` branch).
        depth: 0 in the top graph, 1 inside a child graph or conditional body...
        type: ``"KERNEL"``, ``"MEMCPY"``, ``"MEMSET"``, ``"MEM_ALLOC"``, ``"MEM_FREE"``,
            ``"GRAPH"`` (child graph), ``"CONDITIONAL"``, ``"EVENT_RECORD"``,
            ``"WAIT_EVENT"``, ``"EMPTY"``, ``"HOST"``... ``"UNKNOWN"`` when unreadable. A CPU
            graph also holds ``"MEMTILE"`` (a fill) and Warp's native helpers (``"SCAN"``,
            ``"REDUCTION"``, ``"RADIX_SORT"``, ``"SEGMENTED_SORT"``, ``"RUNLENGTH_ENCODE"``,
            ``"BSR_FROM_TRIPLETS"``, ``"BSR_TRANSPOSE"``, ``"BVH_REFIT"``, ``"BVH_REBUILD"``,
            ``"HASH_GRID_UPDATE"``).
        deps: handles of the nodes it depends on (on the CPU, the operation before it).
        fields: for a kernel ``func``, ``name``, ``grid``, ``block``, ``smem``, ``params``
            (bytes per parameter, None when they could not be read) and
            ``params_unread`` (why not); for a memcpy ``dst``, ``src``, ``nbytes``,
            ``dst_extent`` and ``src_extent`` (bytes spanned from each address), ``dst_kind``
            and ``src_kind`` (``"device"``, ``"host"``...); for a memset ``dst``,
            ``value``, ``element_size``, ``nbytes``, ``extent``; for alloc and free ``dst``
            (and ``nbytes``); for child graphs and conditionals ``graphs`` (the bodies).
            A CPU kernel has ``name`` (Warp's kernel key), ``module``, ``adjoint``,
            ``shape``, ``size`` and ``params`` as replay will pass them (the launch bounds,
            then each argument's bytes, pointer slots holding the addresses they resolve
            to); a fill ``dst``, ``value`` (bytes), ``element_size``, ``count``, ``nbytes``;
            a native helper its buffers' addresses and its counts by the names its Warp
            function gives them (``keys``, ``count``); every CPU node ``addresses``, the
            ``(argument, start, bytes)`` it will touch.
        error: why the node could not be read ('' when it was).
        record: index of the recorded operation that made it, once matched (or None).
        role: what the matching decided it is: ``"recorded"`` (the node an operation
            is checked against), ``"warp-native"`` (more nodes of the same Warp
            operation), ``"warp-conditional"``, ``"allocation"``, ``"synchronization"``,
            ``"structure"`` (child graph and conditional nodes no operation claims),
            ``"embedded"`` (inside a child graph), ``"unread"``, ``"unrecorded"`` (a Warp
            kernel no recorded launch made) or ``"foreign"`` (from outside Warp).
        asked: on the CPU, once matched, what the recorded call asked Warp's native side
            for (the fields this node must hold: ``dst``, ``nbytes``, ``value``...); else None.
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
    asked: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """A kernel node's function name ('' for other nodes, or when unknown)."""
        return str(self.fields.get("name", "") or "")

    def __str__(self) -> str:
        return f"{self.index}: {node_text(self)}"

    def __repr__(self) -> str:
        # The fields hold raw parameter bytes: what the node is reads better.
        return f"<GraphNode {self}>"


class Dropped(NamedTuple):
    """A recorded operation a CPU graph does not hold: its replays will not run it.

    Attributes:
        record: index of the operation in the trace the graph was matched against.
        call: what the operation asked Warp's native side for (``"mesh_refit_host"``,
            ``"memset_host"``), or what a graph launched inside the capture held.
        why: what the graph holds in its place, one sentence.
    """

    record: int
    call: str
    why: str


def node_text(node: GraphNode) -> str:
    """What a node is, in a few words: ``kernel integrate shape (64,)``, ``memcpy 256 bytes
    0x7f...00 -> 0x7f...40``."""
    fields, kind = node.fields, node.type.lower()
    if node.error:
        return f"{kind} ({node.error})"
    if node.type == "KERNEL":
        name = node.name or f"{int(fields.get('func') or 0):#x}"
        where = (
            f"shape {fields['shape']}"
            if "shape" in fields
            else f"grid {fields.get('grid')} block {fields.get('block')}"
        )
        return f"kernel {name}{' (adjoint)' if fields.get('adjoint') else ''} {where}"
    if node.type == "MEMCPY":
        return f"memcpy {fields.get('nbytes')} bytes {_hex(fields.get('src'))} -> {_hex(fields.get('dst'))}"
    if node.type == "MEMSET":
        return f"memset {fields.get('nbytes')} bytes at {_hex(fields.get('dst'))} to {fields.get('value')}"
    if node.type == "MEMTILE":
        value = bytes(fields.get("value", b""))
        return f"fill {fields.get('count')} x {value[::-1].hex() or '?'} at {_hex(fields.get('dst'))}"
    if node.type == "CONDITIONAL" and "kind" in fields:
        return f"{fields['kind']} {_hex(fields.get('condition'))} != 0"
    shown = [f"{k}={_hex(v) if k in _ADDRESSES else v}" for k, v in fields.items() if isinstance(v, (int, float, str))]
    return " ".join([kind, *shown])


_ADDRESSES = frozenset(("dst", "src", "keys", "values", "out", "a", "b", "points", "groups", "grid", "bvh", "dest"))


def _hex(value: Any) -> str:
    return f"{value:#x}" if isinstance(value, int) else str(value)

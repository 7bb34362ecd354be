"""Stage 4b of the pipeline: hold the captured CUDA graph against the record.

Each node is matched to the recorded operation that made it: during a CUDA capture,
every recorded operation learns the node(s) it added (``cuStreamGetCaptureInfo``), and
nodes added by an opaque Warp operation (a fill, a strided copy, a sort) between two
recorded ones belong to the later. Then:

- a kernel node's function must be the one Warp launched, its grid, block and dynamic
  shared memory must be Warp's own configuration for the launch, and its parameter
  bytes must equal the recorded bytes; else ``node-mismatch``, naming the argument and
  the field (``x.shape[0]``, ``params.dt``) that differs;
- memcpy and memset nodes must copy and set what the record says;
- a node no record made is ``unrecorded-node``, unless Warp adds it itself (the kernels
  that set conditional handles, allocation and synchronisation nodes, the contents of
  child graphs), which are classified, not flagged; nodes of other libraries (kernels,
  copies, host nodes) are "foreign" and flagged unless ``allow_foreign_nodes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import _warp
from .findings import Finding, make_finding
from .graph import GraphNode, read_graph
from .params import ArrayRef, decode, expected_cuda_config, field_at

if TYPE_CHECKING:
    from .buffers import BufferSet
    from .guard import CheckedGraph, _Baked
    from .record import LaunchRecord, LaunchTrace

__all__ = ["baked_from_graph", "baked_from_nodes", "check_graph", "check_nodes", "match"]

_OPAQUE = ("native", "copy", "memset")
_SYNC_TYPES = ("EMPTY", "EVENT_RECORD", "WAIT_EVENT")
_ALLOC_TYPES = ("MEM_ALLOC", "MEM_FREE")
#: Kernels Warp launches itself around conditional nodes (wp.capture_if / capture_while).
_WARP_CONDITIONAL_KERNELS = ("set_conditional_",)


def match(nodes: Sequence[GraphNode], trace: LaunchTrace) -> None:
    """Set each node's ``record`` (index of the operation that made it) and ``role``."""
    by_handle: dict[int, int] = {}
    for index, record in enumerate(trace.records):
        if record.node is not None:
            for handle in record.node[1]:
                by_handle[handle] = index
    records = trace.records
    pending: dict[int, list[GraphNode]] = {}
    for node in nodes:
        found = by_handle.get(node.handle)
        waiting = pending.setdefault(node.graph, [])
        if found is None:
            waiting.append(node)
            continue
        index = found
        node.record, node.role = index, "recorded"
        if records[index].kind in _OPAQUE:
            # An opaque Warp operation (a fill, a strided copy, a sort) adds several
            # nodes; the ones since the previous recorded node of this graph are its own.
            for earlier in waiting:
                if earlier.type not in _SYNC_TYPES:
                    earlier.record, earlier.role = index, "warp-native"
        waiting.clear()
    for node in nodes:
        if node.role:
            continue
        if node.depth > 0 and _inside_child_graph(node, nodes):
            node.role = "embedded"
        elif node.type in _SYNC_TYPES:
            node.role = "synchronization"
        elif node.type in _ALLOC_TYPES:
            node.role = "allocation"
        elif node.type in ("GRAPH", "CONDITIONAL"):
            node.role = "structure"
        elif node.type == "KERNEL" and node.name.startswith(_WARP_CONDITIONAL_KERNELS):
            node.role = "warp-conditional"
        else:
            node.role = "unrecorded"


def _inside_child_graph(node: GraphNode, nodes: Sequence[GraphNode]) -> bool:
    # A child graph node embeds a copy of a graph captured before (wp.capture_if with a
    # Graph branch): its contents were checked when that graph was captured.
    return any(other.type == "GRAPH" and node.graph in other.fields.get("graphs", ()) for other in nodes)


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _kernel_mismatches(node: GraphNode, record: LaunchRecord, expected_func: int | None) -> list[str]:
    problems: list[str] = []
    fields = node.fields
    cuda = record.cuda
    if cuda is not None:
        func, dim_size, max_blocks, block_dim, grid_stride, cluster_dim, smem = cuda
        wanted = expected_func or func
        if fields.get("func") != wanted:
            problems.append(f"function {fields.get('func', 0):#x} ({node.name or '?'}) where Warp launched {wanted:#x}")
        config = expected_cuda_config(dim_size, block_dim, max_blocks, bool(grid_stride), cluster_dim)
        if config is not None:
            grid, block = config
            if tuple(fields.get("grid", ())) != grid:
                problems.append(f"grid {fields.get('grid')} where Warp's configuration is {grid}")
            if tuple(fields.get("block", ())) != block:
                problems.append(f"block {fields.get('block')} where Warp's configuration is {block}")
        if fields.get("smem") != smem:
            problems.append(f"{fields.get('smem')} bytes of shared memory where Warp asked for {smem}")
    node_params = fields.get("params")
    recorded = record.param_bytes
    if node_params is not None and recorded:
        if len(node_params) != len(recorded):
            problems.append(f"{len(node_params)} parameters where the launch passed {len(recorded)}")
        for i, (got, want) in enumerate(zip(node_params, recorded)):
            if not want or got == want:
                continue
            offset = _first_difference(got, want)
            name = field_at(record.layout, i, offset)
            problems.append(f"parameter {name} is {_word(got, offset)} where the launch passed {_word(want, offset)}")
    return problems


def _word(data: bytes, offset: int) -> str:
    chunk = data[offset - offset % 4 : offset - offset % 4 + 8]
    return "0x" + chunk[::-1].hex() if chunk else "nothing"


def _copy_mismatches(node: GraphNode, record: LaunchRecord) -> list[str]:
    problems: list[str] = []
    fields = node.fields
    dest = record.args.get("dest")
    if not isinstance(dest, ArrayRef):
        return problems
    if node.type == "MEMCPY" and record.kind == "copy":
        src = record.args.get("src")
        elem = dest.strides[-1] if dest.strides else 1
        count = int(record.args.get("count") or 0)
        want = {
            "dst": dest.ptr + int(record.args.get("dest_offset") or 0) * elem,
            "src": (src.ptr if isinstance(src, ArrayRef) else 0) + int(record.args.get("src_offset") or 0) * elem,
            "nbytes": count * elem,
        }
        for key, value in want.items():
            if fields.get(key) != value:
                problems.append(f"{key} {fields.get(key)!r} where the copy asked for {value!r}")
    elif node.type == "MEMSET" and record.kernel == "array.zero_":
        if fields.get("dst") != dest.ptr:
            problems.append(f"dst {fields.get('dst', 0):#x} where the memset asked for {dest.ptr:#x}")
        if fields.get("value") != 0:
            problems.append(f"value {fields.get('value')} where zero_() sets 0")
        if fields.get("nbytes") != dest.nbytes:
            problems.append(f"{fields.get('nbytes')} bytes where zero_() sets {dest.nbytes}")
    return problems


def user_positions(trace: LaunchTrace) -> dict[int, int]:
    """Index in ``trace`` -> index among the operations the user issued (Warp's internal
    ones left out), which is how reports number operations."""
    positions: dict[int, int] = {}
    for index, record in enumerate(trace.records):
        if not record.internal:
            positions[index] = len(positions)
    return positions


def check_nodes(
    nodes: Sequence[GraphNode],
    trace: LaunchTrace,
    *,
    expected_functions: dict[int, int] | None = None,
    warp_functions: dict[int, tuple[str, bool]] | None = None,
    allow_foreign_nodes: bool = False,
) -> list[Finding]:
    """Findings for nodes that differ from their record, and for unrecorded nodes.

    Args:
        nodes: the graph's nodes (see :func:`graphcheck.graph.read_graph`).
        trace: the operations recorded while capturing.
        expected_functions: record index -> the CUfunction Warp uses for that kernel on
            that device at that block size (default: what Warp passed at launch).
        warp_functions: CUfunction -> (kernel, adjoint) of every Warp kernel the graph
            retains: an unrecorded node running one is Warp's, not another library's.
        allow_foreign_nodes: accept nodes no Warp operation made (other libraries' work).
    """
    match(nodes, trace)
    records = trace.records
    positions = user_positions(trace)
    warp_functions = warp_functions or {}
    findings: list[Finding] = []
    for node in nodes:
        if node.role == "recorded" and node.record is not None:
            record = records[node.record]
            if node.type == "KERNEL" and record.kind == "launch":
                expected = (expected_functions or {}).get(node.record)
                problems = _kernel_mismatches(node, record, expected)
            else:
                problems = _copy_mismatches(node, record)
            if problems:
                findings.append(
                    make_finding(
                        "node-mismatch",
                        f"graph node {node.index} ({node.type.lower()}) made by {record.kernel}",
                        kernel=record.kernel,
                        index=positions.get(node.record),
                        site=record.site,
                        values="; ".join(problems),
                        detail={"node": node.handle, "problems": problems},
                    )
                )
        elif node.role == "unrecorded":
            func = int(node.fields.get("func", 0) or 0)
            warp = warp_functions.get(func)
            if warp is not None:
                what = f"graph node {node.index}: Warp kernel {warp[0]} that no recorded launch made"
            else:
                # No Warp operation made it: another library's work captured in the block.
                node.role = "foreign"
                if allow_foreign_nodes:
                    continue
                if node.type == "KERNEL":
                    what = f"graph node {node.index}: kernel {node.name or hex(func)} from outside Warp"
                else:
                    what = f"graph node {node.index}: a {node.type.lower()} node from outside Warp"
            findings.append(
                make_finding(
                    "unrecorded-node",
                    what,
                    kernel=warp[0] if warp else (node.name or None),
                    values=_node_summary(node),
                    detail={"node": node.handle, "type": node.type},
                )
            )
    return findings


def _node_summary(node: GraphNode) -> str:
    fields = node.fields
    if node.type == "KERNEL":
        return f"grid {fields.get('grid')}, block {fields.get('block')}"
    if node.type in ("MEMCPY", "MEMSET"):
        return f"{fields.get('nbytes')} bytes to {fields.get('dst', 0):#x}"
    return node.type.lower()


def _extra_graphs(trace: LaunchTrace, top: int) -> tuple[int, ...]:
    return tuple(dict.fromkeys(r.node[0] for r in trace.records if r.node is not None and r.node[0] != top))


def _read(graph: Any, trace: LaunchTrace) -> list[GraphNode]:
    top = _warp.graph_handle(graph) or 0
    return read_graph(graph, _extra_graphs(trace, top))


def check_graph(
    graph: Any, trace: LaunchTrace, *, allow_foreign_nodes: bool = False
) -> tuple[list[Finding], list[str]]:
    """Read a captured ``wp.Graph`` and cross-check it against ``trace``.

    Returns:
        ``(findings, notes)``; a graph that cannot be read gives a note, not a finding.
    """
    from ._cuda import GraphInspectError

    try:
        nodes = _read(graph, trace)
    except GraphInspectError as error:
        return [], [f"the CUDA graph was not cross-checked: {error}"]
    expected = {}
    for index, record in enumerate(trace.records):
        kernel = record.kernel_object
        if record.kind == "launch" and kernel is not None and record.cuda is not None and not record.adjoint:
            try:
                handle = _warp.kernel_function(kernel, record.device, record.block_dim)
            except Exception:  # a kernel Warp cannot look up again: trust what it launched
                handle = None
            if handle:
                expected[index] = handle
    findings = check_nodes(
        nodes,
        trace,
        expected_functions=expected,
        warp_functions=_warp.cuda_function_map(graph),
        allow_foreign_nodes=allow_foreign_nodes,
    )
    notes = []
    unmatched = [r for r in trace.records if r.node is None and r.device.startswith("cuda")]
    if unmatched:
        notes.append(f"{len(unmatched)} recorded operation(s) could not be matched to a graph node")
    return findings, notes


def baked_from_graph(graph: Any, trace: LaunchTrace, baked: list[_Baked], owned: BufferSet | None) -> list[_Baked]:
    """The addresses baked into a CUDA graph, read from its nodes (see :func:`baked_from_nodes`);
    ``baked`` as it is when the graph cannot be read."""
    from ._cuda import GraphInspectError

    try:
        nodes = _read(graph, trace)
    except GraphInspectError:
        return baked
    return baked_from_nodes(nodes, trace, baked, owned)


def baked_from_nodes(
    nodes: Sequence[GraphNode], trace: LaunchTrace, baked: list[_Baked], owned: BufferSet | None
) -> list[_Baked]:
    """The addresses baked into a graph's nodes, in place of those recorded for them.

    Kernel nodes are decoded with their record's parameter layout; memcpy and memset
    nodes give their destination (and source). ``baked`` holds the recorded addresses,
    indexed like reports number operations (Warp's internal ones left out); the
    operations whose node could not be read keep theirs.
    """
    from .guard import _Baked

    match(nodes, trace)
    records = trace.records
    positions = user_positions(trace)
    out: list[_Baked] = []
    covered: set[int] = set()
    for node in nodes:
        if node.record is None or node.role != "recorded":
            continue
        record = records[node.record]
        position = positions.get(node.record, -1)
        found: list[tuple[int, int, str]] = []  # (address, bytes, argument)
        params = node.fields.get("params")
        if node.type == "KERNEL" and record.kind == "launch" and params:
            found = [
                (value.start, value.nbytes, name)
                for name, value in decode(record.layout, params).items()
                if isinstance(value, ArrayRef) and value.ptr
            ]
        elif node.type in ("MEMCPY", "MEMSET"):
            found = [(node.fields["dst"], node.fields.get("nbytes", 1), "dest")]
            if node.type == "MEMCPY":
                found.append((node.fields["src"], node.fields.get("nbytes", 1), "src"))
        else:
            continue
        out += [_Baked.at(ptr, nbytes, owned, position, record, name) for ptr, nbytes, name in found]
        covered.add(position)
    out += [b for b in baked if b.index not in covered]
    return out


def graph_picture(checked: CheckedGraph) -> list[str] | None:
    """DOT lines for the nodes and edges of a checked CUDA graph (None for CPU graphs)."""
    from ._cuda import GraphInspectError
    from .dot import _BAD, _GOOD, _escape, record_label

    graph, trace = checked.graph, checked._full_trace
    if graph is None or not _warp.graph_handle(graph) or trace is None:
        return None
    try:
        nodes = _read(graph, trace)
    except GraphInspectError:
        return None
    match(nodes, trace)
    positions = user_positions(trace)
    flagged = {f.index for f in checked.report.findings if f.index is not None}
    records = trace.records
    lines = []
    for node in nodes:
        position = positions.get(node.record) if node.record is not None else None
        if position is not None and node.role == "recorded":
            label = record_label(position, records[node.record])  # type: ignore[index]
        else:
            label = _escape(f"{node.type.lower()} {node.name}".strip() + f"\\n({node.role})")
        bad = (position is not None and position in flagged) or node.role in ("unrecorded", "foreign")
        lines.append(f'  n{node.handle} [label="{label}" {_BAD if bad else _GOOD}];')
        lines += [f"  n{dep} -> n{node.handle};" for dep in node.deps]
    return lines

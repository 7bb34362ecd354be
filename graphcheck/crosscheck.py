"""Stage 4b of the pipeline: hold the captured graph against the record.

:func:`check` takes the :class:`~graphcheck.graph.GraphMatch` the graph layer made (each
node with the recorded operation that made it, see :mod:`graphcheck.graph`) and finds:

- ``node-mismatch``: a kernel node whose function is not the one Warp launched, whose
  grid, block or dynamic shared memory is not Warp's own configuration for the launch,
  or whose parameter bytes differ from the recorded bytes (naming the argument and the
  field, ``x.shape[0]``, ``params.dt``); a memcpy or memset node that does not copy or
  set what its record says. On the CPU: a kernel launch whose kernel, launch bounds or
  argument bytes (pointer slots as the addresses replay resolves them to) differ from
  the launch's, a copy, memset, fill or native helper whose addresses, sizes or values
  differ from what the call asked Warp's native side for;
- ``unrecorded-node``: a node no recorded operation made, unless Warp makes it itself
  (classified, not flagged): a Warp kernel no recorded launch made, or another library's
  work (kernels, copies, host callbacks, allocations), "foreign" and flagged unless
  ``allow_foreign_nodes``. On the CPU, any operation of the graph no record asked for;
- ``capture-error``: on the CPU, a recorded operation the graph does not hold, whose
  replays will therefore not run it (a ``Mesh.refit()``, Warp 1.15's ``array_inner``, the
  kernels of a CPU graph launched inside the capture).

What the match could not read or match (its gaps) comes back as notes: the cross-check
is then partial.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from . import _warp
from ._words import article
from .checks import Outcome
from .findings import Finding, make_finding
from .graph import GraphMatch, GraphNode, read_match
from .nodes import GraphReadError
from .operations import CPU_GRAPH_LAUNCH
from .params import ArrayRef, expected_cuda_config, field_at

if TYPE_CHECKING:
    from .operations import LaunchRecord
    from .record import LaunchTrace

__all__ = ["CrossCheck", "check", "check_graph"]


class CrossCheck(NamedTuple):
    """What the cross-check found.

    Attributes:
        findings: nodes that differ from their record, and unrecorded nodes.
        notes: what could not be checked, one sentence each; any makes it partial.
    """

    findings: list[Finding]
    notes: list[str]

    @property
    def complete(self) -> bool:
        """Whether every node and every operation was checked."""
        return not self.notes

    def outcome(self) -> Outcome:
        """As a stage of the checks: ``graph`` ran, or ran in part."""
        if self.complete:
            return Outcome(list(self.findings), ["graph"])
        return Outcome(list(self.findings), skipped=[("graph", "the cross-check is partial: " + "; ".join(self.notes))])


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _kernel_mismatches(node: GraphNode, record: LaunchRecord, cpu: bool = False) -> list[str]:
    problems: list[str] = []
    fields = node.fields
    if cpu:  # a CPU graph's launch names its kernel and direction
        name = getattr(record.kernel_object, "key", None)
        if fields["name"] != name:
            problems.append(f"kernel {fields['name']!r} where Warp launched {name!r}")
        if fields["adjoint"] != record.adjoint:
            direction = "the adjoint" if fields["adjoint"] else "the forward"
            problems.append(f"{direction} kernel where Warp launched the other")
    cuda = record.cuda
    if cuda is not None:
        # The CUfunction Warp launched, as recorded: asking Warp again could load another
        # module (one rebuilt since, for a generic kernel's new overload).
        wanted = cuda.function
        if fields.get("func") != wanted:
            problems.append(f"function {fields.get('func', 0):#x} ({node.name or '?'}) where Warp launched {wanted:#x}")
        config = expected_cuda_config(
            cuda.dim_size, cuda.block_dim, cuda.max_blocks, bool(cuda.grid_stride), cuda.cluster_dim
        )
        if config is not None:
            grid, block = config
            if tuple(fields.get("grid", ())) != grid:
                problems.append(f"grid {fields.get('grid')} where Warp's configuration is {grid}")
            if tuple(fields.get("block", ())) != block:
                problems.append(f"block {fields.get('block')} where Warp's configuration is {block}")
        if fields.get("smem") != cuda.smem_bytes:
            problems.append(f"{fields.get('smem')} bytes of shared memory where Warp asked for {cuda.smem_bytes}")
    node_params = fields.get("params")
    recorded = record.param_bytes
    if node_params is not None and fields.get("unresolved"):
        # Pointer slots whose address could not be read: left out of both sides.
        node_params, recorded = _masked(node_params, fields["unresolved"]), _masked(recorded, fields["unresolved"])
    if node_params is not None and recorded:
        if len(node_params) != len(recorded):
            problems.append(f"{len(node_params)} parameters where the launch passed {len(recorded)}")
        # A parameter graphcheck keeps no bytes of is one whose size it does not know (past
        # the kernel's layout: Warp's hidden extras of a deterministic launch); any other
        # (an adjoint argument) is compared, kept empty or not.
        sizes = [spec.size for spec in record.layout]
        for i, (got, want) in enumerate(zip(node_params, recorded)):
            if got == want or (not want and (i >= len(sizes) or not sizes[i])):
                continue
            offset = _first_difference(got, want)
            name = field_at(record.layout, i, offset)
            problems.append(f"parameter {name} is {_word(got, offset)} where the launch passed {_word(want, offset)}")
    return problems


def _masked(params: tuple[bytes, ...], slots: tuple[tuple[int, int], ...]) -> tuple[bytes, ...]:
    out = [bytearray(p) for p in params]
    for position, at in slots:
        if position < len(out):
            out[position][at : at + 8] = bytes(len(out[position][at : at + 8]))
    return tuple(bytes(p) for p in out)


def _asked_mismatches(node: GraphNode) -> list[str]:
    """How a CPU graph's operation differs from what its recorded call asked for: every
    field both name (addresses, sizes, counts, values)."""
    problems = []
    for key, want in (node.asked or {}).items():
        if key in ("addresses", "graph") or key not in node.fields:
            continue
        got = node.fields[key]
        if isinstance(want, ArrayRef):
            want = want.ptr
        if got != want:
            problems.append(f"{key} {_shown(got)} where the call asked for {_shown(want)}")
    return problems


def _shown(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value[::-1].hex() if value else "nothing"
    if isinstance(value, int) and value > 0xFFFF:
        return f"{value:#x}"
    return repr(value)


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


def check(match: GraphMatch, *, allow_foreign_nodes: bool = False) -> CrossCheck:
    """Findings for nodes that differ from their record, and for unrecorded nodes.

    Args:
        match: the graph's nodes matched to the trace (:func:`graphcheck.graph.read_match`).
        allow_foreign_nodes: accept nodes no Warp operation made (other libraries' work).
    """
    trace = match.trace
    records = trace.records
    cpu = match.device == "cpu"
    findings: list[Finding] = []
    for node in match.nodes:
        if node.role == "recorded" and node.record is not None:
            record = records[node.record]
            if node.type == "KERNEL" and record.kind == "launch":
                fields = node.fields
                if (  # the commonest case on the CPU: the launch as launched, the same kernel and bytes
                    cpu
                    and fields["params"] == record.param_bytes
                    and fields["name"] == getattr(record.kernel_object, "key", None)
                    and fields["adjoint"] == record.adjoint
                ):
                    continue
                problems = _kernel_mismatches(node, record, cpu)
            elif node.asked is not None:
                problems = _asked_mismatches(node)
            else:
                problems = _copy_mismatches(node, record)
            if problems:
                findings.append(
                    make_finding(
                        "node-mismatch",
                        f"graph node {node.index} ({node.type.lower()}) made by {record.kernel}",
                        kernel=record.kernel,
                        index=match.positions.get(node.record),
                        site=record.site,
                        values="; ".join(problems),
                        detail={"node": node.handle, "problems": problems},
                    )
                )
        elif node.role == "unrecorded" and node.type != "KERNEL":
            findings.append(
                make_finding(
                    "unrecorded-node",
                    f"graph node {node.index}: {article(node.type.lower())} that no recorded operation asked for",
                    values=_node_summary(node),
                    detail={"node": node.handle, "type": node.type},
                )
            )
        elif node.role == "unrecorded":
            kernel = str(node.fields.get("warp_kernel") or node.name)
            findings.append(
                make_finding(
                    "unrecorded-node",
                    f"graph node {node.index}: Warp kernel {kernel} that no recorded launch made",
                    kernel=kernel,
                    values=_node_summary(node),
                    detail={"node": node.handle, "type": node.type},
                )
            )
        elif node.role == "foreign" and not allow_foreign_nodes:
            if node.type == "KERNEL":
                what = f"graph node {node.index}: kernel {node.name or hex(int(node.fields.get('func') or 0))}"
            else:
                what = f"graph node {node.index}: {article(node.type.lower())} node"
            findings.append(
                make_finding(
                    "unrecorded-node",
                    what + " from outside Warp",
                    kernel=node.name or None,
                    values=_node_summary(node),
                    detail={"node": node.handle, "type": node.type},
                )
            )
    findings += _dropped(match)
    return CrossCheck(findings, list(match.gaps))


def _dropped(match: GraphMatch) -> list[Finding]:
    """One ``capture-error`` per operation (and call site) a CPU graph does not hold."""
    if not match.dropped:
        return []
    records, positions = match.trace.records, match.positions
    groups: dict[tuple[str, Any], list[Any]] = {}
    for drop in match.dropped:
        groups.setdefault((records[drop.record].kernel, records[drop.record].site), []).append(drop)
    findings = []
    for (kernel, site), drops in groups.items():
        first = drops[0]
        times = f" ({len(drops)} times)" if len(drops) > 1 else ""
        if kernel == CPU_GRAPH_LAUNCH:
            what = "wp.capture_launch of a CPU graph inside the captured call"
            values = (
                f"the CPU graph will not replay the launched graph's work: {first.why} (warp-lang "
                f"{_warp.WARP_VERSION} replays a graph launched inside a CPU capture while it records, which records "
                "none of its kernel launches; a CUDA capture records it as a child graph)"
            )
            fix = (
                "call the code the inner graph captured directly inside the captured call instead of wp.capture_launch "
                "(a solver that captures its own step: let it step eagerly while an outer capture records it), or "
                "launch the inner graph outside the captured call"
            )
        else:
            what = f"{kernel} inside the captured call{times}"
            values = (
                f"the CPU graph will not replay it: {first.why}; warp-lang {_warp.WARP_VERSION} ran it once, at "
                "capture, and every replay keeps that result (a CUDA graph replays it)"
            )
            fix = "run it outside the captured call, before each replay, or capture on a CUDA device"
        findings.append(
            make_finding(
                "capture-error",
                what,
                kernel=kernel,
                index=positions.get(first.record),
                site=site,
                values=values,
                fix=fix,
                detail={"call": first.call, "graph": "cpu", "times": len(drops)},
            )
        )
    return findings


def _node_summary(node: GraphNode) -> str:
    fields = node.fields
    if node.type == "KERNEL" and "grid" not in fields:  # a CPU graph's launch
        return f"shape {fields.get('shape')}" + (", adjoint" if fields.get("adjoint") else "")
    if node.type == "KERNEL":
        return f"grid {fields.get('grid')}, block {fields.get('block')}"
    if node.type in ("MEMCPY", "MEMSET", "MEM_ALLOC", "MEM_FREE"):
        return f"{fields.get('nbytes')} bytes at {int(fields.get('dst') or 0):#x}"
    return node.type.lower()


def check_graph(graph: Any, trace: LaunchTrace, *, allow_foreign_nodes: bool = False) -> CrossCheck:
    """Read a captured ``wp.Graph`` and cross-check it against ``trace`` (both stages in
    one call; a capture site reads the graph once and keeps the match instead).

    A graph that cannot be read gives a note, not a finding.
    """
    try:
        match = read_match(graph, trace)
    except GraphReadError as error:
        return CrossCheck([], [f"the graph was not cross-checked: {error}"])
    return check(match, allow_foreign_nodes=allow_foreign_nodes)

"""Stage 4a of the pipeline: read a captured graph once, and match its nodes to the
recorded operations.

:func:`read_match` reads a ``wp.Graph`` and returns a :class:`GraphMatch`: every node with
the operation that made it and its role, and what could not be read. On CUDA it walks the
raw ``cudaGraph_t`` with cuda-python, child graphs and conditional bodies included; on the
CPU it reads the operation stream Warp will replay (:func:`graphcheck._warp.read_cpu_graph`),
one node per operation. The cross-check (:mod:`graphcheck.crosscheck`), the replay check's
addresses (:meth:`GraphMatch.addresses`) and the picture (:mod:`graphcheck.dot`) all use
that one match, so a validated graph is read once.

How CPU operations are attributed: a CPU graph is a sequence, written in the order the
capture issued its operations, so it is matched to the record by position
(:func:`match_cpu`). Each recorded operation says what it asked Warp's native side for
(its launch, or the calls of Warp's host entry points it made:
:attr:`~graphcheck.LaunchRecord.host_calls`), and each such call wants one operation of the
graph's, of the type that call records; a ``wp.capture_if`` / ``capture_while`` wants one
conditional whose branches hold its bodies' operations. Where the two sequences slip (an
operation the graph does not hold, one no record made), the nearest fit ahead is taken:
what the graph holds that nothing asked for is ``"unrecorded"``, and what was asked that
the graph does not hold is :attr:`GraphMatch.dropped`: a CPU graph's replay will not run it.

How nodes are attributed: during a CUDA capture every recorded operation learns where
the capturing stream stood just before and just after it (a
:class:`~graphcheck.nodes.CaptureSpan`), and the nodes it added are those on the paths
between the two. Operations nested in another (the gradient copy inside ``wp.copy``)
keep their own nodes; an operation that added none (a launch of dimension 0) has none.
Within an operation's nodes, the one its record describes is ``"recorded"`` and is
checked; the other nodes a Warp call enqueued (the kernels of a strided copy, a sort's
passes) are ``"warp-native"``; node types Warp never makes (host callbacks, external
semaphores) are never claimed. A node outside every operation is Warp's own only when
Warp is known to make it (the kernels that set conditional handles, allocations of
arrays recorded during the capture, synchronisation, child-graph contents); otherwise it
is ``"unrecorded"`` (a Warp kernel no recorded launch made) or ``"foreign"``.

It is longer than most modules on purpose: reading a graph and matching its nodes to the
record is one concept with two readers (a CUDA graph's nodes walked as a DAG and
attributed by capture spans, a CPU graph's operations matched by position) that share
:class:`GraphMatch`, the node roles and the addresses a replay check reads; the CPU
graph's binary format itself is read in :mod:`graphcheck._warp.cpu_graph`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _cuda, _warp
from ._words import article
from .nodes import CaptureSpan, Dropped, GraphNode, node_text
from .operations import CPU_GRAPH_LAUNCH
from .params import ArrayRef, decode

if TYPE_CHECKING:
    from .operations import LaunchRecord
    from .record import LaunchTrace

__all__ = [
    "CaptureSpan",
    "Dropped",
    "GraphMatch",
    "GraphNode",
    "NodeAddress",
    "match_cpu",
    "match_nodes",
    "read_graph",
    "read_match",
    "span_nodes",
    "user_positions",
]

_SYNC_TYPES = ("EMPTY", "EVENT_RECORD", "WAIT_EVENT")
_ALLOC_TYPES = ("MEM_ALLOC", "MEM_FREE")
_STRUCTURE_TYPES = ("GRAPH", "CONDITIONAL")
#: Node types a Warp copy, memset, fill or native helper may enqueue besides its own.
_WARP_NATIVE_TYPES = ("KERNEL", "MEMCPY", "MEMSET", *_ALLOC_TYPES, *_SYNC_TYPES)
#: The node a record of each kind describes.
_RECORDED_TYPE = {"launch": "KERNEL", "copy": "MEMCPY", "memset": "MEMSET", "conditional": "CONDITIONAL"}
#: Kernels Warp launches itself around conditional nodes (wp.capture_if / capture_while).
_WARP_CONDITIONAL_KERNELS = ("set_conditional_",)
_LISTED = 3  # problems of one kind named in a note before "and N more"


class NodeAddress(NamedTuple):
    """An address baked into a graph node, as the node holds it.

    Attributes:
        record: index of the operation in the trace the graph was matched against.
        operation: its number in reports (Warp's internal operations left out; -1 for
            one of those).
        arg: the argument (``"x"``, ``"dest"``, ``"src"``).
        start: the lowest address the node may touch.
        nbytes: how many bytes from there.
    """

    record: int
    operation: int
    arg: str
    start: int
    nbytes: int


@dataclass
class GraphMatch:
    """A captured graph's nodes, each matched to the operation that made it.

    Attributes:
        nodes: every node, in walk order, with ``record`` and ``role`` set.
        trace: the trace it was matched against (Warp's internal operations included).
        gaps: what could not be read, walked or matched, one sentence each: while any
            is left, a cross-check of this match is partial.
        device: ``"cuda"`` or ``"cpu"``: which kind of graph was read.
        dropped: on the CPU, what recorded operations asked for that the graph does not
            hold (its replays will not run it).
    """

    nodes: list[GraphNode]
    trace: LaunchTrace
    gaps: list[str] = field(default_factory=list)
    #: CUfunction -> (kernel, adjoint) for the kernel nodes of child graphs: how their bytes decode.
    child_kernels: dict[int, tuple[Any, bool]] = field(default_factory=dict)
    device: str = "cuda"
    dropped: list[Dropped] = field(default_factory=list)
    #: On the CPU, what was read (a :class:`graphcheck._warp.CpuGraph`): see :meth:`holds_what_was_read`.
    source: Any = None
    # (how many records the trace held, positions): worked out when first asked
    _positions: tuple[int, dict[int, int]] = field(default=(-1, {}), init=False, repr=False, compare=False)

    def lines(self) -> list[str]:
        """The graph as text, one line per node: what it is, and the operation that made it
        with its source line (branches indented under their conditional); then what a CPU
        graph left out."""
        records, positions = self.trace.records, self.positions
        out = []
        for node in self.nodes:
            record = records[node.record] if node.record is not None else None
            if record is None:
                made = _ROLES.get(node.role, node.role)
            elif node.record in positions:
                made = f"operation #{positions[node.record]} {record.kernel} at {record.site.short}"
            else:
                made = f"Warp's own {record.kernel} (in wp.{record.via or '?'}) at {record.site.short}"
            out.append(f"{'  ' * node.depth}{node.index}: {node_text(node)}  <- {made}")
        for drop in self.dropped:
            record = records[drop.record]
            out.append(f"not in the graph: {record.kernel} at {record.site.short}: {drop.why}")
        return out

    def holds_what_was_read(self, graph: Any) -> bool:
        """Whether ``graph`` still holds what this match read, without reading it again:
        on the CPU its operation stream and region table compared byte for byte; on CUDA
        never known (the graph is read again)."""
        return self.source is not None and _warp.unchanged(graph, self.source)

    @property
    def complete(self) -> bool:
        """Whether every node was read and every operation matched."""
        return not self.gaps

    @property
    def positions(self) -> dict[int, int]:
        """Index in the trace -> the operation's number in reports."""
        held, positions = self._positions
        if held != len(self.trace.records):  # (a trace still recording numbers its new operations too)
            self._positions = len(self.trace.records), (positions := user_positions(self.trace))
        return positions

    def addresses(self) -> dict[int, list[NodeAddress]]:
        """The addresses baked into the nodes that were read, by operation number.

        Kernel nodes are decoded with their record's parameter layout; memcpy nodes give
        their destination and source, memset nodes their destination. An operation is a
        key when its node was read, even if it holds no address; one whose node could
        not be read is not, and keeps the addresses recorded for it.
        """
        records = self.trace.records
        positions = self.positions
        out: dict[int, list[NodeAddress]] = {}
        for node in self.nodes:
            if node.role != "recorded" or node.record is None:
                continue
            record = records[node.record]
            operation = positions.get(node.record, -1)
            found: list[tuple[str, int, int]] | None
            if node.type == "KERNEL" and record.kind == "launch" and node.fields.get("params") == record.param_bytes:
                # The bytes the launch passed (a CPU graph's, the commonest case): its addresses, worked out once.
                found = [(address.arg, address.start, address.nbytes) for address in record.addresses()]
            else:
                launch = node.type == "KERNEL" and record.kind == "launch" and _decodable(node, record)
                found = _node_addresses(node, record.layout if launch else None)
            if found is None:
                continue  # the record's addresses stand
            out.setdefault(operation, []).extend(
                NodeAddress(node.record, operation, arg, start, max(int(nbytes), 1)) for arg, start, nbytes in found
            )
        # A child graph is a copy of a graph captured before (a wp.capture_if Graph
        # branch): its nodes bake addresses too, counted to the operation that embedded it.
        owners = _child_graph_owners(self.nodes, records)
        for node in self.nodes:
            index = owners.get(node.graph)
            if node.role != "embedded" or index is None:
                continue
            operation = positions.get(index, -1)
            if operation not in out:  # the operation's own addresses (a condition) stand beside them
                out[operation] = [NodeAddress(index, operation, a.arg, a.start, a.nbytes)
                                  for a in records[index].addresses()]  # fmt: skip
            # A kernel's only when its function is a known Warp kernel's and its bytes fit that kernel's layout.
            found = _node_addresses(node, _child_kernel_layout(node, self.child_kernels)) or []
            out[operation].extend(
                NodeAddress(index, operation, f"{arg} (child graph node {node.index})", start, max(int(nbytes), 1))
                for arg, start, nbytes in found
            )
        return out


#: What a node no recorded operation made is, in :meth:`GraphMatch.lines`.
_ROLES = {
    "unrecorded": "no recorded operation made it",
    "foreign": "made outside Warp",
    "unread": "could not be read",
    "structure": "structure",
    "embedded": "inside a child graph",
    "allocation": "Warp's allocation",
    "synchronization": "synchronization",
    "warp-conditional": "Warp's conditional handle",
}


def _child_graph_owners(nodes: Sequence[GraphNode], records: Sequence[LaunchRecord]) -> dict[int, int]:
    """Child graph -> the index of the operation that embedded it: the ``wp.capture_if`` /
    ``capture_while`` whose body holds its node, or the operation that made the node."""
    owners: dict[int, int] = {}
    for index, record in enumerate(records):
        if record.kind == "conditional" and record.capture is not None:
            owners.update(dict.fromkeys(record.capture.bodies, index))
    for node in nodes:  # walk order: a child graph's node comes before its contents
        if node.type == "GRAPH":
            owner = node.record if node.record is not None else owners.get(node.graph)
            if owner is not None:
                owners.update(dict.fromkeys(node.fields.get("graphs", ()), owner))
    return owners


def _node_addresses(node: GraphNode, layout: Any) -> list[tuple[str, int, int]] | None:
    """``(arg, start, nbytes)`` of the addresses a node bakes: a memcpy's destination and
    source, a memset's destination, a kernel's arrays decoded from its bytes by ``layout``
    (the same enumeration as LaunchRecord.addresses: data, gradients, indices and struct
    fields alike). None for a kernel with no layout its bytes follow, and any other node."""
    fields = node.fields
    if node.type != "KERNEL" and "addresses" in fields:  # a CPU graph's operation says them itself
        return list(fields["addresses"])
    if node.type == "MEMCPY":
        return [
            (arg, fields[key], fields.get(f"{key}_extent", fields.get("nbytes", 1)))
            for arg, key in (("dest", "dst"), ("src", "src"))
            if fields.get(key) is not None
        ]
    if node.type == "MEMSET":
        return [("dest", fields["dst"], fields.get("extent", fields.get("nbytes", 1)))]
    if node.type != "KERNEL" or layout is None:
        return None
    return [
        (address.arg, address.start, address.nbytes)
        for name, value in decode(layout, fields["params"]).items()
        if isinstance(value, ArrayRef)
        for address in value.addresses(name)
    ]


def _child_kernel_layout(node: GraphNode, kernels: dict[int, tuple[Any, bool]]) -> Any:
    """The layout a child graph's kernel node's bytes follow, or None when unknown: its
    function is no Warp kernel loaded now, or its parameters do not fit the kernel's."""
    known = kernels.get(int(node.fields.get("func") or 0)) if node.type == "KERNEL" else None
    params = node.fields.get("params")
    if known is None or params is None:
        return None
    layout = _warp.kernel_layout(*known)
    if len(params) < len(layout) or any(len(got) != spec.size for spec, got in zip(layout, params)):
        return None
    return layout


def _decodable(node: GraphNode, record: LaunchRecord) -> bool:
    """Whether a kernel node's bytes follow its launch's layout: they were read, it runs the
    function Warp launched and each parameter has the recorded size (else the cross-check reports it,
    and its bytes are not decoded as the launch's)."""
    if node.fields.get("params") is None:
        return False
    if record.cuda is not None and node.fields.get("func") != record.cuda.function:
        return False
    return all(len(got) == spec.size for spec, got in zip(record.layout, node.fields["params"]))


def user_positions(trace: LaunchTrace) -> dict[int, int]:
    """Index in ``trace`` -> index among the operations the user issued (Warp's internal
    ones left out), which is how reports number operations."""
    positions: dict[int, int] = {}
    for index, record in enumerate(trace.records):
        if not record.internal:
            positions[index] = len(positions)
    return positions


# -- attribution (no driver) ------------------------------------------------------------------


def span_nodes(nodes: Sequence[GraphNode], span: CaptureSpan) -> list[GraphNode]:
    """The nodes of one graph an operation added: those on the paths from ``span.before``
    to ``span.after`` (ancestors of ``after``, themselves included, that descend from
    ``before``; every ancestor of ``after`` when ``before`` is empty), in ``nodes``' order.

    Args:
        nodes: the nodes of ``span.graph`` in topological order, each with its ``deps``.
        span: where the capturing stream stood before and after the operation.
    """
    return _Graph([n for n in nodes if n.graph == span.graph]).span(span)


class _Graph:
    """The nodes of one graph, indexed once for every span asked of it."""

    def __init__(self, nodes: Sequence[GraphNode]) -> None:
        self.by_handle = {n.handle: n for n in nodes}
        self.position = {n.handle: i for i, n in enumerate(nodes)}

    def span(self, span: CaptureSpan) -> list[GraphNode]:
        by_handle, before = self.by_handle, set(span.before)
        # Walk back from `after`, stopping at `before`: for the usual chain of one stream,
        # that visits the operation's own nodes only.
        found: set[int] = set()
        stack = [h for h in span.after if h in by_handle and h not in before]
        while stack:
            handle = stack.pop()
            if handle not in found:
                found.add(handle)
                stack += [d for d in by_handle[handle].deps if d in by_handle and d not in before]
        ordered = sorted(found, key=self.position.__getitem__)
        if before:
            # Keep those that descend from `before`: a branch that reaches back past it
            # (work another stream left dangling, joined at a resume) is not this operation's.
            descends: set[int] = set()
            for handle in ordered:  # topological: a node's deps come before it
                if any(d in before or d in descends for d in by_handle[handle].deps):
                    descends.add(handle)
            ordered = [h for h in ordered if h in descends]
        return [by_handle[h] for h in ordered]


def match_nodes(
    nodes: Sequence[GraphNode], trace: LaunchTrace, *, warp_functions: Any = None, child_kernels: Any = None
) -> GraphMatch:
    """Set every node's ``record`` and ``role`` from the trace's capture spans.

    Args:
        nodes: the graph's nodes, bodies included (see :func:`read_match`).
        trace: the operations recorded while capturing (Warp's internal ones included).
        warp_functions: CUfunction -> (kernel, adjoint) of every Warp kernel the graph
            retains: an unclaimed node running one is Warp's (``"unrecorded"``), any
            other unclaimed kernel ``"foreign"``.
        child_kernels: CUfunction -> (kernel, adjoint) of Warp kernels a child graph's
            kernel nodes may run, to read the addresses they bake.

    Returns:
        The match, with a gap for every node that could not be read, every conditional
        body that could not be walked, every kernel node whose parameters could not be
        compared and every CUDA operation that learnt no place in the capture.
    """
    warp_functions = warp_functions or {}
    records = trace.records
    for node in nodes:
        node.record, node.role = None, ""
    by_graph: dict[int, list[GraphNode]] = {}
    for node in nodes:
        by_graph.setdefault(node.graph, []).append(node)
    graphs = {graph: _Graph(members) for graph, members in by_graph.items()}

    # Each node goes to the smallest span holding it: a nested operation (the gradient
    # copy inside wp.copy) keeps its own node; ties go to the later, inner, record.
    claims: dict[int, tuple[int, int]] = {}
    for index, record in enumerate(records):
        span = record.capture
        if span is None:
            continue
        members = graphs[span.graph].span(span) if span.graph in graphs else []
        for node in members:
            size = len(members)
            held = claims.get(node.handle)
            if held is None or size <= held[0]:
                claims[node.handle] = (size, index)
    owned: dict[int, list[GraphNode]] = {}
    for node in nodes:
        if node.handle in claims:
            owned.setdefault(claims[node.handle][1], []).append(node)
    for index, own in owned.items():
        _claim(index, records[index], own)

    embedded = _embedded_graphs(nodes)
    for node in nodes:
        if not node.role:
            node.role = _unclaimed_role(node, embedded, trace, warp_functions)
    child_kernels = dict(child_kernels or {})
    gaps = _gaps(nodes, records) + _child_gaps(nodes, records, child_kernels)
    return GraphMatch(list(nodes), trace, gaps, child_kernels)


def _child_gaps(nodes: Sequence[GraphNode], records: Sequence[LaunchRecord], kernels: dict[int, Any]) -> list[str]:
    """What the replay check cannot read of child graphs: those no recorded operation
    embedded (a ``wp.capture_launch`` inside the capture), kernels of unknown functions."""
    owners = _child_graph_owners(nodes, records)
    embedded = [n for n in nodes if n.role == "embedded" and n.type in ("KERNEL", "MEMCPY", "MEMSET")]
    orphans = [n for n in embedded if n.graph not in owners]
    unknown = [
        n for n in embedded if n.type == "KERNEL" and n.graph in owners and _child_kernel_layout(n, kernels) is None
    ]
    gaps = []
    if orphans:
        gaps.append(
            f"{len(orphans)} node(s) of child graphs no recorded operation embedded (a wp.capture_launch inside the "
            f"capture?) are not checked before replay: {_listed([f'node {n.index}' for n in orphans])}"
        )
    if unknown:
        named = [f"node {n.index} ({n.name or hex(int(n.fields.get('func') or 0))})" for n in unknown]
        gaps.append(
            f"the addresses {len(unknown)} kernel node(s) of child graphs bake cannot be read for the replay check "
            f"(not a Warp kernel loaded now): {_listed(named)}"
        )
    return gaps


def _claim(index: int, record: LaunchRecord, own: list[GraphNode]) -> None:
    """Give an operation the nodes Warp made for it; leave the others unclaimed."""
    kind = record.kind
    recorded_type = _RECORDED_TYPE.get(kind)
    main = None
    if kind == "launch":
        kernels = [n for n in own if n.type == "KERNEL" and not n.error]
        wanted = record.cuda.function if record.cuda else None
        main = next((n for n in kernels if n.fields.get("func") == wanted), None)
        if main is None and len(kernels) == 1:
            # The launch's only node, running another function: held against the record,
            # it is a node-mismatch that says so. Among several, none is the launch's.
            main = kernels[0]
    elif recorded_type is not None:
        main = next((n for n in own if n.type == recorded_type and not n.error), None)
    for node in own:
        if node.error:
            node.record, node.role = index, "unread"
        elif node is main or (kind == "conditional" and node.type == "CONDITIONAL"):
            node.record, node.role = index, "recorded"
        elif kind == "conditional":
            if node.type == "KERNEL" and node.name.startswith(_WARP_CONDITIONAL_KERNELS):
                node.record, node.role = index, "warp-conditional"
        elif kind != "launch" and node.type in _WARP_NATIVE_TYPES:
            node.record, node.role = index, "warp-native"


def _embedded_graphs(nodes: Sequence[GraphNode]) -> set[int]:
    # A child graph node embeds a copy of a graph captured before (wp.capture_if with a
    # Graph branch): its contents, and everything below them, were checked then.
    embedded: set[int] = set()
    for node in nodes:  # walk order: a child graph's contents come after its node
        if node.type == "GRAPH" or node.graph in embedded:
            embedded.update(node.fields.get("graphs", ()))
    return embedded


def _unclaimed_role(node: GraphNode, embedded: set[int], trace: LaunchTrace, warp_functions: Any) -> str:
    if node.error:
        return "unread"
    if node.graph in embedded:
        return "embedded"
    if node.type in _SYNC_TYPES:
        return "synchronization"
    if node.type in _ALLOC_TYPES:
        # Warp's own when it allocates (or frees) an array recorded during the capture.
        return "allocation" if trace.allocation_at(int(node.fields.get("dst") or 0)) is not None else "foreign"
    if node.type in _STRUCTURE_TYPES:
        return "structure"
    if node.type == "KERNEL":
        if node.name.startswith(_WARP_CONDITIONAL_KERNELS):
            return "warp-conditional"
        warp = warp_functions.get(int(node.fields.get("func") or 0))
        if warp is not None:
            node.fields["warp_kernel"] = warp[0]
            return "unrecorded"
    return "foreign"


def _listed(problems: list[str]) -> str:
    more = len(problems) - _LISTED
    return "; ".join(problems[:_LISTED]) + (f"; and {more} more" if more > 0 else "")


def _gaps(nodes: Sequence[GraphNode], records: Sequence[LaunchRecord]) -> list[str]:
    gaps = []
    unread = [f"node {n.index} ({n.type.lower()}): {n.error}" for n in nodes if n.error]
    if unread:
        gaps.append(f"{len(unread)} graph node(s) could not be read and were not checked: {_listed(unread)}")
    bodies = [f"node {n.index}: {n.fields['bodies_unknown']}" for n in nodes if n.fields.get("bodies_unknown")]
    if bodies:
        gaps.append(f"{len(bodies)} conditional body(ies) were not walked: {_listed(bodies)}")
    params = [
        f"node {n.index}: {n.fields.get('params_unread') or 'not read'}"
        for n in nodes
        if n.role == "recorded" and n.type == "KERNEL" and n.fields.get("params") is None
    ]
    if params:
        gaps.append(f"the parameters of {len(params)} kernel node(s) were not compared: {_listed(params)}")
    # An operation that ran outside the capture (paused, or on a stream the capture does
    # not record: a stream-drift finding of the host checks) has no node to match.
    escaped = [r for r in records if r.capture is None and r.uncaptured is None and r.device.startswith("cuda")]
    if escaped:
        gaps.append(
            f"{len(escaped)} recorded operation(s) could not be matched to a graph node: the driver could not say "
            f"where they stood in the capture ({_listed([r.kernel for r in escaped])})"
        )
    return gaps


# -- reading ---------------------------------------------------------------------------------


def read_graph(graph: Any) -> list[GraphNode]:
    """Every node of a captured graph, as graphcheck's cross-check reads it.

    On CUDA the graph's nodes as the driver holds them (child graphs and conditional
    bodies included); on the CPU every operation Warp will replay, in order, with its fields
    (a kernel launch's argument bytes as replay will pass them, a copy's addresses and size,
    a fill's value...). Each node prints as one line (``str(node)``: ``0: kernel relax shape
    (64,)``). Given a :class:`~graphcheck.CheckedGraph`, the nodes come matched to the
    recorded operations that made them (``record``, ``role``), read again when the graph
    changed since its capture. A plain ``wp.Graph`` has no record of what made its nodes;
    for the view with source lines that ``graphcheck check --show-graph`` prints, capture
    with :func:`graphcheck.capture` (or a :class:`graphcheck.GraphGuard`) and print
    ``checked.graph_match.lines()``::

        checked = gc.capture(sim.step, device="cpu")
        for line in checked.graph_match.lines():
            print(line)
        # 0: kernel relax shape (64,)  <- operation #0 mysims.relax at mysims.py:69

    Args:
        graph: a ``wp.Graph`` captured on CUDA or the CPU, or a ``CheckedGraph``.

    Raises:
        graphcheck.nodes.GraphReadError: the graph cannot be read (the message says why).
        TypeError: for anything else than a ``wp.Graph`` or a ``CheckedGraph``.
        ValueError: for an external capture, which holds no graph to read.
    """
    import warp as wp

    if not (hasattr(graph, "graph_match") or isinstance(graph, wp.Graph)):
        raise TypeError(
            f"read_graph() takes a wp.Graph (capture.graph of a wp.ScopedCapture) or a graphcheck.CheckedGraph, got "
            f"{graph!r} ({article(type(graph).__name__)})"
        )
    match = getattr(graph, "graph_match", None)
    trace = getattr(graph, "full_trace", None)
    if hasattr(graph, "graph_match"):  # a CheckedGraph: its nodes, matched to its record
        inner = graph.graph
        if match is not None and match.holds_what_was_read(inner):
            return list(match.nodes)
        if trace is not None:
            return list(read_match(inner, trace).nodes)
        graph = inner
    if _warp.cpu_graph_state(graph) is not None:
        return list(_warp.read_cpu_graph(graph).nodes)
    handle = _warp.graph_handle(graph)
    if not handle:
        raise ValueError(f"this graph holds no graph to read: it was captured by an external capture ({graph!r})")
    return walk(_cuda.Reader(), handle, ())


# -- reading (the driver) ---------------------------------------------------------------------


def read_match(graph: Any, trace: LaunchTrace, reader: Any = None) -> GraphMatch:
    """Read a captured ``wp.Graph`` once and match its nodes to ``trace``.

    Args:
        graph: a ``wp.Graph`` from a CUDA or CPU capture (kept alive while reading).
        trace: the operations recorded while capturing, Warp's internal ones included.
        reader: on CUDA, a :class:`graphcheck._cuda.Reader` (default: a new one, for this walk).

    Raises:
        ValueError: for an external capture (no graph to read).
        graphcheck.nodes.GraphReadError: on CUDA without cuda-python or a driver, or when
            the driver cannot list the top graph's nodes; on the CPU when the operation
            stream cannot be read (the message says which and why). A node, a body or a
            child graph that cannot be read is a gap of the match.
    """
    if _warp.cpu_graph_state(graph) is not None:
        return match_cpu(_warp.read_cpu_graph(graph), trace)
    handle = _warp.graph_handle(graph)
    if not handle:
        raise ValueError(
            "this graph has no graph to read: it was captured by an external capture "
            f"(device {_warp.graph_device(graph)})"
        )
    reader = reader if reader is not None else _cuda.Reader()
    nodes = walk(reader, handle, trace.records)
    children = _warp.loaded_cuda_kernels() if any(n.type == "GRAPH" for n in nodes) else {}
    return match_nodes(nodes, trace, warp_functions=_warp.cuda_function_map(graph), child_kernels=children)


def walk(reader: Any, top: int, records: Sequence[LaunchRecord]) -> list[GraphNode]:
    """Every node of a graph, numbered in walk order: topological, the nodes of a child
    graph or conditional body right after the node that holds them.

    A conditional node's bodies come from the driver from CUDA 13.2, else from the
    capture spans of the ``wp.capture_if`` / ``capture_while`` that made it; a body
    neither knows is marked (``fields["bodies_unknown"]``), not walked.

    Raises:
        graphcheck._cuda.GraphInspectError: the top graph's nodes cannot be listed.
    """
    spans: dict[int, list[CaptureSpan]] = {}
    for record in records:
        if record.capture is not None and record.kind == "conditional" and record.capture.bodies:
            spans.setdefault(record.capture.graph, []).append(record.capture)
    out: list[GraphNode] = []
    seen: set[int] = set()
    _walk(reader, top, 0, spans, seen, out, required=True)
    # Graphs operations were captured into that no node led to (a body whose conditional
    # node could not be told apart): walk them too, so their operations are matched.
    for record in records:
        span = record.capture
        for graph in (span.graph, *span.bodies) if span is not None else ():
            _walk(reader, graph, 1, spans, seen, out, required=False)
    for index, node in enumerate(out):
        node.index = index
    return out


def _walk(
    reader: Any,
    graph: int,
    depth: int,
    spans: dict[int, list[CaptureSpan]],
    seen: set[int],
    out: list[GraphNode],
    required: bool,
) -> None:
    if graph in seen:
        return
    seen.add(graph)
    try:
        nodes = reader.nodes(graph, depth)
    except _cuda.GraphInspectError as error:
        if required:
            raise
        out.append(GraphNode(-1, 0, graph, depth, "UNKNOWN", error=f"graph {graph:#x} could not be read: {error}"))
        return
    learnt = bodies_from_capture(nodes, spans.get(graph, ()))
    for node in nodes:
        out.append(node)
        if node.type == "CONDITIONAL" and not node.error and "graphs" not in node.fields:
            bodies = learnt.get(node.handle)
            if bodies is None:
                node.fields["bodies_unknown"] = (
                    f"a CUDA {reader.version // 1000}.{reader.version % 1000 // 10} driver cannot reach it "
                    "(13.2 can), and no recorded wp.capture_if / capture_while captured it"
                )
            else:
                node.fields["graphs"] = bodies
        for child in node.fields.get("graphs", ()):
            _walk(reader, child, depth + 1, spans, seen, out, required=False)


def bodies_from_capture(nodes: Sequence[GraphNode], spans: Sequence[CaptureSpan]) -> dict[int, tuple[int, ...]]:
    """Conditional node -> its bodies, from the capture spans of ``wp.capture_if`` /
    ``capture_while`` records: Warp adds one single-body conditional node per branch,
    the ``if`` branch first, and captures the bodies in that order."""
    out: dict[int, tuple[int, ...]] = {}
    graph = _Graph(nodes)
    for span in spans:
        conditionals = [n for n in graph.span(span) if n.type == "CONDITIONAL"]
        if len(conditionals) == len(span.bodies):
            out.update((n.handle, (body,)) for n, body in zip(conditionals, span.bodies))
        elif conditionals:
            out[conditionals[0].handle] = span.bodies
    return out


# -- CPU graphs: matched by position -------------------------------------------------------------

#: How far ahead the matching looks for an operation where the two sequences slip.
_AHEAD = 32


class _Want(NamedTuple):
    """One operation a recorded operation wants the CPU graph to hold."""

    record: int  # index in the trace
    type: str | None  # node type; None: no CPU graph operation replays it
    call: str  # what asked for it: a kernel's key, the host entry point called
    asked: dict[str, Any] | None  # the fields the node must hold (a launch: its record says)
    branches: tuple[list[_Want], list[_Want]] | None = None  # a conditional's bodies
    adjoint: bool = False  # a launch's direction


_new_want = tuple.__new__  # a _Want of every field, made without _Want's own constructor (one call less a launch)


def _wanted(records: Sequence[LaunchRecord]) -> list[_Want]:
    """What the trace wants the graph to hold, in order: a conditional's bodies inside it."""
    top: list[_Want] = []
    bodies: dict[tuple[int, str], list[_Want]] = {}
    keys: dict[int, str] = {}  # id(kernel) -> its key
    for index, record in enumerate(records):
        nested = record.nested
        target = bodies.setdefault(nested[:2], []) if nested.__class__ is tuple else top
        kind = record.kind
        if record.uncaptured == 0 or (record.device != "cpu" and not record.device.startswith("cpu")):
            continue  # it ran at once, out of every CPU capture (paused), or on another device
        if kind == "launch":
            kernel = record.kernel_object
            key = keys.get(id(kernel))
            if key is None:
                key = keys[id(kernel)] = str(getattr(kernel, "key", ""))
            target.append(_new_want(_Want, (index, "KERNEL", key, None, None, record.adjoint)))
        elif kind == "conditional":
            loop = record.kernel.endswith("capture_while")
            branches = (
                bodies.setdefault((record.seq, "while_body" if loop else "on_true"), []),
                [] if loop else bodies.setdefault((record.seq, "on_false"), []),
            )
            condition = record.args.get("condition")
            asked = {"kind": "while" if loop else "if", "condition": getattr(condition, "ptr", None)}
            target.append(_Want(index, "CONDITIONAL", record.kernel, asked, branches))
        else:
            for name, fields in record.host_calls:
                wanted = "GRAPH" if name == CPU_GRAPH_LAUNCH else _warp.node_type_for(name)
                if wanted != _warp.SET_UP:
                    target.append(_Want(index, wanted, name, fields))
    return top


def match_cpu(graph: Any, trace: LaunchTrace) -> GraphMatch:
    """Match a CPU graph's operations to ``trace`` by position.

    Args:
        graph: what the graph holds (:func:`graphcheck._warp.read_cpu_graph`).
        trace: the operations recorded while capturing, Warp's internal ones included.

    Returns:
        The match: each node matched to the operation that asked for it (``"recorded"``,
        with what was asked in ``asked``), or ``"unrecorded"``; what the graph does not
        hold in ``dropped``; a node that could not be read ``"unread"``, and a gap.
    """
    nodes: list[GraphNode] = graph.nodes
    for node in nodes:
        node.record, node.role, node.asked = None, "", None
    dropped: list[Dropped] = []
    _align(_wanted(trace.records), graph.streams.get(graph.top, []), graph.streams, dropped)
    for node in nodes:
        if node.error:
            node.role = "unread"
        elif not node.role:
            node.role = "unrecorded"
            if node.type == "KERNEL":  # (a copy: the reader shares one launch's fields between its copies)
                node.fields = {**node.fields, "warp_kernel": node.name}
    gaps = list(graph.gaps)
    unread = [f"operation {n.index} ({n.type.lower()}): {n.error}" for n in nodes if n.error]
    if unread:
        gaps.append(f"{len(unread)} operation(s) of the CPU graph could not be read: {_listed(unread)}")
    return GraphMatch(list(nodes), trace, gaps, device="cpu", dropped=dropped, source=graph)


def _fits(want: _Want, node: GraphNode) -> bool:
    """Whether ``node`` is the operation ``want`` asks for (its contents aside)."""
    if node.type != want.type or node.error:
        return False
    if node.type == "KERNEL":
        return node.fields.get("name") == want.call and node.fields.get("adjoint") == want.adjoint
    if node.type == "CONDITIONAL":
        return node.fields.get("kind") == (want.asked or {}).get("kind")
    return True


def _ahead(items: Sequence[Any], start: int, test: Any) -> int | None:
    return next((k for k in range(start, min(len(items), start + _AHEAD)) if test(items[k])), None)


def _align(wants: list[_Want], nodes: list[GraphNode], streams: dict[int, list[GraphNode]], dropped: list) -> None:
    """Match one stream's operations to what ``wants`` asks for, in order."""
    i = j = 0
    count = len(nodes)
    while i < len(wants):
        want = wants[i]
        node = nodes[j] if j < count else None
        if (  # the commonest case first: the next operation is the one asked for
            node is not None
            and want.branches is None
            and node.type == want.type
            and not node.error
            and (want.type != "KERNEL" or (node.fields["name"] == want.call and node.fields["adjoint"] == want.adjoint))
        ):
            node.record, node.role, node.asked = want.record, "recorded", want.asked
            i, j = i + 1, j + 1
            continue
        if want.type is None:
            dropped.append(Dropped(want.record, want.call, "Warp's CPU graphs have no operation for it"))
        elif want.type == "GRAPH":
            j = _align_launched(want, nodes, j, dropped)
        elif node is not None and _fits(want, node):
            _pair(want, node, streams, dropped)
            j += 1
        else:
            found = _ahead(nodes, j, lambda n, w=want: _fits(w, n))
            later = _ahead(wants, i + 1, lambda w, n=node: n is not None and _fits(w, n))
            if found is not None and (later is None or found - j <= later - i):
                _pair(want, nodes[found], streams, dropped)  # what lies before it, no record made
                j = found + 1
            elif node is not None and node.type == want.type and later is None:
                _pair(want, node, streams, dropped)  # the same kind of operation: compared, it says how it differs
                j += 1
            else:
                there = f"the graph holds {_described(node)} there" if node is not None else "the graph ends before it"
                dropped.append(
                    Dropped(
                        want.record,
                        want.call,
                        f"the graph holds no {want.type.lower().replace('_', ' ')} for it ({there})",
                    )
                )
        i += 1


def _pair(want: _Want, node: GraphNode, streams: dict[int, list[GraphNode]], dropped: list) -> None:
    node.record, node.role, node.asked = want.record, "recorded", want.asked
    if want.branches is not None:
        for body, stream in zip(want.branches, node.fields.get("graphs", ())):
            _align(body, streams.get(stream, []), streams, dropped)


def _described(node: GraphNode) -> str:
    if node.type == "KERNEL":
        return f"the launch of {node.name}" + (" (adjoint)" if node.fields.get("adjoint") else "")
    return article(node.type.lower().replace("_", " "))


def _align_launched(want: _Want, nodes: list[GraphNode], j: int, dropped: list) -> int:
    """A CPU graph launched inside the capture (``wp.capture_launch``): the operations of
    the outer graph that replay what the inner graph holds, from ``j``; what they leave
    out is dropped. Returns where the outer graph's next operation stands."""
    inner = (want.asked or {}).get("graph")
    if not isinstance(inner, _warp.CpuGraph):
        dropped.append(Dropped(want.record, want.call, str(inner or "the graph launched could not be read")))
        return j
    missing: list[str] = []
    flattened: list[str] = []
    for node in inner.streams.get(inner.top, []):
        if node.type != "CONDITIONAL":
            if j < len(nodes) and _same_operation(node, nodes[j]):
                _embed(want, node, nodes[j])
                j += 1
            else:
                missing.append(_described(node))
            continue
        taken = []
        for branch, stream in zip(("the first", "the second"), node.fields.get("graphs", ())):
            body = inner.streams.get(stream, [])
            held = 0
            while held < len(body) and j < len(nodes) and _same_operation(body[held], nodes[j]):
                _embed(want, body[held], nodes[j])
                held, j = held + 1, j + 1
            if held:
                taken.append(branch)
        kind = f"wp.capture_{node.fields.get('kind', 'if')}"
        flattened.append(
            f"its {kind} flattened to {taken[0]} branch, the one taken at capture (replays run it whatever the "
            "condition)"
            if taken
            else f"not its {kind}"
        )
    if missing or flattened:
        held = sum(1 for n in nodes if n.record == want.record)
        parts = ([f"not {_listed(missing)}"] if missing else []) + flattened
        total = sum(1 for n in inner.nodes if n.type != "CONDITIONAL")  # the operations its branches hold count
        why = f"it holds {held} of that graph's {total} operation(s): " + "; ".join(parts)
        dropped.append(Dropped(want.record, want.call, why))
    return j


def _same_operation(inner: GraphNode, outer: GraphNode) -> bool:
    """Whether an operation of a graph launched inside a capture is replayed by ``outer``."""
    if inner.type != outer.type or inner.error or outer.error:
        return False
    skip = ("addresses", "unresolved")
    return all(outer.fields.get(k) == v for k, v in inner.fields.items() if k not in skip)


def _embed(want: _Want, inner: GraphNode, outer: GraphNode) -> None:
    # The launch's record is the operation that made it: its addresses are checked before replay too.
    outer.record, outer.role, outer.asked = want.record, "recorded", dict(inner.fields)

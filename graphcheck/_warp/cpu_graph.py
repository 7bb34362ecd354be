"""What a captured CPU graph will replay, read back from Warp's own operation stream.

A Warp CPU graph (``wp.ScopedCapture(device="cpu")``) runs nothing while it is captured:
each operation is written as a packed record into one byte stream of a native
``APICState`` (``warp/native/apic_internal.h``; the records are the ``#pragma pack(1)``
structs of ``warp/native/apic_types.h``), and ``wp.capture_launch`` walks that stream.
A record addresses memory as a region id and an offset; the state's region table gives
each region's live base pointer, the address replay will use.

:func:`read_cpu_graph` copies the stream and the region table out of the state and turns
every record into a :class:`~graphcheck.nodes.GraphNode`, as the CUDA reader turns a
graph's nodes: a kernel launch with its argument bytes as replay will pass them (pointer
slots holding the addresses they resolve to), copies, memsets and fills with their
addresses, sizes and values, Warp's native helpers with their buffers and counts, and a
``wp.capture_if`` / ``capture_while`` with its branches.

Nothing Warp exports hands out the stream with the region table, so both are read from
the state's memory, behind a layout check made on every read: the operation count at its
place equals the one ``wp_apic_get_operation_count`` answers, the records walk to the
stream's exact end, every region Python registered for the capture has the base pointer
Warp's capture helper holds for it, every region a record names is in the table, and every
pointer slot a launch's relocation patches lies in that launch's record.
Warp's own save (``wp_apic_state_save``, which writes a ``.wrp`` file) is the other
route: it gives the same stream and its format version, but not the live base pointers,
and it copies every buffer the graph touched into the file (too slow to take on every
capture, and refused for graphs that refit a BVH or update a hash grid). It is taken to
learn the format version (once, from an empty state), and for a graph whose memory
fails the layout check: its nodes then carry no addresses, and the cross-check says so.

It is longer than most modules on purpose: it reads one binary format behind one layout
check, and the state's memory, the stream's records and what each host call asks for must
change together when Warp's format moves (a release that changes it changes this module
alone).
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import operator
import os
import re
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from .._memo import remember
from ..nodes import GraphNode, GraphReadError
from .version import WARP_VERSION, _runtime

__all__ = [
    "CPU_GRAPH_FORMATS",
    "SET_UP",
    "CpuGraph",
    "CpuGraphUnreadable",
    "cpu_graph_state",
    "host_call_fields",
    "node_type_for",
    "read_cpu_graph",
    "read_cpu_state",
    "stream_format",
    "unchanged",
]

#: The operation stream formats graphcheck reads (``APIC_FORMAT_VERSION``): 14 is Warp
#: 1.15's, 15 that of 1.16 and 1.17, 16 that of 1.18, 18 that of 1.19. The records are
#: laid out alike in all of them; 14 lacks the reductions, BVH and hash grid records
#: (Warp 1.15's CPU graphs leave those helpers out), and before 16 a launch's shape is
#: signed.
CPU_GRAPH_FORMATS = (14, 15, 16, 18)


class CpuGraphUnreadable(GraphReadError):
    """A CPU graph's operation stream cannot be read; the message says why."""


@dataclass
class CpuGraph:
    """What a CPU graph holds, read back.

    Attributes:
        nodes: every operation in walk order: a ``wp.capture_if`` / ``capture_while``
            (type ``"CONDITIONAL"``) right before its branches' operations.
        streams: the operations of each stream by its id: ``top`` (the graph's own), and
            one per branch of each conditional (its node's ``fields["graphs"]``).
        top: the id of the graph's own stream.
        format: the stream's format version (``APIC_FORMAT_VERSION``).
        source: ``"memory"`` (the state read in place) or ``"save"`` (Warp's own save).
        gaps: what could not be read, one sentence each (nodes without addresses).
        read: the stream and region table bytes as read from memory (empty from a save):
            what :func:`unchanged` compares.
    """

    nodes: list[GraphNode]
    streams: dict[int, list[GraphNode]]
    top: int
    format: int
    source: str
    gaps: list[str] = field(default_factory=list)
    read: tuple[bytes, bytes] = (b"", b"")


# -- the stream format -------------------------------------------------------------------

_format: int | None = None


def stream_format() -> int:
    """The format version this Warp writes its CPU graphs in, learnt once from Warp's own
    save of an empty state (the ``.wrp`` header's version).

    Raises:
        CpuGraphUnreadable: when the save fails, or the format is not one graphcheck reads.
    """
    global _format
    if _format is None:
        core = _runtime().core
        state = core.wp_apic_create_state()
        try:
            header = _saved(state)[:8]
        finally:
            core.wp_apic_destroy_state(ctypes.c_void_p(state))
        if len(header) < 8 or header[:4] != b"WRP1":
            raise CpuGraphUnreadable(f"warp-lang {WARP_VERSION} saved an empty CPU graph without a WRP1 header")
        _format = struct.unpack_from("<I", header, 4)[0]
    if _format not in CPU_GRAPH_FORMATS:
        raise CpuGraphUnreadable(
            f"warp-lang {WARP_VERSION} writes its CPU graphs in format {_format}, which graphcheck does not read "
            f"(it reads {', '.join(map(str, CPU_GRAPH_FORMATS))}: Warp 1.15 to 1.19)"
        )
    return _format


def _saved(state: int) -> bytes:
    """Warp's own save of an APIC state, as the bytes of the ``.wrp`` file it writes."""
    runtime = _runtime()
    handle, path = tempfile.mkstemp(prefix="graphcheck-", suffix=".wrp")
    os.close(handle)
    try:
        if not runtime.core.wp_apic_state_save(ctypes.c_void_p(state), path.encode(), 0, None):
            raise CpuGraphUnreadable(f"Warp's save of the graph failed: {runtime.get_error_string() or 'no reason'}")
        with open(path, "rb") as saved:
            return saved.read()
    finally:
        os.unlink(path)


# -- the state in memory ---------------------------------------------------------------------

# struct APICState (warp/native/apic_internal.h, the same in Warp 1.15 to 1.19) as x86-64
# and aarch64 compilers with libstdc++ lay it out: three bools, the operation stream (a
# std::vector: begin, end, capacity), the operation count, the region info map (a std::map,
# 48 bytes), the region table (a std::vector of {u64 base, u64 size, bool valid}, 24 bytes
# an entry) and the next region id. Every read checks it (see _state_memory).
_STATE_BYTES = 120
_CPU, _VALIDATED = 1, 2
_STREAM, _COUNT, _REGIONS, _NEXT_REGION = 8, 32, 88, 112
_REGION_ENTRY = struct.Struct("<QQ?7x")
_REGION_ENTRIES = np.dtype([("base", "<u8"), ("size", "<u8"), ("valid", "?"), ("_", "V7")])
_VECTOR = struct.Struct("<QQQ")


def cpu_graph_state(graph: Any) -> int | None:
    """The ``APICState`` address of a CPU graph, or None for any other graph."""
    device = getattr(graph, "device", None)
    state = getattr(graph, "apic_state", None)
    if not getattr(device, "is_cpu", False) or state is None:
        return None
    address = state.value if isinstance(state, ctypes.c_void_p) else state
    return int(address) if address else None


def _vector(header: bytes, at: int, what: str) -> tuple[int, int]:
    begin, end, capacity = _VECTOR.unpack_from(header, at)
    if not begin <= end <= capacity or (begin == 0) != (end == 0):
        raise CpuGraphUnreadable(f"the graph's {what} is not where Warp 1.15 to 1.19 keep it ({begin:#x}..{end:#x})")
    return begin, end - begin


def _state_bytes(state: int) -> tuple[bytes, bytes, bytes]:
    """``(header, stream, region table)`` of an APICState as its memory holds them."""
    header = ctypes.string_at(state, _STATE_BYTES)
    begin, nbytes = _vector(header, _STREAM, "operation stream")
    table, table_bytes = _vector(header, _REGIONS, "region table")
    stream = ctypes.string_at(begin, nbytes) if nbytes else b""
    return header, stream, ctypes.string_at(table, table_bytes) if table_bytes else b""


def unchanged(graph: Any, read: CpuGraph) -> bool:
    """Whether a CPU graph still holds, byte for byte, the stream and region table ``read``
    found in it (False for another graph, or one read from a save)."""
    state = cpu_graph_state(graph)
    if state is None or state != read.top or read.source != "memory":
        return False
    try:
        _, stream, table = _state_bytes(state)
    except CpuGraphUnreadable:
        return False
    return (stream, table) == read.read


def _state_memory(state: int, python_regions: dict[int, int]) -> tuple[bytes, int, dict[int, int], bytes]:
    """``(stream, operation count, region id -> base, region table bytes)`` read from an
    APICState, checked against what Warp answers and what Python registered."""
    core = _runtime().core
    header, stream, raw = _state_bytes(state)
    count = struct.unpack_from("<I", header, _COUNT)[0]
    answered = int(core.wp_apic_get_operation_count(ctypes.c_void_p(state)))
    if count != answered or header[_CPU] != 1 or header[_VALIDATED] > 1:
        raise CpuGraphUnreadable(
            f"the graph's state is not laid out as graphcheck reads it (operation count {count} where Warp answers "
            f"{answered})"
        )
    table_bytes = len(raw)
    next_region = struct.unpack_from("<I", header, _NEXT_REGION)[0]
    entries = table_bytes // _REGION_ENTRY.size
    if table_bytes % _REGION_ENTRY.size or (entries and entries != next_region):
        raise CpuGraphUnreadable(
            f"the graph's region table is not laid out as graphcheck reads it ({table_bytes} bytes, next region id "
            f"{next_region})"
        )
    table = np.frombuffer(raw, _REGION_ENTRIES)
    valid = table["valid"].tolist()
    regions = dict(zip(itertools.compress(range(entries), valid), itertools.compress(table["base"].tolist(), valid)))
    if not python_regions.items() <= regions.items():  # (a set comparison: each pair looked up once)
        rid, base = next((rid, base) for rid, base in python_regions.items() if regions.get(rid) != base)
        raise CpuGraphUnreadable(
            f"region {rid} of the graph's region table does not hold the buffer Python registered for it "
            f"({base:#x}): its layout is not the one graphcheck reads"
        )
    return stream, count, regions, raw


def _python_regions(graph: Any) -> dict[int, int]:
    """Region id -> base pointer of the buffers Warp's Python side registered for a capture."""
    capture = getattr(graph, "_apic_capture", None)
    entries = getattr(capture, "_regions", None) or {}
    return dict(map(_ID_AND_BASE, list(entries.values())))


_ID_AND_BASE = operator.itemgetter(0, 1)  # of an entry Warp's capture keeps: (id, base, capacity, ...)


def _saved_stream(state: int) -> tuple[bytes, int]:
    """``(stream, operation count)`` from Warp's own save (its OPERATIONS section)."""
    blob = _saved(state)
    sections, table = struct.unpack_from("<IQ", blob, 12)
    for i in range(sections):
        kind, _, offset, size, _ = struct.unpack_from("<IIQQQ", blob, table + 32 * i)
        if kind == 3:  # APIC_SECTION_OPERATIONS: the count, then the stream
            return blob[offset + 4 : offset + size], struct.unpack_from("<I", blob, offset)[0]
    raise CpuGraphUnreadable("Warp's save of the graph holds no operations section")


def read_cpu_graph(graph: Any, *, source: str = "memory") -> CpuGraph:
    """Every operation a captured CPU graph will replay, in order.

    Args:
        graph: a ``wp.Graph`` captured on the CPU.
        source: ``"memory"`` (the graph's state, read in place: the default) or ``"save"``
            (Warp's own save of it, which holds no live addresses; slow).

    Raises:
        CpuGraphUnreadable: the graph is no CPU capture, its format is not one graphcheck
            reads, or its stream cannot be read (the message says why).
    """
    state = cpu_graph_state(graph)
    if state is None:
        raise CpuGraphUnreadable("this graph holds no CPU operation stream (it was not captured on the CPU)")
    return read_cpu_state(state, _python_regions(graph), source=source)


def read_cpu_state(state: int, python_regions: dict[int, int] | None = None, *, source: str = "memory") -> CpuGraph:
    """:func:`read_cpu_graph` of a graph's ``APICState`` address (the one ``wp.capture_launch``
    hands Warp's replay); ``python_regions`` (region id -> base) are checked against it."""
    version = stream_format()
    layout, table = "", b""
    if source == "save":
        stream, count = _saved_stream(state)
        regions: dict[int, int] | None = None
    else:
        try:
            stream, count, regions, table = _state_memory(state, python_regions or {})
        except CpuGraphUnreadable as error:
            stream, count = _saved_stream(state)  # the records are still Warp's own
            regions = None
            layout = str(error)
    reader = _Reader(stream, version, regions, state, table)
    # A node, its fields and its parameters for each operation, none of them garbage: the
    # cyclic collector is paused while they are made rather than run every few hundred of
    # them (where a program holds many objects, a full collection it set off costs more than
    # the read), and resumed, as it was, when they are.
    collecting = gc.isenabled()
    gc.disable()
    try:
        reader.walk(0, len(stream), count, state, 0)
        reader.relocate()
    finally:
        if collecting:
            gc.enable()
    gaps = []
    if regions is None:
        why = layout or "Warp's save holds no live addresses"
        gaps.append(f"the addresses the graph's operations use could not be read ({why}): they were not compared")
    if regions is None:
        return CpuGraph(reader.nodes, reader.streams, state, version, "save", gaps)
    return CpuGraph(reader.nodes, reader.streams, state, version, "memory", gaps, (stream, table))


# -- the records ---------------------------------------------------------------------------

_OP = struct.Struct("<II")
# APICLaunchRecord, 80 bytes: the header, the shape (signed before format 16), its rank and
# the thread count at 8, then Warp's CUDA settings (0 on the CPU), and at 60 the direction
# and the lengths of what follows: key, module hash, parameters, relocations, values.
_LAUNCH_BYTES = 80
_LAUNCH = {True: struct.Struct("<II4iiQQiiiiB3xHHH2xII"), False: struct.Struct("<II4IiQQiiiiB3xHHH2xII")}
_PARAM = struct.Struct("<HHIII")
_RELOC = struct.Struct("<IiQB7x")
_RELOCS = np.dtype([("slot", "<u4"), ("region", "<i4"), ("offset", "<u8"), ("kind", "u1"), ("_", "V7")])
# A launch record's direction and the lengths of its name, module hash and parameters, at 60.
_LENGTHS = struct.Struct("<B3xHHH")
_DATA_PTR, _HANDLE = 1, 2
_NO_FIELDS: dict[str, Any] = {}  # a node's fields until they are read
_COND = struct.Struct("<IIiIQIIII")
_U64 = struct.Struct("<Q")

#: APIC operation type -> the node type it reads as.
_TYPES = {
    1: "KERNEL", 2: "MEMCPY", 3: "MEMCPY", 4: "MEMCPY", 5: "MEMSET", 6: "MEM_ALLOC", 7: "CONDITIONAL",
    8: "CONDITIONAL", 9: "SCAN", 10: "MEMTILE", 11: "SEGMENTED_SORT", 12: "RADIX_SORT", 13: "RUNLENGTH_ENCODE",
    14: "BSR_FROM_TRIPLETS", 15: "BSR_TRANSPOSE", 16: "REDUCTION", 17: "BVH_REFIT", 18: "BVH_REBUILD",
    19: "HASH_GRID_UPDATE",
}  # fmt: skip
#: Operation types format 14 (Warp 1.15) does not have.
_SINCE_15 = (16, 17, 18, 19)
_APIC_TYPES = {
    1: ("int32", 4),
    2: ("uint32", 4),
    3: ("int64", 8),
    4: ("uint64", 8),
    5: ("float32", 4),
    6: ("float64", 8),
}

# The fixed records: operation type -> (struct after the header, field names). Region
# fields come in pairs, "<name>_region" and "<name>_offset", and read as the address
# "<name>"; the names are those Warp's Python functions give the helpers' arguments.
_FIXED: dict[int, tuple[struct.Struct, tuple[str, ...]]] = {
    op: (struct.Struct("<" + fmt), tuple(names.split()))
    for op, (fmt, names) in {
        2: ("iIQQ", "dst_region _ dst_offset nbytes"),
        3: ("iiQQQ", "dst_region src_region dst_offset src_offset nbytes"),
        4: ("iiQQQ", "dst_region src_region dst_offset src_offset nbytes"),
        5: ("iiQQ", "dst_region value dst_offset nbytes"),
        6: ("iIQ", "dst_region _ nbytes"),
        9: ("iiQQIiiiBB2x", "dest_region src_region dest_offset src_offset count src_stride dest_stride type_length "
                            "dtype inclusive"),
        10: ("iIQQ", "dst_region element_size dst_offset count"),
        11: ("iiiiQQQQIIB3x", "keys_region values_region segment_starts_region segment_ends_region keys_offset "
                              "values_offset segment_starts_offset segment_ends_offset count segments dtype"),
        12: ("iiQQIiiiB3x", "keys_region values_region keys_offset values_offset count begin_bit end_bit value_size "
                            "dtype"),
        13: ("iiiiQQQQI4x", "values_region run_values_region run_lengths_region run_count_region values_offset "
                            "run_values_offset run_lengths_offset run_count_offset count"),
        14: ("iiiiiB3xQ10i10Q", "block_size scalar_size rows columns nnz_upper_bound masked_topology zero_mask "
                                "tpl_nnz_region tpl_rows_region tpl_columns_region tpl_values_region "
                                "summed_offsets_region summed_indices_region offsets_region row_counts_region "
                                "columns_region nnz_region tpl_nnz_offset tpl_rows_offset tpl_columns_offset "
                                "tpl_values_offset summed_offsets_offset summed_indices_offset offsets_offset "
                                "row_counts_offset columns_offset nnz_offset"),
        15: ("11i8Q", "rows columns nnz_upper_bound offsets_region row_counts_region columns_region "
                      "transposed_offsets_region transposed_row_counts_region transposed_columns_region "
                      "block_indices_region status_region offsets_offset row_counts_offset columns_offset "
                      "transposed_offsets_offset transposed_row_counts_offset transposed_columns_offset "
                      "block_indices_offset status_offset"),
        16: ("iiiIQQQiiiBB2x", "a_region b_region out_region count a_offset b_offset out_offset stride_a stride_b "
                               "type_length kind dtype"),
        17: ("QiI", "bvh constructor _"),
        18: ("QiI", "bvh constructor _"),
        19: ("QdiiQQiiiBB2x", "grid radius points_region groups_region points_offset groups_offset count "
                              "points_stride groups_stride type_id has_groups"),
    }.items()
}  # fmt: skip


class _Reader:
    """Reads one stream's records into nodes (one reader per read of a graph)."""

    def __init__(self, data: bytes, version: int, regions: dict[int, int] | None, state: int, table: bytes) -> None:
        self.data = data
        self.table = table  # the region table's bytes (see _state_memory)
        self.version = version
        self.regions = regions
        self.header = _LAUNCH[version < 16]
        self.nodes: list[GraphNode] = []
        self.streams: dict[int, list[GraphNode]] = {}
        # The launches of each layout, read together once the whole stream is walked (see
        # relocate): where each distinct record starts, and its first node.
        self._launches: dict[_Layout, tuple[list[int], list[GraphNode]]] = {}
        # A launch record -> its first node's handle -> the nodes of the record's later copies.
        self._copies: dict[bytes, int] = {}
        self._more: dict[int, list[GraphNode]] = {}

    def walk(self, start: int, end: int, count: int, stream: int, depth: int) -> list[GraphNode]:
        data, nodes, launches, copies, more = self.data, self.nodes, self._launches, self._copies, self._more
        last: _Layout | None = None  # the layout of the launch before
        out: list[GraphNode] = []
        self.streams[stream] = out
        pos = start
        previous: tuple[int, ...] = ()
        for _ in range(count):
            if pos + 8 > end:
                raise CpuGraphUnreadable(f"the operation stream ends at byte {end} inside an operation's header")
            op, size = _OP.unpack_from(data, pos)
            if size < 8 or pos + size > end:
                raise CpuGraphUnreadable(f"the operation at byte {pos} claims {size} bytes, past its stream's end")
            node = GraphNode(len(nodes), pos + 1, stream, depth, _TYPES.get(op, "UNKNOWN"), previous, _NO_FIELDS)
            nodes.append(node)
            out.append(node)
            try:
                if op == 1:
                    # The same launch, byte for byte, shares its fields (nodes do not change them).
                    record = data[pos : pos + size]
                    first = copies.get(record)
                    if first is not None:
                        more.setdefault(first, []).append(node)
                        pos += size
                        previous = (node.handle,)
                        continue
                    forward, key_len, hash_len, nparams = _LENGTHS.unpack_from(data, pos + 60)
                    fixed = _LAUNCH_BYTES + key_len + hash_len + _PARAM.size * (nparams if forward else 2 * nparams)
                    if last is None or fixed != last.fixed or not data.startswith(last.key, pos + 8):
                        key = data[pos + 8 : pos + fixed]
                        last = _LAYOUTS.get(key) or remember(
                            _LAYOUTS, key, _Layout.read(data, self.header, pos, size, fixed, key)
                        )
                    layout = last
                    if size != layout.size:
                        raise ValueError(f"a launch record of {size} bytes whose parts do not add up")
                    group = launches.get(layout)
                    if group is None:
                        group = launches[layout] = ([], [])
                    group[0].append(pos)
                    group[1].append(node)
                    copies[record] = node.handle
                else:
                    node.fields = {}
                    self._read(node, op, pos, size, depth)
            except (struct.error, ValueError, KeyError) as error:
                node.error = f"its record could not be read ({type(error).__name__}: {error})"
            pos += size
            previous = (node.handle,)
        if pos != end:
            raise CpuGraphUnreadable(f"the operations end at byte {pos} of a stream of {end} bytes")
        return out

    def base(self, region: int) -> int | None:
        """The base a region id resolves to (None for no region, or none known)."""
        if region < 0 or self.regions is None:
            return None
        base = self.regions.get(region)
        if base is None:
            raise KeyError(f"region {region} is not in the graph's region table")
        return base

    def address(self, region: int, offset: int) -> int | None:
        """The address a region and an offset resolve to (None for no region, or none known)."""
        base = self.base(region)
        return None if base is None else base + offset

    def _read(self, node: GraphNode, op: int, pos: int, size: int, depth: int) -> None:
        if op not in _TYPES or (self.version < 15 and op in _SINCE_15):
            node.error = f"operation type {op} is not one of format {self.version}'s"
            return
        if op in (7, 8):
            self._conditional(node, op, pos, size, depth)
            return
        # The same record, byte for byte, over the same bases, shares its fields (a step zeroes
        # the same buffers every substep, capture after capture): a record's fields depend on
        # nothing else (region ids are a graph's own, so the bases they name are the key).
        record = self.data[pos : pos + size]
        known = _FIXED_READS.get(record)
        if known is None:
            layout, names = _FIXED[op]
            values = dict(zip(names, layout.unpack_from(record, 8)))
            ids = tuple(value for name, value in values.items() if name.endswith("_region"))
            known = remember(_FIXED_READS, record, (values, ids, {}))
        values, ids, by_bases = known
        bases = tuple(map(self.base, ids))
        fields = by_bases.get(bases)
        if fields is None:
            tail = record[8 + _FIXED[op][0].size :]
            fields = remember(by_bases, bases, _fixed_fields(op, values, self.address, tail), _BASES_PER_RECORD)
        node.fields = fields

    def relocate(self) -> None:
        """Give every launch its fields, once the whole stream is walked: its values as
        replay will pass them, each pointer slot holding the address its relocation
        resolves to, as replay's ``apic_pack_args_buf`` (``apic.cpp``) patches it (a data
        pointer its region's live base plus its offset, a handle its captured id, an
        explicit null 0). Without a region table (a save), pointer slots keep the record's
        bytes and each launch's fields say which they are (``unresolved``), to be left out
        of comparisons.

        Raises:
            CpuGraphUnreadable: a launch names a region the graph's region table lacks.
        """
        groups = list(self._launches.items())
        more = self._more
        self._launches, self._copies, self._more = {}, {}, {}
        resolved = self.regions is not None
        moved = self._relocated(groups) if resolved else {}
        for layout, (starts, nodes) in groups:
            data, at, shift = moved.get(layout, (self.data, starts, 0))
            try:
                layout.give(nodes, at, data, resolved, shift)
            except (struct.error, ValueError) as error:
                for node in nodes:
                    node.error = f"its record could not be read ({type(error).__name__}: {error})"
            if more:  # a record's copies share what its first node was given
                for node in nodes:
                    for copy in more.get(node.handle, ()):
                        copy.fields, copy.error = node.fields, node.error

    def _relocated(
        self, groups: list[tuple[_Layout, tuple[list[int], list[GraphNode]]]]
    ) -> dict[_Layout, tuple[bytes, list[int], int]]:
        """Every launch's relocations and values, their pointer slots relocated, all at once:
        by layout, the bytes they are in, where each launch's relocations start there, and
        what to add to that for where its record would start."""
        data = self.data
        pending = [(layout, starts) for layout, (starts, _) in groups if layout.nrelocs]
        if not pending:
            return {}
        # Each launch's relocations and values, one after another, and its relocations alone.
        layouts = [layout for layout, starts in pending for _ in starts]  # each launch's
        tails = bytearray(
            b"".join([data[at + layout.fixed : at + layout.size] for layout, starts in pending for at in starts])
        )
        relocs = np.frombuffer(
            b"".join([data[at + layout.fixed : at + layout.values] for layout, starts in pending for at in starts]),
            _RELOCS,
        )
        # Where each relocation's pointer slot lies in `tails`: its launch's place there, plus
        # its layout's place for the parameter it patches, plus its slot.
        places_of = list(itertools.accumulate([layout.size - layout.fixed for layout in layouts], initial=0))
        counts = [layout.nrelocs for layout in layouts]
        places = np.repeat(np.array(places_of[:-1], np.int64), counts)
        places += np.concatenate(
            [np.tile(layout.patches, len(starts)) if len(starts) > 1 else layout.patches for layout, starts in pending]
        )
        places += relocs["slot"]
        # Region id -> its live base, and whether the table holds it (a region past the table
        # reads as its last entry, and is refused below).
        entries = np.frombuffer(self.table, _REGION_ENTRIES)
        bases, known = entries["base"], entries["valid"]
        if not len(bases):
            bases, known = np.zeros(1, np.uint64), np.zeros(1, bool)
        data_pointer = relocs["kind"] == _DATA_PTR
        named = np.where(data_pointer, relocs["region"], 0)
        if (data_pointer & ((named >= len(bases)) | ~known.take(named, mode="clip"))).any():
            raise CpuGraphUnreadable("a launch of the graph names a region its region table lacks")
        if (places + 8 > np.repeat(np.array(places_of[1:], np.int64), counts)).any():
            raise CpuGraphUnreadable("a launch of the graph relocates a pointer past its record's end")
        addresses = np.where(
            data_pointer,
            bases.take(named, mode="clip") + relocs["offset"],
            np.where(relocs["kind"] == _HANDLE, relocs["offset"], np.uint64(0)),
        ).astype("<u8")
        # Every 8 bytes of `tails` from each byte on, as one (unaligned) u64: each slot written in one step.
        np.ndarray((len(tails) - 7,), "<u8", tails, 0, (1,))[places] = addresses
        patched = bytes(tails)
        moved, first = {}, 0
        for layout, starts in pending:
            moved[layout] = patched, places_of[first : first + len(starts)], -layout.fixed
            first += len(starts)
        return moved

    def _conditional(self, node: GraphNode, op: int, pos: int, size: int, depth: int) -> None:
        _, _, region, _, offset, a_size, a_count, b_size, b_count = _COND.unpack_from(self.data, pos)
        a_start = pos + _COND.size
        if a_start + a_size + b_size != pos + size:
            raise ValueError(f"a conditional record of {size} bytes whose branches do not add up")
        condition = self.address(region, offset)
        branches = (node.handle * 2, node.handle * 2 + 1)  # ids no operation's handle takes
        node.fields = {
            "kind": "while" if op == 8 else "if",
            "condition": condition,
            "graphs": branches,
            "addresses": [("condition", condition, 4)] if condition is not None else [],
        }
        self.walk(a_start, a_start + a_size, a_count, branches[0], depth + 1)
        self.walk(a_start + a_size, a_start + a_size + b_size, b_count, branches[1], depth + 1)


#: A fixed record's values, the region ids it names and its fields by the bases those
#: resolve to, by the record's bytes (see _Reader._read); nodes never change their fields.
_FIXED_READS: dict[bytes, tuple[dict[str, Any], tuple[int, ...], dict[tuple[int | None, ...], dict[str, Any]]]] = {}
_BASES_PER_RECORD = 4  # the bases one record is kept for (a program that reallocates gets new ones)


#: What the launches of one kernel share (see :class:`_Kernel`), by the bytes they share.
_KERNELS: dict[bytes, _Kernel] = {}


@dataclass(frozen=True)
class _Kernel:
    """What every launch record of one kernel in one graph shares: its name and module, the
    launch bounds replay builds for it (``launch_bounds_t<ndim>``: the shape, the thread
    count, and a folding multiplier derived from them), each parameter's place among the
    values, and for each relocation the parameter it patches and where that starts."""

    name: str
    module: str
    ndim: int
    bounds: struct.Struct
    split: Callable[[bytes], tuple[bytes, ...]]  # the values, one bytes per parameter
    blobs: tuple[tuple[int, int], ...]  # each parameter's (start, size) among the values
    slots: tuple[tuple[int, int], ...]  # each relocation's (parameter position, where it starts)
    relocs: struct.Struct  # the relocation table: a launch's relocations in one read

    @classmethod
    def read(cls, data: bytes, pos: int, ndim: int, forward: int, key_len: int, hash_len: int, nparams: int) -> _Kernel:
        q = pos + _LAUNCH_BYTES
        name = data[q : q + key_len].decode(errors="replace")
        module = data[q + key_len : q + key_len + hash_len].decode(errors="replace")
        q += key_len + hash_len
        bindings = list(_PARAM.iter_unpack(data[q : q + _PARAM.size * (nparams if forward else 2 * nparams)]))
        ndim = min(max(ndim, 1), 4)
        pad = ((4 * ndim + 7) & ~7) - 4 * ndim
        slots = tuple(
            (position, offset)
            for position, (_, count, offset, _, _) in enumerate(bindings, 1)
            for _ in range(count)
        )  # fmt: skip
        blobs = tuple((offset, size) for _, _, offset, size, _ in bindings)
        slices = [slice(offset, offset + size) for offset, size in blobs]
        split: Callable[[bytes], tuple[bytes, ...]] = (
            operator.itemgetter(*slices) if len(slices) > 1 else lambda values: tuple(values[b] for b in slices)
        )
        relocs = struct.Struct("<" + _RELOC.format.lstrip("<") * len(slots))
        return cls(name, module, ndim, struct.Struct(f"<{ndim}I{pad}xQQ"), split, blobs, slots, relocs)


#: From how many launches of one layout their values are split one parameter at a time, for
#: all of them at once (numpy), rather than one launch at a time.
_COLUMNS = 16


#: What the launches of one layout share (see :class:`_Layout`), by the bytes they share.
_LAYOUTS: dict[bytes, _Layout] = {}


@dataclass(frozen=True, eq=False)
class _Layout:
    """What the launch records of one layout share: the same kernel, shape, parameters
    and relocation count, every byte but their relocations and values (read once in the
    process: a step launches the same kernels capture after capture)."""

    key: bytes  # the bytes they share, from the record's 8th on
    kernel: _Kernel
    fields: dict[str, Any]  # what their nodes' fields share (never changed: each node's are a copy)
    bounds: bytes
    size: int  # each record's bytes
    fixed: int  # where its relocations start (its values follow them)
    nrelocs: int
    values: int  # where its values start
    patches: np.ndarray  # where the parameter each relocation patches starts, from the relocations' start

    @classmethod
    def read(cls, data: bytes, header: struct.Struct, pos: int, size: int, fixed: int, key: bytes) -> _Layout:
        """The layout of the launch record at ``pos`` (``fixed``: where its relocations start)."""
        (_, _, s0, s1, s2, s3, ndim, total, _, _, _, _, _, forward, key_len, hash_len, nparams, nrelocs,
         value_size) = header.unpack_from(data, pos)  # fmt: skip
        if fixed + _RELOC.size * nrelocs + value_size != size:
            raise ValueError(f"a launch record of {size} bytes whose parts do not add up")
        shared = data[pos + 24 : pos + 28] + data[pos + 44 : pos + fixed]
        kernel = _KERNELS.get(shared)
        if kernel is None:
            kernel = remember(_KERNELS, shared, _Kernel.read(data, pos, ndim, forward, key_len, hash_len, nparams))
        if len(kernel.slots) != nrelocs:
            raise ValueError(f"a launch record of {nrelocs} relocations for {len(kernel.slots)} pointer slots")
        shape = (s0, s1, s2, s3)[: kernel.ndim]
        product = prod(shape)
        multiplier = total // product if product and total > product else 1
        fields = {
            "name": kernel.name,
            "module": kernel.module,
            "adjoint": not forward,
            "shape": shape,
            "size": total,
            "params": None,  # each launch's own (see give)
            "unresolved": (),
        }
        bounds = kernel.bounds.pack(*shape, total, multiplier)
        values = fixed + _RELOC.size * nrelocs
        patches = np.array([values - fixed + start for _, start in kernel.slots], np.int64)
        return cls(key, kernel, fields, bounds, size, fixed, nrelocs, values, patches)

    def give(self, nodes: list[GraphNode], starts: list[int], data: bytes, resolved: bool, shift: int = 0) -> None:
        """Give the nodes of the launches of this layout whose records start at ``starts``
        plus ``shift`` their fields, from ``data`` (the stream, its pointer slots relocated
        where ``resolved``; else left as recorded, and named ``unresolved``)."""
        kernel, bounds = self.kernel, self.bounds
        size = self.size + shift
        start = (self.values if resolved else self.fixed) + shift  # from here on the bytes tell launches apart
        skip = 0 if resolved else self.values - self.fixed
        if resolved and len(starts) >= _COLUMNS:
            # Many launches: their values split one parameter at a time, all at once.
            values = b"".join([data[at + start : at + size] for at in starts])
            rows = np.frombuffer(values, np.uint8).reshape(len(starts), size - start)
            columns = []
            for low, nbytes in kernel.blobs:
                high = min(low + nbytes, size - start)  # as a slice of the values reads
                if high > low:
                    columns.append(np.ascontiguousarray(rows[:, low:high]).view(f"V{high - low}").ravel().tolist())
                else:
                    columns.append([b""] * len(starts))
            fields = self.fields
            for node, params in zip(nodes, zip(itertools.repeat(bounds), *columns)):
                node.fields = dict(fields, params=params)
            return
        fields, split = self.fields, kernel.split
        if resolved:
            for node, at in zip(nodes, starts):
                node.fields = dict(fields, params=(bounds, *split(data[at + start : at + size])))
            return
        for node, at in zip(nodes, starts):
            tail = data[at + start : at + size]
            node.fields = dict(fields, params=(bounds, *split(tail[skip:])), unresolved=self._unresolved(tail))

    def _unresolved(self, tail: bytes) -> tuple[tuple[int, int], ...]:
        """A record's pointer slots that hold a data pointer, from its relocations."""
        relocs = self.kernel.relocs.unpack_from(tail)  # (slot, region, offset, kind) each
        return tuple(
            (position, relocs[4 * at]) for at, (position, _) in enumerate(self.kernel.slots) if relocs[4 * at + 3] == 1
        )


def _fixed_fields(op: int, values: dict[str, Any], address: Callable[[int, int], int | None], tail: bytes) -> dict:
    """A fixed record's fields: each region and offset pair as the address it resolves to."""
    if op == 16 and values["kind"] != 2:  # array_sum names its input and stride so
        values = {_SUM_NAMES.get(name, name): value for name, value in values.items()}
    regions = [name[: -len("_region")] for name in values if name.endswith("_region")]
    fields: dict[str, Any] = {
        name: value for name, value in values.items() if not name.endswith(("_region", "_offset")) and name != "_"
    }
    for name in regions:
        fields[name] = address(values[f"{name}_region"], values[f"{name}_offset"])
    dtype, element = _APIC_TYPES.get(values.get("dtype", 0), ("", 0))
    if "dtype" in values:
        fields["dtype"] = dtype
    if op == 16:
        fields["kind"] = "inner" if values["kind"] == 2 else "sum"
        if fields["kind"] == "sum":
            regions.remove("b")
            del fields["b"], fields["stride_b"]
    elif op == 19:
        fields["has_groups"] = bool(values["has_groups"])
    elif op == 10:  # a fill: its value follows the record
        fields["value"] = tail
        fields["nbytes"] = values["element_size"] * values["count"]
    nbytes = fields.get("nbytes", 0)
    if op in (2, 3, 4, 5, 6, 10):
        fields["dst_extent"] = fields["extent"] = fields["src_extent"] = nbytes
        fields["dst_kind"] = fields["src_kind"] = "host"
        if op == 5:
            fields["element_size"] = 1
    count = values.get("count", 0)
    fields["addresses"] = [
        (_ARGUMENTS.get(name, name), fields[name], _extent(op, name, nbytes, count, element))
        for name in regions
        if fields[name] is not None
    ]  # fmt: skip
    return fields


#: The names a copy's or memset's record gives the addresses a node calls dst and src.
_ARGUMENTS = {"dst": "dest"}


#: A sum's names for a reduction record's first input and its stride (array_sum's own).
_SUM_NAMES = {"a_region": "values_region", "a_offset": "values_offset", "stride_a": "stride"}


def _extent(op: int, name: str, nbytes: int, count: int, element: int) -> int:
    """How many bytes an operation may touch from one of its addresses (at least one)."""
    if op in (2, 3, 4, 5, 6, 10):
        return max(nbytes, 1)
    if op in (11, 12) and name in ("keys", "values"):
        return max(2 * count * element, 1)  # a sort works through twice the count
    if op in (9, 13, 16) and name not in ("run_count", "out"):
        return max(count * element, 1) if element else 1
    return 1


# -- what a recorded host call asks for --------------------------------------------------------

#: Warp's native entry points (without ``wp_``) that set up or tear down rather than
#: enqueue work: a CPU graph holds no operation for them, and needs none.
_SET_UP = re.compile(r"(^|_)(alloc|free|create|destroy|reserve|validate)(_|$)|^volume_(index_)?from_|^cuda_")

#: Native entry points -> the node type a CPU graph holds for them, when it holds one
#: (``apic_record_*`` in ``warp/native``): whether a release records it is what the
#: cross-check finds out.
_NODE_TYPES = (
    (re.compile(r"^cpu_launch_kernel$"), "KERNEL"),
    (re.compile(r"^memcpy_h2h$"), "MEMCPY"),
    (re.compile(r"^memset_host$"), "MEMSET"),
    (re.compile(r"^memtile_host$"), "MEMTILE"),
    (re.compile(r"^array_scan_\w+_host$"), "SCAN"),
    (re.compile(r"^array_(sum|inner)_\w+_host$"), "REDUCTION"),
    (re.compile(r"^radix_sort_pairs_\w+_host$"), "RADIX_SORT"),
    (re.compile(r"^segmented_sort_pairs_\w+_host$"), "SEGMENTED_SORT"),
    (re.compile(r"^runlength_encode_\w+_host$"), "RUNLENGTH_ENCODE"),
    (re.compile(r"^bsr_matrix_from_triplets_host$"), "BSR_FROM_TRIPLETS"),
    (re.compile(r"^bsr_transpose_host$"), "BSR_TRANSPOSE"),
    (re.compile(r"^bvh_refit_host$"), "BVH_REFIT"),
    (re.compile(r"^bvh_rebuild_host$"), "BVH_REBUILD"),
    (re.compile(r"^hash_grid_update_host$"), "HASH_GRID_UPDATE"),
)

#: What :func:`node_type_for` answers for a call that sets up: no operation, none needed.
SET_UP = ""


def node_type_for(label: str) -> str | None:
    """The node type a CPU graph holds for a call of Warp's native entry point ``label``
    (``"memset_host"``, ``"radix_sort_pairs_int_host"``): ``""`` for set-up work a graph
    needs no operation for (allocations, constructors), None for work no CPU graph
    operation replays (``"mesh_refit_host"``)."""
    if label not in _NODE_TYPE_OF:
        kind = next((kind for pattern, kind in _NODE_TYPES if pattern.match(label)), None)
        if kind is None and _SET_UP.search(label):
            kind = SET_UP
        _NODE_TYPE_OF[label] = kind
    return _NODE_TYPE_OF[label]


_NODE_TYPE_OF: dict[str, str | None] = {}  # the entry points are few: each looked up once


def host_call_fields(label: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """What a call of one of Warp's host entry points asks for, as the fields of the node
    a CPU graph holds for it (:func:`node_type_for`): a copy's ``dst``, ``src`` and
    ``nbytes``, a memset's ``dst``, ``value`` and ``nbytes``, a fill's ``dst``, ``value``
    (bytes), ``element_size`` and ``count``. Empty for other calls (their arguments by
    role are their record's ``args``)."""
    if label == "memcpy_h2h":
        return {"dst": _address(args[0]), "src": _address(args[1]), "nbytes": _int(args[2])}
    if label == "memset_host":
        return {"dst": _address(args[0]), "value": _int(args[1]), "nbytes": _int(args[2])}
    if label == "memtile_host":
        size = _int(args[2])
        source = _address(args[1])
        value = ctypes.string_at(source, size) if source and size else b""
        return {"dst": _address(args[0]), "value": value, "element_size": size, "count": _int(args[3])}
    return {}


def _int(value: Any) -> int:
    """A number argument as an int (a Python int, or a ctypes one: ``c_int(0)``, ``c_size_t(n)``)."""
    return int(getattr(value, "value", value))


def _address(value: Any) -> int:
    """A pointer argument as an int (a ctypes pointer, a c_void_p, an int, or None)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, ctypes.c_void_p):
        return int(value.value or 0)
    try:
        return int(ctypes.cast(value, ctypes.c_void_p).value or 0)
    except (TypeError, ctypes.ArgumentError):
        return int(getattr(value, "value", 0) or 0)

"""Stage 2 of the pipeline: compare two recorded calls, operation by operation.

The two operation sequences are aligned first (common prefix and suffix, then a
longest-matching-blocks alignment of what is left), so one extra or missing launch is
one difference, not a mismatch at every later position. Each aligned pair is then
compared field by field: launch dimensions, block size, stream, and every argument by
name, arrays by the buffer they point into.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .params import Address, ArrayRef, canonical, values_equal

if TYPE_CHECKING:
    from .buffer_set import BufferSet
    from .operations import Allocation, LaunchRecord
    from .record import LaunchTrace

__all__ = ["Difference", "align", "compare_traces", "topology_keys"]

# Above this many unmatched operations on each side, the alignment falls back to
# pairing by position: difflib's matcher is quadratic in the worst case.
_ALIGN_LIMIT = 4000


@dataclass(frozen=True)
class Difference:
    """One way in which two recorded calls differ.

    Attributes:
        what: ``"missing"`` (only in the first call), ``"extra"`` (only in the second),
            ``"kernel"`` (another operation at this position), ``"dim"``,
            ``"block_dim"``, ``"max_blocks"``, ``"stream"`` or ``"arg"``.
        index_a: the operation's index in the first trace (None for ``"extra"``).
        index_b: its index in the second trace (None for ``"missing"``).
        record_a: the first trace's record, if any.
        record_b: the second trace's record, if any.
        arg: the argument's name, for ``"arg"``.
        value_a: the value in the first call.
        value_b: the value in the second call.
        where_a: for arrays, where the first value points (``"sim.x+0"``), else None.
        where_b: the same for the second value.
    """

    what: str
    index_a: int | None
    index_b: int | None
    record_a: LaunchRecord | None
    record_b: LaunchRecord | None
    arg: str | None = None
    value_a: Any = None
    value_b: Any = None
    where_a: str | None = None
    where_b: str | None = None

    @property
    def record(self) -> LaunchRecord:
        """The record the difference is about (the second call's where there is one)."""
        record = self.record_b or self.record_a
        assert record is not None
        return record

    @property
    def is_array(self) -> bool:
        """Whether the values that differ are buffers: arrays, or the ids of owned meshes,
        hash grids, BVHs and volumes (located like arrays, by ``where_a`` / ``where_b``)."""
        return (
            isinstance(self.value_a, ArrayRef)
            or isinstance(self.value_b, ArrayRef)
            or (self.where_a is not None and self.where_b is not None)
        )

    def position(self) -> str:
        """``#3`` when both calls agree on the index, else ``#3/#4``."""
        a, b = self.index_a, self.index_b
        if a is None:
            return f"#{b} (second call only)"
        if b is None:
            return f"#{a} (first call only)"
        return f"#{a}" if a == b else f"#{a}/#{b}"

    def values(self) -> str:
        """Both values, with the difference for numbers: ``0.01 vs 0.02 (Δ +0.01)``."""
        return describe_values(self.value_a, self.value_b, self.where_a, self.where_b)

    def describe(self) -> str:
        """One readable line: position, operation, call site, what differs, both values."""
        record = self.record
        head = f"{self.position()} {record.kernel}{' (adjoint)' if record.adjoint else ''} at {record.site.short}"
        if self.what == "missing":
            return f"{head}: only in the first call"
        if self.what == "extra":
            return f"{head}: only in the second call"
        if self.what == "kernel":
            assert self.record_a is not None and self.record_b is not None
            return f"{head}: {self.record_a.kernel} in the first call, {self.record_b.kernel} in the second"
        name = f"argument {self.arg!r}" if self.what == "arg" else self.what
        return f"{head}: {name} {self.values()}"


def describe_values(a: Any, b: Any, where_a: str | None = None, where_b: str | None = None) -> str:
    """``a vs b``, with ``(Δ ...)`` for two numbers and buffer names for arrays."""
    left, right, delta = value_texts(a, b, where_a, where_b)
    return f"{left} vs {right} (Δ {delta})" if delta else f"{left} vs {right}"


def value_texts(a: Any, b: Any, where_a: str | None = None, where_b: str | None = None) -> tuple[str, str, str]:
    """``(a, b, difference)`` as text: arrays with the buffers they point into, the
    difference of two numbers or two addresses (``+0.01``, ``+0x100``), else ``""``."""
    if isinstance(a, ArrayRef) or isinstance(b, ArrayRef):
        left = f"{a} ({where_a})" if where_a else str(a)
        right = f"{b} ({where_b})" if where_b else str(b)
        if isinstance(a, ArrayRef) and isinstance(b, ArrayRef) and a.ptr and b.ptr and a.ptr != b.ptr:
            return left, right, f"{b.ptr - a.ptr:+#x}"
        return left, right, ""
    if _is_number(a) and _is_number(b):
        delta = b - a
        return repr(a), repr(b), f"{delta:+.6g}" if isinstance(delta, float) else f"{delta:+d}"
    return repr(a), repr(b), ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def align(
    a: Sequence[Any],
    b: Sequence[Any],
    coarse_a: Sequence[Any] | None = None,
    coarse_b: Sequence[Any] | None = None,
) -> list[tuple[int | None, int | None]]:
    """Pair the positions of two key sequences: ``(i, j)``, ``(i, None)`` or ``(None, j)``.

    Equal keys are paired in order. Where the keys disagree, the runs are paired again
    by the coarse keys (when given: the same operation with other arguments pairs up),
    then position by position, the surplus left unpaired.
    """
    n, m = len(a), len(b)
    if n == m and all(x == y for x, y in zip(a, b)):
        return list(zip(range(n), range(m)))
    head = 0
    while head < n and head < m and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    pairs: list[tuple[int | None, int | None]] = [(i, i) for i in range(head)]
    mid_a, mid_b = a[head : n - tail], b[head : m - tail]
    if len(mid_a) <= _ALIGN_LIMIT and len(mid_b) <= _ALIGN_LIMIT:
        ops = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    else:
        ops = [("replace", 0, len(mid_a), 0, len(mid_b))]
    for op, i1, i2, j1, j2 in ops:
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        if op == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2)))
        elif coarse_a is not None and coarse_b is not None and (i2 - i1) != (j2 - j1):
            sub = align(coarse_a[i1:i2], coarse_b[j1:j2])
            pairs.extend((None if i is None else i1 + i, None if j is None else j1 + j) for i, j in sub)
        else:
            common = min(i2 - i1, j2 - j1)
            pairs.extend((i1 + k, j1 + k) for k in range(common))
            pairs.extend((i, None) for i in range(i1 + common, i2))
            pairs.extend((None, j) for j in range(j1 + common, j2))
    pairs.extend((n - tail + k, m - tail + k) for k in range(tail))
    return pairs


def _location(trace: LaunchTrace, record: LaunchRecord, ptr: int, buffers: BufferSet | None) -> Any:
    """The comparable location of an address (:func:`_location_text` writes it out)."""
    if not ptr:
        return 0
    alloc = trace.allocation_at(ptr, record.seq)
    if alloc is not None:
        # A buffer the call made: two calls' temporaries are the same when they are the
        # same allocation in order (the k-th made at that line), wherever the allocator
        # put them, and whether or not an owner keeps the last one when the call ends.
        site, order = trace.allocation_order(alloc)
        return ("<temporary>", site, alloc.dtype, order, ptr - alloc.start)
    if buffers is not None:
        hit = buffers.locate(ptr)
        return hit if hit is not None else ("<foreign>", ptr)
    return ptr


def _location_text(location: Any) -> str | None:
    """A location as the findings show it (``"sim.x+0"``), or None for a raw address.
    Written only for a difference that is reported: comparing needs the location alone."""
    if type(location) is not tuple:
        return None
    if location[0] == "<temporary>":
        _, site, _, order, offset = location
        return f"temporary #{order} from {site.short}+{offset}"
    if location[0] == "<foreign>":
        return f"foreign {location[1]:#x}"
    return f"{location[0]}+{location[1]}"  # (label, offset) of an owned buffer


def _array_key(trace: LaunchTrace, record: LaunchRecord, ref: ArrayRef, buffers: BufferSet | None) -> tuple[Any, ...]:
    return (
        _location(trace, record, ref.ptr, buffers),
        ref.shape,
        ref.strides,
        _location(trace, record, ref.grad, buffers),
    )


def topology_keys(
    trace: LaunchTrace, buffers: BufferSet | None = None, *, scalars: bool = True, streams: bool = False
) -> list[tuple[Any, ...]]:
    """One comparable key per record of ``trace`` (see :meth:`LaunchTrace.topology`)."""
    keys = []
    for record in trace.records:
        args = []
        for name, value in record.args.items():
            if isinstance(value, ArrayRef):
                args.append((name, _array_key(trace, record, value, buffers)))
            elif scalars:
                args.append((name, canonical(value)))
        key: tuple[Any, ...] = (record.kind, record.kernel, record.adjoint, record.dim, record.block_dim, tuple(args))
        if streams:
            key += (record.stream,)
        keys.append(key)
    return keys


def _compare(
    trace_a: LaunchTrace,
    ra: LaunchRecord,
    i: int,
    trace_b: LaunchTrace,
    rb: LaunchRecord,
    j: int,
    buffers: BufferSet | None,
    scalars: bool,
    streams: bool,
    differing: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...]]] | None = None,
) -> list[Difference]:
    if _same(ra, rb, streams):
        return []
    if not ra.same_identity(rb):
        return [Difference("kernel", i, j, ra, rb)]
    out: list[Difference] = []
    if ra.kind == "launch" and ra.dim != rb.dim:  # a copy's or memset's dim is its count
        out.append(Difference("dim", i, j, ra, rb, "dim", ra.dim, rb.dim))
    if ra.block_dim != rb.block_dim:
        out.append(Difference("block_dim", i, j, ra, rb, "block_dim", ra.block_dim, rb.block_dim))
    elif ra.tile_block_dim != rb.tile_block_dim:  # what launch_tiled was asked for
        out.append(Difference("block_dim", i, j, ra, rb, "block_dim", ra.tile_block_dim, rb.tile_block_dim))
    if ra.max_blocks != rb.max_blocks:
        out.append(Difference("max_blocks", i, j, ra, rb, "max_blocks", ra.max_blocks, rb.max_blocks))
    if streams and ra.stream != rb.stream:
        out.append(Difference("stream", i, j, ra, rb, "stream", ra.stream, rb.stream))
    # Same bytes, same arguments: the common case costs one comparison.
    if ra.kind == "launch" and ra.param_bytes[1:] == rb.param_bytes[1:]:
        return out
    args_a, args_b = ra.args, rb.args
    for name in _differing_args(args_a, args_b, differing):
        va, vb = args_a.get(name), args_b.get(name)
        if isinstance(va, ArrayRef) or isinstance(vb, ArrayRef):
            if not (isinstance(va, ArrayRef) and isinstance(vb, ArrayRef)):
                out.append(Difference("arg", i, j, ra, rb, name, va, vb))
                continue
            for field, pa, pb in (("", va.ptr, vb.ptr), (".grad", va.grad, vb.grad)):
                loc_a = _location(trace_a, ra, pa, buffers)
                loc_b = _location(trace_b, rb, pb, buffers)
                # A kernel is handed the whole descriptor, shape and strides included; a copy
                # or memset only its count, compared on its own (copy-drift).
                reshaped = not field and ra.kind == "launch" and (va.shape, va.strides) != (vb.shape, vb.strides)
                if loc_a != loc_b or reshaped:
                    text_a, text_b = _location_text(loc_a), _location_text(loc_b)
                    if loc_a == loc_b:  # reshaped
                        text_a = f"{text_a or hex(pa)} shape {va.shape}"
                        text_b = f"{text_b or hex(pb)} shape {vb.shape}"
                    shown_a = va if not field else ArrayRef(pa, 0)
                    shown_b = vb if not field else ArrayRef(pb, 0)
                    out.append(Difference("arg", i, j, ra, rb, name + field, shown_a, shown_b, text_a, text_b))
        elif scalars and not values_equal(va, vb):
            (loc_a, where_a), (loc_b, where_b) = _handle(trace_a, ra, buffers, va), _handle(trace_b, rb, buffers, vb)
            if where_a is None and where_b is None:
                out.append(Difference("arg", i, j, ra, rb, name, va, vb))
            elif loc_a != loc_b:  # the id of a structure: another structure is another buffer
                out.append(Difference("arg", i, j, ra, rb, name, va, vb, where_a or repr(va), where_b or repr(vb)))
    return out


def _differing_args(
    args_a: Mapping[str, Any],
    args_b: Mapping[str, Any],
    known: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...]]] | None,
) -> tuple[str, ...]:
    """The names of the arguments whose decoded values differ, in the order of both calls.

    An array that is the same address is the same baked value, wherever it points; which
    of the others are the same buffer depends on when they are used, and is left to the
    caller. Launches with the same parameter bytes share one decoded dict, and a solver
    repeats the same pairs of launches in every substep: ``known`` keeps each pair's answer.
    """
    key = (id(args_a), id(args_b))
    entry = known.get(key) if known is not None else None
    if entry is not None and entry[0] is args_a and entry[1] is args_b:
        return entry[2]
    names = []
    for name in dict.fromkeys([*args_a, *args_b]):
        va, vb = args_a.get(name), args_b.get(name)
        if va is vb:
            continue
        if isinstance(va, ArrayRef) and isinstance(vb, ArrayRef):
            if va == vb:
                continue
        elif not (isinstance(va, ArrayRef) or isinstance(vb, ArrayRef)) and values_equal(va, vb):
            continue
        names.append(name)
    found = tuple(names)
    if known is not None:
        known[key] = (args_a, args_b, found)
    return found


def _handle(trace: LaunchTrace, record: LaunchRecord, buffers: BufferSet | None, value: Any) -> tuple[Any, str | None]:
    """``(comparable location, readable location)`` of a structure whose id ``value`` is (a
    mesh, hash grid, BVH, volume or texture): one the call made, matched by order of
    creation as temporaries are, or an owned one (see :meth:`BufferSet.handle`); else
    ``(value, None)``."""
    if type(value) is int and value > 0xFFFF:
        made = trace.allocation_at(value, record.seq)
        if made is not None and made.start == value and made.nbytes == 1:
            location = _location(trace, record, value, None)
            return location, _location_text(location)
    hit = buffers.handle(value) if buffers is not None else None
    return (hit, hit.label) if hit is not None else (value, None)


def _same(ra: LaunchRecord, rb: LaunchRecord, streams: bool) -> bool:
    """Whether two operations would bake the same graph node (a cheap test)."""
    if ra.kind == "launch" and rb.kind == "launch":
        return (
            ra.same_code(rb)
            and ra.adjoint == rb.adjoint
            and ra.block_dim == rb.block_dim
            and ra.tile_block_dim == rb.tile_block_dim
            and ra.max_blocks == rb.max_blocks
            and (not streams or ra.stream == rb.stream)
            and ra.same_params(rb)
        )
    return bool(ra.match_key(streams) == rb.match_key(streams))


def compare_traces(
    a: LaunchTrace,
    b: LaunchTrace,
    buffers: BufferSet | None = None,
    *,
    scalars: bool = True,
    streams: bool = False,
    notes: list[str] | None = None,
) -> list[Difference]:
    """Every difference between two traces, after aligning their operations.

    The bodies of ``wp.capture_if`` / ``wp.capture_while`` compare body by body: a capture
    records each body once, an eager call runs it as often as the data says, so the
    captured body compares with every run of the same body in the other call. A body that
    did not run there cannot be compared: ``notes`` (when given) says so.

    Args:
        a: the first (reference) trace.
        b: the second trace.
        buffers: owned buffers; addresses then compare by ``(buffer, offset)``.
        scalars: whether scalar arguments count.
        streams: whether streams count.
        notes: where to say what could not be compared.
    """
    a.keep(_reused_by(a, b))
    b.keep(_reused_by(b, a))
    if a.same_launches(b):  # the commonest case: a's launches, unread unless a keep() above read them
        return []
    # Warp's internal operations (in a trace made with include_warp=True) follow from the
    # user's and are left out.
    index_a = [i for i, r in enumerate(a.records) if not (r.nested or r.internal)]
    index_b = [j for j, r in enumerate(b.records) if not (r.nested or r.internal)]
    out: list[Difference] = []
    _Comparison(a, b, buffers, scalars, streams, notes, out).runs(index_a, index_b)
    return out


class _Comparison:
    """One comparison of two traces: aligns runs of operations and compares each pair."""

    def __init__(
        self,
        a: LaunchTrace,
        b: LaunchTrace,
        buffers: BufferSet | None,
        scalars: bool,
        streams: bool,
        notes: list[str] | None,
        out: list[Difference],
    ) -> None:
        self.a, self.b, self.buffers, self.scalars, self.streams = a, b, buffers, scalars, streams
        self.notes, self.out = notes, out
        self._bodies: tuple[dict[Any, list[int]], dict[Any, list[int]]] | None = None
        self.differing: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...]]] = {}  # see _differing_args

    def runs(self, index_a: list[int], index_b: list[int]) -> None:
        """Align two runs of operations (indices into each trace) and compare every pair."""
        a, b, streams = self.a, self.b, self.streams
        all_a, all_b = a.records, b.records
        records_a = [all_a[i] for i in index_a]
        records_b = [all_b[j] for j in index_b]
        n, m = len(records_a), len(records_b)
        # The common prefix and suffix cost one cheap comparison per operation.
        head = 0
        while head < n and head < m and _same(records_a[head], records_b[head], streams):
            head += 1
        tail = 0
        while tail < n - head and tail < m - head and _same(records_a[n - 1 - tail], records_b[m - 1 - tail], streams):
            tail += 1
        mid_a, mid_b = records_a[head : n - tail], records_b[head : m - tail]
        if len(mid_a) == len(mid_b) and all(a.same_identity(b) for a, b in zip(mid_a, mid_b)):
            # The same operations in the same order: pair them in place, so a value that
            # changes in every launch of a loop is that, not a shifted sequence.
            middle: list[tuple[int | None, int | None]] = list(zip(range(len(mid_a)), range(len(mid_b))))
        else:
            # Align on the exact operations, so one extra launch of a kernel that runs many
            # times is found where it is; what differs there is aligned by kernel.
            ids_a, ids_b = [r.identity() for r in mid_a], [r.identity() for r in mid_b]
            keys_a = [r.match_key(streams) for r in mid_a]
            keys_b = [r.match_key(streams) for r in mid_b]
            middle = align(keys_a, keys_b, ids_a, ids_b)
        pairs = [(None if i is None else head + i, None if j is None else head + j) for i, j in middle]
        # Launches that differ mostly differ in a temporary or two: one call's launch is read
        # from the other's (the capture's, read first by the checks), before the numbering
        # of temporaries reads the rest.
        for i, j in pairs:
            if i is not None and j is not None:
                records_a[i].read_like(records_b[j])
                records_b[j].read_like(records_a[i])
        out = self.out
        # The common prefix and suffix are the same operations: only their conditionals'
        # bodies are left to compare.
        for k in range(head):
            if records_b[k].kind == "conditional":
                self.bodies(records_a[k], records_b[k])
        for k in range(1, tail + 1):
            if records_b[m - k].kind == "conditional":
                self.bodies(records_a[n - k], records_b[m - k])
        for i, j in pairs:
            if i is None:
                assert j is not None
                out.append(Difference("extra", None, index_b[j], None, records_b[j]))
            elif j is None:
                out.append(Difference("missing", index_a[i], None, records_a[i], None))
            else:
                ra, rb = records_a[i], records_b[j]
                out.extend(_compare(a, ra, index_a[i], b, rb, index_b[j], self.buffers, self.scalars, streams,
                                    self.differing))  # fmt: skip
                if ra.kind == "conditional" and rb.kind == "conditional" and ra.kernel == rb.kernel:
                    self.bodies(ra, rb)

    def bodies(self, ra: LaunchRecord, rb: LaunchRecord) -> None:
        """Compare each body the second call's conditional recorded with every run of that
        body in the first call: a graph holds one body, which must do what each eager
        iteration did."""
        if self._bodies is None:
            self._bodies = (_body_index(self.a), _body_index(self.b))
        in_a, in_b = self._bodies
        for (seq, branch, iteration), index_b in in_b.items():
            if seq != rb.seq or iteration:
                continue
            runs = [index for (s, b, _), index in in_a.items() if s == ra.seq and b == branch]
            if not runs:
                if self.notes is not None:
                    count = len(index_b)
                    self.notes.append(
                        f"the {branch} body of {rb.kernel} at {rb.site.short} did not run in the reference call: its "
                        f"{count} operation{'s' if count != 1 else ''} could not be compared"
                    )
                continue
            for index_a in runs:
                self.runs(index_a, index_b)


def reused(trace: LaunchTrace, other: LaunchTrace) -> Iterator[tuple[Address, Allocation]]:
    """``(address, allocation)`` for each address range ``other``'s operations use without
    having made its memory, that lies in an allocation ``trace`` made before that use: a
    buffer that outlived the call that made it (a cache filled on a first call), not a
    temporary. Each range once.

    A use that came before ``trace`` made the allocation is of other memory the allocator
    handed out again later: when every operation of ``other`` came before ``trace``'s first
    allocation (a reference call, and the capture after it), there is nothing to find, and
    ``other``'s operations are left unread.

    A range is judged at its first use after ``trace`` made it: had ``other`` made its
    memory before a later use, it would have before that first use too (the latest
    allocation made before a use holds it). A step hands the same few buffers to many
    launches, and launches with the same arguments share one tuple of addresses: each range
    is looked up once.
    """
    if not trace.allocations or other.latest_seq() < min(alloc.seq for alloc in trace.allocations):
        return
    seen_tuples: set[int] = set()
    seen: set[tuple[int, int]] = set()
    for record in other.records:
        addresses = record.addresses()
        if id(addresses) in seen_tuples:  # met at an earlier operation: every range judged there
            continue
        seen_tuples.add(id(addresses))  # the records hold the tuple: its id is not reused here
        for address in trace.made_here(addresses):  # the ranges in an allocation trace made
            key = (address.start, address.nbytes)
            if key in seen:
                continue
            alloc = trace.allocation_at(address.start, record.seq)
            if alloc is None:  # trace made it after this use
                continue
            seen.add(key)
            if other.allocation_at(address.start, record.seq) is None:
                yield address, alloc


def _reused_by(trace: LaunchTrace, other: LaunchTrace) -> set[Allocation]:
    """The allocations ``trace`` made that ``other`` uses too (see :func:`reused`)."""
    return {alloc for _, alloc in reused(trace, other)}


def _body_index(trace: LaunchTrace) -> dict[Any, list[int]]:
    """``(conditional's seq, branch, iteration)`` -> the indices of that body's own operations."""
    bodies: dict[Any, list[int]] = {}
    for i, record in enumerate(trace.records):
        key = record.nested
        if type(key) is tuple and not record.internal:
            bodies.setdefault(key, []).append(i)
    return bodies

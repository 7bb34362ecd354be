"""Stage 1 of the pipeline: record every operation Warp enqueues.

:func:`trace_launches` records, in the current thread or task only, every kernel
launch (by any path), copy, memset, fill and native helper call Warp enqueues, and
every allocation made meanwhile. Each operation becomes a :class:`LaunchRecord` that
keeps the exact parameter bytes Warp passed and decodes them by argument name.

Example::

    import graphcheck as gc

    with gc.trace_launches() as first:
        sim.step()
    with gc.trace_launches() as second:
        sim.step()
    owned = gc.buffers_of(sim, root="sim")
    gc.assert_same_topology(first, second, buffers=owned)
    gc.assert_pointers_within(first, owned)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, overload

from . import _session
from ._words import article
from .buffer_set import BufferSet, reach_index
from .compare import Difference, compare_traces, topology_keys
from .operations import Allocation, HostSync, LaunchRecord, ended
from .params import Address
from .raw_launches import from_raw, same_launch, seq_of
from .site import Site

__all__ = [
    "Allocation",
    "HostSync",
    "LaunchRecord",
    "LaunchTrace",
    "Site",
    "assert_pointers_within",
    "assert_same_topology",
    "trace_launches",
]


class LaunchTrace:
    """The operations recorded in a :func:`trace_launches` block, in order.

    A sequence of :class:`LaunchRecord` (``len``, iteration, indexing). Operations Warp
    issues on its own behalf (the copy inside ``wp.clone``) are left out unless the
    trace was made with ``include_warp=True``; allocations are always kept.

    Attributes:
        include_warp: whether Warp's internal operations are kept.
        allocations: every :class:`Allocation` made while recording, in order.
        host_syncs: every readback and synchronisation (:class:`HostSync`), in order.
    """

    def __init__(self, *, include_warp: bool = False, eager: bool = False) -> None:
        self.include_warp = bool(include_warp)
        # An eager call's trace (a reference call): operations it captures into graphs of
        # its own are kept nested, out of the comparison (see _session.Session.eager).
        self.eager = bool(eager)
        # What the recorder appends: LaunchRecords, and for eager CPU launches (the hot
        # path) raw tuples that become LaunchRecords when first read (see `records`).
        self._items: list[Any] = []
        self._materialized = 0  # items before this index are all LaunchRecords
        self.allocations: list[Allocation] = []
        self.host_syncs: list[HostSync] = []
        # ids of the wp.Launch commands and structs set, and the indexed arrays made, while
        # recording: objects the call itself re-derives, which keep nothing built once.
        self.remade: set[int] = set()
        self._token: Any = None
        # Where the recorder delivers an operation: the list's own append while the trace
        # records, `ended` (which drops what it is given) before and after. Set in one
        # step, it is the one answer to "is this trace recording?".
        self.deliver: Any = ended
        self._alloc_index: tuple[list[int], list[Allocation], list[int]] | None = None
        self._holding: dict[int, tuple[Allocation, ...]] = {}  # address -> allocations holding it (allocation_at)
        # id(addresses) -> (them, allocations then, made_here(them))
        self._made_here: dict[int, tuple[Any, int, tuple[Address, ...]]] = {}
        self._alloc_order: dict[int, tuple[Allocation, tuple[Site, int]]] = {}  # see allocation_order
        # Allocations another call used too (a cache filled on a first call): not numbered.
        self._kept: frozenset[Allocation] = frozenset()
        self._user_view: LaunchTrace | None = None
        self._started = False  # entered at least once: an empty trace that never was is a mistake

    @classmethod
    def empty(cls) -> LaunchTrace:
        """A trace that recorded nothing (the record of a capture that failed before its first operation)."""
        trace = cls()
        trace._started = True
        return trace

    def _check_started(self) -> None:
        if not self._started and not self._items:
            raise RuntimeError(
                "this trace never recorded: trace_launches() records inside a with block only, as in "
                "`with gc.trace_launches() as trace: ...`"
            )

    # -- recording ------------------------------------------------------------------------

    def __enter__(self) -> LaunchTrace:
        if self.recording:
            raise RuntimeError("this LaunchTrace is already recording; use a new trace_launches() for a nested trace")
        self._items = []
        self._materialized = 0
        self.allocations = []
        self.host_syncs = []
        self.remade = set()
        self._alloc_index = None
        self._holding, self._made_here = {}, {}
        self._alloc_order = {}
        self._user_view = None
        self._started = True
        self._token = _session.start(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _session.stop(self, self._token)
        self._token = None

    @property
    def records(self) -> list[LaunchRecord]:
        """The recorded operations, in order."""
        items = self._items
        start = self._materialized
        if start < len(items):
            for i in range(start, len(items)):
                if type(items[i]) is tuple:
                    items[i] = from_raw(items[i])
            self._materialized = len(items)
        return items

    @property
    def recording(self) -> bool:
        """Whether the trace is recording right now."""
        return self.deliver is not ended

    # -- what the recorder (graphcheck._session) calls -------------------------------------

    def open(self) -> None:
        """Start taking deliveries."""
        self.deliver = self._items.append

    def close(self) -> None:
        """Stop taking deliveries: from here on nothing reaches the trace."""
        self.deliver = ended
        # A session still alive elsewhere (a task or thread that outlives the trace) holds
        # the list's own append (Session.deliver): it goes on appending to a list the
        # trace no longer reads, emptied so that it holds nothing.
        delivered, self._items = self._items, self._items[:]
        delivered.clear()

    def retract(self, record: LaunchRecord) -> None:
        """Take back a delivered record (its operation failed: Warp enqueued nothing)."""
        items = self._items
        for i in range(len(items) - 1, -1, -1):
            if items[i] is record:
                del items[i]
                self._materialized = min(self._materialized, i)
                return

    def add_allocation(self, allocation: Allocation) -> None:
        """An allocation made while recording."""
        if self.recording:
            self.allocations.append(allocation)

    def add_host_sync(self, event: HostSync) -> None:
        """A readback or synchronisation made while recording."""
        if self.recording:
            self.host_syncs.append(event)

    def add_remade(self, obj: Any) -> None:
        """A command's parameter or a struct's field set, or an indexed array made, while recording."""
        if self.recording:
            self.remade.add(id(obj))

    # -- sequence -------------------------------------------------------------------------

    def __len__(self) -> int:
        self._check_started()
        return len(self._items)

    def __iter__(self) -> Iterator[LaunchRecord]:
        self._check_started()
        return iter(self.records)

    @overload
    def __getitem__(self, index: int) -> LaunchRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[LaunchRecord]: ...
    def __getitem__(self, index: int | slice) -> LaunchRecord | list[LaunchRecord]:
        self._check_started()
        return self.records[index]

    def __repr__(self) -> str:
        ops, allocs = len(self.records), len(self.allocations)
        return f"LaunchTrace({ops} operation{'s' * (ops != 1)}, {allocs} allocation{'s' * (allocs != 1)})"

    def user_view(self) -> LaunchTrace:
        """The same trace without Warp's internal operations (and the same allocations).

        Made once for a trace that ended: the checks, the baked addresses and the checked
        graph share one view (and the allocation index it builds when first asked).
        """
        if self._user_view is not None and not self.recording:
            return self._user_view
        view = LaunchTrace.empty()
        view._items = [r for r in self.records if not r.internal]
        view._materialized = len(view._items)
        view.allocations = self.allocations
        view.host_syncs = self.host_syncs
        view.remade = self.remade
        if not self.recording:
            self._user_view = view
        return view

    def kernels(self) -> list[str]:
        """The kernel (``"wp.copy"``, ``"array.zero_"``, a native helper) of every record."""
        return [r.kernel for r in self.records]

    # -- allocations ----------------------------------------------------------------------

    def allocation_at(self, ptr: int, before: int | None = None) -> Allocation | None:
        """The allocation made during the trace that holds ``ptr``.

        With ``before`` (a record's :attr:`~LaunchRecord.seq`), only allocations made
        before it count, and the latest wins: an address the allocator handed out
        twice resolves to the allocation that was live at that time.
        """
        if not self.allocations or not ptr:
            return None
        holding = self._holding.get(ptr)
        if holding is None or len(self._alloc_index[1]) != len(self.allocations):  # type: ignore[index]
            holding = self._holding_of(ptr)
        if before is None:
            return holding[-1] if holding else None
        for alloc in reversed(holding):
            if alloc.seq < before:
                return alloc
        return None

    def made_here(self, addresses: tuple[Address, ...]) -> tuple[Address, ...]:
        """The ranges of ``addresses`` (an operation's :meth:`~LaunchRecord.addresses`) that
        start in an allocation made during the trace, at any time: the only ones for which
        :meth:`allocation_at` can answer anything but None. Kept per tuple, since launches
        with the same arguments share one, and most ranges are the owners' buffers."""
        if not self.allocations:
            return ()
        entry = self._made_here.get(id(addresses))
        if entry is None or entry[0] is not addresses or entry[1] != len(self.allocations):
            holding, holding_of = self._fresh_holding(), self._holding_of
            made = []
            for address in addresses:
                held = holding.get(address.start)
                if held is None:
                    held = holding_of(address.start)
                if held:
                    made.append(address)
            entry = self._made_here[id(addresses)] = (addresses, len(self.allocations), tuple(made))
        return entry[2]

    def _fresh_holding(self) -> dict[int, tuple[Allocation, ...]]:
        """The address -> allocations cache, emptied when allocations were added since."""
        index = self._alloc_index
        if index is None or len(index[1]) != len(self.allocations):
            self._alloc_index = reach_index(self.allocations)
            self._holding = {}
        return self._holding

    def _holding_of(self, ptr: int) -> tuple[Allocation, ...]:
        """The allocations that hold ``ptr``, oldest first: kept per address, since the
        checks ask about the same few buffers for every operation of a step."""
        holding = self._fresh_holding()
        starts, ordered, reach = self._alloc_index  # type: ignore[misc]
        found = []
        i = bisect.bisect_right(starts, ptr)
        # reach[j] is the furthest end among the first j+1 allocations: once it is at or
        # below ptr, no earlier allocation can hold ptr.
        while i > 0 and reach[i - 1] > ptr:
            i -= 1
            if ptr < ordered[i].end:
                found.append(ordered[i])
        held = holding[ptr] = tuple(sorted(found, key=lambda a: a.seq))
        return held

    def latest_seq(self) -> int:
        """The place (:attr:`~LaunchRecord.seq`) of the trace's latest operation (0: none), read
        without making records of the raw launches the recorder kept."""
        return max(map(seq_of, self._items), default=0)

    def same_launches(self, other: LaunchTrace) -> bool:
        """Whether ``other`` holds, pair by pair, the same launches as this trace, each an
        eager CPU launch still unread (see :func:`~graphcheck.raw_launches.same_launch`).
        Cheap, and False says only that they must be compared."""
        items, theirs = self._items, other.records
        return len(items) == len(theirs) and all(map(same_launch, items, theirs))

    def keep(self, kept: Iterable[Allocation]) -> None:
        """Number temporaries without ``kept``: allocations made here that another call uses
        too (a cache a Warp call fills on its first call), which are no temporaries."""
        kept = frozenset(kept)
        if kept != self._kept:
            self._kept = kept
            self._alloc_order = {}

    def allocation_order(self, alloc: Allocation) -> tuple[Site, int]:
        """``(site, k)``: ``alloc`` is the k-th temporary (from 0) of its element type and
        device, made at its site, in the order the trace's operations first use them.

        Two calls of the same code use their temporaries in the same order; this is how
        they are matched, since the allocator may hand out other addresses each time.
        Counting by first use, an allocation no operation uses (an extra scratch array
        made on some calls only) shifts nothing; counting per element type, neither does a
        cache a Warp call fills on its first call only (a quadrature's points). Not per
        size: scratch sized by a host count is the same temporary in every call.
        """
        # Keyed by identity (an Allocation hashes all its fields): the comparison asks about
        # the same few temporaries for every operation that differs.
        order = self._alloc_order
        entry = order.get(id(alloc))
        if entry is None or entry[0] is not alloc:
            self._number_allocations()
            entry = order.get(id(alloc))
            if entry is None or entry[0] is not alloc:  # an equal Allocation, not the trace's own object
                entry = next((e for e in order.values() if e[0] == alloc), None)
                if entry is None:
                    raise KeyError(alloc)
        return entry[1]

    def _number_allocations(self) -> None:
        """Fill the order :meth:`allocation_order` reads (id of an allocation -> (it, (site, k)))."""
        order = self._alloc_order
        counts: dict[tuple[Any, ...], int] = {}
        order.clear()
        kinds = {(a.site, a.dtype, a.device) for a in self.allocations}
        if len(kinds) == len(self.allocations):
            # Each the only one of its site, type and device (MuJoCo Warp's temporaries): each
            # is the 0th, whatever the order of first use, and the operations are left unread.
            for a in self.allocations:
                order[id(a)] = (a, (a.site, -1 if a in self._kept else 0))
            return

        def number(a: Allocation, body: Any = None) -> None:
            if id(a) in order:
                return
            if a in self._kept:  # made here and used again by the other call: no temporary
                order[id(a)] = (a, (a.site, -1))
            else:
                # Counted afresh in each run of a conditional body: a capture records
                # one run, which compares with each eager iteration.
                key = (a.site, a.dtype, a.device, body)
                k = counts.get(key, 0)
                order[id(a)] = (a, (a.site, k))
                counts[key] = k + 1

        for record in self.records:
            body = record.nested if type(record.nested) is tuple else None
            for address in self.made_here(record.addresses()):
                used = self.allocation_at(address.start, record.seq)
                if used is not None:
                    number(used, body)
        for a in self.allocations:  # the ones no operation uses, after the others
            number(a)

    # -- comparison -----------------------------------------------------------------------

    def topology(
        self, buffers: BufferSet | None = None, *, scalars: bool = True, streams: bool = False
    ) -> list[tuple[Any, ...]]:
        """One comparable key per record: ``(kind, kernel, adjoint, dim, arguments
        [, stream])``.

        With ``buffers``, an address inside one of them becomes ``(label, offset)``;
        one inside an allocation made during this trace ``("<allocated>", site,
        offset)``; any other ``"<foreign>"``. Without, addresses stay raw. With
        ``scalars=False`` only array arguments are kept.
        """
        return topology_keys(self, buffers, scalars=scalars, streams=streams)

    def diff(
        self,
        other: LaunchTrace,
        buffers: BufferSet | None = None,
        *,
        scalars: bool = True,
        streams: bool = False,
        limit: int | None = 20,
    ) -> list[str]:
        """Readable differences between this trace and ``other``; ``[]`` when they match.

        The two sequences are aligned first, so one extra or missing operation is one
        line. Each line names the operation's index in both traces, the kernel, the
        argument, the user's call site and both values (for numbers, the difference).

        Args:
            other: the trace to compare with.
            buffers: owned buffers: addresses compare by ``(buffer, offset)``, so two
                traces of two producers built alike can match.
            scalars: whether scalar arguments count.
            streams: whether the stream each operation went to counts.
            limit: the most lines to return (None: all).
        """
        _expect_trace(other, "diff")
        lines = [d.describe() for d in self.differences(other, buffers, scalars=scalars, streams=streams)]
        if limit is not None and len(lines) > limit:
            lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
        return lines

    def differences(
        self,
        other: LaunchTrace,
        buffers: BufferSet | None = None,
        *,
        scalars: bool = True,
        streams: bool = False,
    ) -> list[Difference]:
        """Every difference between this trace and ``other`` as :class:`~graphcheck.Difference`
        objects (what :meth:`diff` writes out as lines)."""
        _expect_trace(other, "differences")
        return compare_traces(self, other, buffers, scalars=scalars, streams=streams)

    def same_topology(self, other: LaunchTrace, buffers: BufferSet | None = None, **kwargs: Any) -> bool:
        """Whether :meth:`diff` finds no difference."""
        return not self.differences(other, buffers, **kwargs)

    def foreign_pointers(
        self, buffers: BufferSet, *, ignore: Iterable[Any] = ()
    ) -> list[tuple[LaunchRecord, str, int]]:
        """``(record, argument, address)`` of every address range not wholly inside one of
        ``buffers`` (see :meth:`LaunchRecord.addresses`: gradients, indices, struct fields
        and native helpers' buffers included).

        Args:
            buffers: the buffers the producer owns.
            ignore: arrays (or a :class:`BufferSet`) whose addresses are fine too.
        """
        extra = ignore if isinstance(ignore, BufferSet) else BufferSet.of(ignore)
        out = []
        for record in self.records:
            for address in record.addresses():
                start, nbytes = address.start, address.nbytes
                if buffers.find(start, nbytes) is None and extra.find(start, nbytes) is None:
                    out.append((record, address.arg, start))
        return out


def _expect_trace(other: Any, method: str) -> None:
    if not isinstance(other, LaunchTrace):
        raise TypeError(
            f"LaunchTrace.{method}() compares with another trace (from gc.trace_launches()), got {other!r} "
            f"({article(type(other).__name__)})"
        )


def trace_launches(*, include_warp: bool = False) -> LaunchTrace:
    """Record every operation Warp enqueues in a ``with`` block.

    Only the current thread (or asyncio task) is recorded. Traces nest: an operation
    is recorded by every active trace of the context. Hooks are installed on entry and
    removed when the last active trace ends, also when the block raises.

    Args:
        include_warp: also keep operations Warp issues on its own behalf, such as the
            copy inside ``wp.clone`` or the memset inside ``wp.zeros``.

    Returns:
        A :class:`LaunchTrace`, to use as a context manager (it yields itself).

    Example::

        with gc.trace_launches() as trace:
            wp.launch(integrate, dim=n, inputs=[x, v, dt])
        print(trace[0].args["dt"])
    """
    return LaunchTrace(include_warp=include_warp)


def keep_hooks() -> Callable[[], None]:
    """Keep the recording hooks in Warp until the returned function is called: traces in a
    row (a reference call, then its capture) then install and remove them once."""
    return _session.hold_hooks()


def assert_same_topology(
    a: LaunchTrace, b: LaunchTrace, buffers: BufferSet | None = None, *, scalars: bool = True, streams: bool = False
) -> None:
    """Raise ``AssertionError`` listing every difference between two traces.

    See :meth:`LaunchTrace.diff`.
    """
    lines = a.diff(b, buffers, scalars=scalars, streams=streams)
    if lines:
        raise AssertionError(f"the two traces ({len(a)} and {len(b)} operations) differ:\n  " + "\n  ".join(lines))


def assert_pointers_within(trace: LaunchTrace, buffers: BufferSet, *, ignore: Iterable[Any] = ()) -> None:
    """Raise ``AssertionError`` when an operation touches an address outside ``buffers``."""
    if not isinstance(trace, LaunchTrace):
        raise TypeError(f"assert_pointers_within() takes a trace (gc.trace_launches()), got {trace!r}")
    if not isinstance(buffers, BufferSet):
        raise TypeError(
            f"assert_pointers_within() takes the allowed buffers as a BufferSet (gc.buffers_of(sim)), got {buffers!r} "
            f"({article(type(buffers).__name__)})"
        )
    foreign = trace.foreign_pointers(buffers, ignore=ignore)
    if foreign:
        index = {id(r): i for i, r in enumerate(trace.records)}
        lines = []
        for record, name, ptr in foreign[:10]:
            alloc = trace.allocation_at(ptr, record.seq)
            why = f" (allocated during the trace: {alloc})" if alloc else ""
            lines.append(
                f"#{index[id(record)]} {record.kernel} argument {name!r} -> {ptr:#x} at {record.site.short}{why}"
            )
        more = f"\n  ... and {len(foreign) - 10} more" if len(foreign) > 10 else ""
        raise AssertionError(
            f"{len(foreign)} address(es) outside the {len(buffers)} allowed buffers:\n  " + "\n  ".join(lines) + more
        )

"""Labelled address ranges, and which of them holds a given address.

A :class:`BufferSet` holds :class:`Buffer` ranges labelled by the path the owners reach
them by (``sim.state.x``); :meth:`BufferSet.locate` says which buffer, and at which
offset, holds an address. Nested ranges (a view inside its base, a struct's array inside a
pooled allocation) resolve to the innermost buffer. :func:`graphcheck.buffers_of` fills
one from the owners (:mod:`graphcheck.buffers`).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol, TypeVar

from . import _warp
from ._words import article

__all__ = ["KEPT", "PLAIN", "WITHIN", "Buffer", "BufferSet", "reach_index"]

_START, _END = operator.itemgetter(0), operator.itemgetter(1)  # a Buffer's start and end


class Buffer(NamedTuple):
    """One labelled address range ``[start, end)``."""

    start: int
    end: int
    label: str

    @property
    def nbytes(self) -> int:
        """Its size in bytes."""
        return self.end - self.start


_Range = TypeVar("_Range", bound="_HasRange")


class _HasRange(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def reach_index(ranges: Iterable[_Range]) -> tuple[list[int], list[_Range], list[int]]:
    """``(starts, ranges, reach)``: the ranges sorted by start, and for each position the
    furthest end among the ranges up to it.

    To find the ranges holding an address, bisect ``starts`` and walk left while ``reach``
    still passes the address: once it does not, no range further left can hold it.
    """
    ordered = sorted(ranges, key=lambda r: r.start)
    reach, furthest = [], 0
    for r in ordered:
        furthest = max(furthest, r.end)
        reach.append(furthest)
    return [r.start for r in ordered], ordered, reach


class BufferSet:
    """Labelled address ranges that addresses can be located in.

    Adding is O(1); the first look-up after a change builds the index in O(n log n);
    each :meth:`locate` is then one binary search, O(log n). Where ranges nest or
    overlap, an address belongs to the smallest range that holds it (the first added
    among equal ones).

    Example::

        owned = gc.BufferSet().add(x, "x").add(v, "v")
        owned.locate(x.ptr + 8)     # ("x", 8)
    """

    def __init__(self, buffers: Iterable[Buffer] = ()) -> None:
        self._buffers: list[Buffer] = list(buffers)
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._owners: list[Buffer] = []
        self._dirty = True
        self._by_start: tuple[list[int], list[Buffer], list[int]] | None = None
        # (path, start, end, how) of every way the walk that made the set reached an array, when
        # it looked (see holders_of; how: KEPT, WITHIN or PLAIN); None when it did not.
        self._paths: list[tuple[str, int, int, int]] | None = None
        self._paths_by_range: dict[tuple[int, int], list[tuple[str, int]]] | None = None
        self._paths_by_name: dict[str, tuple[int, int]] | None = None

    @classmethod
    def of(cls, arrays: Iterable[Any], label: str = "") -> BufferSet:
        """A set of the given arrays, each labelled ``label`` (or described by its dtype and shape)."""
        out = cls()
        for arr in arrays:
            out.add(arr, label)
        return out

    def add(self, array: Any, label: str = "") -> BufferSet:
        """Add an array's addressable range (a null or empty array is ignored).

        Args:
            array: a ``wp.array`` (or indexed array: its data array counts).
            label: what to call it (default: its dtype, shape and device).

        Returns:
            The set itself, so that calls chain.
        """
        span = _warp.array_range(array)
        if span is not None:
            self._buffers.append(Buffer(span[0], span[1], label or _warp.array_label(array)))
            self._dirty = True
        return self

    def add_range(self, start: int, end: int, label: str) -> BufferSet:
        """Add the range ``[start, end)`` under ``label``."""
        start, end = int(start), int(end)
        if end <= start:
            raise ValueError(f"an address range must not be empty: got [{start:#x}, {end:#x}) for {label!r}")
        self._buffers.append(Buffer(start, end, label))
        self._dirty = True
        return self

    def update(self, other: BufferSet) -> BufferSet:
        """Add every range of another set."""
        self._buffers.extend(other._buffers)
        self._dirty = True
        return self

    # -- index ----------------------------------------------------------------------------

    def _build(self) -> None:
        ordered = sorted(self._buffers)
        if all(b.start < b.end for b in ordered) and all(a.end <= b.start for a, b in itertools.pairwise(ordered)):
            # No two ranges share a byte (a simulator's arrays, as a rule): each range is its
            # own segment, which is what the sweep below finds, in about half its time.
            self._starts, self._ends, self._owners = [b.start for b in ordered], [b.end for b in ordered], ordered
            self._dirty = False
            return
        # Else most ranges still share no byte with any other (a few views, a few arrays
        # known by two names): only the clusters of ranges that overlap are swept, each
        # range by its place in the set (which breaks ties between ranges of one size).
        buffers = self._buffers
        starts: list[int] = []
        ends: list[int] = []
        owners: list[Buffer] = []
        cluster: list[int] = []
        reach = 0
        for i in sorted(range(len(buffers)), key=buffers.__getitem__):
            b = buffers[i]
            if cluster and b.start < reach:
                cluster.append(i)
                reach = max(reach, b.end)
                continue
            self._sweep(cluster, starts, ends, owners)
            cluster, reach = [i], b.end
        self._sweep(cluster, starts, ends, owners)
        self._starts, self._ends, self._owners = starts, ends, owners
        self._dirty = False

    def _sweep(self, cluster: list[int], starts: list[int], ends: list[int], owners: list[Buffer]) -> None:
        """Append the segments of the ranges at positions ``cluster`` (in order of start),
        which share no byte with any other range, to ``starts``, ``ends`` and ``owners``."""
        buffers = self._buffers
        if len(cluster) == 1:
            b = buffers[cluster[0]]
            if b.start < b.end:
                starts.append(b.start)
                ends.append(b.end)
                owners.append(b)
            return
        # Sweep the range boundaries in address order, keeping the ranges open at each
        # point in a heap keyed by size (then place in the set): each elementary segment
        # between two boundaries belongs to the smallest open range. Ranges that end are
        # dropped lazily when they surface at the top of the heap.
        points = sorted({p for i in cluster for p in (buffers[i].start, buffers[i].end)})
        heap: list[tuple[int, int, Buffer]] = []
        k = 0
        for left, right in itertools.pairwise(points):
            while k < len(cluster) and buffers[cluster[k]].start <= left:
                b = buffers[cluster[k]]
                heapq.heappush(heap, (b.end - b.start, cluster[k], b))
                k += 1
            while heap and heap[0][2].end <= left:
                heapq.heappop(heap)
            if not heap:
                continue
            owner = heap[0][2]
            if owners and owners[-1] is owner and ends[-1] == left:
                ends[-1] = right  # merge with the previous segment of the same buffer
            else:
                starts.append(left)
                ends.append(right)
                owners.append(owner)

    def locate(self, ptr: int) -> tuple[str, int] | None:
        """``(label, byte offset)`` of the innermost buffer holding ``ptr``, else None."""
        if not isinstance(ptr, int) or isinstance(ptr, bool):
            raise TypeError(
                f"locate() takes an address (an int, such as array.ptr), got {ptr!r} ({article(type(ptr).__name__)})"
            )
        if self._dirty:
            self._build()
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0 and ptr < self._ends[i]:
            owner = self._owners[i]
            return owner.label, ptr - owner.start
        return None

    def buffer_at(self, ptr: int) -> Buffer | None:
        """The innermost :class:`Buffer` holding ``ptr``, else None."""
        if self._dirty:
            self._build()
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0 and ptr < self._ends[i]:
            return self._owners[i]
        return None

    def find(self, start: int, nbytes: int = 1) -> Buffer | None:
        """The smallest buffer holding all of ``[start, start + nbytes)``, else None.

        An argument can span more than the innermost buffer at its first byte (a view of
        a base array both registered): then the smallest enclosing buffer answers.
        """
        hit = self.buffer_at(start)
        end = start + max(nbytes, 1)
        if hit is None or end <= hit.end:
            return hit if hit is not None and end <= hit.end else None
        starts, ordered, reach = self._enclosing()
        best = None
        i = bisect.bisect_right(starts, start)
        # reach[j] is the furthest end among the first j+1 buffers by start: once it falls
        # short of `end`, no buffer further left can hold the range.
        while i > 0 and reach[i - 1] >= end:
            i -= 1
            b = ordered[i]
            if b.end >= end and (best is None or b.nbytes < best.nbytes):
                best = b
        return best

    def kept_paths(self, buffer: Buffer) -> tuple[str, ...]:
        """The paths through a ``@wp.struct``, a ``wp.Launch`` command or an indexed array by
        which the walk that made this set reached an array of ``buffer``'s range: objects
        built once, that keep the buffer however the owners name it elsewhere (none when the
        walk did not look: see :func:`holders_of`)."""
        return tuple(path for path, how in self._paths_of(buffer) if how == KEPT)

    def plain_paths(self, buffer: Buffer) -> tuple[str, ...]:
        """The other paths the walk recorded to an array of ``buffer``'s range (see
        :func:`holders_of`), those through no struct, command or indexed array first
        (attributes, items: names a step looks up when it runs), each in the order the walk
        met them."""
        entries = self._paths_of(buffer)
        if self._paths is not None and all(path != buffer.label for path, _ in entries):
            # Met first by a name (the walk records such an array's other names only when asked).
            return (buffer.label, *(path for path, how in entries if how == PLAIN))
        ranked = sorted(entries, key=lambda entry: entry[1])  # stable: PLAIN, then WITHIN
        return tuple(path for path, how in ranked if how != KEPT)

    def held_at(self, path: str) -> tuple[int, int] | None:
        """``(start, end)`` of the array the walk found at ``path``, where it recorded it (see
        :func:`holders_of`), else None."""
        if self._paths is None:
            return None
        if self._paths_by_name is None:
            self._paths_by_name = {path: (start, end) for path, start, end, _ in self._paths}
        return self._paths_by_name.get(path)

    def _paths_of(self, buffer: Buffer) -> list[tuple[str, int]]:
        if self._paths is None:
            return []
        if self._paths_by_range is None:
            by_range: dict[tuple[int, int], list[tuple[str, int]]] = {}
            for path, start, end, how in self._paths:
                by_range.setdefault((start, end), []).append((path, how))
            self._paths_by_range = by_range
        return self._paths_by_range.get((buffer.start, buffer.end), [])

    def handle(self, value: Any) -> Buffer | None:
        """The owned structure whose id ``value`` is (a mesh, hash grid, BVH or volume, which
        :func:`buffers_of` registers as a one-byte ``<path>.id`` handle), else None."""
        if type(value) is not int or value <= 0xFFFF:
            return None
        hit = self.find(value, 1)
        if hit is not None and hit.start == value and hit.nbytes == 1 and hit.label.endswith(".id"):
            return hit
        return None

    def _enclosing(self) -> tuple[list[int], list[Buffer], list[int]]:
        index = self._by_start
        if index is None or len(index[1]) != len(self._buffers):
            index = self._by_start = reach_index(self._buffers)
        return index

    def __contains__(self, ptr: object) -> bool:
        return isinstance(ptr, int) and self.locate(ptr) is not None

    def __len__(self) -> int:
        return len(self._buffers)

    def __iter__(self) -> Iterator[Buffer]:
        # By start, the longer first at one start, then in the order added: two stable sorts
        # by a tuple's item (a few times cheaper than one by a Python key; a validated
        # capture's owned buffers are iterated for the next capture to compare with).
        by_end = sorted(self._buffers, key=_END, reverse=True)
        return iter(sorted(by_end, key=_START))

    def labels(self) -> list[str]:
        """Every buffer's label, in address order."""
        return [b.label for b in self]

    def __repr__(self) -> str:
        return f"BufferSet({len(self)} buffers)"


#: How the walk reached an array (see BufferSet.kept_paths): by names alone, through a struct,
#: command or indexed array the call re-derives, or through one built once, that keeps it.
PLAIN, WITHIN, KEPT = 0, 1, 2

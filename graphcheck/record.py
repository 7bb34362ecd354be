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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from . import _warp
from .buffers import reach_index
from .params import Address, ArrayRef, ParamSpec, decode, launch_dim
from .site import UNKNOWN_SITE, Site, site_of

if TYPE_CHECKING:
    from .buffers import BufferSet
    from .compare import Difference
    from .nodes import CaptureSpan

__all__ = [
    "Allocation",
    "LaunchRecord",
    "LaunchTrace",
    "Site",
    "assert_pointers_within",
    "assert_same_topology",
    "trace_launches",
]


#: The kinds of operation a record can hold.
KINDS = ("launch", "copy", "memset", "native", "conditional")


class LaunchRecord:
    """One operation Warp enqueued: a kernel launch, a copy, a memset or fill, or a
    native helper (sort, scan, reduction, spatial-structure build).

    Attributes:
        kind: ``"launch"``, ``"copy"``, ``"memset"``, ``"native"`` or ``"conditional"``
            (a ``wp.capture_if`` / ``wp.capture_while``).
        block_dim: threads per block as Warp resolved it (0 when not a launch).
        max_blocks: the launch's block cap (0: none).
        stream: the CUDA stream handle it was enqueued on; None on the CPU.
        device: ``"cpu"``, ``"cuda:0"``, ...
        adjoint: whether the backward kernel ran.
        via: the Warp function the user called (``"launch"``, ``"launch_tiled"``,
            ``"clone"``, ``"assign"``, ``"backward"``...).
        internal: whether Warp issued it on its own behalf (the copy inside
            ``wp.clone``, the memset inside ``wp.zeros``).
        replay: whether it is the replay of a recorded ``wp.Launch`` command.
        nested: inside the body of a ``wp.capture_if`` or ``wp.capture_while`` (the
            conditional itself is a record of kind ``"conditional"``): ``(conditional's
            seq, branch, iteration)``, the branch being ``"on_true"``, ``"on_false"`` or
            ``"while_body"``; True for work inside the conditional outside a body; else
            False.
        seq: position in the process-wide order of operations and allocations.
        capture: on CUDA inside a capture, where the capturing stream stood before and
            after the operation (a :class:`~graphcheck.nodes.CaptureSpan`: the graph and
            the nodes around the ones it added); else None.
        tile_block_dim: for ``wp.launch_tiled``, the block size the user asked for (Warp
            resolves it to 1 on the CPU; a CUDA graph bakes what was asked); else None.
        cuda: on CUDA, the native launch arguments ``(function, dim_size, max_blocks,
            block_dim, grid_stride, cluster_dim, smem_bytes)``; else None.
    """

    __slots__ = (
        "_args",
        "_code",
        "_dim",
        "_kernel",
        "_key",
        "_lasti",
        "_layout",
        "_name",
        "_params",
        "adjoint",
        "block_dim",
        "capture",
        "cuda",
        "device",
        "internal",
        "kind",
        "max_blocks",
        "nested",
        "replay",
        "seq",
        "stream",
        "tile_block_dim",
        "via",
    )

    def __init__(
        self,
        kind: str,
        kernel: Any,
        adjoint: bool,
        params: list[Any] | tuple[bytes, ...] | None,
        args: dict[str, Any] | None,
        device: str,
        block_dim: int,
        max_blocks: int,
        stream: int | None,
        code: CodeType | None,
        lasti: int,
        via: str,
        internal: bool,
        seq: int,
        replay: bool = False,
        cuda: tuple[int, ...] | None = None,
        dim: tuple[int, ...] | None = None,
    ) -> None:
        # Positional on purpose: while tracing, a record is built for every launch.
        # `kernel` is a Warp kernel (launches) or a name; `params` the parameter objects
        # (or bytes) Warp passed, converted to bytes on first use.
        self.kind = kind
        self._kernel: Any = None if isinstance(kernel, str) else kernel
        self._name: str | None = kernel if isinstance(kernel, str) else None
        self.adjoint = adjoint
        self._params = params
        self._args = args
        self.device = device
        self.block_dim = block_dim
        self.max_blocks = max_blocks
        self.stream = stream
        self._code = code
        self._lasti = lasti
        self.via = via
        self.internal = internal
        self.seq = seq
        self.replay = replay
        self.cuda = cuda
        self._dim = dim
        self._layout: tuple[ParamSpec, ...] | None = None
        self._key: tuple[Any, ...] | None = None
        self.nested: tuple[int, str, int] | bool = False
        self.tile_block_dim: int | None = None
        self.capture: CaptureSpan | None = None

    # -- what -----------------------------------------------------------------------------

    @property
    def kernel(self) -> str:
        """``"<module>.<key>"`` of a launch's kernel; ``"wp.copy"``, ``"array.zero_"``,
        ``"array.fill_"``, or a native helper's name (``"radix_sort_pairs_int_host"``)."""
        name = self._name
        if name is None:
            if self._kernel is not None:
                name = _warp.kernel_name(self._kernel)
            elif self.cuda:
                name = f"<function {self.cuda[0]:#x}>"
            else:
                name = "<unknown kernel>"
            self._name = name
        return name

    @property
    def kernel_object(self) -> Any:
        """The Warp kernel of a launch (None for other operations)."""
        return self._kernel

    @property
    def dim(self) -> tuple[int, ...]:
        """Launch dimensions, as the launch bounds Warp passed encode them.

        For a copy, the element count; for a memset, the array's size.
        """
        dim = self._dim
        if dim is None:
            if self.layout and self._params:
                dim = launch_dim(self.layout[0], self.param_bytes[0])
            elif self.cuda:
                dim = (self.cuda[1],)
            else:
                dim = ()
            self._dim = dim
        return dim

    @property
    def param_bytes(self) -> tuple[bytes, ...]:
        """The exact parameter block Warp passed, one ``bytes`` per parameter.

        The launch bounds come first, then every argument as Warp packed it (then every
        adjoint argument, for adjoint launches). Empty for copies, memsets and native
        helpers.
        """
        params = self._params
        if params is None:
            return ()
        if type(params) is not tuple:
            if type(params) is CapturedParams:
                params = self._params = params.split()
            else:
                params = self._params = tuple([p if type(p) is bytes else bytes(p) for p in params])
        return params

    def same_params(self, other: LaunchRecord) -> bool:
        """Whether two launches passed byte-identical parameter blocks.

        Cheaper than comparing :attr:`param_bytes`: parameter objects the two launches
        share (an array's cached descriptor) are equal without being copied.
        """
        pa, pb = self._params, other._params
        if type(pa) is CapturedParams or type(pb) is CapturedParams:
            return self.param_bytes == other.param_bytes
        if pa is None or pb is None or len(pa) != len(pb):
            return pa is pb
        for x, y in zip(pa, pb):
            if x is not y and (x if type(x) is bytes else bytes(x)) != (y if type(y) is bytes else bytes(y)):
                return False
        return True

    @property
    def layout(self) -> tuple[ParamSpec, ...]:
        """The parameter layout of a launch (empty for other operations)."""
        layout = self._layout
        if layout is None:
            kernel = self._kernel
            layout = _warp.kernel_layout(kernel, self.adjoint) if kernel is not None else ()
            self._layout = layout
        return layout

    @property
    def args(self) -> Mapping[str, Any]:
        """Every argument by name, decoded from the parameter bytes.

        Arrays are :class:`~graphcheck.ArrayRef` (address, byte extent, shape, strides);
        scalars are numbers; vectors and matrices are tuples; struct fields are
        flattened as ``"<argument>.<field>"``. A copy has ``dest``, ``src``,
        ``dest_offset``, ``src_offset`` and ``count``; a memset ``dest`` and ``value``;
        a native helper its arguments by role (``keys``, ``count``...).
        """
        args = self._args
        if args is None:
            args = self._args = _decoded(self.layout, self.param_bytes) if self._params is not None else {}
        return args

    def arrays(self) -> Iterator[tuple[str, ArrayRef]]:
        """``(argument name, ArrayRef)`` of every non-null array argument."""
        for name, value in self.args.items():
            if isinstance(value, ArrayRef) and value.ptr:
                yield name, value

    def addresses(self) -> Iterator[Address]:
        """Every address range the operation hands the device, one :class:`Address` each.

        Array data and gradients (``"<argument>.grad"``), struct fields
        (``"<argument>.<field>"``), an indexed array's index arrays, a native helper's
        buffers by role (``"keys"``, ``"values"``), the buffers behind a spatial structure.
        This is graphcheck's one answer to "which memory does this operation use": the
        ownership check, the replay check and :func:`assert_pointers_within` all ask it.
        """
        for name, value in self.args.items():
            if isinstance(value, ArrayRef):
                yield from value.addresses(name)

    def pointers(self) -> Iterator[tuple[str, int]]:
        """``(name, start)`` of every address range (see :meth:`addresses`)."""
        for address in self.addresses():
            yield address.arg, address.start

    @property
    def dest(self) -> ArrayRef | None:
        """A copy's or memset's destination."""
        return self.args.get("dest")

    @property
    def src(self) -> ArrayRef | None:
        """A copy's source."""
        return self.args.get("src")

    @property
    def value(self) -> Any:
        """A memset's or fill's value."""
        return self.args.get("value")

    @property
    def count(self) -> int | None:
        """A copy's element count."""
        return self.args.get("count")

    def match_key(self, streams: bool = False) -> tuple[Any, ...]:
        """Equal for two operations that would bake the same node into a graph: same
        kernel, direction, block size and exact parameter bytes (copies, memsets: same
        arguments). With ``streams``, the stream counts too."""
        key = self._key
        if key is None:
            if self.kind == "launch":
                kernel = self._kernel if self._kernel is not None else self.kernel
                key = (kernel, self.adjoint, self.block_dim, self.tile_block_dim, self.max_blocks, self.param_bytes)
            else:
                key = (self.kind, self.kernel, self.dim, tuple(self.args.items()))
            self._key = key
        return (*key, self.stream) if streams else key

    def identity(self) -> tuple[str, Any, bool]:
        """What must match for two operations to be "the same operation": kind, kernel
        and direction."""
        kernel = self._kernel
        return (self.kind, kernel if kernel is not None else self.kernel, self.adjoint)

    # -- where ----------------------------------------------------------------------------

    @property
    def site(self) -> Site:
        """The user's call site, the first frame outside Warp and graphcheck."""
        code = self._code
        if code is None:
            return UNKNOWN_SITE
        return site_of(code, self._lasti)

    def __str__(self) -> str:
        what = f"{self.kernel}{' (adjoint)' if self.adjoint else ''}"
        return f"{self.kind} {what} dim={self.dim} from {self.site.short}"

    def __repr__(self) -> str:
        return f"<LaunchRecord {self}>"


@dataclass(frozen=True)
class Allocation:
    """A buffer Warp allocated (or wrapped from host data) while recording.

    Warp makes memory allocated during a capture graph-owned (a CUDA memory pool
    allocation the graph keeps, a CPU capture's retained buffer): a temporary whose
    content is produced on the device is valid on every replay. One whose content comes
    from host memory that lives only for the call is not: the graph re-reads that memory
    (or keeps the capture-time copy) while an eager call would read new data.

    Attributes:
        start: its first address.
        end: one past its last address.
        device: where it lives.
        seq: its place in the order of operations (see :attr:`LaunchRecord.seq`).
        site: the user's call site.
        via: the Warp function the user called (``"zeros"``, ``"clone"``, ``"array"``...).
        how: ``"allocated"`` (content produced on the device: ``wp.zeros``, ``wp.empty``,
            ``wp.clone``...), ``"uploaded"`` (``wp.array(data)`` copied host data into
            it) or ``"wrapped"`` (host memory Warp aliased without copying).
        label: what it is: ``"float32[64] on cpu"``.
        dtype: its element type's name (``"float32"``).
    """

    start: int
    end: int
    device: str
    seq: int
    site: Site
    via: str
    how: str
    label: str
    dtype: str = ""

    def __contains__(self, ptr: object) -> bool:
        return isinstance(ptr, int) and self.start <= ptr < self.end

    @property
    def from_host(self) -> bool:
        """Whether its content comes from host memory (``wp.array(data)``, a wrapped buffer)."""
        return self.how != "allocated"

    @property
    def nbytes(self) -> int:
        """Its size in bytes."""
        return self.end - self.start

    @property
    def by_warp(self) -> bool:
        """Whether Warp made it for itself under a call of the user's (the scratch and caches
        of ``wp.fem.integrate``, ``HashGrid.build``...) rather than the user asking for an array."""
        return self.via not in _warp.USER_ALLOCATORS

    def __str__(self) -> str:
        return f"{self.label} {self.how} at {self.site.short}" + (f" (wp.{self.via})" if self.via else "")


class HostSync(NamedTuple):
    """A readback to the host (``array.numpy()``, ``print(array)``) or a
    ``wp.synchronize*()`` call made while recording.

    A CPU capture runs it (and reads data the deferred graph has not computed yet); a
    CUDA capture cannot: Warp raises, or the capture is invalidated.

    Attributes:
        what: ``"array.numpy()"``, ``"wp.synchronize()"``...
        site: the user's call site.
        seq: its place in the order of operations.
    """

    what: str
    site: Site
    seq: int


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

    def __init__(self, *, include_warp: bool = False) -> None:
        self.include_warp = bool(include_warp)
        # What the recorder appends: LaunchRecords, and for eager CPU launches (the hot
        # path) raw tuples that become LaunchRecords when first read (see `records`).
        self._items: list[Any] = []
        self._materialized = 0  # items before this index are all LaunchRecords
        self.allocations: list[Allocation] = []
        self.host_syncs: list[HostSync] = []
        self._token: Any = None
        # Where recording delivers: the list's own append while the trace records, `ended`
        # (which drops what it is given) before and after. Set in one step, it is the one
        # answer to "is this trace recording?".
        self._append: Any = ended
        self._alloc_index: tuple[list[int], list[Allocation], list[int]] | None = None
        self._alloc_order: dict[Allocation, tuple[Site, int]] = {}
        # Allocations another call used too (a cache filled on a first call): not numbered.
        self._kept: frozenset[Allocation] = frozenset()

    # -- recording ------------------------------------------------------------------------

    def __enter__(self) -> LaunchTrace:
        from . import _session

        if self.recording:
            raise RuntimeError("this LaunchTrace is already recording; use a new trace_launches() for a nested trace")
        self._items = []
        self._materialized = 0
        self.allocations = []
        self.host_syncs = []
        self._alloc_index = None
        self._alloc_order = {}
        self._token = _session.start(self)
        return self

    def __exit__(self, *exc: object) -> None:
        from . import _session

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
                    items[i] = _from_raw(items[i])
            self._materialized = len(items)
        return items

    @property
    def recording(self) -> bool:
        """Whether the trace is recording right now."""
        return self._append is not ended

    # -- sequence -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[LaunchRecord]:
        return iter(self.records)

    @overload
    def __getitem__(self, index: int) -> LaunchRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[LaunchRecord]: ...
    def __getitem__(self, index: int | slice) -> LaunchRecord | list[LaunchRecord]:
        return self.records[index]

    def __repr__(self) -> str:
        ops, allocs = len(self.records), len(self.allocations)
        return f"LaunchTrace({ops} operation{'s' * (ops != 1)}, {allocs} allocation{'s' * (allocs != 1)})"

    def user_view(self) -> LaunchTrace:
        """The same trace without Warp's internal operations (and the same allocations)."""
        view = LaunchTrace(include_warp=False)
        view._items = [r for r in self.records if not r.internal]
        view._materialized = len(view._items)
        view.allocations = self.allocations
        view.host_syncs = self.host_syncs
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
        index = self._alloc_index
        if index is None or len(index[1]) != len(self.allocations):
            index = self._alloc_index = reach_index(self.allocations)
        starts, ordered, reach = index
        best = None
        i = bisect.bisect_right(starts, ptr)
        # reach[j] is the furthest end among the first j+1 allocations: once it is at or
        # below ptr, no earlier allocation can hold ptr.
        while i > 0 and reach[i - 1] > ptr:
            i -= 1
            alloc = ordered[i]
            if ptr < alloc.end and (before is None or alloc.seq < before) and (best is None or alloc.seq > best.seq):
                best = alloc
        return best

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
        order = self._alloc_order
        if alloc not in order:
            counts: dict[tuple[Any, ...], int] = {}
            order.clear()

            def number(a: Allocation, body: Any = None) -> None:
                if a in self._kept:  # made here and used again by the other call: no temporary
                    order[a] = (a.site, -1)
                elif a not in order:
                    # Counted afresh in each run of a conditional body: a capture records
                    # one run, which compares with each eager iteration.
                    key = (a.site, a.dtype, a.device, body)
                    order[a] = (a.site, counts.get(key, 0))
                    counts[key] = order[a][1] + 1

            for record in self.records:
                body = record.nested if type(record.nested) is tuple else None
                for address in record.addresses():
                    used = self.allocation_at(address.start, record.seq)
                    if used is not None:
                        number(used, body)
            for a in self.allocations:  # the ones no operation uses, after the others
                number(a)
        return order[alloc]

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
        from .compare import topology_keys

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
        from .compare import compare_traces

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
        from .buffers import BufferSet

        extra = ignore if isinstance(ignore, BufferSet) else BufferSet.of(ignore)
        out = []
        for record in self.records:
            for address in record.addresses():
                start, nbytes = address.start, address.nbytes
                if buffers.find(start, nbytes) is None and extra.find(start, nbytes) is None:
                    out.append((record, address.arg, start))
        return out


class CapturedParams:
    """The structs Warp passes to a CPU launch inside a capture, split into parameters
    (launch bounds, then each argument) only when they are read."""

    __slots__ = ("adjoint", "args", "bounds")

    def __init__(self, bounds: Any, args: Any, adjoint: Any) -> None:
        self.bounds, self.args, self.adjoint = bounds, args, adjoint

    def split(self) -> tuple[bytes, ...]:
        params = [bytes(self.bounds)]
        for struct in (self.args, self.adjoint):
            if struct is not None:
                blob = bytes(struct)
                params.extend(blob[o : o + n] for o, n in _warp.struct_param_slices(type(struct)))
        return tuple(params)


def ended(item: Any) -> None:
    """Where recording delivers to a trace that is not recording: nowhere."""


#: Objects a kept record names by id (kernels and code objects of the recording fast
#: path), held for good so that an id is never reused; and the parameter sizes of each
#: held kernel's launches, by ``(id, adjoint)``.
_held: dict[int, Any] = {}
_param_slices: dict[tuple[int, bool], tuple[tuple[int, int], ...]] = {}


def hold(obj: Any) -> int:
    """Keep ``obj`` for good; returns its id, by which records name it."""
    _held.setdefault(id(obj), obj)
    return id(obj)


def hold_param_sizes(kernel: Any, adjoint: bool, sizes: tuple[int, ...]) -> None:
    """How one parameter block of ``kernel`` splits into parameters."""
    slices, offset = [], 0
    for size in sizes:
        slices.append((offset, offset + size))
        offset += size
    _param_slices[(hold(kernel), adjoint)] = tuple(slices)


# (id of a layout, parameter bytes) -> (the layout, its decoded arguments). A step launches
# the same kernel with the same arguments many times (every substep, every iteration):
# decoding once serves them all. Bounded: cleared when it grows past _DECODED_MAX.
_decoded_args: dict[tuple[int, tuple[bytes, ...]], tuple[tuple[ParamSpec, ...], dict[str, Any]]] = {}
_DECODED_MAX = 4096


def _decoded(layout: tuple[ParamSpec, ...], params: tuple[bytes, ...]) -> dict[str, Any]:
    key = (id(layout), params)
    entry = _decoded_args.get(key)
    if entry is not None and entry[0] is layout:
        return entry[1]
    args = decode(layout, params)
    if len(_decoded_args) >= _DECODED_MAX:
        _decoded_args.clear()
    _decoded_args[key] = (layout, args)
    return args


def _from_raw(raw: tuple[Any, ...]) -> LaunchRecord:
    # See graphcheck._session: eager CPU launches (7 items: the parameter block as one
    # bytes) and CPU launches inside a capture (8 items: the block size asked for last).
    kernel_id, adjoint, params, max_blocks, code_id, lasti, seq = raw[:7]
    if type(params) is bytes:
        params = tuple([params[start:end] for start, end in _param_slices[(kernel_id, adjoint)]])
    block_dim = _warp.resolve_block_dim("cpu", raw[7]) if len(raw) > 7 else 1
    return LaunchRecord(
        "launch", _held[kernel_id], adjoint, params, None, "cpu", block_dim, max_blocks or 0, None, _held[code_id],
        lasti, "launch", False, seq,
    )  # fmt: skip


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

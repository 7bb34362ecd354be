"""What a trace holds: one recorded operation (:class:`LaunchRecord`), one allocation
(:class:`Allocation`), one readback or synchronisation (:class:`HostSync`).

The recorder (:mod:`graphcheck._session`) makes them; a :class:`graphcheck.LaunchTrace`
keeps them. Eager CPU launches, the hot path, are kept as raw tuples of ids, bytes and
numbers and become LaunchRecords only when read (:mod:`graphcheck.raw_launches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _warp
from ._memo import ByIdentity, remember
from .params import Address, ArrayRef, ParamSpec, decode, decode_like, launch_dim
from .site import UNKNOWN_SITE, Site, site_of

if TYPE_CHECKING:
    from .nodes import CaptureSpan, CudaLaunch

__all__ = ["CPU_GRAPH_LAUNCH", "KINDS", "Allocation", "Baked", "HostSync", "LaunchRecord"]


#: The kinds of operation a record can hold.
KINDS = ("launch", "copy", "memset", "native", "conditional")

#: The name of the ``"native"`` record of a CPU graph replayed by ``wp.capture_launch``.
CPU_GRAPH_LAUNCH = "wp.capture_launch"

#: The ``via`` of a launch that replayed a ``wp.Launch`` command (``cmd.launch()``).
COMMAND_LAUNCH = "Launch.launch"


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
        kernel_object: the Warp kernel of a launch (None for other operations); read it,
            do not set it.
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
        seq: its place in the process-wide order of operations and allocations. Eager
            and captured CPU launches share the place just after the latest allocation
            made before them: ordered against every allocation, not among themselves.
        capture: on CUDA inside a capture, where the capturing stream stood before and
            after the operation (a :class:`~graphcheck.nodes.CaptureSpan`: the graph and
            the nodes around the ones it added); else None.
        tile_block_dim: for ``wp.launch_tiled``, the block size the user asked for (Warp
            resolves it to 1 on the CPU; a CUDA graph bakes what was asked); else None.
        cuda: on CUDA, the native launch arguments (a :class:`~graphcheck.nodes.CudaLaunch`);
            else None.
        uncaptured: on CUDA, for an operation its stream did not capture: the handle of
            the stream its device was capturing on (it went to another stream, ran once,
            at capture time, and is missing from the graph), or 0 when its device had no
            capture open (before or after one, or while the user paused it); on the CPU, 0
            for an operation that ran at once (no CPU capture open, or it was paused);
            None for every other operation (one in a capture, one the driver could not
            place).
        host_bytes: for a copy from host memory (a CPU or pinned array), what the source
            held when the copy was issued (its bytes, or a digest of large ones); else None.
        host_calls: the calls of Warp's host entry points the operation made, in order:
            ``(name, what it asked)`` (``("memcpy_h2h", {"dst": ..., "src": ..., "nbytes":
            ...})``, see :func:`graphcheck._warp.host_call_fields`); a native helper's own
            call first; for a CPU graph launched inside a CPU capture, what that graph held.
            What a CPU graph must hold for the operation.
    """

    __slots__ = (
        "_addresses",
        "_args",
        "_code",
        "_dim",
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
        "host_bytes",
        "host_calls",
        "internal",
        "kernel_object",
        "kind",
        "max_blocks",
        "nested",
        "replay",
        "seq",
        "stream",
        "tile_block_dim",
        "uncaptured",
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
        cuda: CudaLaunch | None = None,
        dim: tuple[int, ...] | None = None,
    ) -> None:
        # Positional on purpose: while tracing, a record is built for every launch.
        # `kernel` is a Warp kernel (launches) or a name; `params` the parameter objects
        # (or bytes) Warp passed, converted to bytes on first use.
        self.kind = kind
        self.kernel_object: Any = None if isinstance(kernel, str) else kernel
        self._name: str | None = kernel if isinstance(kernel, str) else None
        self.adjoint = adjoint
        self._params = params
        self._args = args
        self._addresses: tuple[Address, ...] | None = None
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
        self.uncaptured: int | None = None
        self.host_bytes: bytes | None = None
        self.host_calls: tuple[tuple[str, dict[str, Any]], ...] = ()

    # -- what -----------------------------------------------------------------------------

    @property
    def kernel(self) -> str:
        """``"<module>.<key>"`` of a launch's kernel; ``"wp.copy"``, ``"array.zero_"``,
        ``"array.fill_"``, or a native helper's name (``"radix_sort_pairs_int_host"``)."""
        name = self._name
        if name is None:
            if self.kernel_object is not None:
                name = _warp.kernel_name(self.kernel_object)
            elif self.cuda:
                name = f"<function {self.cuda.function:#x}>"
            else:
                name = "<unknown kernel>"
            self._name = name
        return name

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
                dim = (self.cuda.dim_size,)
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
            params = self._params = tuple([p if type(p) is bytes else bytes(p) for p in params])
        return params

    def same_params(self, other: LaunchRecord) -> bool:
        """Whether two launches passed byte-identical parameter blocks.

        Cheaper than comparing :attr:`param_bytes`: parameter objects the two launches
        share (an array's cached descriptor) are equal without being copied.
        """
        pa, pb = self._params, other._params
        if type(pa) is tuple and type(pb) is tuple:  # bytes each (see from_raw): compared in C
            return pa == pb
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
            kernel = self.kernel_object
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
            args = self._args = decoded(self.layout, self.param_bytes) if self._params is not None else {}
        return args

    def read_like(self, other: LaunchRecord) -> None:
        """Read the arguments from ``other``'s, a launch of the same kernel whose arguments are
        read: only the parameters whose bytes differ are decoded. A reference call's launch
        and its capture's differ in a temporary or two, of some twenty parameters."""
        if (
            self._args is None
            and other._args is not None
            and self._params is not None
            and type(other._params) is tuple  # a launch whose arguments were decoded
            and self.layout is other.layout
        ):
            self._args = decoded(self.layout, self.param_bytes, other)

    def arrays(self) -> Iterator[tuple[str, ArrayRef]]:
        """``(argument name, ArrayRef)`` of every non-null array argument."""
        for name, value in self.args.items():
            if isinstance(value, ArrayRef) and value.ptr:
                yield name, value

    def addresses(self) -> tuple[Address, ...]:
        """Every address range the operation hands the device, one :class:`Address` each.

        Array data and gradients (``"<argument>.grad"``), struct fields
        (``"<argument>.<field>"``), an indexed array's index arrays, a native helper's
        buffers by role (``"keys"``, ``"values"``), the buffers behind a spatial structure.
        This is graphcheck's one answer to "which memory does this operation use": the
        ownership check, the replay check and :func:`assert_pointers_within` all ask it.

        Launches with the same arguments share one tuple.
        """
        addresses = self._addresses
        if addresses is None:  # the checks ask several times: worked out once
            addresses = self._addresses = _addresses_of(self.args)
        return addresses

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
                key = (self.code, self.adjoint, self.block_dim, self.tile_block_dim, self.max_blocks, self.param_bytes)
            else:
                key = (self.kind, self.kernel, self.dim, tuple(self.args.items()))
            self._key = key
        return (*key, self.stream) if streams else key

    def identity(self) -> tuple[str, Any, bool]:
        """What must match for two operations to be "the same operation": kind, compiled
        code (see :attr:`code`) and direction."""
        return (self.kind, self.code, self.adjoint)

    @property
    def code(self) -> Any:
        """What identifies the code the operation runs: for a launch, its kernel's compiled
        code (module, key and content hash), so a kernel declared inside the call, a new
        ``wp.Kernel`` each call, is the same code each call; else its name."""
        kernel = self.kernel_object
        return _warp.compiled_kernel(kernel) if kernel is not None else self.kernel

    def same_code(self, other: LaunchRecord) -> bool:
        """Whether two operations run the same code (the same kernel object, the cheap case)."""
        ka = self.kernel_object
        return (ka is not None and ka is other.kernel_object) or self.code == other.code

    def same_identity(self, other: LaunchRecord) -> bool:
        """``self.identity() == other.identity()``, the cheap case first."""
        return self.kind == other.kind and self.adjoint == other.adjoint and self.same_code(other)

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
            it), ``"wrapped"`` (host memory Warp aliased without copying) or
            ``"structure"`` (a mesh, hash grid, BVH, volume or texture made: its id, one
            byte, or a host texture's texels).
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

    def __init__(
        self, start: int, end: int, device: str, seq: int, site: Site, via: str, how: str, label: str, dtype: str = ""
    ) -> None:
        # The fields in one call instead of the frozen dataclass's setattr per field: every
        # allocation made while recording makes one.
        self.__dict__.update(
            start=start, end=end, device=device, seq=seq, site=site, via=via, how=how, label=label, dtype=dtype
        )

    def __contains__(self, ptr: object) -> bool:
        return isinstance(ptr, int) and self.start <= ptr < self.end

    @property
    def from_host(self) -> bool:
        """Whether its content comes from host memory (``wp.array(data)``, a wrapped buffer)."""
        return self.how in ("uploaded", "wrapped")

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


@dataclass(frozen=True)
class Baked:
    """An address (or structure id) baked into a graph, and what it was at capture time.

    Attributes:
        ptr: the address.
        nbytes: the bytes the operation may touch from there (at least 1).
        label: the owned buffer holding it at capture (``owner.state.x``), or None when
            the owners did not hold it (reported at capture, not checked again).
        index: the operation's index in the capture's trace.
        kernel: the operation's kernel (or copy, memset...).
        arg: the argument.
        site: the user's line that issued the operation.
        kept: the paths through a struct, a ``wp.Launch`` command or an indexed array by
            which the owners held that buffer too at capture (objects built once, that keep
            it however the owners name it elsewhere).
    """

    ptr: int
    nbytes: int
    label: str | None
    index: int
    kernel: str
    arg: str
    site: Site
    kept: tuple[str, ...] = ()

    @classmethod
    def at(
        cls, ptr: int, nbytes: int, owned: Any, index: int, record: LaunchRecord, arg: str, through: Sequence[str] = ()
    ) -> Baked:
        """``ptr`` as ``record``'s argument ``arg``, labelled by the buffer of ``owned``
        (a :class:`~graphcheck.BufferSet`, or None) holding it. ``through``: the paths of
        the structs, commands and indexed arrays the operation took the argument from, whose
        paths to the buffer are :attr:`kept`; an argument taken from none is labelled by the
        first path not through one of them where there is one (the name a step looks up)."""
        hit = owned.find(ptr, nbytes) if owned is not None else None
        if hit is None:
            return cls(ptr, max(nbytes, 1), None, index, record.kernel, arg, record.site)
        if through:
            kept = tuple(path for path in owned.kept_paths(hit) if any(_within(path, holder) for holder in through))
            return cls(ptr, max(nbytes, 1), hit.label, index, record.kernel, arg, record.site, kept)
        plain = owned.plain_paths(hit)
        return cls(ptr, max(nbytes, 1), plain[0] if plain else hit.label, index, record.kernel, arg, record.site)


def _within(path: str, holder: str) -> bool:
    """Whether ``path`` is ``holder`` or leads through it (``owner.cmd.fwd_args[0]`` through ``owner.cmd``)."""
    return path.startswith(holder) and (len(path) == len(holder) or path[len(holder)] in ".[")


@dataclass(frozen=True)
class BakedValue:
    """Bytes a graph baked by value from an object the owners hold: a ``@wp.struct``
    instance passed to a launch, or a ``wp.Launch`` command replayed in the capture.

    Attributes:
        label: where the owners held it at capture (``owner.params``, ``owner.cmd``).
        kind: ``"struct"`` or ``"launch"`` (see :func:`graphcheck._warp.baked_by_value`).
        baked: its bytes as the graph baked them: the struct's, or every parameter's of
            the command, launch bounds first.
        index: the operation's index in the capture's trace.
        record: the operation.
        position: where its bytes sit in ``record.param_bytes`` (a struct: its argument's
            place; a command: 0, all of them).
    """

    label: str
    kind: str
    baked: tuple[bytes, ...]
    index: int
    record: LaunchRecord
    position: int

    def params_with(self, now: tuple[bytes, ...]) -> tuple[bytes, ...]:
        """The operation's parameter bytes with the object's bytes ``now`` in place of the baked ones."""
        params = self.record.param_bytes
        if self.kind == "struct":
            return (*params[: self.position], now[0], *params[self.position + 1 :])
        return now


def ended(item: Any) -> None:
    """Where recording delivers to a trace that is not recording: nowhere."""


# (id of a layout, parameter bytes) -> (the layout, its decoded arguments). A step launches
# the same kernel with the same arguments many times (every substep, every iteration):
# decoding once serves them all.
_decoded_args: dict[tuple[int, tuple[bytes, ...]], tuple[tuple[ParamSpec, ...], dict[str, Any]]] = {}


def decoded(
    layout: tuple[ParamSpec, ...], params: tuple[bytes, ...], like: LaunchRecord | None = None
) -> dict[str, Any]:
    """The arguments of a parameter block: from ``like`` (a launch of the same layout, its
    arguments read) where it can (see :func:`~graphcheck.params.decode_like`), else whole."""
    key = (id(layout), params)
    entry = _decoded_args.get(key)
    if entry is None or entry[0] is not layout:
        args = decode_like(layout, params, like._params, like._args) if like is not None else None  # type: ignore[arg-type]
        entry = remember(_decoded_args, key, (layout, args if args is not None else decode(layout, params)))
    return entry[1]


# (id of an ArrayRef, the argument's name) -> (the ArrayRef, its addresses). Decoded arrays
# are shared (one ArrayRef per descriptor), and a step hands the same array under the same
# name to many kernels: its ranges are made once. The entry holds the ArrayRef, so its id
# is not reused while the entry lives.
_array_addresses: dict[tuple[int, str], tuple[ArrayRef, tuple[Address, ...]]] = {}


def _addresses(args: Mapping[str, Any]) -> tuple[Address, ...]:
    found: list[Address] = []
    known = _array_addresses
    for name, value in args.items():
        if isinstance(value, ArrayRef):
            held = known.get((id(value), name))
            if held is None or held[0] is not value:
                held = remember(known, (id(value), name), (value, value.addresses(name)))
            found += held[1]
    return tuple(found)


# A decoded dict's addresses: launches with the same parameter bytes share one decoded dict
# (see `decoded`), and so one tuple of addresses.
_addresses_of: ByIdentity[Mapping[str, Any], tuple[Address, ...]] = ByIdentity(_addresses)

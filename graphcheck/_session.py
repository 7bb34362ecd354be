"""The recording session of one context: turns what the hooks see into records.

:mod:`graphcheck._warp` calls a :class:`Session`'s ``on_*`` methods from inside Warp;
the session works out what the user asked for (the pending ``wp.launch`` or
``wp.Launch`` call), where they asked (the first frame outside Warp and graphcheck),
keeps the exact parameter bytes, and hands the :class:`~graphcheck.LaunchRecord` to
every active trace of the context.

The eager CPU launch path runs for every launch while tracing, so it is written for
speed: plain tuples, positional calls, work deferred until a record is read.

It is longer than most modules on purpose: :class:`Session` is one state machine (the
pending call, the operations in progress, each capture's span, the conditional bodies)
whose ``on_*`` methods the hooks call from inside Warp, with the fast path's constants and
the hooks' lifetime beside it; split, one operation's record would be followed across
modules.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
import sys
import threading
from _thread import RLock as _RLock
from collections.abc import Callable
from types import CodeType
from typing import TYPE_CHECKING, Any

from . import _warp
from ._memo import remember
from .nodes import CaptureSpan, CudaLaunch
from .operations import CPU_GRAPH_LAUNCH, Allocation, HostSync, LaunchRecord
from .params import ARRAY_REFS, ArrayRef
from .raw_launches import hold, hold_param_sizes, split_block, struct_block
from .site import CodeKind, qualified_name, site_of

if TYPE_CHECKING:
    from .record import LaunchTrace

# One process-wide order for operations and allocations (next() on a count is atomic).
# Every event takes an even place of its own, except a CPU launch kept as a raw tuple
# (LAUNCH_RECORD, and the captured CPU launch): taking a place would cost the fast path a
# call and an int per launch, so it reads the place of the latest allocation instead and
# stands just after it, at the odd place that follows (raw_launches.from_raw). A launch is
# only ever ordered against allocations (LaunchTrace.allocation_at), and that order is
# kept: after every allocation made before it, before every one made after it.
_sequence = itertools.count(2, 2)
_latest_allocation = [0]  # its place (set after taking it; threads racing may see an older one)

_ALLOCATING = _warp.ALLOCATING_FUNCTIONS
_LAUNCH = _warp.LAUNCH
_KIND, _FRAME, _KERNEL, _COMMAND = _warp.PENDING_KIND, _warp.PENDING_FRAME, _warp.PENDING_KERNEL, _warp.PENDING_COMMAND
_MAX_BLOCKS, _BLOCK_DIM, _ADJOINT = _warp.PENDING_MAX_BLOCKS, _warp.PENDING_BLOCK_DIM, _warp.PENDING_ADJOINT
_REPLAY = _warp.REPLAY

# id(code) -> (code, kind): keyed by id because hashing a code object hashes its contents
# (slow on a hot path); the code object is held (record.hold), so its id is never reused.
_code_kinds: dict[int, tuple[CodeType, CodeKind]] = {}
_code_kind = _warp.code_kind
# Module globals: an enum member's attribute lookup costs ~150 ns on a hot path.
_USER, _WARP = CodeKind.USER, CodeKind.WARP


def _kind(code: CodeType) -> CodeKind:
    entry = _code_kinds.get(id(code))
    if entry is None:
        entry = _code_kinds[hold(code)] = (code, _code_kind(code))
    return entry[1]


# kernel -> (id of the held kernel, bytes of its parameter block): an eager CPU launch's
# parameters are kept as one bytes object, split by the sizes held for the kernel. A kernel
# in _forward_blocks is one the fast paths take (a forward launch's is the kernel the user
# passed to wp.launch, not a generic one).
_forward_blocks: dict[Any, tuple[int, int]] = {}
_backward_blocks: dict[Any, tuple[int, int]] = {}


def _block(kernel: Any, adjoint: bool, sizes: tuple[int, ...]) -> tuple[int, int]:
    block = (hold(kernel), sum(sizes))
    hold_param_sizes(kernel, adjoint, sizes)
    (_backward_blocks if adjoint else _forward_blocks)[kernel] = block
    return block


def _caller(frame: Any, via: str) -> tuple[CodeType | None, int, str, bool]:
    """``(code, lasti, via, internal)`` of the first user frame at or above ``frame``.

    ``via`` becomes the outermost Warp function on the way (the one the user called);
    ``internal`` says whether an allocating Warp function (``wp.clone``, ``wp.zeros``...)
    issued the operation on its own behalf.
    """
    internal = False
    while frame is not None:
        code = frame.f_code
        kind = _kind(code)
        if kind is _USER:
            return code, frame.f_lasti, via, internal
        if kind is _WARP:
            via = _via_name(code, frame)
            if code.co_name in _ALLOCATING:
                internal = True
        frame = frame.f_back
    return None, -1, via, internal


_via_names: dict[int, tuple[CodeType, str]] = {}


def _via_name(code: CodeType, frame: Any) -> str:
    # "clone", "launch_tiled", "Tape.backward" -> "backward"; a constructor is named by
    # its class ("array", "Mesh").
    entry = _via_names.get(id(code))
    if entry is None:
        parts = qualified_name(code).split(".")
        if parts[-1] != "__init__":
            name = parts[-1]
        elif len(parts) > 1:
            name = parts[-2]
        else:  # Python 3.10: the class whose __init__ this is, from the object it makes (once per code)
            made = type(frame.f_locals.get("self")).__mro__
            name = next(
                (c.__name__ for c in made if getattr(vars(c).get("__init__"), "__code__", None) is code), "__init__"
            )
        entry = _via_names[id(code)] = (code, name)
    return entry[1]


_plain = _warp.plain_value


# (descriptor bytes, element type) -> the ArrayRef of a dense array: a step zeroes and copies
# the same arrays again and again, and reading an array's extent, gradient and type name
# costs several times more than the descriptor Warp keeps for its launches, which holds all
# but the type. Bounded as the ArrayRefs of decoded parameters are.
_array_refs: dict[tuple[bytes, Any], ArrayRef] = {}


def _array_ref(arr: Any) -> ArrayRef:
    if not _warp.is_dense_array(arr):
        data = getattr(arr, "data", None)
        if not _warp.is_dense_array(data):
            return ArrayRef(0, 0, dtype=type(arr).__name__)
        arr = data
    key = (_warp.array_descriptor(arr), arr.dtype)
    ref = _array_refs.get(key)
    if ref is None:
        ptr, nbytes, shape, strides = _warp.array_extent(arr)
        grad = _warp.array_grad(arr)
        ref = ArrayRef(ptr, nbytes, shape, strides, int(getattr(grad, "ptr", 0) or 0), _warp.dtype_name(arr))
        remember(_array_refs, key, ref, ARRAY_REFS)
    return ref


# id(code) -> code, for each user code object a launch came from (held here, so its id is
# never reused): the fast path's test that the caller is user code, by id because hashing a
# code object hashes its contents. A raw record holds the code itself (no cyclic garbage
# collector traverses a code object, so the record is still left alone once seen).
_user_codes: dict[int, CodeType] = {}
_NO_CODES: dict[int, CodeType] = {}  # stays empty: a session whose launches take the general path
# The user code learnt last (any thread): a new session's `last_code`, so that the loop that
# launched in the last trace passes the identity test in the next one too.
_last_learnt: list[CodeType | None] = [None]


def _delivery(traces: tuple[LaunchTrace, ...]) -> Callable[[Any], None]:
    """One callable handing a record to each of ``traces`` (their ``deliver`` as it is now)."""
    delivers = tuple(trace.deliver for trace in traces)
    if len(delivers) == 1:
        return delivers[0]  # the commonest case: the trace's own list.append, no Python frame

    def deliver(raw: Any) -> None:
        for each in delivers:
            each(raw)

    return deliver


class Session:
    """What one context records in one thread: its active traces and the call in progress.

    A session belongs to the thread that made it; a thread that finds another thread's
    session in its context (``asyncio.to_thread`` copies the context) makes its own for
    the same traces (:meth:`rebind`), so the per-call state below is never shared.
    """

    __slots__ = (
        "_conditional_depth", "_tiled", "allocations_seen", "bodies", "conditionals", "deliver", "deterministic",
        "eager", "fast_codes", "in_memset", "last_code", "ops", "owner", "pending", "traces", "uploading",
    )  # fmt: skip

    def __init__(self, traces: tuple[LaunchTrace, ...]) -> None:
        self.traces = traces
        # The innermost trace records an eager call (a reference call): what the call
        # captures into a graph of its own is no work it does, and is marked nested.
        self.eager = bool(traces) and traces[-1].eager
        # What the fast paths hand a record to: every trace's own `deliver`, as it was when
        # the session was made (an ended trace drops what reaches it: see LaunchTrace.close).
        self.deliver = _delivery(traces)
        # The user codes whose launches the fast path records: all of them, or none while
        # a conditional body or a tiled launch runs (the general path records those).
        self.fast_codes = _user_codes
        # The user code whose launch was learnt last (see _on_invoke): a loop launching
        # from one function costs one identity test instead of the lookup. Only ever a code
        # in fast_codes (which only grows), so cleared with it.
        self.last_code: Any = _last_learnt[0]
        # An RLock this thread holds for the session's life: `owner._is_owned()` tells
        # this thread from another in one C call that makes nothing (comparing
        # threading.get_ident() costs the launch prologue a generic call and an int).
        self.owner: Any = _RLock()
        self.owner.acquire()
        self.pending: Any = None
        self.in_memset = False
        self.allocations_seen = 0
        self.uploading = 0  # inside wp.array(data): allocations are filled from host memory
        # The copies, memsets and native helpers in progress, innermost last: the calls of
        # Warp's host entry points made meanwhile are theirs (see on_host_call).
        self.ops: list[LaunchRecord] = []
        self._conditional_depth = 0
        self.conditionals: list[LaunchRecord] = []  # the wp.capture_if / capture_while calls in progress
        self.bodies: list[tuple[int, str, int]] = []  # the conditional bodies running: see _body
        # Inside Warp's deterministic launcher: everything but the kernel's own phase
        # launches is Warp's machinery (see on_deterministic).
        self.deterministic = 0
        self._tiled: Any = None

    @property
    def conditional_depth(self) -> int:
        """How many ``wp.capture_if`` / ``capture_while`` calls are in progress."""
        return self._conditional_depth

    @conditional_depth.setter
    def conditional_depth(self, depth: int) -> None:
        self._conditional_depth = depth
        self._settle_fast_codes()

    @property
    def tiled(self) -> Any:
        """Inside ``wp.launch_tiled``: the block size the user asked for; else None."""
        return self._tiled

    @tiled.setter
    def tiled(self, block_dim: Any) -> None:
        self._tiled = block_dim
        self._settle_fast_codes()

    def _settle_fast_codes(self) -> None:
        plain = not self._conditional_depth and self._tiled is None
        self.fast_codes = _user_codes if plain else _NO_CODES
        self.last_code = _last_learnt[0] if plain else None

    def rebind(self) -> Session:
        """This context's session for the calling thread, made and made current now."""
        session = Session(tuple(t for t in self.traces if t.recording))
        _warp.ACTIVE.set(session)
        return session

    # -- delivery -------------------------------------------------------------------------
    # Only to traces still recording: an ended trace's `deliver` drops what it is given
    # (a task spawned inside a trace, or a thread, may outlive it).

    def _emit(self, record: LaunchRecord) -> None:
        if self._conditional_depth:
            record.nested = self.bodies[-1] if self.bodies else True
        if self.deterministic and record.kind != "launch":
            record.internal = True
        # Captured into a graph the eager call makes itself (a solver that captures its own
        # step lazily): the wp.capture_launch of that graph stands for it. An operation on a
        # CUDA stream learns it from before_cuda_op's one question.
        on_cpu = not record.stream or record.device.startswith("cpu")
        if self.eager and on_cpu and _warp.capturing_now(record.device, None):
            record.nested = True
        if record.stream is None and not _warp.capturing_now("cpu", None):
            record.uncaptured = 0  # a CPU operation no CPU capture records (none open, or paused): it ran at once
        internal = record.internal
        for trace in self.traces:
            if not internal or trace.include_warp:
                trace.deliver(record)

    def retract(self, record: LaunchRecord) -> None:
        """Take back a record: the operation failed, so Warp enqueued nothing."""
        for trace in self.traces:
            trace.retract(record)

    def finish(self, record: LaunchRecord, returned: bool) -> None:
        """After Warp's function for ``record`` returned (or raised: nothing was enqueued)."""
        if self.ops and self.ops[-1] is record:
            self.ops.pop()
        if returned:
            self.after_cuda_op(record, record.stream)
        else:
            self.retract(record)

    # -- kernel launches ------------------------------------------------------------------

    def on_cpu_launch(self, kernel: Any, params: Any, adjoint: bool, blocks: bool) -> None:
        """``invoke`` / ``invoke_cpu_blocks``: an eager CPU launch the hook's fast path did
        not take (see :func:`make_cpu_invoke_hook`), and Warp's parameter objects."""
        frozen = list(params)
        if self.pending is not None:
            # A wp.Launch command owns its parameter objects and may change them later.
            frozen = [bytes(p) for p in frozen]
        self._record_launch(kernel, frozen, adjoint, "cpu", None if blocks else 1, None, None)

    def on_cpu_capture_launch(self, bounds_ref: Any, args_ref: Any, adj_ref: Any) -> None:
        """``wp_cpu_launch_kernel``: a CPU launch inside a capture, as the structs Warp built."""
        pending = self.pending
        if adj_ref is None and pending is not None and pending[_KIND] is _LAUNCH and not self.eager:
            frame = pending[_FRAME]
            code = frame.f_code
            block = _forward_blocks.get(pending[_KERNEL])
            if id(code) in self.fast_codes and block is not None:  # plain, from user code seen before
                # The fast path, as the eager one's: the launch bounds and argument struct
                # joined (see struct_block), split when read.
                args = args_ref._obj
                raw = (block[0], False, b"".join((bounds_ref._obj, args)), pending[_MAX_BLOCKS], code,
                       frame.f_lasti, _latest_allocation[0], pending[_BLOCK_DIM], type(args))  # fmt: skip
                self.deliver(raw)
                return
        joined, key = struct_block(bounds_ref._obj, getattr(args_ref, "_obj", None), getattr(adj_ref, "_obj", None))
        params = split_block(joined, key)
        self._record_launch(None, list(params), adj_ref is not None, "cpu", None, None, None)
        if adj_ref is None and pending is not None and pending[_KIND] is _LAUNCH and self.fast_codes is _user_codes:
            # The next forward launch of this kernel from this code takes the fast path.
            kernel, code = pending[_KERNEL], pending[_FRAME].f_code
            if _kind(code) is _USER and not getattr(kernel, "is_generic", True):
                _user_codes[id(code)] = code
                if kernel not in _forward_blocks:
                    _block(kernel, False, tuple([len(p) for p in params]))

    def on_cuda_launch(
        self,
        func: Any,
        dim_size: int,
        max_blocks: int,
        block_dim: int,
        grid_stride: int,
        cluster_dim: int,
        smem_bytes: int,
        kernel_params: Any,
        stream: Any,
        context: Any = None,
    ) -> LaunchRecord:
        """``wp_cuda_launch_kernel``: every CUDA launch, in Warp's ``context``; the bytes
        are read before it runs."""
        kernel, adjoint = self._pending_kernel()
        count = len(kernel_params)
        sizes = [spec.size for spec in _warp.kernel_layout(kernel, adjoint)] if kernel is not None else []
        # The driver reads exactly these bytes from each host pointer when it launches
        # (or copies them into the graph node); parameters past the known layout (Warp's
        # hidden extras for deterministic launches) are kept empty.
        params = [
            ctypes.string_at(kernel_params[i], sizes[i]) if i < len(sizes) and kernel_params[i] else b""
            for i in range(count)
        ]
        handle = _warp.stream_handle(stream)
        cuda = CudaLaunch(_warp.as_address(func), int(dim_size), int(max_blocks), int(block_dim), int(grid_stride),
                          int(cluster_dim), int(smem_bytes))  # fmt: skip
        record = self._record_launch(
            kernel, params, adjoint, _warp.device_of_context(context), int(block_dim), handle, cuda, int(max_blocks)
        )
        self.before_cuda_op(record, handle)
        return record

    def _pending_kernel(self) -> tuple[Any, bool]:
        """``(kernel, adjoint)`` of the ``wp.launch`` or ``wp.Launch`` call in progress."""
        pending = self.pending
        if pending is None:
            return None, False
        if pending[_KIND] is _REPLAY:
            config = _warp.replay_config(pending[_COMMAND])
            return config[0], config[4]
        kernel, inputs, outputs = pending[_KERNEL : _KERNEL + 3]
        return _warp.resolve_overload(kernel, inputs, outputs), bool(pending[_ADJOINT])

    def _record_launch(
        self,
        kernel: Any,
        params: list[Any],
        adjoint: bool,
        device: str | None,
        block_dim: int | None,
        stream: int | None,
        cuda: CudaLaunch | None,
        max_blocks: int = 0,
    ) -> LaunchRecord:
        """The general path: replays, captures, CUDA, and launches Warp makes natively.

        ``block_dim`` None means "as the user asked, resolved by Warp's rule"."""
        pending = self.pending
        replay = False
        if pending is None:
            code, lasti, via, internal = _caller(sys._getframe(1), "")
        elif pending[_KIND] is _REPLAY:
            code, lasti, via, internal = _caller(pending[_FRAME], "Launch.launch")
            replay = True
            cmd_kernel, cmd_device, cmd_block_dim, cmd_max_blocks, _ = _warp.replay_config(pending[_COMMAND])
            kernel = kernel if kernel is not None else cmd_kernel
            device = device or cmd_device
            block_dim = block_dim if block_dim is not None else cmd_block_dim
            max_blocks = max_blocks or cmd_max_blocks
        else:
            intent = pending[_KERNEL:]
            code, lasti, via, internal = _caller(pending[_FRAME], "launch")
            req_kernel, inputs, outputs, req_device, req_stream, req_max_blocks, req_block_dim, _ = intent
            if kernel is None:
                kernel = _warp.resolve_overload(req_kernel, inputs, outputs)
            resolved = _warp.get_device(req_stream.device if req_stream is not None else req_device)
            device = device or str(resolved)
            if block_dim is None:
                block_dim = _warp.resolve_block_dim(resolved, req_block_dim)
            max_blocks = max_blocks or int(req_max_blocks or 0)
            if stream is None:
                stream = _warp.stream_handle(req_stream)
        record = LaunchRecord(
            "launch", kernel, adjoint, params, None, device or "?", block_dim or 1, max_blocks, stream,
            code, lasti, via, internal, next(_sequence), replay, cuda,
        )  # fmt: skip
        if self.tiled is not None:
            record.tile_block_dim = int(self.tiled)
        self._emit(record)
        return record

    def _run(
        self, record: LaunchRecord, call: Callable[..., Any], args: tuple[Any, ...], kwargs: Any, stream: int | None
    ) -> Any:
        """Deliver ``record``, then let Warp do the operation; a failed one is not recorded."""
        self._emit(record)
        if stream:  # a CPU operation has no capture span to take (the commonest while recording on the CPU)
            self.before_cuda_op(record, stream)
        ops = self.ops
        ops.append(record)
        try:
            result = call(*args, **kwargs)
        except BaseException:
            self.retract(record)
            raise
        finally:
            ops.pop()
        if stream:
            self.after_cuda_op(record, stream)
        return result

    def before_cuda_op(self, record: LaunchRecord, stream: int | None) -> None:
        """Before a CUDA operation is enqueued: where does the capture stand?"""
        if not stream:
            return
        if not _warp.stream_is_capturing(stream):
            # Outside the capture: before or after one, while the user paused it, or on a
            # stream it does not record while the device captures on another (Warp sends
            # zero_, fill_ and its native helpers to the current stream, which
            # wp.ScopedCapture(stream=s) does not change): then it runs now, once. With no
            # capture open anywhere (an eager call), no device has capturing streams to
            # ask for. Warp's deterministic launcher sets its buffers up on an uncaptured
            # stream of its own on purpose: once, at capture time.
            if self.deterministic and record.internal:
                record.uncaptured = 0
                return
            capturing = _warp.capturing_streams(record.device) if _warp.capture_open_anywhere() else ()
            record.uncaptured = capturing[0] if capturing else 0
            return
        if self.eager:
            record.nested = True  # captured into a graph the eager call makes itself (see _emit)
        from . import _cuda

        try:
            state = _cuda.capture_state(stream)
        except _cuda.GraphInspectError:
            return  # the cross-check will say the operation was not matched; never break the capture
        if state is not None:
            record.capture = CaptureSpan(state[0], state[1], state[1])  # nothing added yet

    def after_cuda_op(self, record: LaunchRecord, stream: int | None) -> None:
        """After a CUDA operation was enqueued: the nodes it added lie between where the
        capture stood before it and where it stands now (see :class:`CaptureSpan`)."""
        span = record.capture
        if span is None or not stream:
            return
        from . import _cuda

        try:
            state = _cuda.capture_state(stream)
        except _cuda.GraphInspectError:
            state = None
        # Unknown, or in another graph than it started in: no place in the capture.
        record.capture = span._replace(after=state[1]) if state is not None and state[0] == span.graph else None

    def on_capture_resume(self, graph: Any) -> None:
        """Warp resumed a capture into ``graph``: inside ``wp.capture_if`` /
        ``capture_while``, a conditional body (or the parent graph again)."""
        if not self.conditionals:
            return
        record = self.conditionals[-1]
        span, handle = record.capture, _warp.graph_handle(graph)
        if span is not None and handle and handle != span.graph and handle not in span.bodies:
            record.capture = span._replace(bodies=(*span.bodies, handle))

    # -- copies, memsets, native helpers --------------------------------------------------

    def on_copy(self, intent: tuple[Any, ...], frame: Any) -> LaunchRecord | None:
        """``wp.copy``, before Warp copies: the record, delivered; None when Warp will raise
        its own error for these arguments (graphcheck never raises in their place)."""
        dest, src, dest_offset, src_offset, count, stream = intent
        if not (_warp.is_array(dest) and _warp.is_array(src)):
            return None
        try:
            # As Warp reads them (operator.index), so a bad value fails in Warp, unchanged.
            dest_offset, src_offset = operator.index(dest_offset), operator.index(src_offset)
            count = operator.index(count) or int(src.size)
        except Exception:
            return None
        if count <= 0 or dest_offset < 0 or src_offset < 0:
            return None
        # Where Warp sends the copy: the stream given, else the destination's current stream,
        # else (a copy to the host) the source's; the record is on that stream's device.
        device = _warp.array_device(dest)
        handle = _warp.stream_handle(stream)
        if handle is not None:
            device = getattr(stream, "device", device)
        else:
            handle = _warp.device_stream_handle(device)
            if handle is None:
                source = _warp.array_device(src)
                handle = _warp.device_stream_handle(source)
                if handle is not None:
                    device = source
        code, lasti, via, internal = _caller(frame, "copy")
        args_map = {
            "dest": _array_ref(dest),
            "src": _array_ref(src),
            "dest_offset": dest_offset,
            "src_offset": src_offset,
            "count": count,
        }
        record = LaunchRecord(
            "copy", "wp.copy", False, None, args_map, str(device), 0, 0, handle,
            code, lasti, via, internal, next(_sequence), False, None, (count,),
        )  # fmt: skip
        # What host memory the copy reads holds now: a graph copies whatever is there at
        # replay, so contents the call itself writes are compared between the two calls.
        record.host_bytes = _warp.host_contents(src)
        self._emit(record)
        self.before_cuda_op(record, handle)  # finish() takes the other side of its span
        self.ops.append(record)  # until finish()
        return record

    def on_memset(self, original: Callable[..., Any], name: str, arr: Any, args: Any, kwargs: Any) -> Any:
        if self.in_memset or not getattr(arr, "size", 0):
            # A fill inside a memset (zero_ of a strided array fills 0) is the same operation.
            return original(arr, *args, **kwargs)
        value = 0 if name == "zero_" else (args[0] if args else kwargs.get("value"))
        device = _warp.array_device(arr)
        handle = _warp.device_stream_handle(device)
        code, lasti, via, internal = _caller(sys._getframe(2), name)
        record = LaunchRecord(
            "memset", f"array.{name}", False, None, {"dest": _array_ref(arr), "value": _plain(value)},
            str(device), 0, 0, handle, code, lasti, via, internal, next(_sequence), False, None, (int(arr.size),),
        )  # fmt: skip
        self.in_memset = True
        try:
            return self._run(record, original, (arr, *args), kwargs, handle)
        finally:
            self.in_memset = False

    def on_native(self, original: Callable[..., Any], name: str, on_device: bool, args: tuple[Any, ...]) -> Any:
        code, lasti, via, internal = _caller(sys._getframe(2), name)
        # A device helper runs on the current CUDA context's current stream (Warp's
        # WP_CURRENT_STREAM), which need not be the default device's.
        device = _warp.current_cuda_device() if on_device else _warp.get_device("cpu")
        handle = _warp.device_stream_handle(device)  # None for a host helper
        record = LaunchRecord(
            "native", name, False, None, _warp.native_args(name, args), str(device), 0, 0,
            handle, code, lasti, via, internal, next(_sequence), False, None, (),
        )  # fmt: skip
        if not on_device:
            record.host_calls = ((name, {}),)
        return self._run(record, original, args, {}, handle)

    def on_host_call(self, original: Callable[..., Any], name: str, args: tuple[Any, ...]) -> Any:
        """A call of one of Warp's host entry points (``wp_memcpy_h2h``, ``wp_memset_host``,
        ``wp_bsr_transpose_host``...): part of the copy, memset or helper in progress, which
        asked for it; else an operation of its own (a library calling Warp's native
        library directly), kept with Warp's internal operations: what a CPU graph holds
        for it is matched to it, and what it does not hold is reported."""
        try:
            fields = _warp.host_call_fields(name, args)
        except Exception:  # arguments graphcheck cannot read: Warp's call goes on, and asks for nothing known
            fields = {}
        ops = self.ops
        if ops:
            record = ops[-1]
            record.host_calls = (*record.host_calls, (name, fields))
            return original(*args)
        code, lasti, via, _ = _caller(sys._getframe(2), name)
        record = LaunchRecord(
            "native", name, False, None, _warp.native_args(name, args), "cpu", 0, 0, None, code, lasti, via, True,
            next(_sequence), False, None, (),
        )  # fmt: skip
        record.host_calls = ((name, fields),)
        return self._run(record, original, args, {}, None)

    def on_deterministic(self, original: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Any:
        """Warp's deterministic launcher (``launch_deterministic(kernel, hooks, params,
        bounds, device, stream, ...)``): the native work it enqueues around the kernel's
        phase launches (recorded as launches of their own) is one internal operation, so
        the nodes it adds are Warp's own.

        Everything else Warp does in there is internal: the buffers it fills once on an
        uncaptured stream of its own while capturing, the resets it adds to the capture
        only while capturing, its readbacks of counters outside captures."""
        named = dict(zip(("kernel", "hooks", "params", "bounds", "device", "stream"), args))
        named.update(kwargs)
        handle = _warp.stream_handle(named.get("stream"))
        code, lasti, via, _ = _caller(sys._getframe(2), "launch")
        kernel = named.get("kernel")
        record = LaunchRecord(
            "native", "launch_deterministic", False, None, {"kernel": _warp.kernel_name(kernel) if kernel else "?"},
            str(named.get("device")), 0, 0, handle, code, lasti, via, True, next(_sequence), False, None, (),
        )  # fmt: skip

        def launch(*args: Any, **kwargs: Any) -> Any:
            self.deterministic += 1
            try:
                return original(*args, **kwargs)
            finally:
                self.deterministic -= 1

        return self._run(record, launch, args, kwargs, handle)

    def on_cpu_graph_launch(self, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``wp.capture_launch`` of a CPU graph: one operation, whose work Warp replays natively."""
        code, lasti, via, internal = _caller(sys._getframe(2), "capture_launch")
        record = LaunchRecord(
            "native", CPU_GRAPH_LAUNCH, False, None, {}, "cpu", 0, 0, None, code, lasti, via, internal,
            next(_sequence), False, None, (),
        )  # fmt: skip
        if args and _warp.capturing_now("cpu", None):
            # Launched inside a CPU capture: what the inner graph holds is what the outer
            # graph should hold in its place (the cross-check holds one against the other).
            record.host_calls = ((CPU_GRAPH_LAUNCH, {"graph": _inner_graph(args[0])}),)
        return self._run(record, original, args, {}, None)

    def on_conditional(
        self, original: Callable[..., Any], name: str, condition: Any, args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        """``wp.capture_if`` / ``wp.capture_while``: one record, and its body's operations nested."""
        code, lasti, via, internal = _caller(sys._getframe(2), name)
        device = _warp.array_device(condition)
        # Warp inserts the conditional on the stream= it is given, else the device's current one.
        stream = _conditional_stream(name, args, kwargs)
        handle = _warp.stream_handle(stream) if stream is not None else None
        if handle is None and device is not None:
            handle = _warp.device_stream_handle(device)
        record = LaunchRecord(
            "conditional", f"wp.{name}", False, None, {"condition": _array_ref(condition)},
            str(device) if device is not None else "?", 0, 0, handle, code, lasti, via, internal, next(_sequence),
            False, None, (),
        )  # fmt: skip
        self._emit(record)
        self.before_cuda_op(record, handle)
        self.conditional_depth += 1
        self.conditionals.append(record)
        # Each body the user passed runs under a key (conditional, branch, iteration), so its
        # operations compare with the same body's in another call.
        args, kwargs = _with_bodies(self, record.seq, name, args, kwargs)
        try:
            result = original(condition, *args, **kwargs)
        except BaseException:
            self.retract(record)  # Warp refused it, or a body's error broke the capture: nothing to match
            raise
        finally:
            self.conditional_depth -= 1
            self.conditionals.pop()
        self.after_cuda_op(record, handle)
        return result

    def on_host_sync(self, what: str) -> None:
        """A readback (``array.numpy()``) or ``wp.synchronize*()``: a CUDA capture cannot run one."""
        if self.deterministic:
            return  # Warp's own readback of its deterministic counters (never while capturing)
        code, lasti, _, _ = _caller(sys._getframe(2), what)
        event = HostSync(what, site_of(code, lasti), next(_sequence))
        for trace in self.traces:
            trace.add_host_sync(event)

    def on_remade(self, obj: Any) -> None:
        """A ``wp.Launch`` command's parameter or a struct's field set, or an indexed array
        made: the call re-derives it (see :attr:`LaunchTrace.remade`)."""
        for trace in self.traces:
            trace.add_remade(obj)

    # -- allocations ----------------------------------------------------------------------

    def structure_place(self) -> int:
        """The place in the order of a structure about to be made (see :meth:`on_structure`)."""
        _latest_allocation[0] = place = next(_sequence)
        return place

    def on_structure(self, value: Any, place: int) -> None:
        """A mesh, hash grid, BVH, volume or texture was made: its id (one byte, as the owners'
        walk registers it) and a host texture's texels are allocations of the call, placed
        before the operations that filled it, so two calls' structures are matched by order
        of creation, as their temporaries are."""
        handle = _warp.structure_handle(value)
        if handle is None:
            return
        code, lasti, via, _ = _caller(sys._getframe(2), type(value).__name__)
        site = site_of(code, lasti)
        name, device = type(value).__name__, str(getattr(value, "device", "?"))
        spans = [(handle, handle + 1, name), *_warp.structure_memory(value)]
        for start, end, dtype in spans:
            label = f"{name} on {device}" if dtype == name else f"{name}'s {dtype} texels on {device}"
            allocation = Allocation(start, end, device, place, site, via, "structure", label, dtype)
            for trace in self.traces:
                trace.add_allocation(allocation)

    def on_alloc(self, arr: Any, how: str) -> None:
        """An allocation: ``how`` is ``"allocated"`` (``"uploaded"`` when ``wp.array(data)``
        fills it from host data) or ``"wrapped"`` (host memory Warp aliased)."""
        self.allocations_seen += 1
        if how == "allocated" and self.uploading:
            how = "uploaded"
        span = _warp.array_range(arr)
        if span is None:
            return
        code, lasti, via, _ = _caller(sys._getframe(2), "array")
        site = site_of(code, lasti)
        _latest_allocation[0] = place = next(_sequence)
        allocation = Allocation(
            span[0], span[1], str(arr.device), place, site, via, how, _warp.array_label(arr),
            _warp.dtype_name(arr),
        )  # fmt: skip
        for trace in self.traces:
            trace.add_allocation(allocation)


def _inner_graph(state: Any) -> Any:
    """What a CPU graph launched inside a capture holds (a :class:`graphcheck._warp.CpuGraph`),
    or why it could not be read."""
    address = getattr(state, "value", state)
    try:
        return _warp.read_cpu_state(int(address or 0))
    except (_warp.CpuGraphUnreadable, TypeError, ValueError) as error:
        return f"the graph launched could not be read: {error}"


# The parameters of wp.capture_if / capture_while that take a body, in order.
_BODIES = {"capture_if": ("on_true", "on_false"), "capture_while": ("while_body",)}


def _conditional_stream(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The ``stream=`` of a ``wp.capture_if`` / ``capture_while`` call (after its bodies), or None."""
    at = len(_BODIES.get(name, ()))
    return args[at] if len(args) > at else kwargs.get("stream")


def _with_bodies(
    session: Session, seq: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every body callable wrapped to mark its operations."""
    positional, kwargs = list(args), dict(kwargs)
    for i, branch in enumerate(_BODIES.get(name, ())):
        if i < len(positional):
            positional[i] = _body(session, seq, branch, positional[i])
        elif branch in kwargs:
            kwargs[branch] = _body(session, seq, branch, kwargs[branch])
    return tuple(positional), kwargs


def _body(session: Session, seq: int, branch: str, body: Any) -> Any:
    # A wp.Graph branch is no callable: its operations were recorded when it was captured.
    if not callable(body) or _warp.is_warp_handle(body):
        return body
    iterations = itertools.count()

    def run(*args: Any, **kwargs: Any) -> Any:
        session.bodies.append((seq, branch, next(iterations)))
        try:
            return body(*args, **kwargs)
        finally:
            session.bodies.pop()

    return run


def _on_invoke(session: Session, kernel: Any, params: Any, adjoint: bool, blocks: bool) -> None:
    """Warp's CPU ``invoke`` (``invoke_cpu_blocks`` when ``blocks``) is about to run a
    kernel, while ``session`` records: what ``wp.launch``'s woven call of ``invoke``
    (:data:`LAUNCH_TEST`) did not record. A ``wp.launch`` from user code (a kernel's first
    launch, or any on a Warp without that call) is recorded here as that call records it,
    and its kernel learnt for the next; :meth:`Session.on_cpu_launch` does the rest
    (replays, launches Warp makes itself, bodies of conditionals)."""
    # Only Warp's woven launch and replay call invoke, and they made this context's
    # session this thread's own before setting its pending call.
    pending = session.pending
    if (
        pending is not None
        and pending[_KIND] is _LAUNCH
        and not blocks
        and session.fast_codes is _user_codes  # a plain session: no conditional body, no tiled launch
    ):
        frame = pending[_FRAME]
        code = frame.f_code
        entry = _code_kinds.get(id(code))
        if (entry[1] if entry is not None else _kind(code)) is _USER:
            block = (_backward_blocks if adjoint else _forward_blocks).get(kernel)
            try:
                if block is None:
                    block = _block(kernel, adjoint, tuple([ctypes.sizeof(p) for p in params]))
                kept: Any = b"".join(params)
            except TypeError:  # not a ctypes parameter: the general path's business
                pass
            else:
                if len(kept) != block[1]:
                    kept = tuple([bytes(p) for p in params])
                _user_codes[id(code)] = code  # learnt: its next launches take the fast path
                session.last_code = _last_learnt[0] = code
                raw = (block[0], adjoint, kept, pending[_MAX_BLOCKS], code, frame.f_lasti, _latest_allocation[0])
                session.deliver(raw)
                return
    if not session.owner._is_owned():
        session = session.rebind()
    session.on_cpu_launch(kernel, params, adjoint, blocks)


#: Woven into ``wp.launch`` where it calls Warp's CPU ``invoke`` (see
#: :class:`graphcheck._warp.Recorder`): every eager CPU ``wp.launch`` passes here while a
#: trace is active, so the commonest case, a forward launch of a kernel seen before, from
#: user code seen before, outside conditional bodies and tiled launches, is recorded in
#: ``launch``'s own frame, without a call; anything else goes on to ``invoke``, whose
#: prologue calls :func:`_on_invoke`. The caller is the session's ``last_code`` (one
#: identity test: a loop launches from one function) or is looked up in ``fast_codes``
#: (inline: a solver step launches from many functions in turn), which is empty while the
#: session is not plain; the kernel is one lookup.
#:
#: The record is a tuple of the kernel's id and the caller's code, the parameter block as one
#: ``bytes`` (Warp's parameter objects joined, split again by the sizes held for the
#: kernel when read), and numbers: nothing the cyclic garbage collector traverses once it
#: has seen the tuple, so a long trace does not slow every collection down. The maximum
#: block count is the one the user asked for, kept in the pending call; the place is the
#: latest allocation's (see ``_sequence``).
LAUNCH_TEST = """
not adjoint
and ((_graphcheck_caller_code := _graphcheck_caller.f_code) is _graphcheck_session.last_code
     or _graphcheck_id(_graphcheck_caller_code) in _graphcheck_session.fast_codes)
and (_graphcheck_block := _graphcheck_forward_blocks.get(kernel)) is not None
and len(_graphcheck_kept := _graphcheck_join(params)) == _graphcheck_block[1]
"""
# `max_blocks` is wp.launch's own argument, which no supported Warp rebinds before it
# calls invoke: read there, it is the one the user asked for, without a subscript.
LAUNCH_RECORD = """
_graphcheck_deliver = _graphcheck_session.deliver
_graphcheck_deliver((_graphcheck_block[0], False, _graphcheck_kept, max_blocks, _graphcheck_caller_code,
                     _graphcheck_caller.f_lasti, _graphcheck_latest_allocation[0]))
"""


#: Woven into Warp's CPU ``invoke`` (``blocks``: ``invoke_cpu_blocks``): what the launch
#: site did not record.
CPU_INVOKE_PROLOGUE = """
_graphcheck_session = _graphcheck_active.get()
if _graphcheck_session is not None:
    _graphcheck_on_invoke(_graphcheck_session, kernel, params, adjoint, {blocks})
"""


def make_cpu_invoke_hook(original: Callable[..., Any], blocks: bool) -> Callable[..., Any]:
    """A hook in place of Warp's CPU ``invoke`` (``invoke_cpu_blocks`` when ``blocks``),
    for a Warp whose ``invoke`` cannot take :data:`CPU_INVOKE_PROLOGUE` (other argument names)."""
    active = _warp.ACTIVE

    def hook(kernel: Any, hooks: Any, params: Any, adjoint: bool) -> Any:
        session = active.get()
        if session is not None:
            _on_invoke(session, kernel, params, adjoint, blocks)
        return original(kernel, hooks, params, adjoint)

    return hook


#: What the hooks take from the recorder: the record made at wp.launch's call of invoke, and invoke's prologue.
RECORDER = _warp.Recorder(
    launch_test=" ".join(LAUNCH_TEST.split()),
    launch_record=LAUNCH_RECORD,
    invoke_prologues=(CPU_INVOKE_PROLOGUE.format(blocks=False), CPU_INVOKE_PROLOGUE.format(blocks=True)),
    invoke_hook=make_cpu_invoke_hook,
    woven_globals={
        "_graphcheck_on_invoke": _on_invoke,
        "_graphcheck_id": id,
        "_graphcheck_forward_blocks": _forward_blocks,
        "_graphcheck_join": b"".join,
        "_graphcheck_latest_allocation": _latest_allocation,
    },
)


# -- Starting and stopping ----------------------------------------------------------------
#
# The hooks are in while any trace records anywhere in the process. Each trace says
# whether it records (one attribute, set in one step); `settle` makes the hooks agree
# with the traces that do. Settling is idempotent, so a start or stop an interrupt cut
# short is completed by the next one, and a trace that ended is never delivered to.

_lock = threading.Lock()
_recording: set[LaunchTrace] = set()


def settle() -> None:
    """Install the hooks if a trace records, remove them if none does."""
    with _lock:
        for trace in [t for t in _recording if not t.recording]:
            _recording.discard(trace)
        if _recording:
            _warp.HOOKS.install(RECORDER)
            return
        try:
            _warp.HOOKS.remove()
        except BaseException:
            _warp.HOOKS.remove()  # an interrupt cut the removal short: finish it, then let it through
            raise


class _HooksHeld:
    """Stands in `_recording` for a holder of the hooks (see :func:`hold_hooks`)."""

    recording = True


def hold_hooks() -> Callable[[], None]:
    """Keep the hooks installed between traces until the returned function is called, so
    that traces in a row (a reference call, then its capture) install them once."""
    held = _HooksHeld()
    with _lock:
        _recording.add(held)  # type: ignore[arg-type]
    settle()

    def release() -> None:
        held.recording = False
        settle()

    return release


def start(trace: LaunchTrace) -> Any:
    """Make ``trace`` record in the current context; returns the token :func:`stop` needs."""
    trace.open()
    try:
        with _lock:
            _recording.add(trace)
        settle()
        current = _warp.ACTIVE.get()
        outer = tuple(t for t in current.traces if t.recording) if current is not None else ()
        return _warp.ACTIVE.set(Session((*outer, trace)))
    except BaseException:
        trace.close()
        settle()
        raise


def stop(trace: LaunchTrace, token: Any) -> None:
    """Undo :func:`start`; removes the hooks when no trace is left anywhere."""
    trace.close()  # first: from here on nothing reaches the trace
    try:
        if _warp.HOOKS.checkpoint is not None:
            _warp.HOOKS.checkpoint("stop: trace ended")
        if token is not None:
            try:
                _warp.ACTIVE.reset(token)
            except (ValueError, RuntimeError):
                # The trace ends in another context than it started in (an async generator
                # finalised elsewhere): keep what else records here.
                current = _warp.ACTIVE.get()
                outer = tuple(t for t in current.traces if t.recording) if current is not None else ()
                _warp.ACTIVE.set(Session(outer) if outer else None)
        if _warp.HOOKS.checkpoint is not None:
            _warp.HOOKS.checkpoint("stop: context reset")
    finally:
        settle()

"""A CUDA capture played on Warp's CPU device, for the tests of the session's CUDA bookkeeping.

No driver runs. Every operation is Warp's own, run on its CPU device with graphcheck's
hooks in place; only what CUDA hardware would add is scripted, as the answers of the
leaf questions graphcheck's adapters ask (``graphcheck._warp``, ``graphcheck._cuda``):

- the devices: two CUDA devices, ``cuda:0`` and ``cuda:1``, each with its own context
  and streams, a current stream each, and which of them the current CUDA context is.
  Every array lives on ``cuda:0`` unless a test puts it elsewhere (:meth:`ScriptedCapture.host`
  plays pinned host memory: Warp's CPU device, as it is);
- the captures: which streams capture, into which graph, and where each stands (its
  current dependencies). Each question is answered from that state, as the driver
  answers ``cuStreamIsCapturing`` and ``cuStreamGetCaptureInfo`` (real ``cuda.bindings``
  values, in the tuple shapes the 13.x bindings return), and as Warp's own bookkeeping
  answers which streams its devices capture on;
- where each operation leaves its stream: a test lists the operations Warp enqueues, in
  order (:meth:`ScriptedCapture.adds`, :meth:`ScriptedCapture.escapes`), and the capture
  moves only when Warp really enqueues, in its own native entry points: the CPU device's
  ``memset`` and ``memtile``, ``wp_memcpy_h2h``, ``wp_array_copy_host``,
  ``wp_array_fill_host`` (passed through to Warp, observed), and the stand-ins for the
  entry points only CUDA reaches (``wp_cuda_launch_kernel``, a device helper), each
  behind graphcheck's real hook for it. A question asked before an operation and one
  asked after it therefore get different answers only when they are asked on the right
  side of the enqueue;
- conditional bodies: Warp's CUDA ``capture_if`` / ``capture_while`` resume the capture
  into each body graph with ``capture_resume``; :meth:`ScriptedCapture.resume` calls
  Warp's own ``capture_resume`` (the module global Warp's conditionals call, where
  graphcheck's hook stands while recording) on a paused CPU graph whose ``graph`` holds
  the body's handle, as the driver fills it.

A question the script cannot answer, or an enqueue it did not expect, is kept and named
by :meth:`ScriptedCapture.done` (graphcheck turns a failure in its launch hook into a
warning, so the failure itself may not reach the test).

The same object is the driver graphcheck reads the captured graph through afterwards
(a :class:`tests.recorded_driver.RecordedDriver`): a test builds the graph's nodes from
real ``cuda.bindings`` structs filled from Warp's side of each operation (its arrays'
addresses, the bytes Warp packed), never from the records under test.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import warp as wp
import warp._src.context as warp_context

from tests.internals import _cuda, _session, _warp, cuda_launch_hook, native_hook
from tests.recorded_driver import SUCCESS, RecordedDriver, driver

STREAM = 0x5EED00  # cuda:0's current stream
OTHER_STREAM = 0x5EED80  # another stream of cuda:0
ALLOC_STREAM = 0x5EEDA0  # a third stream of cuda:0 (Warp's deterministic allocation stream)
SECOND_STREAM = 0x5EED40  # cuda:1's current stream
GRAPH, BODY = 0xA000, 0xB000
FUNC, ADJOINT_FUNC = 0x7F00_1000, 0x7F00_2000  # the CUfunctions of a kernel's forward and backward

_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE

_ALLOC, _OP = "allocation", "operation"


class Device:
    """A CUDA device as the script plays it: its name, context, streams and current stream."""

    is_cuda = True

    def __init__(self, name: str, context: int, streams: tuple[int, ...]) -> None:
        self.name = name
        self.context = context
        self.streams = streams
        self.stream = streams[0]

    def __str__(self) -> str:
        return self.name


class ScriptedCapture(RecordedDriver):
    """The hardware's side of a CUDA capture, played on Warp's CPU device (see the module
    docstring: no driver runs).

    Args:
        version: what ``cuDriverGetVersion`` answers.
    """

    def __init__(self, version: int = 13000) -> None:
        super().__init__(version)
        self.devices = {
            "cuda:0": Device("cuda:0", 0xC7A0, (STREAM, OTHER_STREAM, ALLOC_STREAM)),
            "cuda:1": Device("cuda:1", 0xC7A1, (SECOND_STREAM,)),
        }
        self.current = self.devices["cuda:0"]  # the device of the current CUDA context
        self.at: dict[int, tuple[int, tuple[int, ...]]] = {}  # capturing stream -> (graph, where it stands)
        self._stood: dict[int, tuple[int, ...]] = {}  # graph -> where its capture stood when left
        self.enqueues: deque[tuple[str, int, int | None, tuple[int, ...] | None]] = deque()
        self.elsewhere = False  # a device the script does not play holds a capture open
        self.asked: list[str] = []  # every question graphcheck asked, in order
        self.wrong: list[str] = []
        self._placed: dict[int, Any] = {}  # array address -> the device it lives on (default cuda:0)
        self._paused: Any = None  # the paused CPU graph Warp's capture_resume runs on (see resume)

    # -- the script ---------------------------------------------------------------------------

    def begin(self, stream: int = STREAM, graph: int = GRAPH, at: tuple[int, ...] | None = None) -> None:
        """``stream`` captures into ``graph`` from here on (``wp.capture_begin``, or
        ``wp.capture_resume`` after :meth:`pause`), standing at ``at`` (default: where the
        graph's capture stood when paused; nowhere for a new one)."""
        self.at[stream] = (graph, tuple(at) if at is not None else self._stood.get(graph, ()))

    def pause(self, stream: int = STREAM) -> None:
        """``stream`` stops capturing (``wp.capture_pause``); :meth:`begin` or :meth:`resume` goes on."""
        graph, at = self.at.pop(stream)
        self._stood[graph] = at

    def adds(self, *at: int, stream: int = STREAM, graph: int | None = None) -> None:
        """The next operation Warp enqueues adds nodes to ``stream``'s capture, which then
        stands at ``at`` (the node or nodes it added last), in ``graph`` (default: the
        graph it captures into)."""
        self.enqueues.append((_OP, stream, graph, tuple(at)))

    def escapes(self) -> None:
        """The next operation Warp enqueues goes to a stream that does not capture: it adds nothing."""
        self.enqueues.append((_OP, 0, None, None))

    def allocates(self, *at: int, stream: int = STREAM) -> None:
        """The next allocation Warp makes adds a mem-alloc node to ``stream``'s capture (an
        allocation with no such line adds none)."""
        self.enqueues.append((_ALLOC, stream, None, tuple(at)))

    def host(self, *arrays: Any) -> None:
        """These arrays play pinned host memory: they live on Warp's CPU device, as they do."""
        for arr in arrays:
            self._placed[arr.ptr] = arr.device

    def place(self, device: str, *arrays: Any) -> None:
        """These arrays live on ``device`` (every array lives on ``cuda:0`` unless placed)."""
        for arr in arrays:
            self._placed[arr.ptr] = self.devices[device]

    @contextlib.contextmanager
    def current_stream(self, stream: int, device: str = "cuda:0") -> Iterator[None]:
        """``device``'s current stream is ``stream`` inside the block (``wp.ScopedStream``)."""
        playing = self.devices[device]
        saved, playing.stream = playing.stream, stream
        try:
            yield
        finally:
            playing.stream = saved

    def resume(self, graph: int, *, stream: int = STREAM, inserted: tuple[int, ...] | None = None) -> None:
        """What Warp's CUDA ``capture_if`` / ``capture_while`` do to enter a body graph (and,
        with the parent's handle, to come back): the capture on ``stream`` resumes into
        ``graph``, where it stood when it left it (nowhere, for a new body), by Warp's own
        ``capture_resume``, the module global Warp's conditionals call.

        Args:
            inserted: where the parent graph stands once Warp inserted the conditional
                (its handle-setting kernel and node), before it resumes into the first body.
        """
        if stream in self.at:
            left, at = self.at[stream]
            self._stood[left] = inserted if inserted is not None else at
        self.at[stream] = (graph, self._stood.get(graph, ()))
        if self._paused is None:
            wp.capture_begin(device="cpu")
            self._paused = warp_context.capture_pause(device="cpu")
        # The handle the driver gives the body graph; a CPU graph resumes without reading it.
        self._paused.graph = ctypes.c_void_p(graph)
        try:
            warp_context.capture_resume(self._paused)
            warp_context.capture_pause(device="cpu")
        finally:
            self._paused.graph = None

    def native_work(self) -> None:
        """Warp enqueues native work graphcheck has no hook on (deterministic mode's
        sort-reduce): it moves the capture as any other enqueue."""
        self._enqueued(_OP)

    def done(self) -> None:
        """Assert that nothing went wrong and every enqueue the script holds happened."""
        assert not self.wrong, self.wrong
        left = [f"{kind} on {stream:#x}" for kind, stream, _, _ in self.enqueues]
        assert not left, f"Warp enqueued fewer operations than the script holds; left: {left}"

    def close(self) -> None:
        """End the paused CPU graph :meth:`resume` used, if any."""
        if self._paused is not None:
            paused, self._paused = self._paused, None
            warp_context.capture_resume(paused)
            wp.capture_end(device="cpu")

    # -- Warp's native entry points ---------------------------------------------------------

    def _enqueued(self, kind: str) -> None:
        """Warp enqueued an operation (or an allocation): its stream's capture moves as scripted."""
        if kind == _ALLOC:
            if self.enqueues and self.enqueues[0][0] == _ALLOC:
                _, stream, _, at = self.enqueues.popleft()
                self._move(stream, None, at)
            return
        if not self.enqueues:
            if self.at:
                self.wrong.append(
                    f"Warp enqueued an operation while {self._capturing()} captured; the script holds none"
                )
            return
        expected, stream, graph, at = self.enqueues.popleft()
        if expected != kind:
            self.wrong.append(f"Warp enqueued an {kind} where the script expected an {expected}")
        elif at is not None:
            self._move(stream, graph, at)

    def _move(self, stream: int, graph: int | None, at: tuple[int, ...] | None) -> None:
        if stream not in self.at:
            self.wrong.append(f"the script adds nodes on stream {stream:#x}, which does not capture")
            return
        self.at[stream] = (graph if graph is not None else self.at[stream][0], at or ())

    def _capturing(self) -> str:
        return ", ".join(f"{s:#x}" for s in self.at) or "no stream"

    def observe(self, kind: str, native: Callable[..., Any]) -> Callable[..., Any]:
        """``native`` (Warp's own), passed through, telling the script it enqueued."""

        def call(*args: Any) -> Any:
            result = native(*args)
            self._enqueued(kind)
            return result

        return call

    def launch_native(self, fails: bool = False) -> Callable[..., int]:
        """Stands for Warp's native ``wp_cuda_launch_kernel`` (it would enqueue on the GPU):
        0 and an enqueue, or 1 and none (Warp raises its own error)."""

        def wp_cuda_launch_kernel(*args: Any) -> int:
            if fails:
                return 1
            self._enqueued(_OP)
            return 0

        return wp_cuda_launch_kernel

    def launch(
        self,
        kernel: Any,
        dim: Any,
        inputs: list[Any],
        *,
        adjoint: bool = False,
        adj_inputs: list[Any] | None = None,
        block_dim: int = 256,
        replay: bool = False,
        tiled: int | None = None,
        device: str = "cuda:0",
        stream: int | None = None,
        fails: bool = False,
    ) -> Any:
        """Launch ``kernel`` as Warp's CUDA path would, through graphcheck's hook around
        ``wp_cuda_launch_kernel``, in ``device``'s context, on ``stream`` (default: its
        current stream).

        Warp packs the parameters (``wp.launch(..., record_cmd=True)`` on the CPU: the same
        bounds and argument structs a CUDA launch passes); the launch is pending as
        ``wp.launch`` leaves it (``Launch.launch`` with ``replay``, also ``launch_tiled``
        with ``tiled``, the block size asked for), as graphcheck's prologues woven into
        them set it (Warp's CPU launch never reaches the CUDA hook); the hook is called
        with Warp's native arguments, the parameter block as ``(void*)[]`` of the packed
        structs.

        Returns:
            The ``wp.Launch`` command holding the parameters (keep it alive while its
            bytes are read).
        """
        cmd = wp.launch(
            kernel, dim=dim, inputs=inputs, adjoint=adjoint, adj_inputs=adj_inputs or [], device="cpu", record_cmd=True
        )
        session = _warp.current_session()
        caller = sys._getframe(1)
        if replay:
            session.pending = (_warp.REPLAY, caller, cmd)
        else:
            # (LAUNCH, caller, kernel, inputs, outputs, device, stream, max_blocks, block_dim, adjoint)
            session.pending = (_warp.LAUNCH, caller, kernel, inputs, [], "cpu", None, 0, block_dim, adjoint)
        if tiled is not None:
            session.tiled = tiled
        playing = self.devices[device]
        hook = cuda_launch_hook(self.launch_native(fails))
        kernel_params = (ctypes.c_void_p * len(cmd.params))(*[ctypes.addressof(p) for p in cmd.params])
        func = ADJOINT_FUNC if adjoint else FUNC
        on = stream if stream is not None else playing.stream
        try:
            hook(playing.context, func, int(cmd.bounds.size), 0, block_dim, 1, 1, 0, kernel_params, on, None)
        finally:
            session.pending = None
            if tiled is not None:
                session.tiled = None
        return cmd

    def device_helper(self, name: str) -> Callable[..., Any]:
        """Warp's device helper ``wp_<name>_device`` as Warp's CUDA path calls it: graphcheck's
        hook for it, around Warp's host helper (it does the work on CPU memory, observed)."""
        assert not _warp.hooks_installed(), "take the helper while graphcheck's hooks are out (Warp's own is wanted)"
        host = getattr(warp_context.runtime.core, f"wp_{name}_host")
        return native_hook(f"wp_{name}_device", self.observe(_OP, host), True)

    # -- the answers ------------------------------------------------------------------------------

    def _stream_device(self, stream: int) -> str | None:
        return next((name for name, d in self.devices.items() if stream in d.streams), None)

    def cuStreamIsCapturing(self, stream: Any) -> tuple[Any, ...]:
        self.asked.append(f"cuStreamIsCapturing({int(stream):#x})")
        return SUCCESS, (_ACTIVE if int(stream) in self.at else _NONE)

    def cuStreamGetCaptureInfo(self, stream: Any) -> tuple[Any, ...]:
        self.asked.append(f"cuStreamGetCaptureInfo({int(stream):#x})")
        if int(stream) not in self.at:
            return SUCCESS, _NONE, 0, driver.CUgraph(0), [], [], 0
        graph, deps = self.at[int(stream)]
        return _info(graph, deps)

    def stream_is_capturing(self, handle: int | None) -> bool:
        """What ``graphcheck._warp.stream_is_capturing`` answers (Warp's
        ``wp_cuda_stream_is_capturing``, which asks ``cuStreamIsCapturing``)."""
        if not handle:
            return False
        _, status = self.cuStreamIsCapturing(driver.CUstream(handle))
        return bool(status == _ACTIVE)

    def capturing_now(self, device: str, stream: int | None) -> bool:
        """What ``graphcheck._warp.capturing_now`` answers: the CPU device's own state, as
        it is; a CUDA stream's, from the driver."""
        if device.startswith("cpu"):
            return bool(_REAL["capturing_now"](device, stream))
        return bool(stream) and self.stream_is_capturing(stream)

    def capture_open_anywhere(self) -> bool:
        """What ``graphcheck._warp.capture_open_anywhere`` answers: whether Warp's runtime
        holds a CUDA capture open, on any device."""
        self.asked.append("runtime.captures")
        return bool(self.at) or self.elsewhere

    def capturing_streams(self, device: Any) -> tuple[int, ...]:
        """What ``graphcheck._warp.capturing_streams`` answers: the streams Warp's
        ``device.captures`` holds for the device named."""
        self.asked.append(f"{device}.captures")
        return tuple(s for s in self.at if self._stream_device(s) == str(device))

    def device_stream_handle(self, device: Any) -> int | None:
        """A played device's current stream; Warp's answer for a device of Warp's own."""
        if isinstance(device, Device):
            return device.stream
        return _REAL["device_stream_handle"](device)

    def array_device(self, arr: Any) -> Any:
        """Where an array lives: ``cuda:0`` unless a test put it elsewhere."""
        ptr = getattr(arr, "ptr", None)
        if ptr is None:
            return _REAL["array_device"](arr)
        return self._placed.get(ptr, self.devices["cuda:0"])

    def current_cuda_device(self) -> Device:
        return self.current

    def device_of_context(self, context: Any) -> str | None:
        return next((name for name, d in self.devices.items() if d.context == _warp.as_address(context)), None)


_REAL: dict[str, Any] = {}  # graphcheck's own adapters, for what the script passes through


def _info(graph: int, deps: tuple[int, ...]) -> tuple[Any, ...]:
    # (result, status, capture id, graph, dependencies, edge data, count): the 13.x shape.
    nodes = [driver.CUgraphNode(d) for d in deps]
    return SUCCESS, _ACTIVE, 7, driver.CUgraph(graph), nodes, [driver.CUgraphEdgeData() for _ in deps], len(deps)


def install(monkeypatch: pytest.MonkeyPatch) -> ScriptedCapture:
    """Put a :class:`ScriptedCapture` in the hardware's place (no driver runs): the
    driver graphcheck asks, the devices and streams its adapters see, and observers on
    Warp's CPU entry points that enqueue. Call :meth:`ScriptedCapture.close` when done."""
    script = ScriptedCapture()
    for name in ("capturing_now", "device_stream_handle", "array_device"):
        _REAL.setdefault(name, getattr(_warp, name))
    monkeypatch.setattr(_cuda, "_driver", script)
    monkeypatch.setattr(_cuda, "_version", script.version)
    for name in (
        "stream_is_capturing", "capturing_now", "capture_open_anywhere", "capturing_streams", "device_stream_handle",
        "array_device", "current_cuda_device", "device_of_context",
    ):  # fmt: skip
        monkeypatch.setattr(_warp, name, getattr(script, name))
    cpu = wp.get_device("cpu")
    for name in ("memset", "memtile"):  # the CPU device's (Warp binds them to it when it starts)
        monkeypatch.setattr(cpu, name, script.observe(_OP, getattr(cpu, name)))
    core = warp_context.runtime.core
    for name in ("wp_memcpy_h2h", "wp_array_copy_host", "wp_array_fill_host"):
        monkeypatch.setattr(core, name, script.observe(_OP, getattr(core, name)))
    monkeypatch.setattr(core, "wp_alloc_host", script.observe(_ALLOC, core.wp_alloc_host))
    # While recording, graphcheck's own hooks stand in those places and hand each call to the
    # session with Warp's function: observed there too.
    on_host_call = _session.Session.on_host_call
    enqueuing = {"memset_host", "memtile_host", "memcpy_h2h", "array_copy_host", "array_fill_host"}

    def observed(session: Any, original: Any, name: str, args: tuple[Any, ...]) -> Any:
        return on_host_call(session, script.observe(_OP, original) if name in enqueuing else original, name, args)

    monkeypatch.setattr(_session.Session, "on_host_call", observed)
    return script


def packed_bytes(cmd: Any) -> list[bytes]:
    """The bytes of each parameter Warp packed for a launch: what a kernel node holds."""
    return [bytes(p) for p in cmd.params]

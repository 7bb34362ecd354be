"""A CUDA capture played on Warp's CPU device, for the tests of the session's CUDA bookkeeping.

No driver runs. Every operation is Warp's own, run on its CPU device with graphcheck's
hooks in place; only what a CUDA device would add is scripted:

- the stream Warp enqueues on (:data:`STREAM`; the CPU device has none), and, for an
  operation that stream did not capture, whether Warp held a capture open anywhere (its
  runtime's ``captures``) and, if so, the streams the device was capturing on (its
  ``device.captures``);
- the driver's answers about that stream, in the order graphcheck asks them:
  ``cuStreamIsCapturing`` (what Warp's ``wp_cuda_stream_is_capturing`` asks) and
  ``cuStreamGetCaptureInfo``, each a real ``cuda.bindings`` value (``CUresult``,
  ``CUstreamCaptureStatus``, ``CUgraph``, ``CUgraphNode``, ``CUgraphEdgeData``) in the
  tuple shape the 13.x bindings return. A question the script did not expect fails the
  operation that asked it (graphcheck's launch hook turns that into a warning), and
  :meth:`ScriptedCapture.done` names it;
- for a kernel launch, Warp's native ``wp_cuda_launch_kernel`` (it would enqueue on the
  GPU): :func:`cuda_launch` calls graphcheck's hook around it as Warp's CUDA launch path
  does, with the parameter block Warp packed for the launch (``record_cmd=True`` packs
  without running). Warp's CPU launch never reaches that hook, so the helper sets the
  call in progress itself, as graphcheck's prologues woven into ``wp.launch``,
  ``Launch.launch`` and ``launch_tiled`` set it.

The same object is the driver graphcheck reads the captured graph through afterwards
(a :class:`tests.recorded_driver.RecordedDriver`): a test builds the graph's nodes from
real ``cuda.bindings`` structs filled from Warp's side of each operation (its arrays'
addresses, the bytes Warp packed), never from the records under test.
"""

from __future__ import annotations

import ctypes
import sys
from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest
import warp as wp

from tests.internals import _cuda, _warp, cuda_launch_hook
from tests.recorded_driver import SUCCESS, RecordedDriver, driver

STREAM = 0x5EED00  # the stream Warp enqueues on
OTHER_STREAM = 0x5EED80  # another stream of the same device
GRAPH, BODY = 0xA000, 0xB000
FUNC, ADJOINT_FUNC = 0x7F00_1000, 0x7F00_2000  # the CUfunctions of a kernel's forward and backward

_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


class ScriptedCapture(RecordedDriver):
    """The driver's answers about a capturing stream, in the order graphcheck asks them,
    and the graph it captured (see the module docstring: no driver runs).

    Build the script with :meth:`op` (an operation the capture records), or with
    :meth:`before` and :meth:`after` for operations that nest; :meth:`uncaptured` for
    one the stream did not capture.
    """

    def __init__(self, version: int = 13000) -> None:
        super().__init__(version)
        self.answers: deque[tuple[str, int, tuple[Any, ...]]] = deque()
        self.asked = 0
        self.wrong: list[str] = []

    # -- the script ---------------------------------------------------------------------------

    def before(self, graph: int, deps: tuple[int, ...] = (), stream: int = STREAM) -> None:
        """Before an operation: the stream is capturing into ``graph``, next to ``deps``."""
        self.answers.append(("cuStreamIsCapturing", stream, (SUCCESS, _ACTIVE)))
        self.answers.append(("cuStreamGetCaptureInfo", stream, _info(graph, deps)))

    def after(self, graph: int, deps: tuple[int, ...], stream: int = STREAM) -> None:
        """After an operation: the stream stands at ``deps`` (the nodes it added, or
        ``before``'s own when it added none)."""
        self.answers.append(("cuStreamGetCaptureInfo", stream, _info(graph, deps)))

    def op(self, graph: int, before: tuple[int, ...], after: tuple[int, ...], stream: int = STREAM) -> None:
        """One operation the capture records, from ``before`` to ``after``."""
        self.before(graph, before, stream)
        self.after(graph, after, stream)

    def uncaptured(self, stream: int = STREAM, capturing: tuple[int, ...] = (), elsewhere: bool = False) -> None:
        """An operation on a stream that is not capturing, while its device captures on
        the ``capturing`` streams (none: a paused capture, or none open at all) and, with
        ``elsewhere``, another device captures (Warp then holds a capture open)."""
        self.answers.append(("cuStreamIsCapturing", stream, (SUCCESS, _NONE)))
        self.answers.append(("runtime.captures", 0, bool(capturing) or elsewhere))
        if capturing or elsewhere:
            self.answers.append(("device.captures", 0, capturing))

    def done(self) -> None:
        """Assert that graphcheck asked every question the script holds."""
        assert not self.wrong, self.wrong
        left = [f"{name}({stream:#x})" for name, stream, _ in self.answers]
        assert not left, f"graphcheck asked {self.asked} question(s); the script still holds {left}"

    # -- the answers ----------------------------------------------------------------------------

    def _next(self, name: str, stream: Any) -> tuple[Any, ...]:
        self.asked += 1
        if not self.answers:
            self.wrong.append(f"question {self.asked}, {name}({int(stream):#x}), is past the end of the script")
        else:
            expected, on, answer = self.answers.popleft()
            if (expected, on) == (name, int(stream)):
                return answer
            self.wrong.append(
                f"question {self.asked} was {name}({int(stream):#x}) where the script expected {expected}({on:#x})"
            )
        # Kept for done() too: graphcheck turns a failure in its launch hook into a warning.
        raise AssertionError(self.wrong[-1])

    def cuStreamIsCapturing(self, stream: Any) -> tuple[Any, ...]:
        return self._next("cuStreamIsCapturing", stream)

    def cuStreamGetCaptureInfo(self, stream: Any) -> tuple[Any, ...]:
        return self._next("cuStreamGetCaptureInfo", stream)

    def capture_open_anywhere(self) -> bool:
        """What ``graphcheck._warp.capture_open_anywhere`` answers: whether Warp's runtime
        holds a capture open (on any device), as scripted."""
        return self._next("runtime.captures", 0)

    def capturing_streams(self, device: Any) -> tuple[int, ...]:
        """What ``graphcheck._warp.capturing_streams`` answers: the streams Warp's
        ``device.captures`` holds, as scripted."""
        return self._next("device.captures", 0)

    def stream_is_capturing(self, handle: int | None) -> bool:
        """What ``graphcheck._warp.stream_is_capturing`` answers: the driver's status."""
        if not handle:
            return False
        _, status = self.cuStreamIsCapturing(driver.CUstream(handle))
        return bool(status == _ACTIVE)


def _info(graph: int, deps: tuple[int, ...]) -> tuple[Any, ...]:
    # (result, status, capture id, graph, dependencies, edge data, count): the 13.x shape.
    nodes = [driver.CUgraphNode(d) for d in deps]
    return SUCCESS, _ACTIVE, 7, driver.CUgraph(graph), nodes, [driver.CUgraphEdgeData() for _ in deps], len(deps)


def install(monkeypatch: pytest.MonkeyPatch) -> ScriptedCapture:
    """Put a :class:`ScriptedCapture` in the driver's place (no driver runs): the CPU
    device's operations go to :data:`STREAM`, and what graphcheck asks about its
    capture is answered from the script."""
    script = ScriptedCapture()
    monkeypatch.setattr(_cuda, "_driver", script)
    monkeypatch.setattr(_cuda, "_version", script.version)
    monkeypatch.setattr(_warp, "device_stream_handle", lambda device: STREAM)
    monkeypatch.setattr(_warp, "stream_is_capturing", script.stream_is_capturing)
    monkeypatch.setattr(_warp, "capture_open_anywhere", script.capture_open_anywhere)
    monkeypatch.setattr(_warp, "capturing_streams", script.capturing_streams)
    return script


def resumed(graph: int) -> None:
    """What graphcheck's hook on Warp's ``capture_resume`` tells the session when
    ``wp.capture_if`` / ``capture_while`` resumes the capture into ``graph`` (on the CPU
    Warp runs the body eagerly and resumes nothing)."""
    session = _warp.current_session()
    session.on_capture_resume(SimpleNamespace(graph=ctypes.c_void_p(graph)))


def cuda_launch(
    kernel: Any,
    dim: Any,
    inputs: list[Any],
    *,
    adjoint: bool = False,
    adj_inputs: list[Any] | None = None,
    block_dim: int = 256,
    replay: bool = False,
    tiled: int | None = None,
    native: Any = None,
) -> Any:
    """Launch ``kernel`` as Warp's CUDA path would, through graphcheck's hook around
    ``wp_cuda_launch_kernel`` (no driver runs: see the module docstring).

    Warp packs the parameters (``wp.launch(..., record_cmd=True)`` on the CPU: the same
    bounds and argument structs a CUDA launch passes); the launch is pending as
    ``wp.launch`` leaves it (``Launch.launch`` with ``replay``, also ``launch_tiled``
    with ``tiled``, the block size asked for); the hook is called with Warp's native
    arguments, the parameter block as ``(void*)[]`` of the packed structs, on
    :data:`STREAM`.

    Args:
        native: stands for Warp's native launch (called by the hook; returns 0 for
            success); default: one that succeeds.

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
    hook = cuda_launch_hook(native or (lambda *args: 0))
    kernel_params = (ctypes.c_void_p * len(cmd.params))(*[ctypes.addressof(p) for p in cmd.params])
    func = ADJOINT_FUNC if adjoint else FUNC
    try:
        hook(None, func, int(cmd.bounds.size), 0, block_dim, 1, 1, 0, kernel_params, STREAM, None)
    finally:
        session.pending = None
        if tiled is not None:
            session.tiled = None
    return cmd


def packed_bytes(cmd: Any) -> list[bytes]:
    """The bytes of each parameter Warp packed for a launch: what a kernel node holds."""
    return [bytes(p) for p in cmd.params]

"""A guard's own ``wp.ScopedCapture``: begun and ended as graphcheck's, never left open.

A front end that patched Warp's capture API (:class:`~graphcheck.AutoGuard`) leaves a
guard's own capture alone (:func:`opening_capture`), and hears of each guard's verdict
(:func:`observe`). Both are per thread: a guard captures in the thread that entered it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import _warp
from .checks import is_capture_error
from .record import LaunchTrace, trace_launches

if TYPE_CHECKING:
    from .guard import GraphGuard
    from .options import CaptureOptions

__all__ = ["begin", "capture_block", "end", "observe", "opening_capture", "prepare_driver", "tell_observers"]


class _Guards(threading.local):
    """This thread's guards at work: how deep inside Warp's capture API they are, and who
    hears of each guard's verdict."""

    def __init__(self) -> None:
        self.opening = 0  # > 0 while a guard begins or ends its wp.ScopedCapture
        self.observers: list[Callable[[GraphGuard], None]] = []


_guards = _Guards()


def opening_capture() -> bool:
    """Whether a guard of this thread is beginning or ending its own capture now: a front end
    that patched ``wp.capture_begin`` (:class:`~graphcheck.AutoGuard`) leaves it alone."""
    return _guards.opening > 0


def observe(callback: Callable[[GraphGuard], None]) -> Callable[[], None]:
    """Call ``callback(guard)`` whenever a guard of this thread has its verdict (before it
    acts on it); returns the function that stops it."""
    _guards.observers.append(callback)
    return lambda: _guards.observers.remove(callback)


def tell_observers(guard: GraphGuard) -> None:
    """Hand ``guard``, which has its verdict, to every observer of this thread."""
    for callback in list(_guards.observers):
        callback(guard)


def begin(device: str, options: CaptureOptions) -> Any:
    """A real ``wp.ScopedCapture`` on ``device``, begun as a guard's own."""
    capture = _warp.scoped_capture(device, **options.scoped_capture())
    _guards.opening += 1
    try:
        capture.__enter__()
    finally:
        _guards.opening -= 1
    return capture


def end(
    device: str,
    capture: Any | None,
    trace: LaunchTrace | None,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: TracebackType | None,
) -> Exception | None:
    """End ``capture`` (as a guard's own; None: beginning it failed) and ``trace``; the error
    ending the capture raised (the capture was invalid), else None. No capture is left open
    either way."""
    _guards.opening += 1
    try:
        if capture is not None:
            capture.__exit__(exc_type, exc, tb)
    except Exception as error:
        return error
    finally:
        _guards.opening -= 1
        if trace is not None:
            trace.__exit__(None, None, None)
        if _warp.capture_in_progress(device):
            _warp.abort_capture(device)
    return None


def capture_block(
    block: Callable[[], Any], device: str, options: CaptureOptions
) -> tuple[Any, LaunchTrace, BaseException | None]:
    """``block`` captured under a trace, Warp's own operations included: the graph (None
    when the capture failed), the trace, and the capture error. The user's own exception
    propagates unchanged."""
    trace = trace_launches(include_warp=True)
    trace.__enter__()
    try:
        capture = begin(device, options)
    except BaseException:
        end(device, None, trace, None, None, None)
        raise
    error: BaseException | None = None
    try:
        block()
    except BaseException as exc:
        error = exc
    ended = end(device, capture, trace, type(error) if error else None, error, error.__traceback__ if error else None)
    error = error or ended
    if error is not None and not is_capture_error(error):
        raise error
    return (capture.graph if error is None else None), trace, error


def prepare_driver() -> None:
    """Load cuda-python's driver bindings before a CUDA capture starts: during the capture
    every operation asks the driver which graph node it made, and first-time set-up does not
    belong inside a capture. Without cuda-python or a driver the capture still runs; the
    cross-check then says the graph could not be read."""
    from . import _cuda

    try:
        _cuda.driver_version()
    except _cuda.GraphInspectError:
        pass

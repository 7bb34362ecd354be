"""A capture Warp could not complete: told apart from the user's own exception
(:func:`is_capture_error`), and turned into a ``capture-error`` with its cure
(:func:`capture_failed`)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .. import _warp
from ..findings import Finding, make_finding
from ..site import CodeKind, Site, site_of

__all__ = ["capture_failed", "is_capture_error", "user_site"]


_MEMPOOL_FIX = (
    "enable the device's memory pool before capturing (wp.set_mempool_enabled(device, True)), so that memory the "
    "call allocates becomes graph-owned; or allocate the buffers once, outside the captured call"
)


_HOST_ARRAY_FIX = (
    "keep a device array on the owner (wp.array(..., device=...), made once) and pass that: Warp uploads a numpy "
    "array passed to wp.launch into a temporary on every eager call, which its CPU capture cannot record; write new "
    "host data into the device array outside the captured call (array.assign, wp.copy)"
)


def capture_failed(error: BaseException, site: Site | None, operations: int) -> Finding:
    """The ``capture-error`` for a capture Warp could not complete, at the user's line.

    Allocating on a CUDA device whose memory pool is off fails inside a capture: the fix
    then is the memory pool, not moving a readback. An error Warp's CPU capture recorder
    raises itself (an ``AttributeError`` on a numpy array passed to ``wp.launch``) is named
    as the capture's failure, with the cure, not left as a traceback from inside Warp.
    """
    text = str(error).strip()
    what = f"the capture failed with {type(error).__name__}"
    values = text.splitlines()[0] if text else type(error).__name__
    in_recorder = _raised_in_capture_machinery(error)
    if in_recorder:
        values = f"Warp's CPU capture recorder raised {type(error).__name__}: {values}"
    if "mempool" in text or "memory pool" in text:
        fix: str | None = _MEMPOOL_FIX
    elif in_recorder and "numpy.ndarray" in text:
        what = f"a numpy array passed to wp.launch: {what}"
        fix = _HOST_ARRAY_FIX
    elif "capture already in progress" in text:
        # Opened inside another capture (a GraphGuard or wp.ScopedCapture within one): no readback is involved.
        fix = (
            "capture one block at a time: end the capture already open on this device (a GraphGuard or "
            "wp.ScopedCapture around this one) before opening another, or guard only the outer one"
        )
    elif isinstance(error, NotImplementedError):
        # Warp cannot capture this operation at all (a CPU capture of a strided copy or
        # fill): its own message says what it does not support.
        fix = f"do this operation outside the captured call, or in a way Warp can capture ({text.splitlines()[0]})"
    else:
        fix = None
    return make_finding(
        "capture-error",
        what,
        index=operations or None,
        site=site,
        captured=text,
        values=values,
        fix=fix,
    )


# Warp's own errors when work inside a capture cannot be captured.
_CAPTURE_ERROR_WORDS = ("capture", "capturing")


def is_capture_error(error: BaseException) -> bool:
    """Whether Warp raised ``error`` because the capture itself failed (raised in Warp's
    own code, saying so, or in Warp's capture recorder), rather than the user's code raising."""
    if not isinstance(error, Exception):
        return False
    if _raised_in_capture_machinery(error):
        return True
    if not isinstance(error, (RuntimeError, NotImplementedError)):
        return False
    text = str(error).lower()
    if not any(word in text for word in _CAPTURE_ERROR_WORDS):
        return False
    code = _raised_in(error)
    return code is not None and _warp.code_kind(code) is CodeKind.WARP


def _raised_in(error: BaseException) -> Any:
    """The code object of the innermost frame ``error`` was raised in, or None."""
    tb = error.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return None if last is None else last.tb_frame.f_code


def _raised_in_capture_machinery(error: BaseException) -> bool:
    code = _raised_in(error)
    return code is not None and _warp.in_capture_machinery(code)


def user_site(tb: TracebackType | None) -> Site | None:
    """The last of the user's lines in a traceback: where a failed capture is reported."""
    site = None
    while tb is not None:
        if _warp.code_kind(tb.tb_frame.f_code) is CodeKind.USER:
            site = site_of(tb.tb_frame.f_code, tb.tb_lasti)
        tb = tb.tb_next
    return site

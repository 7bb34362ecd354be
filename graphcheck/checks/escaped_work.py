"""On CUDA, work that escaped the capture: an operation sent to a stream the capture does
not record ran once, at capture time, and is missing from the graph (a ``stream-drift``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..findings import Finding, make_finding
from .vocabulary import Outcome

if TYPE_CHECKING:
    from ..record import LaunchTrace

__all__ = ["check", "uncaptured"]


def uncaptured(captured: LaunchTrace) -> list[Finding]:
    """On CUDA, operations that went to a stream the capture does not record while it ran:
    each ran once, at capture time, and is missing from the graph (a ``stream-drift``).

    Warp sends ``zero_``, ``fill_`` and its native helpers (sort, scan, hash grids) to the
    device's current stream, and ``wp.ScopedCapture(stream=s)`` does not make ``s``
    current; a launch without ``stream=`` goes there too.
    """
    findings = []
    for index, record in enumerate(captured.records):
        if not record.uncaptured or record.stream is None:
            continue
        findings.append(
            make_finding(
                "stream-drift",
                f"{record.kernel} ran outside the capture",
                kernel=record.kernel,
                arg="stream",
                index=index,
                site=record.site,
                reference=record.uncaptured,
                captured=record.stream,
                values=(
                    f"it went to stream {record.stream:#x} while the capture records stream {record.uncaptured:#x}: "
                    "it ran once, at capture time, and a replay does not run it"
                ),
                fix=(
                    "make the capture's stream current for the captured call (with wp.ScopedStream(s): "
                    "with wp.ScopedCapture(): ...), or pass stream=s to every operation that takes one"
                ),
            )
        )
    return findings


def check(captured: LaunchTrace) -> Outcome:
    """:func:`uncaptured` as a stage."""
    return Outcome(uncaptured(captured))

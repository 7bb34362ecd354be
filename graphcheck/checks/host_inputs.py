"""Host memory the captured call writes and then uploads: a ``copy-drift``, since every
replay uploads what the capture call left there."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from ..findings import Finding, make_finding
from ..params import ArrayRef
from ..site import Site

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..operations import LaunchRecord
    from ..record import LaunchTrace

__all__ = ["host_inputs"]


def host_inputs(reference: LaunchTrace, captured: LaunchTrace, buffers: BufferSet | None) -> list[Finding]:
    """One ``copy-drift`` per copy (and call site) whose host source held other bytes in the
    captured call than in the reference call, the call itself having written them.

    A graph copies whatever its host source holds at replay. Staging the owners keep and
    the program fills between replays, outside the captured call, is the intended use: the
    two calls then read the same bytes. Different bytes mean the call computes what it
    uploads (``self.host[:] = f(frame)``), and every replay uploads what the capture call
    left there. A source an operation of the call may write (a launch using it, a copy into
    it) is device state flowing through the graph; a temporary made during the call is
    :func:`~graphcheck.checks.made_per_call.allocations`' business, unless it wraps host memory the owners keep
    (``array.assign(self.host)`` of an owned numpy array).
    """
    earlier = _host_copies(reference)
    findings: list[Finding] = []
    reported: set[Site] = set()
    for key, (index, record) in _host_copies(captured).items():
        pair = earlier.get(key)
        if pair is None or pair[1].host_bytes == record.host_bytes or record.site in reported:
            continue
        ref_index, ref_record = pair
        src, ref_src = record.args.get("src"), ref_record.args.get("src")
        if not isinstance(src, ArrayRef) or src != ref_src:
            continue  # another source (buffer, offset, length) is between_calls.drift()'s business
        made = captured.allocation_at(src.ptr, record.seq)
        if made is not None and not (made.how == "wrapped" and buffers is not None and buffers.find(made.start)):
            continue  # a temporary of the call, not host memory the owners keep: allocations() judges it
        if _written_in(captured, src) or _written_in(reference, ref_src):
            continue
        reported.add(record.site)
        hit = buffers.find(src.ptr) if buffers is not None else None
        name = hit.label if hit is not None else str(src)
        findings.append(
            make_finding(
                "copy-drift",
                f"{record.kernel} from host memory",
                kernel=record.kernel,
                arg="src",
                index=index,
                site=record.site,
                reference=ref_record.host_bytes,
                captured=record.host_bytes,
                values=(
                    f"{name} held other contents when the captured call copied it than in the reference call "
                    f"({_first_difference(ref_record.host_bytes, record.host_bytes, src.dtype)}): the call writes the "
                    "host memory it uploads, and every replay uploads what the capture call left there"
                ),
                detail={"buffer": name, "address": src.ptr, "reference index": ref_index},
                fix=(
                    "write the host staging buffer outside the captured call, before each replay (the captured call "
                    "only copies it), or compute the data on the device inside the call"
                ),
            )
        )
    return findings


def _host_copies(trace: LaunchTrace) -> dict[tuple[Site, int], tuple[int, LaunchRecord]]:
    """``(site, occurrence at that site) -> (index, record)`` of every copy from host memory."""
    out: dict[tuple[Site, int], tuple[int, LaunchRecord]] = {}
    seen: Counter[Site] = Counter()
    for index, record in enumerate(trace.records):
        if record.kind == "copy" and record.host_bytes is not None and not (record.nested or record.internal):
            out[(record.site, seen[record.site])] = (index, record)
            seen[record.site] += 1
    return out


def _written_in(trace: LaunchTrace, src: ArrayRef) -> bool:
    """Whether an operation of the call may write memory ``src`` spans: a launch using it, a
    copy into it, a fill. Device state on Warp's CPU device is host memory too; what the
    call's own operations write differs between the two calls for that reason alone."""
    start, end = src.start, src.start + src.nbytes
    seen: set[tuple[int, bool]] = set()  # launches with the same arguments share one tuple of addresses
    for record in trace.records:
        addresses = record.addresses()
        copy = record.kind == "copy"
        if (id(addresses), copy) in seen:
            continue
        seen.add((id(addresses), copy))  # the records hold the tuple: its id is not reused here
        for address in addresses:
            if address.start < end and start < address.end and not (copy and address.arg == "src"):
                return True
    return False


def _first_difference(a: bytes | None, b: bytes | None, dtype: str) -> str:
    if a is None or b is None or a.startswith(b"digest:") or b.startswith(b"digest:") or len(a) != len(b):
        return "their digests differ"
    first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    try:
        kind = np.dtype(dtype)
    except TypeError:
        return f"first at byte {first}"
    element = first // kind.itemsize
    at = slice(element * kind.itemsize, (element + 1) * kind.itemsize)
    before, after = np.frombuffer(a[at], kind)[0], np.frombuffer(b[at], kind)[0]
    return f"element [{element}]: {before} in the reference call, {after} captured"

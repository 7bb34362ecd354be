"""The kinds of finding: what each means, and the usual fix (:data:`KINDS`).

Each kind has a page of its own under ``docs/findings/`` (``graphcheck explain KIND``
prints it), and the checks that give it are named in :mod:`graphcheck.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["KINDS", "Kind"]


@dataclass(frozen=True)
class Kind:
    """A kind of finding: what it means and the usual fix."""

    name: str
    summary: str
    fix: str


KINDS: Mapping[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "scalar-drift",
            "a scalar argument (or struct field) differs between the reference call and the capture",
            "pass a value that changes between calls through a device array the kernel reads, and update that "
            "array in place outside the graph",
        ),
        Kind(
            "buffer-drift",
            "an array argument points at another buffer, or another offset of one",
            "keep the buffers a captured call uses fixed: swap ping-pong buffers an even number of times per call, "
            "or copy into fixed buffers instead of rebinding names",
        ),
        Kind(
            "per-call-allocation",
            "a buffer made during the call holds host data that dies with the call (with strict_ownership: any "
            "buffer made during the call)",
            "upload host data outside the captured call into a buffer the producer owns (or keep the host staging "
            "array on the producer and copy from it): a replay does not run the upload again",
        ),
        Kind(
            "launch-sequence-drift",
            "operations added, missing, or a different kernel at a position",
            "make the operations a call issues independent of host state: fixed iteration counts, or "
            "wp.capture_if / wp.capture_while for decisions the data makes",
        ),
        Kind(
            "dim-drift",
            "launch dimensions differ",
            "launch with fixed dimensions (the largest needed) and pass the active count through a device array "
            "the kernel checks",
        ),
        Kind(
            "copy-drift",
            "a copy or memset/fill differs (count, offsets, value)",
            "copy fixed ranges and fill with fixed values; keep a value that changes in a device array and copy "
            "from it",
        ),
        Kind(
            "stream-drift",
            "an operation went to another stream",
            "issue captured work on the capture stream, or streams forked from it, on every call",
        ),
        Kind(
            "foreign-buffer",
            "an address lies outside every buffer the owners hold",
            "make the buffer an attribute of the producer, or pass the object that holds it in owners=; a module "
            "global is shared by every producer",
        ),
        Kind(
            "stale-pointer",
            "before replay: an address in the graph no longer lies in a live owned buffer",
            "do not reassign, resize or free a buffer a graph uses: update it in place (assign, wp.copy, fill_), "
            "or capture the graph again",
        ),
        Kind(
            "unrecorded-node",
            "a graph node that no recorded operation created",
            "capture only Warp work in the guarded block, or allow foreign work with allow_foreign_nodes=True",
        ),
        Kind(
            "node-mismatch",
            "a graph node's function, grid, block, shared memory or bytes differ from the record",
            "do not edit a captured graph's nodes; capture it again (and report a bug if nothing edited it)",
        ),
        Kind(
            "capture-error",
            "the capture failed, or on the CPU would fail on CUDA (a sync or readback inside it), or Warp's CPU "
            "graph leaves out or replays wrongly what the call did",
            "move synchronisation and readbacks (.numpy(), wp.synchronize(), printing an array) out of the "
            "captured call",
        ),
        Kind(
            "replay-divergence",
            "replayed, the graph's results differ from eager stepping (verify_replay)",
            "the structural findings alongside say why; with none, the graph replays other work than Warp launched "
            "(the limits page lists the Warp behaviour known to do so): avoid the pattern, or step eagerly there",
        ),
        Kind(
            "shared-buffer",
            "two producers built alike use the same buffer (check_producer)",
            "allocate the buffer per producer, in its constructor: a module-level cache, a class attribute or a "
            "mutable default argument is shared by every producer built alike",
        ),
    )
}

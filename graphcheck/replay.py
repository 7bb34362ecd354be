"""The addresses a captured graph baked: what a replay check holds the owners to.

On the CPU they are the recorded operations' addresses (:meth:`LaunchRecord.addresses`);
on CUDA, for every operation whose graph node was read, the addresses in the node itself
(:meth:`graphcheck.graph.GraphMatch.addresses`). Each is labelled by the owned buffer
holding it at capture; a temporary the capture made is the graph's own (a memory-pool
allocation node on CUDA, retained on the CPU) and stays unlabelled: live however the
owners hold it later. The ids of owned meshes, hash grids, BVHs and volumes passed to
kernels are baked like addresses, and stale once the structure is rebuilt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .operations import Baked, LaunchRecord

if TYPE_CHECKING:
    from .buffers import BufferSet
    from .graph import GraphMatch
    from .record import LaunchTrace

__all__ = ["baked_addresses"]


def baked_addresses(
    trace: LaunchTrace, user: LaunchTrace, owned: BufferSet | None, match: GraphMatch | None
) -> list[Baked]:
    """Every address and structure id the graph captured in ``trace`` baked.

    Args:
        trace: the capture's trace, Warp's own operations included (graph nodes index it).
        user: its user view (the operations a report counts).
        owned: the owners' buffers at capture (None: no owners, nothing labelled).
        match: on CUDA, the graph's nodes matched to ``trace`` (None: the record's addresses).
    """

    def baked(start: int, nbytes: int, index: int, record: LaunchRecord, arg: str) -> Baked:
        graph_owned = user.allocation_at(start, record.seq) is not None
        return Baked.at(start, nbytes, None if graph_owned else owned, index, record, arg)

    out = [
        baked(address.start, address.nbytes, index, record, address.arg)
        for index, record in enumerate(user.records)
        for address in record.addresses()
    ]
    if match is not None:
        # On CUDA the addresses come from the graph's nodes, for the operations whose node was read.
        read = match.addresses()
        records = trace.records
        out = [b for b in out if b.index not in read] + [
            baked(a.start, a.nbytes, a.operation, records[a.record], a.arg)
            for addresses in read.values()
            for a in addresses
        ]
    return out + _baked_handles(user, owned)


def _baked_handles(user: LaunchTrace, owned: BufferSet | None) -> list[Baked]:
    if owned is None:
        return []
    return [
        Baked.at(value, 1, owned, index, record, name)
        for index, record in enumerate(user.records)
        for name, value in record.args.items()
        if owned.handle(value) is not None
    ]

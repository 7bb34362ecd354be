"""The addresses a captured graph baked: what a replay check holds the owners to.

On the CPU they are the recorded operations' addresses (:meth:`LaunchRecord.addresses`);
on CUDA, for every operation whose graph node was read, the addresses in the node itself
(:meth:`graphcheck.graph.GraphMatch.addresses`). Each is labelled by the owned buffer
holding it at capture; a temporary the capture made is the graph's own (a memory-pool
allocation node on CUDA, retained on the CPU) and stays unlabelled: live however the
owners hold it later. The ids of owned meshes, hash grids, BVHs and volumes passed to
kernels are baked like addresses, and stale once the structure is rebuilt.

A graph also bakes bytes by value from objects the owners may change later: the fields of
a ``@wp.struct`` instance passed to a launch, the parameters of a ``wp.Launch`` command
replayed in the capture (:func:`baked_values`); the replay check compares them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import _warp
from ._memo import ByIdentity
from .operations import COMMAND_LAUNCH, Baked, BakedValue, LaunchRecord
from .params import ParamKind, ParamSpec

if TYPE_CHECKING:
    from .buffer_set import BufferSet
    from .graph import GraphMatch
    from .record import LaunchTrace

__all__ = ["baked_addresses", "baked_values"]


def baked_addresses(
    trace: LaunchTrace,
    user: LaunchTrace,
    owned: BufferSet | None,
    match: GraphMatch | None,
    values: Sequence[BakedValue] = (),
) -> list[Baked]:
    """Every address and structure id the graph captured in ``trace`` baked.

    Args:
        trace: the capture's trace, Warp's own operations included (graph nodes index it).
        user: its user view (the operations a report counts).
        owned: the owners' buffers at capture (None: no owners, nothing labelled).
        match: on CUDA, the graph's nodes matched to ``trace`` (None: the record's addresses).
        values: the bytes the graph baked from the owners' structs and commands
            (:func:`baked_values`): an operation that took its arguments from one reaches
            their buffers through it (:attr:`Baked.kept`), as an indexed array's does.
    """
    holders: dict[int, list[tuple[str, str]]] = {}  # operation -> (argument, holder) of its struct or command
    for value in values:
        if value.kind == "launch" and value.record.via != COMMAND_LAUNCH:
            continue  # the same bytes launched otherwise than by replaying the command: not taken from it
        argument = value.record.layout[value.position].name if value.kind == "struct" else ""
        holders.setdefault(value.index, []).append((argument, value.label))
    through: dict[int, list[tuple[str, str]]] = {}

    def baked(start: int, nbytes: int, index: int, record: LaunchRecord, arg: str) -> Baked:
        graph_owned = user.allocation_at(start, record.seq) is not None
        if index not in through:
            through[index] = holders.get(index, []) + _indexed_arrays(record, owned)
        took = [holder for argument, holder in through[index] if _argument_of(arg, argument)]
        return Baked.at(start, nbytes, None if graph_owned else owned, index, record, arg, took)

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


def _argument_of(arg: str, argument: str) -> bool:
    """Whether address ``arg`` (``p.scratch``, ``a.indices[0]``) belongs to ``argument`` (``""``: all)."""
    return not argument or arg == argument or arg.startswith(argument + ".")


def _indexed_arrays(record: LaunchRecord, owned: BufferSet | None) -> list[tuple[str, str]]:
    """``(argument, path)`` of the owners' indexed arrays ``record`` took as arguments: those
    whose index arrays it was handed (``owner.view`` for ``owner.view.indices[0]``)."""
    found: list[tuple[str, str]] = []
    if owned is None:
        return found
    for address in record.addresses():
        argument, dot, _ = address.arg.partition(".indices[")
        if not dot:
            continue
        hit = owned.find(address.start, address.nbytes)
        for path in owned.kept_paths(hit) if hit is not None else ():
            holder, dot, rest = path.rpartition(".indices[")
            if dot and rest.rstrip("]").isdigit():
                found.append((argument, holder))
    return found


def _baked_handles(user: LaunchTrace, owned: BufferSet | None) -> list[Baked]:
    if owned is None:
        return []
    return [
        Baked.at(value, 1, owned, index, record, name)
        for index, record in enumerate(user.records)
        for name, value in record.args.items()
        if owned.handle(value) is not None
    ]


def baked_values(user: LaunchTrace, holders: list[tuple[str, Any]]) -> list[BakedValue]:
    """The bytes the graph captured in ``user`` baked from ``holders`` (``(label, object)``
    of the owners' structs and ``wp.Launch`` commands at capture, see
    :func:`graphcheck.buffers.holders_of`).

    A struct argument whose bytes are those of exactly one owned struct of its type came
    from it; so did a launch whose kernel and parameters are exactly one owned command's.
    Bytes two owned objects share are left out: which one was passed cannot be told.
    """
    if not holders:
        return []
    structs: dict[tuple[type, bytes], list[str]] = {}
    commands: dict[tuple[Any, tuple[bytes, ...]], list[str]] = {}
    for label, obj in holders:
        kind, parts = _warp.baked_by_value(obj)  # type: ignore[misc]
        if kind == "struct":
            structs.setdefault((type(parts[0]), bytes(parts[0])), []).append(label)
        else:
            key = (_warp.replay_config(obj)[0], tuple(bytes(p) for p in parts))
            commands.setdefault(key, []).append(label)
    out: list[BakedValue] = []
    for index, record in enumerate(user.records):
        if record.kind != "launch":
            continue
        params = record.param_bytes
        if commands:
            labels = commands.get((record.kernel_object, params), ())
            if len(labels) == 1:
                out.append(BakedValue(labels[0], "launch", params, index, record, 0))
        if structs:
            layout = record.layout
            for position in _struct_positions(layout):
                if position < len(params):
                    labels = structs.get((layout[position].ctype, params[position]), ())
                    if len(labels) == 1:
                        out.append(BakedValue(labels[0], "struct", (params[position],), index, record, position))
    return out


# The positions of a layout's struct parameters. A step launches a few kernels thousands of
# times (Newton's VBD cloth: 3130 operations), most of them with no struct parameter: each
# layout is looked through once.
_struct_positions: ByIdentity[tuple[ParamSpec, ...], tuple[int, ...]] = ByIdentity(
    lambda layout: tuple(i for i, spec in enumerate(layout) if spec.kind is ParamKind.STRUCT)
)

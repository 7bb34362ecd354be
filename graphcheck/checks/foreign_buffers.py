"""Addresses outside every buffer the owners hold: a ``foreign-buffer``, buffers the call
made (:mod:`~graphcheck.checks.made_per_call`) and Warp's own
(:mod:`~graphcheck.checks.warp_pools`) aside."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..findings import Finding, make_finding
from ..params import Address, ArrayRef
from .vocabulary import Outcome
from .warp_pools import held_by_warp, held_for_the_process

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..operations import Allocation, LaunchRecord
    from ..record import LaunchTrace

__all__ = ["check", "ownership"]


def ownership(captured: LaunchTrace, owned: BufferSet, held: dict[int, Allocation] | None = None) -> list[Finding]:
    """One finding per address range outside the owned buffers (and outside every
    buffer the call made, and every buffer Warp holds for itself: see :func:`held_by_warp`)."""
    # One finding per foreign address: a shared scratch buffer used by three launches
    # is one cause.
    held = held or {}
    groups: dict[int, list[tuple[int, LaunchRecord, Address]]] = {}
    # A step uses the same few buffers in many launches: each range is looked up once, and
    # launches with the same arguments (one shared tuple of addresses) all inside the owned
    # buffers are judged once (whether a range is a temporary depends on when it is used;
    # whether it is owned does not).
    inside: dict[tuple[int, int], bool] = {}
    owned_tuples: set[int] = set()  # ids of address tuples all inside the owned buffers
    made = bool(captured.allocations)
    for index, record in enumerate(captured.records):
        addresses = record.addresses()
        if id(addresses) in owned_tuples:
            continue
        all_owned = True
        for address in addresses:
            key = (address.start, address.nbytes)
            known = inside.get(key)
            if known is None:
                known = inside[key] = address.start in held or owned.find(address.start, address.nbytes) is not None
            if known:
                continue
            all_owned = False
            if made and captured.allocation_at(address.start, record.seq) is not None:
                continue  # a temporary of the call: allocations() judges it
            groups.setdefault(address.start, []).append((index, record, address))
        if all_owned:
            owned_tuples.add(id(addresses))  # the records hold the tuple: its id is not reused here
    findings = []
    for ptr, used in groups.items():
        index, record, address = used[0]
        kernel = record.kernel
        hit = owned.buffer_at(ptr)
        if hit is not None:
            values = f"{ptr:#x} (+{address.nbytes} bytes) starts in {hit.label} but runs past its end"
        else:
            values = (
                f"{ptr:#x} is in none of the {len(owned)} owned buffers"
                if len(owned)
                else f"{ptr:#x} is in no owned buffer: no owners were given or found (pass owners=)"
            )
        if len(used) > 1:
            values += f"; and in {len(used) - 1} more operation{'s' if len(used) > 2 else ''}"
        ref = record.args.get(address.arg)
        findings.append(
            make_finding(
                "foreign-buffer",
                kernel,
                kernel=kernel,
                arg=address.arg,
                index=index,
                site=record.site,
                captured=ref if isinstance(ref, ArrayRef) else ptr,
                values=values,
                detail={"address": ptr, "bytes": address.nbytes},
            )
        )
    return findings


def check(
    captured: LaunchTrace, owned: BufferSet | None, reference: LaunchTrace | None, *, validated_before: bool
) -> Outcome:
    """Every address against the owners' buffers (:func:`ownership`), buffers Warp keeps for
    itself aside."""
    if owned is None:
        return Outcome(skipped=[("ownership", "no owners (pass owners=)"),
                                ("replay", "no owners: replays are not checked")])  # fmt: skip
    if validated_before:
        return Outcome()
    out = Outcome(ran=["ownership"])
    held = held_by_warp(captured, reference)
    if held:
        kept = set(held.values())
        vias = ", ".join(sorted({f"wp.{a.via}" for a in kept}))
        out.notes.append(
            f"{len(kept)} buffer(s) Warp made for itself during the reference call and kept "
            f"({sum(a.nbytes for a in kept)} bytes, under {vias}) are used: Warp holds them, the owners need not"
        )
    foreign = ownership(captured, owned, held)
    if foreign:
        foreign, cached = held_for_the_process(foreign)
        if cached:
            out.notes.append(cached)
    out.findings += foreign
    return out

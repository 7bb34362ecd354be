"""Before a replay: baked addresses the owners no longer hold where they held them at
capture (``stale-pointer``), and values baked from an object the owners have changed since
(``scalar-drift``, ``buffer-drift``, ``dim-drift``). :class:`~graphcheck.CheckedGraph`
runs them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .. import _warp
from ..findings import Finding, make_finding
from ..params import ArrayRef, decode, launch_dim

if TYPE_CHECKING:
    from ..buffer_set import BufferSet
    from ..operations import Baked, BakedValue

__all__ = ["stale_pointers", "stale_values"]


def stale_pointers(
    baked: Iterable[Baked],
    owned: BufferSet,
    kept_now: Callable[[], BufferSet] | None = None,
    held_at: dict[int, str] | None = None,
) -> list[Finding]:
    """A ``stale-pointer`` for every baked address that lay in an owned buffer at capture
    and no longer lies in that same buffer (by its label: the path the step reaches it by),
    or no longer fits in it, unless one of the objects built once that the operation took
    it from (a struct, a ``wp.Launch`` command, an indexed array: :attr:`Baked.kept`) still
    keeps it at the same path: the step reaches it through that object, as the graph does.

    Addresses the owners did not hold at capture were reported then and are not checked.

    Args:
        baked: the graph's addresses.
        owned: the owners' buffers now.
        kept_now: the owners' buffers now, walked for every path to each array
            (:func:`graphcheck.buffers.holders_of`); called at most once, for an address
            not found under its label first.
        held_at: gets, for each address found through such a path, its position in
            ``baked`` -> the path (where to look for it before the next replay).
    """
    stale: dict[int, list[Any]] = {}
    walked: list[BufferSet] = []
    for position, address in enumerate(baked):
        if address.label is None:
            continue  # not owned at capture: reported then
        hit = owned.find(address.ptr, address.nbytes) or owned.buffer_at(address.ptr)
        if (hit is None or hit.label != address.label) and kept_now is not None:
            if not walked:
                walked.append(kept_now())
            path = _still_held(address, walked[0])
            if path is not None:
                if held_at is not None and path != address.label:
                    held_at[position] = path
                continue
        if hit is None:
            problem = f"{address.ptr:#x} ({address.label} at capture) is in no buffer the owners hold now"
        elif address.ptr + address.nbytes > hit.end:
            problem = (
                f"{address.ptr:#x} (+{address.nbytes} bytes) no longer fits in {hit.label} "
                f"({hit.nbytes} bytes now): the buffer was resized"
            )
        elif hit.label != address.label:
            problem = f"{address.ptr:#x} was {address.label} at capture and is {hit.label} now"
        else:
            continue
        # One finding per stale address, however many operations use it.
        entry = stale.setdefault(address.ptr, [address, hit, problem, 0])
        entry[3] += 1
    findings = []
    for address, hit, problem, uses in stale.values():
        more = f"; used by {uses - 1} more operation{'s' if uses > 2 else ''}" if uses > 1 else ""
        findings.append(
            make_finding(
                "stale-pointer",
                address.kernel,
                kernel=address.kernel,
                arg=address.arg,
                index=address.index,
                site=address.site,
                reference=address.label,
                captured=None if hit is None else hit.label,
                values=problem + more,
            )
        )
    return findings


def _still_held(address: Baked, now: BufferSet) -> str | None:
    """The path the step reaches ``address`` by that still holds it whole (one of the objects
    built once that kept it, or else its label, though another path names it first now),
    else None."""
    for path in address.kept or (address.label,):
        span = now.held_at(path) if path is not None else None
        if span is not None and span[0] <= address.ptr and address.ptr + address.nbytes <= span[1]:
            return path
    return None


def stale_values(values: Iterable[BakedValue], holders: Mapping[str, Any]) -> list[Finding]:
    """A finding for every argument whose bytes the graph baked from an object the owners
    hold (a struct's field, a ``wp.Launch`` command's parameter) and that the object now
    holds otherwise: ``scalar-drift`` for a value, ``buffer-drift`` for an array,
    ``dim-drift`` for a command's launch dimensions. The graph replays what it baked.

    Args:
        values: what the graph baked (:func:`graphcheck.replay.baked_values`).
        holders: the owners' structs and commands now, by label.
    """
    findings = []
    for value in values:
        held = _warp.baked_by_value(holders.get(value.label))
        if held is None or held[0] != value.kind:
            continue  # no longer held there: nothing the graph would take from it
        now = tuple(bytes(part) for part in held[1])
        if now == value.baked or len(now) != len(value.baked):
            continue
        record, baked, params = value.record, value.params_with(value.baked), value.params_with(now)
        layout = record.layout
        changed: list[tuple[str, str, Any, Any]] = []
        if params[0] != baked[0]:
            changed.append(("dim-drift", "dim", launch_dim(layout[0], baked[0]), launch_dim(layout[0], params[0])))
        after = decode(layout, params)
        for name, before in decode(layout, baked).items():
            if after.get(name) != before:
                kind = "buffer-drift" if isinstance(before, ArrayRef) else "scalar-drift"
                changed.append((kind, name, before, after.get(name)))
        what = "a wp.Launch command" if value.kind == "launch" else "a struct"
        fix = (
            f"the graph replays what {value.label} held at capture: capture again after changing it, or keep what "
            "changes between replays in a device array the kernel reads"
        )
        for kind, name, before, after_value in changed:
            findings.append(
                make_finding(
                    kind,
                    f"{record.kernel} replays {what} the owners changed since capture:",
                    kernel=record.kernel,
                    arg=name,
                    index=value.index,
                    site=record.site,
                    reference=before,
                    captured=after_value,
                    values=f"{_shown(before)} baked at capture, {_shown(after_value)} in {value.label} now",
                    fix=fix,
                )
            )
    return findings


def _shown(value: Any) -> str:
    return str(value) if isinstance(value, ArrayRef) else repr(value)

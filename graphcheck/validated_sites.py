"""Sites validated before in this process: what a passed validation leaves for the next
capture at the same site.

A site is the code of the call, its object, the line that opened the capture and the
device (:func:`site_key`). Captured again while the owners hold the very same buffers
(:func:`holds_same_buffers`), it skips its reference call, never the comparison: the new
capture is compared with the capture that was validated, and passes only when the two are
the same (else the site is forgotten, and validated in full next time). While the
validated graph lives, the new one bakes the addresses it baked: its replay check serves
the new graph too.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any

from .checked import owned_buffers

if TYPE_CHECKING:
    from .buffer_set import BufferSet
    from .checked import CheckedGraph

__all__ = ["NOTE", "SiteKey", "Validated", "forget", "holds_same_buffers", "lookup", "remember", "site_key"]

#: A site's key in the registry, and a weak reference to its callable's object.
SiteKey = tuple[tuple[Any, ...], Any]

#: What the report of a capture compared with the validated one says first.
NOTE = (
    "validated before in this process, and the owners hold the same buffers: no reference call ran; the "
    "capture was compared with the capture that was validated (revalidate=True runs a reference call)"
)


@dataclass(frozen=True)
class Validated:
    """What a passed validation leaves for the next capture at the same site."""

    producer: Any  # a weak reference to the callable's object
    buffers: tuple[Any, ...] | None  # the owners' buffers then (start, end, label), if known
    graph: Any  # a weak reference to the validated CheckedGraph, whose baked addresses serve again


#: Sites whose validation passed: (code of the call, its object's id, where the guard
#: was made, device) -> what the validation left.
_validated: dict[tuple[Any, ...], Validated] = {}


def site_key(fn: Any, code: CodeType | None, lasti: int, device: str) -> SiteKey | None:
    """The registry key of a capture site and a weak reference to its callable's object
    (None for no callable, or one that takes no weak reference).

    The object (a bound method's instance, or the function) is part of the key: a second
    producer captured at the same line is validated on its own.
    """
    if fn is None:
        return None
    target = getattr(fn, "__self__", fn)
    try:
        ref = weakref.ref(target)
    except TypeError:
        return None
    return (_code_of(fn), id(target), code, lasti, device), ref


def _code_of(fn: Any) -> Any:
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None) or type(fn)


def lookup(key: SiteKey | None) -> Validated | None:
    """What the validation of site ``key`` left, while its producer lives."""
    if key is None:
        return None
    entry = _validated.get(key[0])
    return entry if entry is not None and entry.producer() is key[1]() else None


def holds_same_buffers(entry: Validated, owners: tuple[Any, ...] | BufferSet | None) -> bool:
    """Whether the validated graph lives and ``owners`` hold the very buffers they held then."""
    if entry.graph() is None or entry.buffers is None:
        return False
    return entry.buffers == _signature(owned_buffers(owners))


def remember(key: SiteKey, owned: BufferSet | None, checked: CheckedGraph) -> None:
    """Keep a passed validation of site ``key``: the owners' buffers ``owned`` then, and
    (weakly) its checked graph."""
    if len(_validated) > 1024:  # forget sites whose producer is gone
        for stale in [k for k, v in _validated.items() if v.producer() is None]:
            del _validated[stale]
    _validated[key[0]] = Validated(key[1], _signature(owned), weakref.ref(checked))


def forget(key: SiteKey) -> None:
    """Forget site ``key``: it no longer issues what was validated."""
    _validated.pop(key[0], None)


def _signature(buffers: BufferSet | None) -> tuple[Any, ...] | None:
    return tuple(buffers) if buffers is not None else None

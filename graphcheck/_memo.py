"""Values worked out once and read again on hot paths (recording, reading records back,
the judge, the owners' walk), kept the one way.

A cache past its limit is emptied and fills again: nothing it holds is kept alive for good
(kernels, layouts and classes made on the fly), at the cost of working a few values out
again. A leaf module: no Warp import.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LIMIT", "ByIdentity", "remember"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
V = TypeVar("V")

#: How many entries a cache holds before it is emptied, unless it says otherwise.
LIMIT = 4096


def remember(cache: dict[K, V], key: K, value: V, limit: int = LIMIT) -> V:
    """``cache[key] = value``, the cache emptied first when it holds ``limit`` entries; ``value``."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value
    return value


class ByIdentity(Generic[T, V]):
    """``compute(obj)``, worked out once per object and looked up by the object's id, for
    objects whose own hash is slow (a tuple of parameter specs hashes every field) or that
    compare by value where identity is meant. Each entry holds its object, so the id is not
    reused while the entry stands.
    """

    __slots__ = ("_compute", "_entries", "_limit")

    def __init__(self, compute: Callable[[T], V], limit: int = LIMIT) -> None:
        self._compute = compute
        self._entries: dict[int, tuple[T, V]] = {}
        self._limit = limit

    def __call__(self, obj: T) -> V:
        entry = self._entries.get(id(obj))
        if entry is None or entry[0] is not obj:
            entry = remember(self._entries, id(obj), (obj, self._compute(obj)), self._limit)
        return entry[1]

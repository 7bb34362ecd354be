"""Prove a verdict by values: replay a captured producer against an eager twin.

A "safe" verdict is a claim that replaying the graph does what calling the producer
does. :func:`replay_against_twin` builds two producers alike, captures one (its
reference call is its first step) and steps the other eagerly, then replays and steps
both ``steps`` more times, comparing after each, and returns every array that
differed, by path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import warp as wp

import graphcheck as gc


def arrays_of(obj: Any, path: str = "p", seen: set[int] | None = None, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every Warp array reachable through attributes, lists and dicts, by path."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 6:
        return
    seen.add(id(obj))
    if isinstance(obj, wp.array):
        yield path, obj
        return
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))
    elif hasattr(obj, "__dict__") and not isinstance(obj, type) and type(obj).__module__.startswith("tests"):
        items = list(vars(obj).items())
    elif type(obj).__name__ == "StructInstance" or hasattr(type(obj), "_cls"):
        items = [(k, getattr(obj, k)) for k in type(obj)._cls.vars]
    else:
        return
    for key, value in items:
        yield from arrays_of(value, f"{path}.{key}", seen, depth + 1)


def replay_against_twin(make: Callable[[], Any], steps: int = 3, device: str = "cpu", **capture: Any) -> list[str]:
    """Paths of the arrays whose contents differ between a replayed producer and an eager twin."""
    eager, graphed = make(), make()
    capture.setdefault("on_failure", "ignore")
    checked = gc.capture(graphed.step, device=device, owners=(graphed,), **capture)
    eager.step()  # the capture's reference call was the graphed producer's first step
    differ: list[str] = []
    for _ in range(steps):  # compared after every step: a difference may not last
        checked.launch()
        eager.step()
        wp.synchronize_device(device)
        for (path, a), (_, b) in zip(arrays_of(eager), arrays_of(graphed)):
            if path not in differ and not np.array_equal(a.numpy(), b.numpy(), equal_nan=True):
                differ.append(path)
    return differ

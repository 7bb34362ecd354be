"""graphcheck: prove a Warp capture site is replay-safe before you replay it.

The pipeline, one module each:

1. record (:mod:`graphcheck.record`): every operation Warp enqueues, exactly;
2. compare (:mod:`graphcheck.compare`): the eager reference call against the capture;
3. own (:mod:`graphcheck.buffers`, :mod:`graphcheck.checks`): every address against the
   producer's buffers and the allocations made during the call;
4. inspect and cross-check (:mod:`graphcheck.graph`, :mod:`graphcheck.crosscheck`): the
   captured CUDA graph's nodes against the record;
5. report (:mod:`graphcheck.findings`): one finding per cause; and before each replay,
   :meth:`CheckedGraph.check_replay` (:mod:`graphcheck.guard`).

Example::

    import graphcheck as gc

    checked = gc.capture(sim.step, owners=(sim,))   # raises GraphCheckError if unsafe
    for _ in range(1000):
        checked.launch()

The public names are loaded on first use, so ``import graphcheck`` (and the pytest
plugin, which pytest loads in every session) does not import Warp until it is needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._warp import TESTED_WARP_VERSIONS, UnsupportedWarpError
    from .autoguard import AutoGuard
    from .buffers import Buffer, BufferSet, buffers_of
    from .compare import Difference
    from .findings import KINDS, Allow, Finding, GraphCheckError, GraphCheckWarning, Report
    from .guard import CheckedGraph, GraphGuard, capture, checking_enabled
    from .params import ArrayRef
    from .record import (
        Allocation,
        LaunchRecord,
        LaunchTrace,
        Site,
        assert_pointers_within,
        assert_same_topology,
        trace_launches,
    )

# public name -> the module that defines it
_EXPORTS = {
    "TESTED_WARP_VERSIONS": "_warp",
    "UnsupportedWarpError": "_warp",
    "AutoGuard": "autoguard",
    "Buffer": "buffers",
    "BufferSet": "buffers",
    "buffers_of": "buffers",
    "Difference": "compare",
    "KINDS": "findings",
    "Allow": "findings",
    "Finding": "findings",
    "GraphCheckError": "findings",
    "GraphCheckWarning": "findings",
    "Report": "findings",
    "CheckedGraph": "guard",
    "GraphGuard": "guard",
    "capture": "guard",
    "checking_enabled": "guard",
    "ArrayRef": "params",
    "Allocation": "record",
    "LaunchRecord": "record",
    "LaunchTrace": "record",
    "Site": "record",
    "assert_pointers_within": "record",
    "assert_same_topology": "record",
    "trace_launches": "record",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'graphcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

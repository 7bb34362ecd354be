"""graphcheck: prove a Warp capture site is replay-safe before you replay it.

The pipeline (read :func:`graphcheck.guard.judge` first), one module each:

1. record (:mod:`graphcheck.record`): every operation Warp enqueues, exactly;
2. compare (:mod:`graphcheck.compare`): the eager reference call against the capture;
3. own (:mod:`graphcheck.buffers`, :mod:`graphcheck.checks`): every address against the
   producer's buffers and the allocations made during the call;
4. inspect and cross-check (:mod:`graphcheck.graph`, :mod:`graphcheck.crosscheck`): the
   captured graph's nodes (a CUDA graph's, or the operations a CPU graph will replay)
   against the record;
5. report (:mod:`graphcheck.findings`): one finding per cause; and before each replay,
   :meth:`CheckedGraph.check_replay` (:mod:`graphcheck.checked`, :mod:`graphcheck.replay`).

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
    from ._warp import TESTED_WARP_VERSIONS as TESTED_WARP_VERSIONS, UnsupportedWarpError as UnsupportedWarpError
    from .autoguard import AutoGuard as AutoGuard
    from .buffers import Buffer as Buffer, BufferSet as BufferSet, buffers_of as buffers_of
    from .checked import CheckedGraph as CheckedGraph
    from .compare import Difference as Difference
    from .conformance import check_producer as check_producer
    from .findings import (
        KINDS as KINDS,
        Allow as Allow,
        Finding as Finding,
        GraphCheckError as GraphCheckError,
        GraphCheckWarning as GraphCheckWarning,
        Report as Report,
    )
    from .graph import GraphNode as GraphNode, read_graph as read_graph
    from .guard import (
        GraphGuard as GraphGuard,
        capture as capture,
        checking_enabled as checking_enabled,
    )
    from .operations import Allocation as Allocation, LaunchRecord as LaunchRecord
    from .options import CaptureOptions as CaptureOptions
    from .params import ArrayRef as ArrayRef
    from .record import (
        LaunchTrace as LaunchTrace,
        assert_pointers_within as assert_pointers_within,
        assert_same_topology as assert_same_topology,
        trace_launches as trace_launches,
    )
    from .site import Site as Site
    from .values import verify_replay as verify_replay

# public name -> the module that defines it
_EXPORTS = {
    "TESTED_WARP_VERSIONS": "_warp",
    "UnsupportedWarpError": "_warp",
    "AutoGuard": "autoguard",
    "Buffer": "buffers",
    "BufferSet": "buffers",
    "buffers_of": "buffers",
    "Difference": "compare",
    "check_producer": "conformance",
    "KINDS": "findings",
    "Allow": "findings",
    "Finding": "findings",
    "GraphCheckError": "findings",
    "GraphCheckWarning": "findings",
    "Report": "findings",
    "CheckedGraph": "checked",
    "CaptureOptions": "options",
    "GraphNode": "graph",
    "read_graph": "graph",
    "GraphGuard": "guard",
    "capture": "guard",
    "checking_enabled": "guard",
    "ArrayRef": "params",
    "Allocation": "operations",
    "LaunchRecord": "operations",
    "LaunchTrace": "record",
    "Site": "site",
    "assert_pointers_within": "record",
    "assert_same_topology": "record",
    "trace_launches": "record",
    "verify_replay": "values",
}

__all__ = [
    "KINDS",
    "TESTED_WARP_VERSIONS",
    "Allocation",
    "Allow",
    "ArrayRef",
    "AutoGuard",
    "Buffer",
    "BufferSet",
    "CaptureOptions",
    "CheckedGraph",
    "Difference",
    "Finding",
    "GraphCheckError",
    "GraphCheckWarning",
    "GraphGuard",
    "GraphNode",
    "LaunchRecord",
    "LaunchTrace",
    "Report",
    "Site",
    "UnsupportedWarpError",
    "__version__",
    "assert_pointers_within",
    "assert_same_topology",
    "buffers_of",
    "capture",
    "check_producer",
    "checking_enabled",
    "read_graph",
    "trace_launches",
    "verify_replay",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'graphcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

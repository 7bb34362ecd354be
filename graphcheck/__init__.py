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
"""

from __future__ import annotations

from ._version import __version__
from ._warp import TESTED_WARP_VERSIONS, UnsupportedWarpError
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

__all__ = [
    "KINDS",
    "TESTED_WARP_VERSIONS",
    "Allocation",
    "Allow",
    "ArrayRef",
    "Buffer",
    "BufferSet",
    "CheckedGraph",
    "Difference",
    "Finding",
    "GraphCheckError",
    "GraphCheckWarning",
    "GraphGuard",
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
    "checking_enabled",
    "trace_launches",
]

"""graphcheck: prove a Warp capture site is replay-safe before you replay it.

The pipeline, one module each:

1. record (:mod:`graphcheck.record`): every operation Warp enqueues, exactly;
2. compare (:mod:`graphcheck.compare`): the eager reference call against the capture;
3. own (:mod:`graphcheck.buffers`): every address against the producer's buffers;
4. inspect and cross-check (:mod:`graphcheck.graph`, :mod:`graphcheck.crosscheck`):
   the captured CUDA graph's nodes against the record;
5. report (:mod:`graphcheck.findings`): one finding per cause.
"""

from __future__ import annotations

from ._version import __version__
from ._warp import TESTED_WARP_VERSIONS, UnsupportedWarpError
from .buffers import Buffer, BufferSet, buffers_of
from .compare import Difference
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
    "TESTED_WARP_VERSIONS",
    "Allocation",
    "ArrayRef",
    "Buffer",
    "BufferSet",
    "Difference",
    "LaunchRecord",
    "LaunchTrace",
    "Site",
    "UnsupportedWarpError",
    "__version__",
    "assert_pointers_within",
    "assert_same_topology",
    "buffers_of",
    "trace_launches",
]

"""The host-side checks on one capture site: one module per concern, each turning the
traces of the reference call and the capture into findings.

The pipeline (:func:`graphcheck.guard.judge`) runs each module's ``check`` as a stage,
each giving an :class:`Outcome` (:mod:`~graphcheck.checks.vocabulary`). Where a finding
comes from:

- :mod:`~graphcheck.checks.between_calls`: what differs between the reference call and the
  capture (``launch-sequence-drift``, ``scalar-drift``, ``dim-drift``, ``buffer-drift``,
  ``copy-drift``, ``stream-drift``), with :mod:`~graphcheck.checks.swaps` (buffer swaps that
  carry no state) and :mod:`~graphcheck.checks.host_inputs` (host memory the call writes and
  uploads);
- :mod:`~graphcheck.checks.made_per_call`: buffers and structures made during the call
  (``per-call-allocation``);
- :mod:`~graphcheck.checks.undecodable`: arguments graphcheck cannot decode (notes);
- :mod:`~graphcheck.checks.escaped_work`: on CUDA, work sent outside the capture
  (``stream-drift``);
- :mod:`~graphcheck.checks.cuda_rules`: on the CPU, readbacks and synchronisation a CUDA
  capture cannot run (``capture-error``);
- :mod:`~graphcheck.checks.overloads`: on the CPU, overloads of one generic kernel, which a
  CPU graph replays as one (``capture-error``);
- :mod:`~graphcheck.checks.foreign_buffers`: addresses outside every owned buffer
  (``foreign-buffer``), with :mod:`~graphcheck.checks.warp_pools` (memory Warp holds for
  itself);
- :mod:`~graphcheck.checks.capture_errors`: a capture Warp could not complete
  (``capture-error``), told apart from the user's own exception;
- :mod:`~graphcheck.checks.stale`: before a replay, addresses and values the owners changed
  since capture (``stale-pointer``, and drift of what a struct or a command holds).

What a CPU graph leaves out, and what the captured graph's nodes hold, the graph
cross-check finds (:mod:`graphcheck.crosscheck`).

Each cause gives one finding: differences of one argument at one call site are grouped, a
run of extra or missing operations is one finding, and an address already reported as a
per-call allocation is not reported again as drift or as foreign.
"""

from __future__ import annotations

from .between_calls import drift
from .capture_errors import capture_failed, is_capture_error
from .stale import stale_pointers, stale_values
from .vocabulary import FIRST_CAPTURE, LATER_CAPTURE, REFERENCE_CALL, VALIDATED_BEFORE, VALIDATED_CAPTURE, Outcome

__all__ = [
    "FIRST_CAPTURE", "LATER_CAPTURE", "REFERENCE_CALL", "VALIDATED_BEFORE", "VALIDATED_CAPTURE", "Outcome",
    "capture_failed", "drift", "is_capture_error", "stale_pointers", "stale_values",
]  # fmt: skip

"""Mutations of the code under test, for tests that prove the value checks can fail.

A value check that passes whatever the replay computes proves nothing. Under
:func:`replays_doing_nothing`, every replay of a captured graph does nothing: each value
check of a producer that changes state every step must then fail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import warp as wp

from graphcheck import checked as _checked
from graphcheck._warp import capture as _capture


def _do_nothing(graph, stream=None):
    """A replay that runs nothing."""


@contextlib.contextmanager
def replays_doing_nothing() -> Iterator[list[int]]:
    """For the block's duration, every graph replay does nothing: graphcheck's
    (``CheckedGraph.launch``, a guard's replay of its block) and ``wp.capture_launch``.

    Yields a one-element list: how many replays were skipped (a mutation that skipped
    nothing shows nothing).
    """
    skipped = [0]

    def skip(graph, stream=None):
        skipped[0] += 1

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_checked, "_capture_launch", skip)
        patch.setattr(_capture, "ORIGINAL_CAPTURE_LAUNCH", skip)
        patch.setattr(wp, "capture_launch", skip)
        yield skipped

"""A replay that does nothing, for tests that prove the value checks can fail (source
mutations of the CUDA bookkeeping are tests/mutations.py's).

A value check that passes whatever the replay computes proves nothing. Under
:func:`replays_doing_nothing`, every replay of a captured graph does nothing: each value
check of a producer that changes state every step must then fail
(:func:`fails_when_replays_do_nothing`, used by the value checks' guard tests).

``python -m pytest -p tests.replay_mutations tests`` runs the whole suite so, and lists the
tests that passed although they replayed a graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import warp as wp

from tests.internals import checked, warp_capture


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
        patch.setattr(checked, "_capture_launch", skip)
        patch.setattr(warp_capture, "ORIGINAL_CAPTURE_LAUNCH", skip)
        patch.setattr(wp, "capture_launch", skip)
        yield skipped


def fails_when_replays_do_nothing(check, *args) -> None:
    """Run the value check ``check(*args)`` with every replay doing nothing: it must fail (a
    check that passes then proves nothing by values)."""
    __tracebackhide__ = True
    with replays_doing_nothing() as skipped:
        try:
            check(*args)
        except (AssertionError, ValueError):  # GraphCheckError is an AssertionError
            pass
        else:
            pytest.fail(f"{check.__name__}{args!r} passes with every replay doing nothing: it proves nothing by values")
    assert skipped[0], f"{check.__name__}{args!r} replayed nothing: the mutation did not reach it"


# -- the mutation run: ``python -m pytest -p tests.replay_mutations tests`` ------------------------
# Loaded as a plugin, every test runs with replays doing nothing, and the run ends with the tests
# that passed although they replayed a graph: each is a value check that proves nothing, or a
# test that checks something else (a verdict, a note, a replay that must differ).

_PASSED_WITH_REPLAYS_SKIPPED: list[tuple[str, int]] = []


@pytest.fixture(autouse=True)
def _replays_do_nothing_in_every_test(request):
    with replays_doing_nothing() as skipped:
        yield
    request.node.stash[_SKIPPED] = skipped[0]


_SKIPPED = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    skipped = item.stash.get(_SKIPPED, 0)
    if report.when == "teardown" and skipped and item.stash.get(_PASSED, False):
        _PASSED_WITH_REPLAYS_SKIPPED.append((item.nodeid, skipped))
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


_PASSED = pytest.StashKey[bool]()


def pytest_terminal_summary(terminalreporter):
    passed = _PASSED_WITH_REPLAYS_SKIPPED
    terminalreporter.section(f"passed with every replay doing nothing: {len(passed)}")
    for nodeid, skipped in passed:
        terminalreporter.write_line(f"{nodeid} ({skipped} replays skipped)")

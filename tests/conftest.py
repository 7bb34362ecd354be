import pytest
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.init()


@pytest.fixture(autouse=True)
def no_hook_left_behind():
    """Every test must leave Warp as it found it: no hook installed, no capture open."""
    from tests.internals import _warp

    yield
    assert not _warp.hooks_installed(), "a graphcheck hook was left installed"
    assert not _warp.capture_in_progress("cpu"), "a CPU capture was left open"


@pytest.fixture
def cpu():
    return "cpu"

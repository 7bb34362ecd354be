"""tests_gpu/: real captures on a CUDA device. Every test skips, with the reason, where
Warp sees no CUDA device; ``nox -s gpu`` runs them on a CUDA machine."""

from pathlib import Path

import pytest
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.init()

CUDA = wp.is_cuda_available()


_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (Warp sees none); run `nox -s gpu` on a CUDA machine")
    for item in items:
        if _HERE in Path(str(item.path)).parents:  # this hook sees every item of the session
            item.add_marker(skip)


@pytest.fixture
def device():
    return str(wp.get_cuda_device(0)) if CUDA else "cuda:0"


@pytest.fixture(autouse=True)
def no_hook_left_behind(device):
    from graphcheck import _warp

    yield
    assert not _warp.hooks_installed(), "a graphcheck hook was left installed"
    if CUDA:
        assert not _warp.capture_in_progress(device), "a CUDA capture was left open"

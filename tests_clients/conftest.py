"""Integration tests on real Warp clients (Newton, MuJoCo Warp), on Warp's CPU device.

They need ``newton`` and ``mujoco_warp`` (about 1 GB with their dependencies): ``nox -s clients``
installs them. Without them each module here is skipped.
"""

import pytest
import warp as wp

wp.config.quiet = True


@pytest.fixture(autouse=True)
def _cpu_device():
    with wp.ScopedDevice("cpu"):
        yield

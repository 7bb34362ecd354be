"""The one place the tests reach graphcheck's internals.

Most tests use only ``graphcheck``'s public names. Those that test an adapter or the
recorder directly (the hooks going in and out, the driver's answers, the owners' probe)
import what they need from here, so that moving an internal changes this file, not every
test that uses it.
"""

import sys

from graphcheck import _cuda, _owners_probe, _session, _warp, checked
from graphcheck._owners_probe import OwnersProbe, Unsupported
from graphcheck._warp import capture as warp_capture
from graphcheck._warp.hooks import (
    _make_cuda_launch_hook as cuda_launch_hook,
    _make_deterministic_hook as deterministic_hook,
    _make_native_hook as native_hook,
)

__all__ = [
    "OwnersProbe",
    "Unsupported",
    "_cuda",
    "_owners_probe",
    "_session",
    "_warp",
    "checked",
    "cuda_launch_hook",
    "deterministic_hook",
    "function_name",
    "native_hook",
    "warp_capture",
]


def function_name(qualified: str) -> str:
    """What a site names the function ``qualified`` (``Sim.step``) on this Python: code objects
    name their class from Python 3.11; on 3.10 a site names the function alone (``step``)."""
    return qualified if sys.version_info >= (3, 11) else qualified.rsplit(".", 1)[-1]

"""graphcheck's warning category, in a leaf module: the Warp adapter warns with it too."""

from __future__ import annotations

import os
import sys


class GraphCheckWarning(UserWarning):
    """A warning from graphcheck: a failed check with ``on_failure="warn"``, or a Warp
    release newer than the ones graphcheck was tested with."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` at which ``warnings.warn``, called by the caller of this function,
    names the first frame outside graphcheck: the user's line, however deep graphcheck's
    own calls go (a guard's ``__exit__``, a checked graph's ``launch``, a fallback)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE_DIR, "<graphcheck")):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level

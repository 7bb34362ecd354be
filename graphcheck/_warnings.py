"""graphcheck's warning category, in a leaf module: the Warp adapter warns with it too."""

from __future__ import annotations


class GraphCheckWarning(UserWarning):
    """A warning from graphcheck: a failed check with ``on_failure="warn"``, or a Warp
    release newer than the ones graphcheck was tested with."""

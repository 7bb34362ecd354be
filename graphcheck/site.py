"""Where user code called into Warp: a file, a line, a function; and whose code a frame runs.

A leaf module (no Warp import), so that findings and reports can be made and read on a
Warp-free path.
"""

from __future__ import annotations

import enum
from types import CodeType
from typing import NamedTuple

__all__ = ["UNKNOWN_SITE", "CodeKind", "Site", "site_of"]


class CodeKind(enum.IntEnum):
    """Whose code a frame runs (:func:`graphcheck._warp.code_kind` tells): a site is the
    first frame of the user's, stepping over Warp's and graphcheck's."""

    USER = 0  # the user's, Warp's shipped examples and tests, graphcheck's demo producer
    WARP = 1
    GRAPHCHECK = 2  # graphcheck's modules and the code it generates


class Site(NamedTuple):
    """Where user code called into Warp: the first frame outside Warp and graphcheck.

    Attributes:
        filename: the file's path.
        lineno: the line.
        function: the function's qualified name (``Sim.step``).
    """

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    @property
    def short(self) -> str:
        """``file.py:42``, the file's base name and the line."""
        name = self.filename.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{name}:{self.lineno}"


UNKNOWN_SITE = Site("<unknown>", 0, "<unknown>")

_sites: dict[tuple[CodeType, int], Site] = {}


def site_of(code: CodeType | None, lasti: int) -> Site:
    """The :class:`Site` of instruction offset ``lasti`` in ``code``.

    Recording keeps a frame's ``f_lasti`` (cheap to read) rather than its ``f_lineno``
    (which scans the line table); the line is looked up here, once per place.
    """
    if code is None:
        return UNKNOWN_SITE
    site = _sites.get((code, lasti))
    if site is None:
        line = code.co_firstlineno
        for start, end, number in code.co_lines():
            if start <= lasti < end and number is not None:
                line = number
                break
        site = _sites[(code, lasti)] = Site(code.co_filename, line, getattr(code, "co_qualname", code.co_name))
    return site

"""Where user code called into Warp: a file, a line, a function; and whose code a frame runs.

A leaf module (no Warp import), so that findings and reports can be made and read on a
Warp-free path.
"""

from __future__ import annotations

import enum
from types import CodeType
from typing import NamedTuple

__all__ = ["UNKNOWN_SITE", "CodeKind", "Site", "qualified_name", "site_of"]


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


def qualified_name(code: CodeType) -> str:
    """The qualified name of the function ``code`` belongs to (``Sim.step``); on Python 3.10,
    whose code objects do not name their class, its bare name (``step``)."""
    return getattr(code, "co_qualname", code.co_name)


# (id(code), lasti) -> (code, its Site): keyed by id because hashing a code object hashes
# its contents (microseconds, on every recorded allocation, memset and readback); the code
# is held in the value, so its id is never reused while the entry stands.
_sites: dict[tuple[int, int], tuple[CodeType, Site]] = {}


def site_of(code: CodeType | None, lasti: int) -> Site:
    """The :class:`Site` of instruction offset ``lasti`` in ``code``.

    Recording keeps a frame's ``f_lasti`` (cheap to read) rather than its ``f_lineno``
    (which scans the line table); the line is looked up here, once per place.
    """
    if code is None:
        return UNKNOWN_SITE
    entry = _sites.get((id(code), lasti))
    if entry is None:
        line = code.co_firstlineno
        for start, end, number in code.co_lines():
            if start <= lasti < end and number is not None:
                line = number
                break
        site = Site(code.co_filename, line, qualified_name(code))
        entry = _sites[(id(code), lasti)] = (code, site)
    return entry[1]

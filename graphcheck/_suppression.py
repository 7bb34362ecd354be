"""Suppression comments, read as forgivingly as ``# noqa``: ``# graphcheck: allow[kind, ...]``.

A comment counts on any line of a statement: the whole ``wp.launch(...)`` call as black
splits it, or the whole header of ``with wp.ScopedCapture(...):``. Case does not matter
(``# GRAPHCHECK: ALLOW[SCALAR-DRIFT]``). A comment that starts like one (``# graphcheck:``)
but is not one is said in a note, never ignored: a bare ``# graphcheck: allow`` allows
nothing (it would accept findings its writer never saw, as a blanket ``# noqa`` does), and
the note says to name the kinds.

:func:`places` finds, for one capture, every comment that applies to it and where, and every
comment in the code that ran the capture that applies to nothing (to be reported unused).

A leaf module: it reads source files (``linecache``, ``ast``), and imports no Warp.
"""

from __future__ import annotations

import ast
import linecache
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Comment", "Place", "places"]

#: A comment that addresses graphcheck: ``# graphcheck:`` and what follows, any case.
_DIRECTIVE = re.compile(r"#\s*graphcheck\s*:(?P<rest>.*)$", re.IGNORECASE)
#: What follows ``graphcheck:`` in a well-formed comment: ``allow``, then ``[kinds]`` or nothing.
_ALLOW = re.compile(r"\s*allow\s*(?:\[(?P<kinds>[^\]]*)\])?\s*(?:#.*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Comment:
    """One ``# graphcheck:`` comment.

    Attributes:
        line: its line.
        text: the comment as written, from its ``#``.
        kinds: the kinds it names, lower-cased (empty when malformed).
        malformed: why it is no suppression comment (None: it is one).
    """

    line: int
    text: str
    kinds: tuple[str, ...]
    malformed: str | None = None


@dataclass(frozen=True)
class Place:
    """Where a comment applies.

    Attributes:
        filename: the file.
        comment: the comment.
        lines: the lines whose findings it allows, ``(first, last)``; None for the whole
            capture (a comment on the capture's line); ``(0, -1)`` for none (it applies to no
            statement that issued an operation: reported unused).
    """

    filename: str
    comment: Comment
    lines: tuple[int, int] | None


def places(capture: tuple[str, int] | None, launches: Iterable[tuple[str, int]]) -> list[Place]:
    """Every suppression comment that concerns one capture.

    Args:
        capture: ``(file, line)`` of the line that opened the capture.
        launches: ``(file, line)`` of each of the user's lines that issued an operation.

    Returns:
        One :class:`Place` per comment: those on the capture's statement (header) apply to
        the whole capture, those on a statement that issued an operation to its lines; the
        other comments in the code that ran the capture (the capture's ``with`` block, and
        each function an operation came from) apply to nothing.
    """
    out: list[Place] = []
    seen: set[tuple[str, int]] = set()
    regions: dict[str, set[tuple[int, int]]] = {}

    def add(filename: str, span: tuple[int, int], lines: tuple[int, int] | None) -> None:
        for number, comment in _comments(filename).items():
            if span[0] <= number <= span[1] and (filename, number) not in seen:
                seen.add((filename, number))
                out.append(Place(filename, comment, lines))

    capture_block: tuple[int, int] | None = None
    if capture is not None and _comments(capture[0]):
        header, capture_block = _capture_statement(*capture)
        add(capture[0], header, None)
        regions.setdefault(capture[0], set()).add(capture_block)
    for filename, line in dict.fromkeys(launches):
        if not _comments(filename):
            continue  # the usual case: no comment in the file, nothing parsed
        statement = _statement(filename, line)
        add(filename, statement, statement)
        block = capture_block if capture is not None and filename == capture[0] else None
        if block is None or not block[0] <= line <= block[1]:
            regions.setdefault(filename, set()).add(_function(filename, line))
    for filename, spans in regions.items():
        for span in spans:
            add(filename, span, (0, -1))
    return out


#: Each file's comments and syntax tree, with the ``linecache`` lines they were read from.
_files: dict[str, tuple[list[str], dict[int, Comment], ast.Module | None]] = {}


def _file(filename: str) -> tuple[dict[int, Comment], ast.Module | None]:
    """A file's ``# graphcheck:`` comments by line, and (only where it has some) its syntax tree."""
    lines = linecache.getlines(filename)
    cached = _files.get(filename)
    if cached is not None and cached[0] is lines:  # linecache hands out one list per file while it is current
        return cached[1], cached[2]
    comments: dict[int, Comment] = {}
    for number, text in enumerate(lines, 1):
        if "graphcheck" in text.lower():
            comment = _read(number, text)
            if comment is not None:
                comments[number] = comment
    tree = None
    if comments:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            tree = None
    _files[filename] = (lines, comments, tree)
    return comments, tree


def _read(number: int, text: str) -> Comment | None:
    match = _DIRECTIVE.search(text)
    if match is None:
        return None
    written = text[match.start() :].strip()
    allow = _ALLOW.match(match.group("rest"))
    if allow is None:
        return Comment(number, written, (), "it is not `# graphcheck: allow[kind, ...]`")
    kinds = tuple(k.strip().lower() for k in (allow.group("kinds") or "").split(",") if k.strip())
    # A bare allow would accept every kind there, a finding the comment's writer never saw
    # included: it is said to allow nothing, as linters flag a blanket noqa comment.
    return Comment(number, written, kinds, None if kinds else "it names no kind, so it allows nothing")


def _comments(filename: str) -> dict[int, Comment]:
    return _file(filename)[0]


def _tree(filename: str) -> ast.Module | None:
    return _file(filename)[1]


def _innermost(filename: str, line: int, kinds: tuple[type, ...]) -> ast.AST | None:
    """The smallest node of ``kinds`` whose lines hold ``line``."""
    tree = _tree(filename)
    best: tuple[int, int] | None = None
    found: ast.AST | None = None
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, kinds):
            continue
        first, last = _span(node, line)
        if first <= line <= last and (best is None or (first >= best[0] and last <= best[1])):
            best, found = (first, last), node
    return found


def _span(node: ast.AST | None, line: int) -> tuple[int, int]:
    if node is None:
        return line, line
    return node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def _statement(filename: str, line: int) -> tuple[int, int]:
    """The lines of the simple statement (or a compound statement's header) that holds ``line``."""
    node = _innermost(filename, line, (ast.stmt,))
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and line < body[0].lineno:
        return node.lineno, max(node.lineno, body[0].lineno - 1)  # type: ignore[union-attr]
    return _span(node, line)


def _capture_statement(filename: str, line: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The header of the statement that opened a capture (``with ...:`` up to its body, or
    a whole ``gc.capture(...)`` statement), and the whole statement."""
    node = _innermost(filename, line, (ast.stmt,))
    whole = _span(node, line)
    body = getattr(node, "body", None)
    if isinstance(node, (ast.With, ast.AsyncWith)) and body:
        return (node.lineno, max(node.lineno, body[0].lineno - 1)), whole
    return whole, whole


def _function(filename: str, line: int) -> tuple[int, int]:
    """The lines of the innermost function holding ``line`` (its statement alone at module level)."""
    node = _innermost(filename, line, (ast.FunctionDef, ast.AsyncFunctionDef))
    return _span(node, line) if node is not None else _statement(filename, line)

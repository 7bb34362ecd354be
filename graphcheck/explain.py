"""``graphcheck explain KIND``: a finding kind's documentation page, in the terminal.

The pages are the documentation's own (``docs/findings/<kind>.md``, MyST Markdown); the
wheel ships them inside the package (``graphcheck/_findings``, see pyproject.toml), and a
source checkout reads them where they are. The example code and the outputs a page
includes (``literalinclude``) are written out in place, and Sphinx roles become plain code,
so the page reads as the documentation site shows it.

A module that imports no Warp: explaining a finding needs no GPU and no Warp import.
"""

from __future__ import annotations

import re
from pathlib import Path

from .findings import KINDS, near_kinds, unknown_kind

__all__ = ["ExplainError", "explain", "pages_dir"]

#: Where the pages lie: in an installed wheel, then in a source checkout.
_PLACES = (Path(__file__).with_name("_findings"), Path(__file__).resolve().parents[1] / "docs" / "findings")

_ROLE = re.compile(r"\{(?:func|class|meth|data|attr|mod|doc|download|ref)\}`([^`]*)`")


class ExplainError(ValueError):
    """No page for that kind, or no pages installed: the message says what to do."""


def pages_dir() -> Path:
    """The folder holding the finding pages (``<kind>.md``)."""
    for place in _PLACES:
        if (place / "scalar-drift.md").is_file():
            return place
    raise ExplainError(
        "the finding pages are not installed with graphcheck (a wheel ships them in graphcheck/_findings); "
        "reinstall graphcheck, or read docs/findings in its source"
    )


def explain(kind: str) -> str:
    """The documentation page of a finding kind, as plain text for a terminal.

    Args:
        kind: a finding kind (``"scalar-drift"``, in any case); ``"list"`` or ``""`` gives every kind with its
            summary.

    Raises:
        ExplainError: an unknown kind (with the nearest one), or pages that are not installed.
    """
    if kind.strip().lower() in ("", "list"):
        width = max(map(len, KINDS))
        return "\n".join(f"{name:<{width}}  {k.summary}" for name, k in KINDS.items())
    near = near_kinds(kind)
    if len(near) == 1 and near[0] == kind.strip().lower().replace("_", "-"):
        kind = near[0]  # the kind in another case (SCALAR-DRIFT) or with underscores
    if kind not in KINDS:
        raise ExplainError(unknown_kind(kind) + "; `graphcheck explain list` lists them")
    folder = pages_dir()
    return render(folder / f"{kind}.md")


def render(page: Path) -> str:
    """A MyST page as plain text: included files written out, roles as code, directives unwrapped."""
    out: list[str] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```{literalinclude}"):
            target = line.split(maxsplit=1)[1].strip()
            options: dict[str, str] = {}
            i += 1
            while i < len(lines) and lines[i].startswith(":"):
                name, _, value = lines[i][1:].partition(":")
                options[name] = value.strip()
                i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1  # a caption or body the directive would show: the included text says it all
            out.extend("    " + text if text else "" for text in _included(page.parent / target, options))
        elif line.startswith("```{") and line.rstrip().endswith("}"):  # {note} and the like: keep what they say
            name = line.strip()[4:-1]
            i += 1
            while i < len(lines) and lines[i].startswith(":"):
                i += 1  # the directive's options (a toctree's :hidden:)
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if name != "toctree":
                out.extend(f"{name.capitalize()}: {_plain(text)}" if n == 0 else _plain(text)
                           for n, text in enumerate(body))  # fmt: skip
        else:
            out.append(_plain(line))
        i += 1
    return "\n".join(out).strip() + "\n"


def _plain(line: str) -> str:
    """Sphinx roles as code: ``{func}`graphcheck.capture``` -> ```graphcheck.capture```, a
    download's title only."""
    return _ROLE.sub(lambda m: f"`{re.sub(r' <[^>]*>$', '', m.group(1))}`", line)


def _included(path: Path, options: dict[str, str]) -> list[str]:
    """The lines ``literalinclude`` shows of ``path``: ``start-at``/``start-after``, ``end-before``/``end-at``,
    ``lines`` and ``dedent``, as Sphinx applies them."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if "lines" in options:
        chosen: list[str] = []
        for part in options["lines"].split(","):
            first, _, last = part.strip().partition("-")
            chosen += lines[int(first) - 1 : int(last) if last else int(first)]
        lines = chosen
    for option, after in (("start-at", False), ("start-after", True)):
        if option in options:
            at = next((n for n, text in enumerate(lines) if options[option].strip("\"'") in text), None)
            if at is not None:
                lines = lines[at + after :]
    for option, keep in (("end-before", False), ("end-at", True)):
        if option in options:
            at = next((n for n, text in enumerate(lines) if options[option].strip("\"'") in text), None)
            if at is not None:
                lines = lines[: at + keep]
    while lines and not lines[-1].strip():
        lines = lines[:-1]  # the blank lines before the marker that ends the excerpt
    if "dedent" in options:
        cut = int(options["dedent"] or 0)
        lines = [text[cut:] if text[:cut].strip() == "" else text.lstrip() for text in lines]
    return lines

"""The one rule for the files graphcheck writes: ``--output``, ``--report``, ``--dot`` and
the pytest plugin's ``--graphcheck-report``.

Every such path is checked before anything runs (:func:`check_output_path`), so a mistake
costs one line, not a whole program's run: it must not name a folder, the folder it lies
in must exist or be one graphcheck may create, and the file must be writable. Missing
folders are created when the file is written (:func:`write_output`), as pytest's
``--junit-xml`` does.

A leaf module: it imports neither Warp nor the rest of graphcheck.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["OutputPathError", "check_output_path", "write_output"]


class OutputPathError(ValueError):
    """An output path graphcheck cannot write; the message is one line naming the option and the path."""


def check_output_path(option: str, path: str | os.PathLike[str], base: Path | None = None) -> Path:
    """The path ``option`` names, checked writable before anything runs.

    Args:
        option: the option as the user wrote it (``"--output"``), for the message.
        path: the path given (``~`` expands; relative to ``base``).
        base: what a relative path is relative to (None: the working directory).

    Returns:
        The path, ``~`` expanded and made absolute against ``base`` when given.

    Raises:
        OutputPathError: the path names a folder, lies below a file, or cannot be written.
    """
    given = str(path)
    target = Path(os.path.expanduser(given))
    if base is not None and not target.is_absolute():
        target = base / target
    where = f"cannot write {option} {given}"
    if not given.strip():
        raise OutputPathError(f"{option} needs a file name, got an empty one")
    if target.is_dir():
        raise OutputPathError(f"{where}: it is a folder (name a file in it, e.g. {Path(given) / _example(option)})")
    if target.exists():
        try:
            with open(target, "a"):  # opened to append: nothing it holds is lost before the run ends
                pass
        except OSError as error:
            raise OutputPathError(f"{where}: {error.strerror or error}") from None
        return target
    folder = target.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"{where}: {_shown(folder)} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):  # the same test the write will meet, and nothing left behind
            pass
    except OSError as error:
        raise OutputPathError(f"{where}: cannot create files in {_shown(folder)} ({error.strerror or error})") from None
    return target


def write_output(path: Path, text: str, option: str | None = None) -> None:
    """Write ``text`` to ``path``, creating the folders it lies in.

    Raises:
        OutputPathError: with ``option`` (the option that named the path), when the write
            fails (a full disk, a folder made unwritable since the path was checked); without
            it, the ``OSError``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        if option is None:
            raise
        raise OutputPathError(f"cannot write {option} {path}: {error.strerror or error}") from None


def _example(option: str) -> str:
    return "graph.dot" if "dot" in option else "graphcheck.json"


def _shown(folder: Path) -> str:
    """A folder as the user would name it: relative to the working directory when it lies below it."""
    try:
        return str(folder.relative_to(Path.cwd())) or "."
    except ValueError:
        return str(folder)

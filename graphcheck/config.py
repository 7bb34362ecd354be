"""Project settings from ``[tool.graphcheck]`` in pyproject.toml, for the command and the pytest plugin.

::

    [tool.graphcheck]
    allow = ["scalar-drift", { kind = "foreign-buffer", kernel = "integrate", arg = "x" }]
    replay_check = "always"      # "first", "always" or "never"
    on_failure = "raise"         # "raise", "warn", "log" or "ignore"
    strict_ownership = true
    device = "cpu"

The command reads the pyproject.toml nearest above the working directory, the pytest
plugin the one in pytest's root directory; options given on the command line win.

Importing this module imports neither Warp nor the rest of graphcheck (the pytest plugin
imports it in every session); checking ``allow`` imports the finding kinds when there are any.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._choices import ON_FAILURE, REPLAY_CHECKS

if TYPE_CHECKING:
    from .findings import Allow
    from .options import CaptureOptions

__all__ = ["ConfigError", "Settings", "disabled_by_environment", "find_pyproject", "load", "parse_allow"]

KEYS = ("allow", "replay_check", "on_failure", "strict_ownership", "device")


#: Why a report checked nothing while ``GRAPHCHECK_DISABLE`` is set: its ``skipped`` entry.
DISABLED = ("all checks", "checking disabled by GRAPHCHECK_DISABLE")


def disabled_by_environment() -> bool:
    """Whether ``GRAPHCHECK_DISABLE`` turns checking off: only 1, true, yes or on (any case)
    do; any other value, ``0`` and ``false`` included, leaves checking on."""
    return os.environ.get("GRAPHCHECK_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")


class ConfigError(ValueError):
    """A setting that cannot be used; the message says where it is and what to write instead."""


@dataclass(frozen=True)
class Settings:
    """graphcheck's project settings (the defaults when there is no ``[tool.graphcheck]``).

    Attributes:
        allow: the allowances every validation gets.
        replay_check: when a checked graph's launch checks its baked addresses.
        on_failure: what a failed validation does (the command always reports and exits 1).
        strict_ownership: ask that every buffer be owned.
        device: the default capture device (None: Warp's default device).
        path: the pyproject.toml the settings came from (None: defaults).
    """

    allow: tuple[Allow, ...] = ()
    replay_check: str = "first"
    on_failure: str = "raise"
    strict_ownership: bool = False
    device: str | None = None
    path: Path | None = field(default=None, compare=False)

    def capture_options(self, **overrides: Any) -> CaptureOptions:
        """The settings as :class:`~graphcheck.CaptureOptions`, ``overrides`` over them."""
        from .options import CaptureOptions  # here: the plugin loads this module in every session

        ours = CaptureOptions(self.on_failure, self.allow, self.replay_check, strict_ownership=self.strict_ownership)
        return CaptureOptions.of(ours, **overrides)


def find_pyproject(start: Path) -> Path | None:
    """The pyproject.toml in ``start`` or the nearest folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load(pyproject: Path | None) -> Settings:
    """The ``[tool.graphcheck]`` settings of ``pyproject`` (defaults without the file or the table).

    Raises:
        ConfigError: an unknown key, a value of the wrong type, an unknown finding kind.
    """
    if pyproject is None or not pyproject.is_file():
        return Settings()
    text = pyproject.read_text(encoding="utf-8")
    if "tool.graphcheck" not in text:
        return Settings()  # no need for a TOML reader
    try:
        table = _toml_loads(text).get("tool", {}).get("graphcheck")
    except ValueError as error:
        raise ConfigError(f"{pyproject}: not valid TOML: {error}") from None
    if table is None:
        return Settings()
    where = f"{pyproject} [tool.graphcheck]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}{_did_you_mean(unknown[0], KEYS)}; the keys are "
                          f"{', '.join(KEYS)}")  # fmt: skip
    replay_check = _choice(table, "replay_check", REPLAY_CHECKS, "first", where)
    on_failure = _choice(table, "on_failure", ON_FAILURE, "raise", where)
    strict = table.get("strict_ownership", False)
    if not isinstance(strict, bool):
        raise ConfigError(f"{where}: strict_ownership must be true or false, got {strict!r}")
    device = table.get("device")
    if device is not None and not isinstance(device, str):
        raise ConfigError(f'{where}: device must be a string such as "cpu" or "cuda:0", got {device!r}')
    allow = table.get("allow", [])
    if not isinstance(allow, list):
        raise ConfigError(f"{where}: allow must be a list of finding kinds or {{kind, kernel, arg}} tables")
    try:
        allowances = tuple(_allow_item(item) for item in allow)
    except ConfigError as error:
        raise ConfigError(f"{where}: allow: {error}") from None
    return Settings(allowances, replay_check, on_failure, strict, device or None, pyproject)


def parse_allow(specs: Iterable[str]) -> tuple[Allow, ...]:
    """Allowances from the command line's ``KIND[:KERNEL[:ARG]]``.

    Raises:
        ConfigError: an unknown kind (with the nearest one), an empty part, or too many parts.
    """
    from .findings import Allow

    out = []
    for spec in specs:
        try:
            out.append(Allow.parse(spec))
        except ValueError as error:
            raise ConfigError(str(error)) from None
    return tuple(out)


def allow_spelling(project: Iterable[Allow], pyproject: Path | None) -> Callable[[Allow], str]:
    """How a front end names an allowance it was given, where one matched nothing: one of
    ``project`` (``[tool.graphcheck]``'s) as written there; any other by ``str`` (``gc.Allow(...)``)."""
    from_project = set(project)
    where = f"in [tool.graphcheck] allow of {pyproject.name if pyproject is not None else 'pyproject.toml'}"

    def spelt(allow: Allow) -> str:
        if allow not in from_project:
            return str(allow)
        fields = [("kind", allow.kind), ("kernel", allow.kernel), ("arg", allow.arg)]
        table = ", ".join(f'{name} = "{value}"' for name, value in fields if value)
        return f"{{ {table} }} {where}" if allow.kernel or allow.arg else f'"{allow.kind}" {where}'

    return spelt


def _allow_item(item: Any) -> Allow:
    from .findings import Allow

    if isinstance(item, str):
        try:
            return Allow.parse(item)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or set(item) - {"kind", "kernel", "arg"}:
        raise ConfigError(f"expected a finding kind or a {{kind, kernel, arg}} table, got {item!r}")
    try:
        return Allow(item["kind"], item.get("kernel"), item.get("arg"))
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error)) from None


def _choice(table: dict[str, Any], key: str, choices: tuple[str, ...], default: str, where: str) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise ConfigError(f"{where}: {key} must be one of {', '.join(map(repr, choices))}, got {value!r}"
                          f"{_did_you_mean(str(value), choices)}")  # fmt: skip
    return str(value)


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    import difflib

    near = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(
                "reading [tool.graphcheck] from pyproject.toml needs Python 3.11, or the tomli package on 3.10 "
                "(pip install tomli)"
            ) from None
    return tomllib.loads(text)

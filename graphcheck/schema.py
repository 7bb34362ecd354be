"""The one JSON document every surface writes: the ``graphcheck.report/1`` envelope.

``graphcheck check|run|demo --output-format json``, ``graphcheck run --report`` and the
pytest plugin's ``--graphcheck-report`` all write::

    {"schema": "graphcheck.report/1", "graphcheck": "0.2.0", "warp": "1.19.0",
     "device": "cpu", "status": "passed", "ok": true, ..., "reports": [...]}

with each report as :meth:`graphcheck.Report.to_dict` gives it. The JSON Schema ships
next to this module (``report.schema.json``, :func:`json_schema`).

A leaf module: it imports neither Warp nor the rest of graphcheck, so the pytest plugin
can write the document in a session that never imported Warp.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA",
    "SCHEMA_PATH",
    "combined_status",
    "json_schema",
    "relative_path",
    "report_document",
    "warp_version",
]

#: The envelope's schema name.
SCHEMA = "graphcheck.report/1"
#: The JSON Schema of the envelope, shipped in the package.
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def json_schema() -> dict[str, Any]:
    """The envelope's JSON Schema (draft 2020-12)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def combined_status(statuses: Iterable[str]) -> str:
    """The status of several reports together: failed if any failed, passed if all passed,
    not-checked if none was checked (or there are none), else partial."""
    found = set(statuses)
    if "failed" in found:
        return "failed"
    if not found or found == {"not-checked"}:
        return "not-checked"
    return "passed" if found == {"passed"} else "partial"


def report_document(reports: Iterable[Any], *, device: str | None = None, **extra: Any) -> dict[str, Any]:
    """The envelope around ``reports``; its ``status`` is :func:`combined_status` of theirs.

    Args:
        reports: :class:`graphcheck.Report` objects, or their ``to_dict()`` data with
            extra keys (``source``, ``nodeid``, ``site``).
        device: the device the surface ran on (None: the reports' own, where they agree).
        extra: more top-level keys the schema knows (``command``, ``program_exit``,
            ``replays``, ``checking``, ``totals``, ``demo``, ``exit_status``, ``exit_reason``).
    """
    from ._version import __version__

    items = [dict(r) if isinstance(r, Mapping) else r.to_dict() for r in reports]
    if device is None:
        devices = {item["device"] for item in items if item.get("device")}
        device = devices.pop() if len(devices) == 1 else None
    status = combined_status(item["status"] for item in items)
    return {
        "schema": SCHEMA,
        "graphcheck": __version__,
        "warp": warp_version(),
        "device": device,
        "status": status,
        "ok": status == "passed",
        **extra,
        "reports": items,
    }


def relative_path(filename: str | os.PathLike[str]) -> str:
    """``filename`` relative to the working directory when it lies below it, else as it is."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return str(filename)
    return str(filename) if relative.startswith("..") else relative


def warp_version() -> str | None:
    """The installed Warp's version, without importing Warp."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("warp-lang")
    except PackageNotFoundError:
        return None

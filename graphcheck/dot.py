"""Pictures of a captured graph, with the operations that have findings highlighted.

:func:`to_dot` draws a :class:`~graphcheck.CheckedGraph`: on CUDA the graph's real nodes
and edges as the driver holds them (kernel nodes labelled with the kernel and its
arguments by name); on the CPU, where a graph has no nodes to read, the recorded
operations in capture order. :func:`write` saves DOT, or SVG where Graphviz's ``dot``
program is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .params import ArrayRef

if TYPE_CHECKING:
    from .guard import CheckedGraph
    from .record import LaunchRecord

__all__ = ["to_dot", "write"]

_BAD = 'style="filled" fillcolor="#f4c7c3" color="#c5221f"'
_GOOD = 'style="filled" fillcolor="#e6f4ea" color="#137333"'


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _short(value: Any) -> str:
    if isinstance(value, ArrayRef):
        shape = "x".join(str(s) for s in value.shape)
        return f"{value.dtype}[{shape}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def record_label(index: int, record: LaunchRecord, max_args: int = 6) -> str:
    """``#3 integrate`` and the first arguments by name, one per line."""
    name = record.kernel.rsplit(".", 1)[-1] if record.kind == "launch" else record.kernel
    lines = [f"#{index} {name}{' (adjoint)' if record.adjoint else ''}"]
    if record.kind == "launch":
        lines.append(f"dim={record.dim}")
    items = list(record.args.items())
    lines += [f"{k}={_short(v)}" for k, v in items[:max_args]]
    if len(items) > max_args:
        lines.append(f"... {len(items) - max_args} more")
    return "\\n".join(_escape(line) for line in lines)


def _flagged(checked: CheckedGraph) -> dict[int, list[str]]:
    flagged: dict[int, list[str]] = {}
    for finding in checked.report.findings:
        if finding.index is not None:
            flagged.setdefault(finding.index, []).append(finding.kind)
    return flagged


def to_dot(checked: CheckedGraph, title: str | None = None) -> str:
    """DOT source of a checked graph, operations with findings filled red.

    Args:
        checked: what :func:`graphcheck.capture` or a :class:`~graphcheck.GraphGuard` returned.
        title: a label for the picture (default: the report's headline).
    """
    title = title or checked.report.headline()
    flagged = _flagged(checked)
    lines = [
        "digraph graphcheck {",
        f'  label="{_escape(title)}"; labelloc=t; fontname="Helvetica";',
        '  node [shape=box fontname="Helvetica" fontsize=10];',
    ]
    nodes = None
    if checked.graph is not None:
        from . import crosscheck

        nodes = crosscheck.graph_picture(checked)
    if nodes is not None:
        lines += nodes
    elif checked.trace is not None:
        records = checked.trace.records
        for i, record in enumerate(records):
            label = record_label(i, record)
            kinds = flagged.get(i)
            style = _BAD if kinds else _GOOD
            if kinds:
                label += "\\n" + _escape(", ".join(dict.fromkeys(kinds)))
            lines.append(f'  op{i} [label="{label}" {style}];')
        lines += [f"  op{i} -> op{i + 1};" for i in range(len(records) - 1)]
    unplaced = [f for f in checked.report.findings if f.index is None]
    for j, finding in enumerate(unplaced):
        lines.append(f'  finding{j} [shape=note label="{_escape(finding.kind)}" {_BAD}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(checked: CheckedGraph, path: str, formats: Iterable[str] = ("dot", "svg")) -> list[str]:
    """Write the picture to ``path`` (DOT), and next to it as SVG when Graphviz is installed.

    Returns:
        The paths written.
    """
    source = to_dot(checked)
    with open(path, "w") as f:
        f.write(source)
    written = [path]
    dot = shutil.which("dot")
    if "svg" in formats and dot is not None:
        svg = path.rsplit(".", 1)[0] + ".svg"
        subprocess.run([dot, "-Tsvg", path, "-o", svg], check=True, timeout=60)
        written.append(svg)
    return written

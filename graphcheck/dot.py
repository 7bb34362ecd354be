"""Pictures of a captured graph, with the operations that have findings highlighted.

:func:`to_dot` draws a :class:`~graphcheck.CheckedGraph`: on CUDA the graph's real nodes
and edges as the driver holds them, from the match the cross-check used (kernel nodes
labelled with the kernel and its arguments by name); on the CPU, where a graph has no nodes to read, the recorded
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
    from .graph import GraphMatch
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


def _graph_lines(match: GraphMatch, flagged: dict[int, list[str]]) -> list[str]:
    """DOT lines for the nodes and edges of a CUDA graph as the driver holds them."""
    records = match.trace.records
    positions = match.positions
    lines = []
    for node in match.nodes:
        position = positions.get(node.record) if node.record is not None else None
        if position is not None and node.role == "recorded":
            label = record_label(position, records[node.record])  # type: ignore[index]
        else:
            label = _escape(f"{node.type.lower()} {node.name}".strip()) + "\\n" + _escape(f"({node.role})")
        bad = (position is not None and position in flagged) or node.role in ("unrecorded", "foreign")
        lines.append(f'  n{node.handle} [label="{label}" {_BAD if bad else _GOOD}];')
        lines += [f"  n{dep} -> n{node.handle};" for dep in node.deps]
    return lines


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
    match = checked.graph_match
    if match is not None:
        lines += _graph_lines(match, flagged)
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

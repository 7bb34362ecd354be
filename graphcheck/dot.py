"""Pictures of a captured graph, with the operations that have findings highlighted.

:func:`to_dot` draws a :class:`~graphcheck.CheckedGraph`: on CUDA the graph's real nodes
and edges as the driver holds them, from the match the cross-check used (kernel nodes
labelled with the kernel and its arguments by name); on the CPU, where a graph has no nodes to read, the recorded
operations in capture order. :func:`write` saves DOT (and SVG beside it), or the picture a
path's suffix names (``.svg``, ``.png``, ``.pdf``), where Graphviz's ``dot`` program is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._outputs import write_output
from .params import ArrayRef

if TYPE_CHECKING:
    from .checked import CheckedGraph
    from .graph import GraphMatch
    from .operations import LaunchRecord

__all__ = ["to_dot", "write"]

_BAD = 'style="filled" fillcolor="#f4c7c3" color="#c5221f"'
_GOOD = 'style="filled" fillcolor="#e6f4ea" color="#137333"'
_TOUCHES = 'style="filled" fillcolor="#fce8b2" color="#b06000"'  # uses a buffer a finding is about
_LEGEND = [
    "  subgraph cluster_legend {",
    '    label="legend"; fontsize=10; color="#9aa0a6";',
    f'    legend_bad [label="operation with a finding" {_BAD}];',
    f'    legend_touches [label="uses a flagged buffer" {_TOUCHES}];',
    f'    legend_good [label="no finding" {_GOOD}];',
    "    legend_bad -> legend_touches -> legend_good [style=invis];",
    "  }",
]


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


def record_label(index: int, record: LaunchRecord, max_args: int = 6, names: dict[str, str] | None = None) -> str:
    """``#3 integrate`` and the first arguments by name, one per line (an array by the
    owner path in ``names``, ``x=owner.x0``, where there is one)."""
    name = record.kernel.rsplit(".", 1)[-1] if record.kind == "launch" else record.kernel
    lines = [f"#{index} {name}{' (adjoint)' if record.adjoint else ''}"]
    if record.kind == "launch":
        lines.append(f"dim={record.dim}")
    items = list(record.args.items())
    names = names or {}
    lines += [f"{k}={names.get(k) or _short(v)}" for k, v in items[:max_args]]
    if len(items) > max_args:
        lines.append(f"... {len(items) - max_args} more")
    return "\\n".join(_escape(line) for line in lines)


def _flagged(checked: CheckedGraph) -> dict[int, list[Any]]:
    flagged: dict[int, list[Any]] = {}
    for finding in checked.report.findings:
        if finding.index is not None:
            flagged.setdefault(finding.index, []).append(finding)
    return flagged


def _flagged_ranges(records: list[LaunchRecord], flagged: dict[int, list[Any]]) -> list[tuple[int, int]]:
    """The address ranges of the arrays the findings name."""
    ranges = []
    for index, findings in flagged.items():
        if index >= len(records):
            continue
        for finding in findings:
            for arg in (finding.arg or "").split(", "):
                ref = records[index].args.get(arg.removesuffix(".grad"))
                if isinstance(ref, ArrayRef) and ref.ptr:
                    ranges.append((ref.start, ref.start + max(ref.nbytes, 1)))
    return ranges


def _drift(finding: Any) -> str | None:
    """``frame: 1 -> 2`` for a value that drifted."""
    if finding.kind != "scalar-drift" or not finding.arg:
        return None
    return f"{finding.arg}: {_short(finding.reference)} -> {_short(finding.captured)}"


class _Operations:
    """How each recorded operation is drawn: its label, style and tooltip, with the findings
    about it and the owned buffers it uses."""

    def __init__(self, checked: CheckedGraph, flagged: dict[int, list[Any]]) -> None:
        self.records = checked.trace.records if checked.trace is not None else []
        self.owned = checked.owned_buffers() if self.records else None
        self.flagged = flagged
        self.ranges = _flagged_ranges(self.records, flagged)

    def attributes(self, i: int) -> str:
        record, findings = self.records[i], self.flagged.get(i, [])
        names = {}
        touches = False
        for arg, ref in record.arrays():
            hit = self.owned.buffer_at(ref.start) if self.owned is not None else None
            if hit is not None:
                names[arg] = hit.label
            touches = touches or any(ref.start < end and start < ref.start + max(ref.nbytes, 1)
                                     for start, end in self.ranges)  # fmt: skip
        label = record_label(i, record, names=names)
        style = _BAD if findings else _TOUCHES if touches else _GOOD
        if findings:
            drifts = [d for d in map(_drift, findings) if d]
            label += "\\n" + "\\n".join(
                _escape(t) for t in [*drifts, ", ".join(dict.fromkeys(f.kind for f in findings))]
            )
        tooltip = _escape("\n".join(f.message for f in findings) or f"#{i} {record.kernel} at {record.site.short}")
        return f'label="{label}" tooltip="{tooltip}" {style}'


def _graph_lines(match: GraphMatch, operations: _Operations) -> list[str]:
    """DOT lines for the nodes and edges of a graph as the cross-check read them."""
    positions = match.positions
    lines = []
    drawn: set[int] = set()
    for node in match.nodes:
        position = positions.get(node.record) if node.record is not None else None
        if position is not None and node.role == "recorded" and position < len(operations.records):
            drawn.add(position)
            attributes = operations.attributes(position)
        else:
            label = _escape(f"{node.type.lower()} {node.name}".strip()) + "\\n" + _escape(f"({node.role})")
            bad = node.role in ("unrecorded", "foreign")
            attributes = f'label="{label}" {_BAD if bad else _GOOD}'
        lines.append(f"  n{node.handle} [{attributes}];")
        lines += [f"  n{dep} -> n{node.handle};" for dep in node.deps]
    # Operations with findings the graph holds no node for (a CPU graph left them out).
    for position in sorted(set(operations.flagged) - drawn):
        if position < len(operations.records):
            lines.append(f"  missing{position} [shape=note {operations.attributes(position)}];")
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
    operations = _Operations(checked, flagged)
    match = checked.graph_match
    if match is not None:
        lines += _graph_lines(match, operations)
    else:
        for i in range(len(operations.records)):
            lines.append(f"  op{i} [{operations.attributes(i)}];")
        lines += [f"  op{i} -> op{i + 1};" for i in range(len(operations.records) - 1)]
    unplaced = [f for f in checked.report.findings if f.index is None]
    for j, finding in enumerate(unplaced):
        lines.append(
            f'  finding{j} [shape=note label="{_escape(finding.kind)}" tooltip="{_escape(finding.message)}" {_BAD}];'
        )
    lines += _LEGEND
    lines.append("}")
    return "\n".join(lines) + "\n"


#: The pictures Graphviz renders, by the suffix of the path asked for; any other suffix gets DOT text.
RENDERED = {".svg": "svg", ".png": "png", ".pdf": "pdf"}


class GraphvizMissing(RuntimeError):
    """A picture format that needs Graphviz's ``dot`` program, which is not installed."""


def renders(path: str) -> str | None:
    """The Graphviz format ``path``'s suffix asks for (``svg``, ``png``, ``pdf``), or None for DOT text."""
    return RENDERED.get(Path(path).suffix.lower())


def write(checked: CheckedGraph, path: str) -> list[str]:
    """Write the picture to ``path``: rendered by Graphviz where its suffix names a picture
    (``.svg``, ``.png``, ``.pdf``); else as DOT text, and next to it as SVG where Graphviz's
    ``dot`` is installed.

    Returns:
        The paths written.

    Raises:
        GraphvizMissing: ``path`` names a rendered picture and ``dot`` is not installed.
    """
    source = to_dot(checked)
    dot = shutil.which("dot")
    fmt = renders(path)
    if fmt is not None:
        if dot is None:
            raise GraphvizMissing(f"a .{fmt} picture needs Graphviz's dot program, which is not installed")
        Path(path).absolute().parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([dot, f"-T{fmt}", "-o", path], input=source, text=True, check=True, timeout=60)
        return [path]
    write_output(Path(path), source)
    written = [path]
    if dot is not None:
        svg = str(Path(path).with_suffix(".svg"))
        subprocess.run([dot, "-Tsvg", path, "-o", svg], check=True, timeout=60)
        written.append(svg)
    return written

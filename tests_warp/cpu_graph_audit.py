"""Every host-side operation of Warp's inside a CPU capture: what the CPU graph holds for it,
what graphcheck's graph cross-check says, and whether a replay computes what eager stepping
does, for the installed Warp (the audit NVIDIA/warp#1676 asks for: replayed right, refused,
or silently dropped).

``nox -s cpu_graphs`` runs it for every supported Warp release; each run writes its
release's column to ``docs/cpu-graphs.json`` and the table of all of them to
``docs/cpu-graphs.md``::

    python -m tests_warp.cpu_graph_audit [--write]

Each case is a small producer whose step does one operation (and a kernel launch that
changes what the operation reads, so a replay that leaves it out computes something else).
It is captured with :func:`graphcheck.capture`, its graph's operations read back, and it is
replayed beside an eagerly stepped twin (:func:`graphcheck.verify_replay`).
"""

from __future__ import annotations

import argparse
import ctypes
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

from tests.cpu_graph_kernels import advance, bump, count_boxes, count_down, count_near, move, scramble, square_sum

N = 16
DOCS = Path(__file__).resolve().parents[1] / "docs"


@wp.kernel
def nearest(mesh: wp.uint64, points: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    query = wp.mesh_query_point_no_sign(mesh, points[i] + wp.vec3(0.0, 0.0, 0.1), 0.5)
    out[i] = wp.where(query.result, 1.0, -1.0)


class Producer:
    """Buffers every case has; ``step`` does the case's operation."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.a = wp.array(np.arange(N, dtype=np.float32), device=device)
        self.b = wp.zeros(N, dtype=float, device=device)
        self.step_count = wp.zeros(1, dtype=int, device=device)

    def launch(self, kernel: Any, inputs: list[Any], dim: Any = N) -> None:
        wp.launch(kernel, dim=dim, inputs=inputs, device=self.device)


#: (operation, the Warp call, a producer class) of every case, in the table's order.
CASES: list[tuple[str, str, type]] = []


def case(operation: str, call: str) -> Callable[[type], type]:
    def register(cls: type) -> type:
        CASES.append((operation, call, cls))
        return cls

    return register


@case("kernel launch", "wp.launch")
class Launch(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])


@case("adjoint launch", "wp.Tape.backward")
class Adjoint(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.x = wp.array(np.arange(3, dtype=np.float32) + 1.0, device=device, requires_grad=True)
        self.y = wp.zeros(3, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.tape = wp.Tape()

    def step(self) -> None:
        self.tape.reset()
        self.loss.zero_()
        with self.tape:
            wp.launch(square_sum, dim=3, inputs=[self.x], outputs=[self.y, self.loss], device=self.device)
        self.tape.backward(loss=self.loss)
        wp.launch(advance, dim=3, inputs=[self.x, 0.5], device=self.device)


@case("recorded command", "wp.Launch.launch")
class Command(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.cmd = wp.launch(advance, dim=N, inputs=[self.a, 2.0], device=device, record_cmd=True)

    def step(self) -> None:
        self.cmd.launch()


@case("copy", "wp.copy")
class Copy(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        wp.copy(self.b, self.a, dest_offset=1, src_offset=3, count=5)


@case("copy of strided arrays", "wp.copy(b[::2], a[::2])")
class StridedCopy(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        wp.copy(self.b[::2], self.a[::2])


@case("memset", "array.zero_")
class Zero(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        self.b.zero_()
        self.launch(advance, [self.b, 2.0])


@case("fill", "array.fill_ (float32, uint8, vec3)")
class Fill(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.small = wp.zeros(N, dtype=wp.uint8, device=device)
        self.vectors = wp.zeros(N, dtype=wp.vec3, device=device)

    def step(self) -> None:
        self.a.fill_(3.0)
        self.small.fill_(7)
        self.vectors.fill_(wp.vec3(1.0, 2.0, 3.0))
        self.launch(advance, [self.a, 1.0])


@case("fill of a strided array", "array.fill_ on a[::2]")
class StridedFill(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        self.a[::2].fill_(1.0)


@case("scan", "wp.utils.array_scan")
class Scan(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        wp.utils.array_scan(self.a, self.b, inclusive=True)


@case("sum", "wp.utils.array_sum(out=)")
class Sum(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        wp.utils.array_sum(self.a, out=self.b[:1])


@case("inner product", "wp.utils.array_inner(out=)")
class Inner(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        wp.utils.array_inner(self.a, self.a, out=self.b[:1])


@case("sum read back", "wp.utils.array_sum (no out=)")
class SumReadBack(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        self.b.fill_(float(wp.utils.array_sum(self.a)))


@case("radix sort", "wp.utils.radix_sort_pairs")
class RadixSort(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.keys = wp.array(np.random.default_rng(3).integers(0, 23, 2 * N).astype(np.int32), device=device)
        self.values = wp.array(np.arange(2 * N, dtype=np.int32), device=device)

    def step(self) -> None:
        self.launch(scramble, [self.keys, self.step_count])
        self.launch(bump, [self.step_count], dim=1)
        wp.utils.radix_sort_pairs(self.keys, self.values, N)


@case("segmented sort", "wp.utils.segmented_sort_pairs")
class SegmentedSort(RadixSort):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.starts = wp.array(np.array([0, 5, 11], dtype=np.int32), device=device)
        self.ends = wp.array(np.array([5, 11, N], dtype=np.int32), device=device)

    def step(self) -> None:
        self.launch(scramble, [self.keys, self.step_count])
        self.launch(bump, [self.step_count], dim=1)
        wp.utils.segmented_sort_pairs(self.keys, self.values, N, self.starts, self.ends)


@case("run-length encoding", "wp.utils.runlength_encode")
class RunLengths(RadixSort):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.run_values = wp.zeros(N, dtype=int, device=device)
        self.run_lengths = wp.zeros(N, dtype=int, device=device)
        self.runs = wp.zeros(1, dtype=int, device=device)

    def step(self) -> None:
        super().step()
        wp.utils.runlength_encode(self.keys, self.run_values, self.run_lengths, run_count=self.runs, value_count=N)


class Sparse(Producer):
    def __init__(self, device: str = "cpu") -> None:
        import warp.sparse as wps

        super().__init__(device)
        self.rows = wp.array(np.array([0, 1, 2, 2, 3, 0], dtype=np.int32), device=device)
        self.columns = wp.array(np.array([1, 0, 2, 3, 3, 1], dtype=np.int32), device=device)
        self.values = wp.array(np.arange(6, dtype=np.float32) + 1.0, device=device)
        self.matrix = wps.bsr_zeros(4, 4, block_type=float, device=device)
        self.transposed = wps.bsr_zeros(4, 4, block_type=float, device=device)
        # Sized once: inside a capture Warp neither allocates nor reads sizes back.
        wps.bsr_set_from_triplets(self.matrix, self.rows, self.columns, self.values)
        wps.bsr_set_transpose(self.transposed, self.matrix)


@case("sparse matrix from triplets", "warp.sparse.bsr_set_from_triplets")
class FromTriplets(Sparse):
    def step(self) -> None:
        import warp.sparse as wps

        self.launch(advance, [self.values, 1.0], dim=6)
        wps.bsr_set_from_triplets(self.matrix, self.rows, self.columns, self.values)


@case("sparse transpose", "warp.sparse.bsr_set_transpose")
class Transpose(Sparse):
    def step(self) -> None:
        import warp.sparse as wps

        self.launch(advance, [self.matrix.values, 1.0], dim=6)
        wps.bsr_set_transpose(self.transposed, self.matrix)


@case("hash grid build", "wp.HashGrid.build")
class HashGridBuild(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        rng = np.random.default_rng(5)
        self.points = wp.array(rng.random((N, 3)).astype(np.float32) * 2.0, dtype=wp.vec3, device=device)
        self.grid = wp.HashGrid(4, 4, 4, device=device)
        self.near = wp.zeros(N, dtype=int, device=device)

    def step(self) -> None:
        self.launch(move, [self.points, wp.vec3(0.3, 0.1, 0.0)])
        self.grid.build(self.points, 0.6)
        self.launch(count_near, [self.grid.id, self.points, self.near])


class Bounds(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        low = np.random.default_rng(8).random((N, 3)).astype(np.float32)
        self.lower = wp.array(low, dtype=wp.vec3, device=device)
        self.upper = wp.array(low + 0.1, dtype=wp.vec3, device=device)
        self.bvh = wp.Bvh(self.lower, self.upper)
        self.found = wp.zeros(1, dtype=int, device=device)

    def moved(self) -> None:
        for bounds in (self.lower, self.upper):
            self.launch(move, [bounds, wp.vec3(0.1, 0.0, 0.0)])


@case("BVH refit", "wp.Bvh.refit")
class BvhRefit(Bounds):
    def step(self) -> None:
        self.moved()
        self.bvh.refit()
        self.launch(count_boxes, [self.bvh.id, self.found], dim=1)


@case("BVH rebuild", "wp.Bvh.rebuild")
class BvhRebuild(Bounds):
    def step(self) -> None:
        self.moved()
        self.bvh.rebuild()
        self.launch(count_boxes, [self.bvh.id, self.found], dim=1)


class Surface(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float32)
        self.points = wp.array(points, dtype=wp.vec3, device=device)
        self.mesh = wp.Mesh(points=self.points, indices=wp.array([0, 1, 2, 1, 3, 2], dtype=int, device=device))
        self.hits = wp.zeros(4, dtype=float, device=device)


@case("mesh refit", "wp.Mesh.refit")
class MeshRefit(Surface):
    def step(self) -> None:
        self.launch(move, [self.points, wp.vec3(10.0, 0.0, 0.0)], dim=4)
        self.mesh.refit()
        self.launch(nearest, [self.mesh.id, self.points, self.hits], dim=4)


@case("mesh points set", "wp.Mesh.points = ...")
class MeshPoints(Surface):
    def step(self) -> None:
        self.launch(move, [self.points, wp.vec3(10.0, 0.0, 0.0)], dim=4)
        self.mesh.points = self.points
        self.launch(nearest, [self.mesh.id, self.points, self.hits], dim=4)


@case("conditional", "wp.capture_if")
class If(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.flag = wp.ones(1, dtype=int, device=device)

    def step(self) -> None:
        wp.capture_if(self.flag, on_true=lambda: self.launch(advance, [self.a, 1.0]))
        self.launch(bump, [self.flag], dim=1)


@case("loop", "wp.capture_while")
class While(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.remaining = wp.zeros(1, dtype=int, device=device)

    def step(self) -> None:
        self.remaining.fill_(3)
        wp.capture_while(self.remaining, lambda: self.launch(count_down, [self.remaining, self.a], dim=1))


@case("graph launched in the capture", "wp.capture_launch")
class GraphLaunch(Producer):
    def __init__(self, device: str = "cpu") -> None:
        super().__init__(device)
        self.flag = wp.zeros(1, dtype=int, device=device)
        with wp.ScopedCapture(device=device) as inner:
            self.launch(advance, [self.a, 1.0])
            self.b.fill_(2.0)
        self.inner = inner.graph

    def step(self) -> None:
        wp.capture_launch(self.inner)


@case("raw native copy", "runtime.core.wp_memcpy_h2h")
class RawCopy(Producer):
    def step(self) -> None:
        self.launch(advance, [self.a, 1.0])
        core = wp._src.context.runtime.core
        core.wp_memcpy_h2h(ctypes.c_void_p(self.b.ptr), ctypes.c_void_p(self.a.ptr), self.a.capacity)


def audit(operation: str, call: str, cls: type) -> dict[str, str]:
    """One case's row: what the graph holds, what the cross-check and the values say."""
    import graphcheck as gc

    row = {"operation": operation, "call": call}
    try:
        producer = cls()
        checked = gc.capture(producer.step, device="cpu", owners=(producer,), on_failure="ignore")
    except Exception as error:  # the case cannot be built on this release
        return {**row, "holds": "", "cross-check": f"not run: {type(error).__name__}: {error}", "values": "",
                "verdict": "not run"}  # fmt: skip
    report = checked.report
    if checked.graph is None:
        (finding,) = report.findings
        reason = finding.values.split(". ")[0]
        return {**row, "holds": "", "cross-check": f"Warp raises: {reason}", "values": "", "verdict": "refused"}
    match = checked.graph_match
    holds = ", ".join(dict.fromkeys(n.type for n in match.nodes)) if match is not None else "(not read)"
    graph_findings = [
        f for f in report.findings if f.kind in ("node-mismatch", "unrecorded-node") or f.detail.get("graph") == "cpu"
    ]
    said = "; ".join(f"{f.kind}: {f.values.split(';')[0]}" for f in graph_findings)
    if "graph" not in report.checks:
        said = "NOT checked: " + dict(report.skipped).get("graph", "?")
    values = gc.verify_replay(cls, steps=4, device="cpu", on_failure="ignore")
    diverged = values.of_kind("replay-divergence")
    shown = "replay == eager" if not diverged else f"replay != eager ({diverged[0].arg})"
    if "graph" not in report.checks:
        verdict = "not checked"
    elif graph_findings:
        verdict = "dropped: found" if diverged else "flagged, replay right"
    else:
        verdict = "replayed right" if not diverged else "MISSED: replay differs, the cross-check found nothing"
    return {**row, "holds": holds, "cross-check": said or "clean", "values": shown, "verdict": verdict}


def render(results: dict[str, list[dict[str, str]]]) -> str:
    """The docs page: one table of verdicts, a column per release, then each release's details."""
    releases = sorted(results, key=lambda v: tuple(int(p) for p in v.split(".")[:3]))
    lines = [
        "# Warp's CPU graphs, operation by operation",
        "",
        "What each host-side operation of Warp's does inside a CPU capture "
        '(`wp.ScopedCapture(device="cpu")`), as graphcheck finds it: the operations the CPU graph holds for '
        "it, what the graph cross-check says (see {doc}`how-it-works`), and whether the graph, replayed beside an "
        "eagerly stepped twin, computes what eager stepping does ({func}`graphcheck.verify_replay`). "
        "`nox -s cpu_graphs` runs it for every supported release and writes this page "
        "(`tests_warp/cpu_graph_audit.py`); it is the audit NVIDIA/warp#1676 asks for.",
        "",
        "*replayed right*: the graph holds the operation and replays it; *dropped: found*: the graph does not hold "
        "it (the capture ran it once), the cross-check reports a `capture-error` and the replay computes something "
        "else; *refused*: Warp raises inside the capture (graphcheck reports Warp's error as a `capture-error`).",
        "",
        "| operation | Warp call | " + " | ".join(releases) + " |",
        "| --- | --- | " + " | ".join("---" for _ in releases) + " |",
    ]
    by_release = {release: {row["operation"]: row for row in results[release]} for release in releases}
    operations = [row["operation"] for row in results[releases[-1]]]
    calls = {row["operation"]: row["call"] for release in releases for row in results[release]}
    for operation in operations:
        cells = [by_release[r].get(operation, {}).get("verdict", "") for r in releases]
        lines.append(f"| {operation} | `{calls[operation]}` | " + " | ".join(cells) + " |")
    for release in reversed(releases):
        lines += ["", f"## warp-lang {release}", "", "| operation | the graph holds | cross-check | values |",
                  "| --- | --- | --- | --- |"]  # fmt: skip
        for row in results[release]:
            cross = row["cross-check"].replace("|", "\\|")
            lines.append(f"| {row['operation']} | {row['holds']} | {cross} | {row['values']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write docs/cpu-graphs.json and docs/cpu-graphs.md")
    args = parser.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    rows = []
    for operation, call, cls in CASES:
        row = audit(operation, call, cls)
        print(f"{operation:32} {row['verdict']:24} {row['holds']:40} {row['cross-check'][:100]}", flush=True)
        rows.append(row)
    missed = [row for row in rows if row["verdict"].startswith("MISSED")]
    if args.write:
        stored = DOCS / "cpu-graphs.json"
        results = json.loads(stored.read_text()) if stored.exists() else {}
        results[wp.__version__] = rows
        stored.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        (DOCS / "cpu-graphs.md").write_text(render(results))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())

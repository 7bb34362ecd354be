"""Sessions for graphcheck's checks: ``nox -l`` lists them; ``nox`` runs lint and tests."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import nox

nox.needs_version = ">=2024.3"
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite on the CPU (real Warp kernels and real CPU graph captures)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=["3.10", "3.11", "3.12", "3.13"])
def pythons(session: nox.Session) -> None:
    """Run the test suite on each supported Python (``nox -s pythons``; ``"pythons-3.10"`` for one)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


def _tested_warp_versions() -> list[str]:
    """graphcheck._warp.version.TESTED_WARP_VERSIONS, read from the source (importing it imports Warp)."""
    source = Path(__file__).parent.joinpath("graphcheck", "_warp", "version.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["TESTED_WARP_VERSIONS"]:
            return list(ast.literal_eval(node.value))
    raise RuntimeError("graphcheck/_warp/version.py assigns no TESTED_WARP_VERSIONS")


@nox.session
@nox.parametrize("warp", [nox.param(version, id=version) for version in _tested_warp_versions()])
def warp(session: nox.Session, warp: str) -> None:
    """Run the test suite against this Warp release (``nox -s warp``: every supported one)."""
    session.install("-e", ".[test]", f"warp-lang=={warp}")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(name="cpu_graphs")
@nox.parametrize("warp", [nox.param(version, id=version) for version in _tested_warp_versions()])
def cpu_graphs(session: nox.Session, warp: str) -> None:
    """Each of Warp's host-side operations inside a CPU capture, per release: what the graph holds, what the
    cross-check and replay by values say (docs/cpu-graphs.md; the audit NVIDIA/warp#1676 asks for)."""
    session.install("-e", ".", f"warp-lang=={warp}")
    session.run("python", "-m", "tests_warp.cpu_graph_audit", "--write", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Lint with ruff, type-check with mypy, and hold the layers with import-linter."""
    session.install("-e", ".[test]", "ruff>=0.6", "mypy>=1.10", "import-linter>=2.1")  # pytest types the plugin
    paths = ("graphcheck", "tests", "tests_gpu", "tests_clients", "tests_warp", "benchmarks", "examples", "noxfile.py")
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", "graphcheck")
    session.run("mypy")
    session.run("lint-imports")  # the contracts in pyproject.toml: every import points down


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks: ratios against bare Warp, and the bars in docs/performance.md."""
    session.install("-e", ".")
    session.run("python", "-m", "benchmarks.run", *session.posargs)


@nox.session
def generate(session: nox.Session) -> None:
    """Judge generated step programs by graphcheck and by values: the agreement table by construct,
    each disagreement shrunk (``nox -s generate -- --count 10000 --seed 0 --labels``)."""
    session.install("-e", ".")
    session.run("python", "-m", "tests.generator", *session.posargs)


@nox.session
def warp_suite(session: nox.Session) -> None:
    """Run a CPU subset of Warp's own test suite untraced and traced: every outcome must match."""
    session.install("-e", ".")
    session.run("python", "-m", "tests_warp.warp_suite", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation with Sphinx, warnings as errors (``-- --serve`` to serve it)."""
    session.install("-e", ".[docs]")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")
    if "--serve" in session.posargs:
        session.run("python", "-m", "http.server", "-d", "docs/_build/html", "8000")


# The real simulators tests_clients/ judges, pinned: the verdicts there name their kernels.
CLIENTS = ("newton==1.8.0", "mujoco-warp==4.0.0", "pillow")  # Pillow: two of Warp's optim examples import it


@nox.session(name="bench-clients")
def bench_clients(session: nox.Session) -> None:
    """What validating real clients' steps costs: gc.capture against one eager call plus a bare capture;
    and what the replay check adds to every launch of MuJoCo Warp's captured step."""
    session.install("-e", ".", *CLIENTS)
    session.run("python", "-m", "benchmarks.run", "clients", "replay_clients", *session.posargs)


@nox.session
def clients(session: nox.Session) -> None:
    """Judge real Warp clients on the CPU against eagerly stepped twins: about 1 GB of packages, so not in CI.

    Newton's and MuJoCo Warp's capture sites tested by hand, and the examples Warp and Newton ship
    that capture, found by searching them: each judged by values, or skipped with the reason (for
    Newton, also "not judged yet"); docs/ci.md has the counts.
    """
    session.install("-e", ".[test]", *CLIENTS)
    session.run("python", "-m", "pytest", "tests_clients", *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """Run the driver probe, tests_gpu/ and the GPU benchmark on a CUDA machine (skips without CUDA)."""
    session.install("-e", ".[test]")
    probe = "import warp as wp; wp.config.log_level = wp.LOG_WARNING; print(int(wp.is_cuda_available()))"
    available = session.run("python", "-c", probe, silent=True)
    if not available or available.strip().splitlines()[-1] != "1":
        session.skip("no CUDA device visible to Warp: tests_gpu/ needs one")
    # The probe prints what the driver answers and exits 1 on a mismatch. One GPU run should
    # tell everything: the probe, the whole of tests_gpu and the benchmark run whatever the
    # others say, and the session fails at the end if the probe or a test failed.
    python = str(Path(session.bin) / "python")
    failed = []
    for what, command in (
        ("tests_gpu/probe.py", [python, "tests_gpu/probe.py"]),
        ("pytest tests_gpu", [python, "-m", "pytest", "tests_gpu", "-v", *session.posargs]),
    ):
        session.log(" ".join(command[1:]))
        status = subprocess.call(command)
        if status:
            failed.append(f"{what} exited {status}")
    session.run("python", "-m", "benchmarks.run", "graph")
    if failed:
        session.error("; ".join(failed) + " (the probe's MISMATCH lines and pytest's failures are above)")

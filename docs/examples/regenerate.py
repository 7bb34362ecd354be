"""Run the documentation's examples and store what they print, for the pages to include.

Run from the repository root::

    PYTHONPATH=. python docs/examples/regenerate.py          # the CPU examples
    PYTHONPATH=. python docs/examples/regenerate.py --gpu    # also the CUDA-only ones

Each example's standard output goes to ``output/<name>.txt`` next to it, and each
blank-line-separated part of it to ``output/<name>-<part>.txt`` (1, 2, 3...). Then it
runs the commands and the test run the command-line page shows, into
``docs/examples/output/`` (with the JSON reports they write). Addresses in the output
change from run to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
CPU = [
    DOCS / "examples" / "quickstart.py",
    DOCS / "examples" / "tracing.py",
    *(DOCS / "findings" / "examples" / f"{name}.py" for name in (
        "scalar_drift", "buffer_drift", "per_call_allocation", "launch_sequence_drift", "dim_drift",
        "copy_drift", "foreign_buffer", "stale_pointer", "capture_error", "replay_divergence", "shared_buffer",
    )),
]
GPU = [DOCS / "findings" / "examples" / f"{name}.py" for name in ("stream_drift", "unrecorded_node", "node_mismatch")]
#: Commands of the command-line page: (output name, arguments to ``python -m graphcheck``).
COMMANDS = [
    ("cli-demo", ["demo", "--device", "cpu", "--colour", "never"]),
    ("cli-run", ["run", "--colour", "never", "cli_sim.py"]),
    ("cli-check", ["check", "--device", "cpu", "--colour", "never", "cli_sim:make_sim"]),
    ("cli-run-report", ["run", "--colour", "never", "--report", "cli-run-report.json", "cli_sim.py"]),
    ("cli-run-reference", ["run", "--colour", "never", "--reference-call", "cli_sim.py"]),
    ("cli-check-json", ["check", "--device", "cpu", "--json", "cli_sim:make_sim"]),
    ("cli-check-github", ["check", "--device", "cpu", "--output-format", "github", "cli_sim:make_sim"]),
    ("cli-usage-error", ["check", "--device", "cpu", "--allow", "scaler-drift", "cli_sim:make_sim"]),
]


def command(name: str, args: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPHCHECK_DISABLE", None)
    cwd = DOCS / "examples"
    done = subprocess.run(
        [sys.executable, "-m", "graphcheck", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"graphcheck {' '.join(args)} failed:\n{done.stderr}")
    # What graphcheck itself says on stderr (a usage error, --reference-call's warning), not Warp's start-up.
    said = [line for line in done.stderr.splitlines() if line.startswith("graphcheck")]
    output = "\n".join([*said, done.stdout.strip()]).strip()
    text = f"$ graphcheck {' '.join(args)}\n{output}\n$ echo $?\n{done.returncode}\n"
    (cwd / "output").mkdir(exist_ok=True)
    (cwd / "output" / f"{name}.txt").write_text(text)
    if "--report" in args:  # `run --report PATH`: keep the JSON it wrote next to the text
        report = cwd / args[args.index("--report") + 1]
        (cwd / "output" / report.name).write_text(report.read_text())
        report.unlink()
    print(f"graphcheck {' '.join(args)}: exit status {done.returncode}")


def pytest_example() -> None:
    """The plugin page's test run: two tests, one with a finding, and a JSON report."""
    from importlib.metadata import entry_points

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPHCHECK_DISABLE", None)
    cwd = DOCS / "examples"
    installed = any(e.name == "graphcheck" for e in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "graphcheck.pytest_plugin"]  # an uninstalled checkout
    args = ["-q", "-p", "no:cacheprovider", "--graphcheck-report", "graphcheck-report.json", "plugin_suite.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *load, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    report = cwd / "graphcheck-report.json"
    (cwd / "output").mkdir(exist_ok=True)
    (cwd / "output" / "pytest.txt").write_text(f"$ pytest {' '.join(load + args)}\n{done.stdout.strip()}\n")
    if report.exists():
        (cwd / "output" / "pytest-report.json").write_text(report.read_text())
        report.unlink()
    print(f"pytest {' '.join(load + args)}: exit status {done.returncode}")


def run(script: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GRAPHCHECK_DISABLE", None)
    done = subprocess.run(
        [sys.executable, script.name], cwd=script.parent, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} failed:\n{done.stderr}")
    out = script.parent / "output"
    out.mkdir(exist_ok=True)
    text = done.stdout.strip() + "\n"
    (out / f"{script.stem}.txt").write_text(text)
    for i, part in enumerate(text.strip().split("\n\n"), 1):
        (out / f"{script.stem}-{i}.txt").write_text(part.strip() + "\n")
    print(f"{script.relative_to(ROOT)}: {len(text.splitlines())} lines")


if __name__ == "__main__":
    for script in CPU + (GPU if "--gpu" in sys.argv else []):
        run(script)
    for name, args in COMMANDS:
        command(name, args)
    pytest_example()

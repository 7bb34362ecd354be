"""The graphcheck command, run as a subprocess on real scripts."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def graphcheck(*args, cwd=None, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "graphcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_demo_shows_the_planted_bugs_then_the_fixed_producer():
    result = graphcheck("demo", "--device", "cpu", "--replays", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "1. A particle simulation with two planted bugs, captured on cpu:" in out
    assert "graphcheck: 2 findings in Particles.step on cpu" in out
    assert "scalar-drift (1)" in out and "per-call-allocation (1)" in out
    assert "demo.py:" in out, "findings point at the producer's lines"
    assert "graphcheck: Particles.step is replay-safe on cpu" in out
    assert "Replayed the fixed graph 5 times" in out


def test_demo_json_and_picture(tmp_path):
    picture = tmp_path / "demo.dot"
    result = graphcheck("demo", "--device", "cpu", "--replays", "1", "--json", "--dot", str(picture))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert not document["with_bugs"]["ok"] and document["fixed"]["ok"]
    assert {f["kind"] for f in document["with_bugs"]["findings"]} == {"scalar-drift", "per-call-allocation"}
    source = picture.read_text()
    assert source.startswith("digraph graphcheck") and "#0 _wind" in source and "scalar-drift" in source


def test_run_guards_an_unmodified_warp_example():
    import warp.examples

    script = Path(warp.examples.__file__).parent / "core" / "example_graph_capture.py"
    result = graphcheck("run", str(script), "--headless", "--num-frames", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "graphcheck: 1 capture guarded, no findings" in result.stdout


SCRIPT = """
import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + b[i]


class Sim:
    def __init__(self):
        self.x = wp.zeros(8, dtype=float, device="cpu")
        self.v = wp.ones(8, dtype=float, device="cpu")

    def step(self):
        {step}


sim = Sim()
with wp.ScopedCapture(device="cpu") as capture:
    sim.step()
{after}
wp.capture_launch(capture.graph)
print("script done")
"""


def write_script(tmp_path, step, after=""):
    path = tmp_path / "sim.py"
    path.write_text(SCRIPT.format(step=step, after=after))
    return path


def test_run_reports_a_per_call_allocation_and_fails(tmp_path):
    step = textwrap.dedent(
        """scratch = wp.array(np.ones(8, dtype=np.float32), device="cpu")
        wp.launch(add, dim=8, inputs=[scratch, self.v], device="cpu")"""
    )
    result = graphcheck("run", str(write_script(tmp_path, step)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "script done" in result.stdout
    assert "per-call-allocation" in result.stdout and "sim.py:" in result.stdout
    # One cause, one finding: the replay check does not report the same buffer again.
    assert "stale-pointer" not in result.stdout
    assert "1 capture guarded, 1 finding" in result.stdout


def test_run_checks_stale_pointers_at_every_capture_launch(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    after = 'sim.v = wp.full(8, 2.0, dtype=float, device="cpu")'
    report = tmp_path / "report.json"
    result = graphcheck("run", "--report", str(report), str(write_script(tmp_path, step, after)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stale-pointer" in result.stdout
    document = json.loads(report.read_text())
    assert document["ok"] is False
    kinds = [f["kind"] for r in document["reports"] for f in r["findings"]]
    assert kinds == ["stale-pointer"]


def test_run_passes_a_clean_script_and_its_exit_status(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    result = graphcheck("run", str(write_script(tmp_path, step, after="import sys; sys.exit(3)")))
    assert result.returncode == 3
    assert "1 capture guarded, no findings" in result.stdout


FACTORY = """
from tests import producers as P


def unsafe(device=None):
    return P.HostCounter(device or "cpu")


def safe(device=None):
    return P.DeviceCounter(device or "cpu")
"""


@pytest.fixture
def factories(tmp_path):
    (tmp_path / "myfactories.py").write_text(FACTORY)
    return tmp_path


def test_check_validates_a_factory_s_producer(factories):
    env_cwd = factories
    unsafe = graphcheck("check", "myfactories:unsafe", "--device", "cpu", cwd=env_cwd)
    assert unsafe.returncode == 1, unsafe.stdout + unsafe.stderr
    assert "scalar-drift" in unsafe.stdout
    safe = graphcheck("check", "myfactories:safe", "--device", "cpu", "--replays", "3", cwd=env_cwd)
    assert safe.returncode == 0, safe.stdout + safe.stderr
    assert "replay-safe" in safe.stdout
    allowed = graphcheck("check", "myfactories:unsafe", "--allow", "scalar-drift", "--json", cwd=env_cwd)
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["suppressed"]


def test_check_explains_a_bad_target(factories):
    for target, message in [
        ("nocolon", "expected MODULE:FACTORY"),
        ("missing_module:make", "cannot import 'missing_module'"),
        ("myfactories:nothing", "has no callable 'nothing'"),
    ]:
        result = graphcheck("check", target, cwd=factories)
        assert result.returncode == 2 and message in result.stderr, result.stderr

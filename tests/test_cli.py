"""The graphcheck command, run as a subprocess on real scripts."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What Warp itself writes to stderr: no CUDA driver here; Python 3.10 deprecated (Warp 1.19).
WARPS_OWN_LINES = ("Warp CUDA warning", "Warp FutureWarning")


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
    with_bugs, fixed = document["reports"]
    assert (with_bugs["source"], fixed["source"]) == ("with-bugs", "fixed") and document["replays"] == 1
    assert with_bugs["status"] == "failed" and fixed["status"] == "passed" and fixed["ok"]
    assert {f["kind"] for f in with_bugs["findings"]} == {"scalar-drift", "per-call-allocation"}
    source = picture.read_text()
    assert source.startswith("digraph graphcheck") and "#0 _wind" in source and "scalar-drift" in source
    # Buffers by owner path, the drifting value, tooltips and a legend.
    assert "v=owner.v" in source and "x=owner.x" in source and "frame: 3 -> 4" in source  # the later calls compared
    assert 'tooltip="graphcheck.demo._wind argument' in source and "cluster_legend" in source


def test_run_guards_an_unmodified_warp_example():
    import warp.examples

    script = Path(warp.examples.__file__).parent / "core" / "example_graph_capture.py"
    result = graphcheck("run", str(script), "--headless", "--num-frames", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "graphcheck: 1 capture guarded, no findings in what was checked" in result.stdout
    # The program's own output, as python prints it (Warp's banner, its module-load line, the
    # example's timers), then graphcheck's closing lines, nothing else.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    python = subprocess.run([sys.executable, str(script), "--headless", "--num-frames", "2"], capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=600, check=True)  # fmt: skip

    def program(stdout):
        lines = [line for line in stdout.splitlines() if not line.startswith("graphcheck: ")]
        # The first of the two runs compiles the example's module when Warp's kernel cache lacks it.
        return [re.sub(r"\((compiled|cached)\)", "(loaded)", re.sub(r"\d+\.\d+ ms", "N ms", line)) for line in lines]

    assert program(result.stdout) == program(python.stdout), result.stdout
    assert any("initialized" in line for line in program(result.stdout)), "Warp's banner is the program's"


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


# SCRIPT's kernel and Sim, then the program's own gc.capture and replay check.
OWN_REPLAY_CHECK = (
    SCRIPT.partition("\nsim = Sim()")[0].format(step='wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")')
    + """
import graphcheck as gc

sim = Sim()
checked = gc.capture(sim.step, device="cpu", owners=(sim,))
sim.x = wp.zeros(8, dtype=float, device="cpu")  # reallocated after the capture
try:
    checked.launch()
except gc.GraphCheckError:
    print("the program handled its replay check's error")
"""
)


def test_run_counts_the_programs_own_replay_check_in_its_closing_lines(tmp_path):
    """A replay check the program makes itself (checked.launch()) and whose error it handles
    is counted: the closing lines never say "no findings" over a stale pointer."""
    script = tmp_path / "own.py"
    script.write_text(OWN_REPLAY_CHECK)
    result = graphcheck("run", str(script))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the program handled its replay check's error" in result.stdout
    line = OWN_REPLAY_CHECK.splitlines().index("    checked.launch()") + 1
    assert f"1 finding in the program's replay check at own.py:{line} (Sim.step)" in result.stdout
    assert "graphcheck: 1 capture guarded, 1 finding" in result.stdout


def test_run_passes_a_clean_script_and_its_exit_status(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    result = graphcheck("run", str(write_script(tmp_path, step, after="import sys; sys.exit(3)")))
    assert result.returncode == 3
    assert "1 capture guarded, no findings" in result.stdout


FACTORY = """
from tests import kernels as K
from tests import producers as P

axpy = K.axpy  # a kernel, not a factory: check says so


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
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["reports"][0]["suppressed"]


def test_check_says_it_replayed_the_graph_and_claims_no_replay_check_for_replays_0(factories):
    safe = graphcheck("check", "myfactories:safe", "--device", "cpu", "--replays", "3", cwd=factories)
    assert safe.returncode == 0, safe.stdout + safe.stderr
    assert safe.stdout.strip().splitlines()[-1] == "replayed the graph 3 times, then checked: replay, graph"
    none = graphcheck("check", "myfactories:safe", "--device", "cpu", "--replays", "0", cwd=factories)
    assert none.returncode == 0, none.stdout + none.stderr
    assert none.stdout.strip().splitlines()[-1] == "NOT checked: replay: --replays 0 replayed nothing"
    document = json.loads(graphcheck("check", "myfactories:safe", "--replays", "0", "--json", cwd=factories).stdout)
    validate_document(document)
    replay = next(r for r in document["reports"] if r["source"] == "replay")
    assert "replay" not in replay["checks"] and replay["status"] == "not-checked"


def test_check_explains_a_bad_target(factories):
    for target, message in [
        ("nocolon", "expected MODULE:FACTORY"),
        ("missing_module:make", "cannot import 'missing_module'"),
        ("myfactories:nothing", "has no callable 'nothing'"),
        ("myfactories:axpy", "myfactories.axpy is a Warp kernel: check takes the class or function that builds"),
    ]:
        result = graphcheck("check", target, cwd=factories)
        assert result.returncode == 2 and message in result.stderr, result.stderr


# -- honest verdicts, exit codes and machine output ----------------------------------------


def validate_document(document):
    from tests.test_report import validate_document as validate

    validate(document)


def graphcheck_env(*args, env=None, cwd=None):
    """graphcheck as a subprocess with extra environment variables (NO_COLOR and GRAPHCHECK_DISABLE unset)."""
    full = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in ("NO_COLOR", "FORCE_COLOR", "GRAPHCHECK_DISABLE", "COLUMNS"):
        full.pop(name, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "graphcheck", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full, timeout=600, check=False)  # fmt: skip


def test_exit_codes_are_documented_in_help():
    for command in ([], ["check"], ["run"], ["demo"]):
        result = graphcheck(*command, "--help")
        assert result.returncode == 0
        text = " ".join(result.stdout.split())
        assert "0 passed" in text and "1 findings" in text and "2 usage or configuration error" in text
        assert "3 internal error or unsupported Warp" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--allow", "scaler-drift", "never_imported:make"],
         "graphcheck check: error: unknown finding kind 'scaler-drift' (did you mean 'scalar-drift'?)"),
        (["chek", "x:y"], "graphcheck: error: argument COMMAND: invalid choice 'chek' (did you mean 'check'?)"),
        (["check", "--device", "cuda:9", "never_imported:make"],
         "graphcheck check: error: --device: cannot capture on"),
        (["check", "--dot", ".", "never_imported:make"],
         "graphcheck check: error: cannot write --dot .: it is a folder (name a file in it, e.g. graph.dot)"),
        (["run", "--allow", "stale-pointr", "no_such_script.py"],
         "graphcheck run: error: unknown finding kind 'stale-pointr' (did you mean 'stale-pointer'?)"),
        (["check", "--output-format", "xml", "m:f"],
         "graphcheck check: error: argument --output-format: invalid choice"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_and_exit_2_before_anything_runs(tmp_path, args, message):
    (tmp_path / "never_imported.py").write_text("raise SystemExit('imported!')\n")
    result = graphcheck(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith(WARPS_OWN_LINES)]
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert "Traceback" not in result.stderr and "imported!" not in result.stderr + result.stdout


def test_a_factory_that_raises_is_one_line_naming_where(tmp_path):
    (tmp_path / "broken.py").write_text("def make(device=None):\n    raise ValueError('no such scene: forest')\n")
    result = graphcheck("check", "broken:make", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 2
    assert "graphcheck check: error: broken:make() raised ValueError at broken.py:2: no such scene: forest" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_an_unsupported_warp_and_an_internal_error_exit_3():
    # graphcheck's own check of Warp's internals is made to fail: Warp itself is untouched.
    probe = (
        "import sys, graphcheck._warp as w\n"
        "def {name}(*a, **k): raise {error}\n"
        "w.check_warp = {name}\n"
        "from graphcheck.cli import main\n"
        "sys.exit(main(['check', '--device', 'cpu', 'tests.producers:DeviceCounter']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    unsupported = probe.format(name="check_warp", error="w.UnsupportedWarpError('Warp 9.0 lacks wp_cuda_graph')")
    result = subprocess.run([sys.executable, "-c", unsupported], capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.returncode == 3
    assert "graphcheck: error: Warp 9.0 lacks wp_cuda_graph" in result.stderr and "Traceback" not in result.stderr
    internal = probe.format(name="check_warp", error="KeyError('a bug')")
    result = subprocess.run([sys.executable, "-c", internal], capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.returncode == 3 and "graphcheck: internal error: KeyError" in result.stderr


def test_check_json_is_the_versioned_envelope(factories):
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "json", cwd=factories)
    assert result.returncode == 1
    document = json.loads(result.stdout)
    validate_document(document)
    assert (document["schema"], document["status"], document["ok"], document["device"]) == (
        "graphcheck.report/1", "failed", False, "cpu"
    )  # fmt: skip
    (report,) = document["reports"]
    (finding,) = report["findings"]
    assert finding["accept"].startswith('allow=[gc.Allow("scalar-drift"')
    safe = graphcheck("check", "myfactories:safe", "--device", "cpu", "--json", cwd=factories)
    document = json.loads(safe.stdout)
    validate_document(document)
    assert safe.returncode == 0 and document["status"] == "passed"
    assert [r["source"] for r in document["reports"]] == ["validate", "replay"]


def test_github_annotations_and_junit(factories):
    github = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "github", cwd=factories)
    assert github.returncode == 1
    (line,) = [line for line in github.stdout.splitlines() if line.startswith("::error")]
    assert line.startswith("::error file=") and ",title=scalar-drift::" in line
    assert re.search(r"file=[^,]*producers\.py,line=\d+,", line)
    junit = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "junit", cwd=factories)
    import xml.etree.ElementTree as ET

    suites = ET.fromstring(junit.stdout.split("\n", 1)[1])
    (case,) = suites.iter("testcase")
    (failure,) = case.iter("failure")
    assert failure.get("type") == "scalar-drift" and "1 finding" in failure.get("message")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["graphcheck.status"] == "failed"


def test_output_writes_the_report_to_a_file_and_the_verdict_to_the_log(factories):
    result = graphcheck("check", "myfactories:unsafe", "--json", "--output", "out.json", cwd=factories)
    assert result.returncode == 1
    assert result.stdout.strip().startswith("graphcheck: 1 finding")
    validate_document(json.loads((factories / "out.json").read_text()))


def test_quiet_prints_verdicts_only(factories):
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--quiet", cwd=factories)
    assert result.returncode == 1
    assert result.stdout.strip().splitlines() == [result.stdout.strip().splitlines()[0]]
    assert result.stdout.startswith("graphcheck: 1 finding in HostCounter.step on cpu")


def test_colour_follows_force_color_and_no_color(factories):
    forced = graphcheck_env("check", "myfactories:unsafe", env={"FORCE_COLOR": "1"}, cwd=factories)
    assert "\033[" in forced.stdout
    plain = graphcheck_env("check", "myfactories:unsafe", env={"FORCE_COLOR": "1", "NO_COLOR": "1"}, cwd=factories)
    assert "\033[" not in plain.stdout
    assert "\033[" not in graphcheck_env("check", "myfactories:unsafe", cwd=factories).stdout


def test_the_text_fits_the_terminal(factories, tmp_path):
    result = graphcheck_env("check", "myfactories:unsafe", env={"COLUMNS": "60"}, cwd=factories)
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    run = graphcheck_env("run", str(write_script(tmp_path, step)), env={"COLUMNS": "60"})
    assert "NOT checked: compare" in run.stdout
    for line in result.stdout.splitlines() + run.stdout.splitlines():
        assert len(line) <= 60 or " " not in line.strip(), line


def test_disabled_checking_says_not_checked_everywhere(factories, tmp_path):
    off = {"GRAPHCHECK_DISABLE": "1"}
    check = graphcheck_env("check", "myfactories:unsafe", "--device", "cpu", env=off, cwd=factories)
    assert check.returncode == 0 and "NOT checked" in check.stdout and "replay-safe" not in check.stdout
    strict = graphcheck_env("check", "myfactories:unsafe", "--strict", env=off, cwd=factories)
    assert strict.returncode == 1
    document = json.loads(graphcheck_env("check", "myfactories:unsafe", "--json", env=off, cwd=factories).stdout)
    validate_document(document)
    assert document["status"] == "not-checked" and document["ok"] is False and document["checking"] is False
    demo = graphcheck_env("demo", "--device", "cpu", "--replays", "1", env=off)
    assert "NOT checked" in demo.stdout and "every address" not in demo.stdout
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    run = graphcheck_env("run", str(write_script(tmp_path, step)), env=off)
    assert run.returncode == 0
    assert (
        run.stdout.strip().splitlines()[-1]
        == "graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, 1 capture ran unchecked"
    )
    assert (
        graphcheck_env("check", "myfactories:unsafe", env={"GRAPHCHECK_DISABLE": "false"}, cwd=factories).returncode
        == 1
    )


def test_disabled_value_checks_are_a_plain_not_checked_run_with_exit_0(factories):
    off = {"GRAPHCHECK_DISABLE": "1"}
    for flag in ("--values", "--conformance"):
        for target in ("myfactories:safe", "myfactories:unsafe"):
            result = graphcheck_env("check", target, flag, "--device", "cpu", env=off, cwd=factories)
            assert result.returncode == 0, result.stdout + result.stderr
            assert "NOT checked" in result.stdout and "deterministic" not in result.stderr, result.stdout
            assert "checking disabled by GRAPHCHECK_DISABLE" in result.stdout
        result = graphcheck_env("check", "myfactories:safe", flag, "--json", env=off, cwd=factories)
        document = json.loads(result.stdout)
        assert document["status"] == "not-checked" and document["checking"] is False


def test_run_without_reference_call_says_what_it_did_not_check_and_strict_fails(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    script = str(write_script(tmp_path, step))
    result = graphcheck("run", script)
    assert result.returncode == 0, result.stderr
    closing = result.stdout.strip().splitlines()[-2:]
    # The closing line itself says what was not compared, not only a later NOT-checked line.
    assert closing[0] == (
        "graphcheck: 1 capture guarded, no findings in what was checked; the capture was NOT compared with an eager "
        "call: rerun with `graphcheck run --reference-call`"
    )
    assert closing[1].startswith("graphcheck: NOT checked: compare: no reference call")
    assert "graphcheck run --reference-call" in closing[1] and "graphcheck check MODULE:FACTORY" in closing[1]
    assert "pass reference=" not in result.stdout, "the command line's hint, not the Python API's"
    assert graphcheck("run", "--strict", script).returncode == 1


COUNTER_SCRIPT = """
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def advance(x: wp.array(dtype=float), t: float):
    i = wp.tid()
    x[i] = x[i] + t


class Sim:
    def __init__(self):
        self.x = wp.zeros(8, dtype=float, device="cpu")
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(advance, dim=8, inputs=[self.x, float(self.frame)], device="cpu")


sim = Sim()
with wp.ScopedCapture(device="cpu") as capture:
    sim.step()
print("frames stepped:", sim.frame)
with wp.ScopedCapture(device="cpu") as other:
    sim.step()
    frame = sim.frame
"""


def test_run_reference_call_finds_drift_and_says_the_program_advances_one_extra_step(tmp_path):
    script = tmp_path / "counter.py"
    script.write_text(COUNTER_SCRIPT)
    plain = graphcheck("run", str(script))
    assert plain.returncode == 0 and "frames stepped: 1" in plain.stdout
    result = graphcheck("run", "--reference-call", "--json", "--output", str(tmp_path / "r.json"), str(script))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "one extra step per capture" in result.stderr
    assert "frames stepped: 2" in result.stdout, "the block ran once more eagerly after the capture"
    assert "the program took 1 extra step" in result.stdout
    document = json.loads((tmp_path / "r.json").read_text())
    validate_document(document)
    first, second = document["reports"]
    assert [f["kind"] for f in first["findings"]] == ["scalar-drift"] and "compare" in first["checks"]
    (drift,) = first["findings"]
    # The graph the program keeps is its own: it baked frame 1, as it would without graphcheck.
    assert (drift["captured"], drift["reference"]) == (1.0, 2.0)
    assert "2.0 in the eager call after the capture, 1.0 captured" in drift["message"]
    assert "a bug if the program means it to advance" in drift["fix"] and "set-up captured once" in drift["fix"]
    # A block that is not plain calls cannot be run again: the compare line says so.
    reason = dict((s["check"], s["reason"]) for s in second["skipped"])["compare"]
    line = COUNTER_SCRIPT.splitlines().index("    frame = sim.frame") + 1
    assert reason.startswith(
        f"the capture block cannot run again as it is: counter.py:{line}, `frame = sim.frame`, is not a call (only "
        "calls, and "
        "names assigned a call's value, run again unchanged); validate the step with `graphcheck check"
    ), reason


ASSIGNED = """
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def advance(x: wp.array(dtype=float), t: float):
    i = wp.tid()
    x[i] = x[i] + t


class Sim:
    def __init__(self):
        self.x = wp.zeros(8, dtype=float, device="cpu")
        self.frame = 0
        self.last = None

    def step(self):
        self.frame += 1
        wp.launch(advance, dim=8, inputs=[self.x, float(self.frame)], device="cpu")
        return self.frame


sim = Sim()
with wp.ScopedCapture(device="cpu") as capture:
    returned: int = sim.step()
print("returned", returned)
with wp.ScopedCapture(device="cpu") as other:
    sim.last = sim.step()
"""


def test_reference_call_runs_a_block_that_assigns_a_call_s_value_to_a_name(tmp_path):
    """``y = sim.step()`` runs again in a copy of the frame's variables: the program's ``y`` keeps what
    its capture returned. An assignment to an attribute would change the program: refused, saying so."""
    (tmp_path / "assigned.py").write_text(ASSIGNED)
    result = graphcheck("run", "--reference-call", "--quiet", "--report", "r.json", "assigned.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "returned 1" in result.stdout, "the program's name holds the capture's value, not the eager call's"
    assert "--reference-call:" not in result.stderr, "--quiet: no banner"
    first, second = json.loads((tmp_path / "r.json").read_text())["reports"]
    assert [f["kind"] for f in first["findings"]] == ["scalar-drift"] and "compare" in first["checks"]
    line = ASSIGNED.splitlines().index("    sim.last = sim.step()") + 1
    assert dict((s["check"], s["reason"]) for s in second["skipped"])["compare"].startswith(
        f"the capture block cannot run again as it is: assigned.py:{line}, `sim.last = sim.step()`, assigns to "
        "sim.last, which running the block again would change (assign the call's value to a name)"
    )


def test_a_stale_pointer_from_run_names_the_capture_launch_line(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    after = 'sim.v = wp.full(8, 2.0, dtype=float, device="cpu")'
    script = write_script(tmp_path, step, after)
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if text.startswith("wp.capture_launch"))
    result = graphcheck("run", "--report", str(tmp_path / "r.json"), str(script))
    assert result.returncode == 1
    assert f"replayed by wp.capture_launch at sim.py:{line}" in result.stdout
    assert f"graphcheck: 1 finding in wp.capture_launch at sim.py:{line}" in result.stdout
    document = json.loads((tmp_path / "r.json").read_text())
    validate_document(document)
    (replay,) = [r for r in document["reports"] if r["source"] == "replay"]
    assert replay["findings"][0]["detail"]["replayed_at"].endswith(f"sim.py:{line}")


def test_run_records_the_program_s_exit_status(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    script = write_script(tmp_path, step, after="import sys; sys.exit(3)")
    result = graphcheck("run", "--json", "--output", str(tmp_path / "out.json"), str(script))
    assert result.returncode == 3, "the program's own failure wins"
    document = json.loads((tmp_path / "out.json").read_text())
    validate_document(document)
    assert document["program_exit"] == 3 and document["status"] == "partial"
    raising = write_script(tmp_path, step, after="raise RuntimeError('the program failed')")
    result = graphcheck("run", "--report", str(tmp_path / "r.json"), str(raising))
    assert result.returncode == 1 and "RuntimeError: the program failed" in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["program_exit"] == 1


def test_demo_json_validates(tmp_path):
    result = graphcheck("demo", "--device", "cpu", "--replays", "1", "--json")
    document = json.loads(result.stdout)
    validate_document(document)
    assert document["command"] == "demo" and document["checking"] is True


def test_pyproject_settings_apply_and_options_win(factories):
    (factories / "pyproject.toml").write_text('[tool.graphcheck]\nallow = ["scalar-drift"]\ndevice = "cpu"\n')
    allowed = graphcheck("check", "myfactories:unsafe", "--json", cwd=factories)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    (report,) = json.loads(allowed.stdout)["reports"][:1]
    assert [f["kind"] for f in report["suppressed"]] == ["scalar-drift"] and report["device"] == "cpu"
    (factories / "pyproject.toml").write_text('[tool.graphcheck]\nallow = ["scaler-drift"]\n')
    bad = graphcheck("check", "myfactories:unsafe", cwd=factories)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "graphcheck check: error: pyproject.toml [tool.graphcheck]: allow: unknown finding kind 'scaler-drift' "
        "(did you mean 'scalar-drift'?)"
    )


def test_an_allowance_that_matched_nothing_is_reported_by_run_once_as_it_was_given(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    script = str(write_script(tmp_path, step))
    result = graphcheck("run", "--allow", "scalar-drift:integrat", script)
    assert "graphcheck: allowance matched nothing: --allow scalar-drift:integrat (check the kernel" in result.stdout
    # With findings, the report is printed too: the closing lines say the unused allowance, once.
    step = textwrap.dedent(
        """scratch = wp.array([1.0] * 8, dtype=float, device="cpu")
        wp.launch(add, dim=8, inputs=[scratch, self.v], device="cpu")"""
    )
    result = graphcheck("run", "--allow", "scalar-drift:integrat", str(write_script(tmp_path, step)))
    assert result.returncode == 1 and "per-call-allocation" in result.stdout, result.stdout
    assert result.stdout.count("allowance matched nothing") == 1, result.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.graphcheck]\nallow = [{ kind = "copy-drift", kernel = "k" }]\n')
    (tmp_path / "myfactories.py").write_text(FACTORY)
    result = graphcheck("check", "--device", "cpu", "--allow", "DIM-DRIFT", "myfactories:unsafe", cwd=tmp_path)
    assert 'allowance matched nothing: { kind = "copy-drift", kernel = "k" } in [tool.graphcheck] allow of' in (
        result.stdout
    ), result.stdout
    assert "allowance matched nothing: --allow dim-drift (check" in result.stdout, "a kind in any case"


def test_strict_ownership_reaches_the_guard_of_every_capture(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    after = "print('strict:', capture._graphcheck.strict_ownership)"
    script = str(write_script(tmp_path, step, after))
    assert "strict: True" in graphcheck("run", "--strict-ownership", script).stdout
    assert "strict: False" in graphcheck("run", script).stdout
    (tmp_path / "pyproject.toml").write_text("[tool.graphcheck]\nstrict_ownership = true\n")
    assert "strict: True" in graphcheck("run", script, cwd=tmp_path).stdout


def graphviz_stand_in(tools):
    """A stand-in for Graphviz's dot on PATH: writes what ``-T<fmt>`` asks for where ``-o`` says,
    from the file it is given or from standard input, as ``dot`` does."""
    tools.mkdir()
    dot = tools / "dot"
    writes = (
        "import sys\n"
        "args = sys.argv[1:]\n"
        "out = args[args.index('-o') + 1]\n"
        "fmt = next(a[2:] for a in args if a.startswith('-T'))\n"
        "inputs = [a for a in args if not a.startswith('-') and a != out]\n"
        "source = open(inputs[0]).read() if inputs else sys.stdin.read()\n"
        "assert source.startswith('digraph'), source[:40]\n"
        "open(out, 'w').write(f'<{fmt}/>')\n"
    )
    dot.write_text(f"#!{sys.executable}\n{writes}")
    dot.chmod(0o755)


@pytest.mark.parametrize("graphviz", [False, True], ids=["without_graphviz", "with_graphviz"])
def test_dot_writes_the_svg_with_graphviz_or_says_how_to_get_it(tmp_path, monkeypatch, graphviz):
    # PATH holds only a stand-in for Graphviz's dot, or nothing: both claims are checked on every machine.
    tools = tmp_path / "bin"
    if graphviz:
        graphviz_stand_in(tools)
    monkeypatch.setenv("PATH", str(tools))
    step = textwrap.dedent(
        """scratch = wp.array([1.0] * 8, dtype=float, device="cpu")  # host data, gone after the call
        wp.launch(add, dim=8, inputs=[scratch, self.v], device="cpu")"""
    )
    picture = tmp_path / "run.dot"
    script = str(write_script(tmp_path, step))
    result = graphcheck("run", "--dot", str(picture), script)
    assert picture.read_text().startswith("digraph graphcheck") and "per-call-allocation" in picture.read_text()
    svg = picture.with_suffix(".svg")
    hint = f"dot -Tsvg {picture} -o {svg}"
    if graphviz:
        assert svg.read_text() == "<svg/>" and f"wrote {svg}" in result.stderr and hint not in result.stderr
    else:
        assert hint in result.stderr and not svg.exists(), result.stderr
    # A picture's suffix names what is written: rendered by Graphviz, never DOT text under that name.
    for suffix in (".svg", ".png"):
        rendered = tmp_path / f"g{suffix}"
        result = graphcheck("run", "--dot", str(rendered), script)
        if graphviz:
            assert result.returncode == 1 and rendered.read_text() == f"<{suffix[1:]}/>", result.stderr
            assert f"wrote {rendered}" in result.stderr and "dot -T" not in result.stderr, result.stderr
        else:
            assert result.returncode == 2 and not rendered.exists() and "script done" not in result.stdout
            source = rendered.with_suffix(".dot")
            assert result.stderr.splitlines()[-1] == (
                f"graphcheck run: error: --dot {rendered}: a .{suffix[1:]} picture needs Graphviz's dot program, "
                f"which is not installed: install Graphviz, or write the DOT text (--dot {source}) and render it "
                f"where Graphviz is (dot -T{suffix[1:]} {source} -o {rendered})"
            ), result.stderr


def test_the_docs_pasted_outputs_carry_no_machine_paths():
    outputs = [*(ROOT / "docs" / "examples" / "output").iterdir(),
               *(ROOT / "docs" / "findings" / "examples" / "output").iterdir()]  # fmt: skip
    for path in outputs:
        text = path.read_text()
        assert str(ROOT) not in text and "/tmp/" not in text and "/home/" not in text, path


def test_run_of_a_program_without_captures_says_not_checked(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('no graphs here')\n")
    result = graphcheck("run", str(script))
    assert result.returncode == 0 and "no graphs here" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == (
        "graphcheck: NOT checked: the program opened no wp.ScopedCapture to guard"
    )
    assert graphcheck("run", "--strict", str(script)).returncode == 1


def test_run_guards_captures_opened_with_capture_begin_and_end(tmp_path):
    script = tmp_path / "begin_end.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            import warp as wp

            wp.config.log_level = wp.LOG_WARNING


            @wp.kernel
            def add(a: wp.array(dtype=float), b: wp.array(dtype=float)):
                i = wp.tid()
                a[i] = a[i] + b[i]


            x = wp.zeros(8, dtype=float, device="cpu")
            wp.capture_begin(device="cpu")
            upload = wp.array(np.ones(8, dtype=np.float32), device="cpu")
            wp.launch(add, dim=8, inputs=[x, upload], device="cpu")
            graph = wp.capture_end(device="cpu")
            wp.capture_launch(graph)
            print("script done")
            """
        )
    )
    result = graphcheck("run", str(script))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "script done" in result.stdout
    assert "per-call-allocation" in result.stdout and "1 capture guarded" in result.stdout


def test_run_reference_call_says_each_reason_a_capture_was_not_compared_with_its_count(tmp_path):
    script = tmp_path / "two_reasons.py"
    script.write_text(
        textwrap.dedent(
            """
            import warp as wp

            wp.config.log_level = wp.LOG_WARNING


            @wp.kernel
            def add(a: wp.array(dtype=float)):
                i = wp.tid()
                a[i] = a[i] + 1.0


            x = wp.zeros(8, dtype=float, device="cpu")
            with wp.ScopedCapture(device="cpu") as loop:
                for _ in range(2):
                    wp.launch(add, dim=8, inputs=[x], device="cpu")
            wp.capture_begin(device="cpu")
            wp.launch(add, dim=8, inputs=[x], device="cpu")
            graph = wp.capture_end(device="cpu")
            wp.capture_launch(graph)
            """
        )
    )
    result = graphcheck("run", "--reference-call", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("graphcheck: NOT checked: compare")]
    assert len(lines) == 2, result.stdout
    assert lines[0].startswith("graphcheck: NOT checked: compare: 1 of the 2 captures: the capture block cannot run "
                               "again as it is: two_reasons.py:15, `for _ in range(2):`, is not a call")  # fmt: skip
    assert lines[1].startswith(
        "graphcheck: NOT checked: compare: 1 of the 2 captures: the capture is not opened by a with statement"
    )


def test_run_with_reference_calls_leaves_a_programs_own_graph_guard_alone():
    result = graphcheck("run", "--reference-call", "examples/rl_env.py", "--steps", "20", "--num-envs", "64")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "launch-sequence-drift" not in result.stdout and "Traceback" not in result.stderr
    assert "20 replayed steps of 64 environments match the eager rollout" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "graphcheck: 1 capture guarded, no findings"


def test_run_github_output_warns_for_each_check_the_captures_did_not_run(tmp_path):
    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    result = graphcheck("run", "--output-format", "github", str(write_script(tmp_path, step)))
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 1, result.stdout
    assert warnings[0].startswith("::warning title=graphcheck%3A compare NOT checked::no reference call")
    assert "--reference-call" in warnings[0] and "not applicable" not in result.stdout
    off = graphcheck_env("run", "--output-format", "github", str(write_script(tmp_path, step)),
                         env={"GRAPHCHECK_DISABLE": "1"})  # fmt: skip
    assert off.returncode == 0 and "::warning title=graphcheck%3A NOT checked::GRAPHCHECK_DISABLE is set" in off.stdout


# -- machine output that machines can read ---------------------------------------------------

PRINTING_PRODUCER = """
import os

import warp as wp


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + b[i]


print("imported")


class Sim:
    def __init__(self, device=None):
        print("building")
        self.a = wp.zeros(4, dtype=float, device=device)
        self.b = wp.ones(4, dtype=float, device=device)

    def step(self):
        print("stepping")
        os.write(1, b"native printf\\n")
        wp.launch(add, dim=4, inputs=[self.a, self.b], device=self.a.device)


def make(device=None):
    return Sim(device)
"""


def test_check_keeps_standard_output_for_the_document(tmp_path):
    import xml.etree.ElementTree as ET

    (tmp_path / "printing.py").write_text(PRINTING_PRODUCER)
    readers = {"json": json.loads, "sarif": json.loads, "junit": ET.fromstring}
    for fmt, read in readers.items():
        result = graphcheck("check", "--device", "cpu", "--output-format", fmt, "printing:make", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        read(result.stdout)  # the document alone
        for said in ("imported", "building", "stepping", "native printf"):
            assert said in result.stderr, (fmt, said, result.stderr)
    github = graphcheck("check", "--device", "cpu", "--output-format", "github", "printing:make", cwd=tmp_path)
    assert github.stdout.startswith("graphcheck: ") and "stepping" not in github.stdout
    text = graphcheck("check", "--device", "cpu", "printing:make", cwd=tmp_path)
    assert text.stdout.startswith("imported\nbuilding\nstepping"), "text: the producer's output is where it was"


def test_a_passing_check_with_output_prints_its_verdict_once(tmp_path):
    (tmp_path / "printing.py").write_text(PRINTING_PRODUCER)
    for fmt in ("text", "json"):
        result = graphcheck("check", "--device", "cpu", "--output-format", fmt, "--output", "out", "printing:make",
                            cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
        verdicts = [line for line in result.stdout.splitlines() if line.startswith("graphcheck: ")]
        assert verdicts == ["graphcheck: Sim.step is replay-safe on cpu (1 operation)"], result.stdout


def test_junit_failures_agree_with_the_exit_status_under_every_flag(tmp_path):
    import xml.etree.ElementTree as ET

    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    script = str(write_script(tmp_path, step))

    def failures(*args):
        result = graphcheck("run", "--output-format", "junit", "--output", str(tmp_path / "j.xml"), *args)
        suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
        return result.returncode, int(suite.get("failures"))

    assert failures(script) == (0, 0)
    assert failures("--strict", script) == (1, 1), "a partial report fails under --strict, in the document too"
    (tmp_path / "exits.py").write_text(Path(script).read_text() + "\nimport sys\nsys.exit(3)\n")
    assert failures(str(tmp_path / "exits.py")) == (3, 1), "the program's own failing status is a failure too"
    (tmp_path / "none.py").write_text("print('no capture')\n")
    assert failures("--strict", str(tmp_path / "none.py")) == (1, 1)


def test_every_document_agrees_with_the_exit_status_under_strict(tmp_path, factories):
    """JSON says the exit status and why; SARIF's invocation does not succeed and says its exit
    code; GitHub annotates an error where --strict fails for a check that did not run."""
    from tests.test_sarif import validate as validate_sarif

    step = 'wp.launch(add, dim=8, inputs=[self.x, self.v], device="cpu")'
    script = str(write_script(tmp_path, step))
    for strict, status in ((False, 0), (True, 1)):
        flag = ["--strict"] if strict else []
        result = graphcheck("run", "--json", *flag, script)
        document = json.loads(result.stdout)
        validate_document(document)
        assert result.returncode == document["exit_status"] == status, result.stderr
        assert document["exit_reason"] == (
            "partial: some checks did not run (--strict)" if strict
            else "partial: some checks did not run (exit status 1 with --strict)"
        )  # fmt: skip
        result = graphcheck("run", "--output-format", "sarif", *flag, script)
        log = json.loads(result.stdout)
        validate_sarif(log)
        (invocation,) = log["runs"][0]["invocations"]
        assert (invocation["exitCode"], invocation["executionSuccessful"]) == (status, not strict)
        assert {n["level"] for n in invocation["toolExecutionNotifications"]} >= {"error" if strict else "warning"}
        result = graphcheck("run", "--output-format", "github", *flag, script)
        assert result.returncode == status
        level = "::error " if strict else "::warning "
        assert any(line.startswith(f"{level}title=graphcheck%3A compare NOT checked") for line in
                   result.stdout.splitlines()), result.stdout  # fmt: skip
    # check: the same rule; findings are the command's own failure, a successful analysis.
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--json", "--strict", cwd=factories)
    document = json.loads(result.stdout)
    assert (result.returncode, document["exit_status"], document["exit_reason"]) == (1, 1, "failed: findings")
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "sarif", cwd=factories)
    (invocation,) = json.loads(result.stdout)["runs"][0]["invocations"]
    assert (invocation["exitCode"], invocation["executionSuccessful"]) == (1, True)


def test_demo_json_status_combines_its_reports_and_demo_says_its_own_verdict():
    result = graphcheck("demo", "--device", "cpu", "--replays", "1", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    validate_document(document)
    assert [r["status"] for r in document["reports"]] == ["failed", "passed"]
    assert (document["status"], document["ok"], document["demo"]) == ("failed", False, "passed")


# -- words ------------------------------------------------------------------------------------


def test_the_command_line_s_accept_lines_are_allow_options(factories):
    text = graphcheck("check", "myfactories:unsafe", "--device", "cpu", cwd=factories)
    accepts = [line.strip() for line in text.stdout.splitlines() if line.strip().startswith("accept:")]
    assert accepts and all(line.startswith("accept: --allow ") for line in accepts), text.stdout
    spec = accepts[0].removeprefix("accept: --allow ")
    allowed = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--allow", spec, cwd=factories)
    assert allowed.returncode == 0 and "allowed (1)" in allowed.stdout, "the line accepts the finding as printed"
    github = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "github", cwd=factories)
    assert "%0Aaccept: --allow " in github.stdout and "gc.Allow" not in github.stdout
    document = json.loads(graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--json", cwd=factories).stdout)
    assert document["reports"][0]["findings"][0]["accept"].startswith("allow=[gc.Allow("), "JSON keeps the API's"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["check", "--bogus", "x:y"],
         "graphcheck check: error: unrecognized arguments: --bogus (see graphcheck check --help)"),
        (["demo", "--jsn"],
         "graphcheck demo: error: unrecognized arguments: --jsn (did you mean --json?) (see graphcheck demo --help)"),
        (["run"], "graphcheck run: error: the following arguments are required: SCRIPT (see graphcheck run --help)"),
        (["explain", "a", "b"], "graphcheck explain: error: unrecognized arguments: b (see graphcheck explain --help)"),
    ],
)  # fmt: skip
def test_a_subcommand_s_usage_error_points_to_its_own_help(args, said):
    result = graphcheck(*args)
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if not line.startswith(WARPS_OWN_LINES)] == [said]

"""``graphcheck run SCRIPT`` behaves like ``python SCRIPT``: the program's messages, tracebacks,
exit status and standard output are its own; graphcheck's verdict and documents come apart from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_cli import ROOT, WARPS_OWN_LINES, graphcheck

RAISES = """\
def inner():
    raise ValueError("the program's own error")


def outer():
    inner()


outer()
"""


def python(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_the_program_s_traceback_is_the_one_python_prints(tmp_path):
    (tmp_path / "prog.py").write_text(RAISES)
    ours = graphcheck("run", "prog.py", cwd=tmp_path)
    theirs = python("prog.py", cwd=tmp_path)
    assert ours.returncode == theirs.returncode == 1
    traceback = ours.stderr[ours.stderr.index("Traceback") :].split("graphcheck: ")[0]
    assert traceback == theirs.stderr, ours.stderr
    assert "runpy" not in ours.stderr and f"graphcheck{os.sep}" not in ours.stderr


def test_sys_exit_with_a_message_prints_it_and_exits_1(tmp_path):
    (tmp_path / "prog.py").write_text("import sys\nsys.exit('config file not found: sim.yaml')\n")
    result = graphcheck("run", "prog.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if not line.startswith(WARPS_OWN_LINES)]
    assert lines[0] == "config file not found: sim.yaml", result.stderr
    assert "exit status 1 is the program's own" in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to oneself is POSIX")
def test_ctrl_c_exits_130(tmp_path):
    (tmp_path / "prog.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n")
    result = graphcheck("run", "prog.py", cwd=tmp_path)
    assert result.returncode == 130, result.stderr
    assert "KeyboardInterrupt" in result.stderr and "runpy" not in result.stderr


def test_the_program_s_exit_status_is_kept_and_said_to_be_its_own(tmp_path):
    (tmp_path / "prog.py").write_text("import sys\nsys.exit(2)\n")
    result = graphcheck("run", "prog.py", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "graphcheck: exit status 2 is the program's own (graphcheck's exit codes apply when the program exits with 0)"
        in result.stderr
    )


def test_a_document_never_mixes_into_the_program_s_output(tmp_path):
    """One rule for run and check: with a document (or annotations) on standard output, the code
    graphcheck runs prints to standard error while it runs, as pytest captures a test's output."""
    (tmp_path / "prog.py").write_text("import os\nprint('the program speaks')\nos.write(1, b'native printf\\n')\n")
    result = graphcheck("run", "--json", "prog.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["command"] == "run", "standard output is the document alone"
    assert "the program speaks" in result.stderr and "native printf" in result.stderr
    junit = graphcheck("run", "--output-format", "junit", "prog.py", cwd=tmp_path)
    assert junit.stdout.startswith("<?xml") and "the program speaks" in junit.stderr
    # Text, or a document written to a file: the program's output is its own, on standard output.
    result = graphcheck("run", "--json", "--output", "r.json", "prog.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["the program speaks", "native printf"]
    assert "{" not in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["command"] == "run"

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


SEES = '''\
from __future__ import annotations  # the program's own future imports; graphcheck's are not inherited
import os
import sys

import warp as wp


def annotated(x: int): ...


print("argv:", sys.argv)
print("file:", __file__, "name:", __name__, "spec:", __spec__, "package:", __package__)
print("path0:", sys.path[0], "main:", sys.modules["__main__"].__file__)
print("loader:", type(__loader__).__name__, "annotations:", annotated.__annotations__)
print("warp log level:", wp.config.log_level)
'''


def test_the_program_sees_what_python_gives_it(tmp_path):
    """sys.argv[0] as given (runpy would make it absolute), __file__ absolute, Warp's configuration
    untouched (graphcheck neither initialises Warp before the program nor quiets it)."""
    (tmp_path / "prog.py").write_text(SEES)
    (tmp_path / "plain.py").write_text(SEES.split("\n", 1)[1])  # no __future__ import: annotations are types
    for script in ("prog.py", "plain.py"):
        ours = graphcheck("run", script, "--flag", "value", cwd=tmp_path)
        theirs = python(script, "--flag", "value", cwd=tmp_path)
        assert ours.returncode == theirs.returncode == 0, ours.stderr
        program = [line for line in ours.stdout.splitlines() if not line.startswith("graphcheck: ")]
        assert program == theirs.stdout.splitlines(), ours.stdout
    assert "argv: ['plain.py', '--flag', 'value']" in ours.stdout


OS_EXIT = """\
import os
import warp as wp

wp.config.log_level = wp.LOG_WARNING
x = wp.zeros(4, dtype=float, device="cpu")
child = os.fork() if hasattr(os, "fork") else 0
if child == 0 and hasattr(os, "fork"):
    os._exit(0)  # a forked child's exit: graphcheck reports nothing there
os.waitpid(child, 0)
with wp.ScopedCapture(device="cpu") as capture:
    scratch = wp.array([1.0] * 4, dtype=float, device="cpu")  # a per-call allocation
    wp.copy(x, scratch)
print("the program is done", flush=True)
os._exit({status})
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
@pytest.mark.parametrize(("status", "expected"), [(0, 1), (4, 4)])
def test_os_exit_after_a_capture_still_reports(tmp_path, status, expected):
    """os._exit skips every finally and exit handler: graphcheck reports first, then the program
    exits (with graphcheck's status when it exits with 0, else its own)."""
    (tmp_path / "prog.py").write_text(OS_EXIT.format(status=status))
    result = graphcheck("run", "prog.py", cwd=tmp_path)
    assert result.returncode == expected, result.stdout + result.stderr
    assert result.stdout.startswith("the program is done\n"), result.stdout
    assert result.stdout.count("graphcheck: 1 capture guarded, 1 finding") == 1, result.stdout
    assert "per-call-allocation" in result.stdout
    assert ("exit status 4 is the program's own" in result.stderr) == bool(status), result.stderr


CAPTURE_RAISES = """\
import os
import signal
import warp as wp

wp.config.log_level = wp.LOG_WARNING
x = wp.zeros(4, dtype=float, device="cpu")
with wp.ScopedCapture(device="cpu") as capture:
    x.fill_(1.0)
    {raises}
"""


@pytest.mark.parametrize(
    ("raises", "status", "said"),
    [
        ("raise ValueError('inside the capture')", 1, "raised ValueError"),
        ("os.kill(os.getpid(), signal.SIGINT)", 130, "was interrupted (Ctrl-C)"),
    ],
)
def test_a_capture_whose_block_raised_is_said_not_checked(tmp_path, raises, status, said):
    if "SIGINT" in raises and sys.platform == "win32":
        pytest.skip("SIGINT to oneself is POSIX")
    (tmp_path / "prog.py").write_text(CAPTURE_RAISES.format(raises=raises))
    result = graphcheck("run", "prog.py", cwd=tmp_path)
    assert result.returncode == status, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"graphcheck: NOT checked: the capture at prog.py:7 did not end: its block {said}, so nothing was checked"
    ], result.stdout
    assert "no wp.ScopedCapture" not in result.stdout

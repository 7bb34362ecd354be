"""A user's mistake is found before anything runs and said in one line naming it (exit status 2).

Output paths (``--output``, ``--dot``, ``--report``, pytest's ``--graphcheck-report``) follow one
rule on both surfaces; values (``--replays``, ``--device``...) are checked before the program runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import ROOT, WARPS_OWN_LINES, graphcheck
from tests.test_pytest_plugin import inner, run_inner  # noqa: F401  (inner: a fixture)

pytest_plugins = ["pytester"]

# A program whose running leaves a mark: a usage error must come before it.
MARKING_SCRIPT = "from pathlib import Path\nPath('ran.txt').write_text('ran')\n"


def stderr_lines(result):
    return [line for line in result.stderr.splitlines() if not line.startswith(WARPS_OWN_LINES)]


def assert_one_line_usage_error(result, start, cwd):
    assert result.returncode == 2, result.stdout + result.stderr
    lines = stderr_lines(result)
    assert len(lines) == 1 and lines[0].startswith(start), result.stderr
    assert "Traceback" not in result.stderr
    assert not (cwd / "ran.txt").exists(), "the program ran before the mistake was reported"


def bad_paths(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each kind of unwritable path: (the path as given, what the error says)."""
    (tmp_path / "a_file.txt").write_text("")
    (tmp_path / "a_folder").mkdir()
    return {
        "folder": ("a_folder", "it is a folder (name a file in it"),
        "below a file": ("a_file.txt/out.json", "a_file.txt is a file, not a folder"),
    }


@pytest.mark.parametrize("option", ["--output", "--report", "--dot"])
@pytest.mark.parametrize("kind", ["folder", "below a file"])
def test_run_checks_every_output_path_before_the_program_runs(tmp_path, option, kind):
    path, says = bad_paths(tmp_path)[kind]
    (tmp_path / "prog.py").write_text(MARKING_SCRIPT)
    result = graphcheck("run", option, path, "prog.py", cwd=tmp_path)
    assert_one_line_usage_error(result, f"graphcheck run: error: cannot write {option} {path}: {says}", tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_an_unwritable_folder_is_refused_even_for_root(tmp_path):
    (tmp_path / "prog.py").write_text(MARKING_SCRIPT)
    result = graphcheck("run", "--report", "/proc/graphcheck.json", "prog.py", cwd=tmp_path)
    assert_one_line_usage_error(
        result,
        "graphcheck run: error: cannot write --report /proc/graphcheck.json: cannot create files in /proc",
        tmp_path,
    )


def test_check_and_demo_check_their_output_paths_too(tmp_path):
    (tmp_path / "never_imported.py").write_text("from pathlib import Path\nPath('ran.txt').write_text('ran')\n")
    (tmp_path / "out").mkdir()
    result = graphcheck("check", "--output", "out", "never_imported:make", cwd=tmp_path)
    assert_one_line_usage_error(result, "graphcheck check: error: cannot write --output out: it is a folder", tmp_path)
    result = graphcheck("demo", "--device", "cpu", "--dot", "out", cwd=tmp_path)
    assert_one_line_usage_error(result, "graphcheck demo: error: cannot write --dot out: it is a folder", tmp_path)


def test_missing_folders_are_created_on_both_surfaces(tmp_path, inner):  # noqa: F811
    # The CLI, like the plugin (and pytest's --junit-xml), makes the folders a report path names.
    (tmp_path / "prog.py").write_text("print('hello')\n")
    result = graphcheck("run", "--report", "new/deeper/r.json", "prog.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "new" / "deeper" / "r.json").is_file()
    inner.makepyfile(test_it="def test_it(graphcheck):\n    pass\n")
    result = run_inner(inner, "--graphcheck-report", "made/here/r.json")
    assert result.ret == 0
    assert (inner.path / "made" / "here" / "r.json").is_file()


def test_the_plugin_checks_its_report_path_before_the_session_runs(inner):  # noqa: F811
    inner.mkdir("reports")
    inner.makepyfile(test_it="from pathlib import Path\n\ndef test_it():\n    Path('ran.txt').write_text('ran')\n")
    result = run_inner(inner, "--graphcheck-report", "reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if "graphcheck" in line]
    assert errors == [
        "ERROR: graphcheck: cannot write --graphcheck-report reports: it is a folder (name a file in it, e.g. "
        "reports/graphcheck.json)"
    ], result.errlines
    assert "Traceback" not in "\n".join(result.errlines) and not (inner.path / "ran.txt").exists()


# -- values, checked before anything runs --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--replays", "-1", "never_imported:make"],
         "graphcheck check: error: argument --replays: must be at least 0, got -1"),
        (["demo", "--replays", "-5"], "graphcheck demo: error: argument --replays: must be at least 0, got -5"),
        (["demo", "--replays", "many"],
         "graphcheck demo: error: argument --replays: expected a whole number, got 'many'"),
        (["check", "--values", "--steps", "1", "never_imported:make"],
         "graphcheck check: error: argument --steps: must be at least 2 (step 1 is the captured producer's reference "
         "call; replays start at step 2), got 1"),
        (["check", "--steps", "3", "never_imported:make"],
         "graphcheck check: error: --steps 3 applies to --values and --conformance (how many steps they take)"),
        (["check", "--device", "", "never_imported:make"],
         "graphcheck check: error: --device needs a device name (cpu, cuda, cuda:0...), got an empty one"),
        (["demo", "--device", " "],
         "graphcheck demo: error: --device needs a device name (cpu, cuda, cuda:0...), got an empty one"),
        (["check", "--values", "--warmup", "1", "never_imported:make"],
         "graphcheck check: error: --warmup applies to the capture check; it does not apply to --values"),
        (["check", "--conformance", "--dot", "g.dot", "never_imported:make"],
         "graphcheck check: error: --dot draws one capture; it does not apply to --conformance"),
        (["run", "--warmup", "1", "never_imported.py"], "graphcheck run: error: --warmup 1 does not apply to run"),
    ],
)  # fmt: skip
def test_values_are_checked_before_anything_runs(tmp_path, args, message):
    (tmp_path / "never_imported.py").write_text(MARKING_SCRIPT)
    result = graphcheck(*args, cwd=tmp_path)
    assert_one_line_usage_error(result, message, tmp_path)
    assert not result.stdout


def test_the_plugin_refuses_a_device_name_warp_has_not_before_the_session_runs(inner):  # noqa: F811
    inner.makepyfile(
        test_it="from pathlib import Path\n\ndef test_it(graphcheck):\n    Path('ran.txt').write_text('')\n"
    )
    result = run_inner(inner, "--graphcheck-device", "banana")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if "graphcheck" in line]
    assert errors == [
        "ERROR: graphcheck: --graphcheck-device: 'banana' is not a Warp device name (cpu, cuda, cuda:0...)"
    ], result.errlines
    assert not (inner.path / "ran.txt").exists()


def test_a_device_this_machine_lacks_fails_the_test_in_one_line(inner):  # noqa: F811
    import warp as wp

    wp.init()
    missing = f"cuda:{wp.get_cuda_device_count()}"  # one past the last: no machine has it
    inner.makepyfile(
        test_it=f"""
        import pytest

        @pytest.mark.graphcheck(device="{missing}")
        def test_marked():
            pass
        """
    )
    result = run_inner(inner, "-rf")
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines)
    assert f"graphcheck: @pytest.mark.graphcheck(device=...): cannot capture on device '{missing}'" in text
    assert "Traceback" not in text and "warp/_src" not in text, text


# -- API errors that name the mistake ------------------------------------------------------


def test_api_mistakes_are_one_line_naming_the_value(cpu):
    import graphcheck as gc
    from tests.producers import DeviceCounter

    sim = DeviceCounter("cpu")
    with gc.trace_launches() as trace:
        sim.step()
    buffers = gc.buffers_of(sim, root="sim")
    mistakes = [
        (lambda: gc.buffers_of(sim, root=3), TypeError, "buffers_of(root=...) takes a label (a str, such as 'sim')"),
        (lambda: gc.buffers_of(42), TypeError, "buffers_of() takes the objects that hold Warp arrays"),
        (lambda: gc.assert_pointers_within(trace, "str"), TypeError,
         "assert_pointers_within() takes the allowed buffers as a BufferSet (gc.buffers_of(sim)), got 'str'"),
        (lambda: trace.diff(42), TypeError, "LaunchTrace.diff() compares with another trace"),
        (lambda: buffers.locate("x"), TypeError, "locate() takes an address (an int, such as array.ptr), got 'x'"),
        (lambda: gc.Allow("scalar-drift", kernel=3), TypeError, "Allow(kernel=...) takes a kernel's name"),
        (lambda: gc.Allow("scalar-drift", arg=["dt"]), TypeError, "Allow(arg=...) takes an argument's name"),
    ]  # fmt: skip
    for call, error, start in mistakes:
        with pytest.raises(error) as caught:
            call()
        assert str(caught.value).startswith(start), str(caught.value)
        assert "\n" not in str(caught.value)


def test_a_trace_used_without_with_says_so_instead_of_being_empty(cpu):
    import graphcheck as gc
    from tests.producers import DeviceCounter

    sim = DeviceCounter("cpu")
    trace = gc.trace_launches()
    sim.step()
    with pytest.raises(RuntimeError, match=r"this trace never recorded: trace_launches\(\) records inside a with"):
        len(trace)
    with pytest.raises(RuntimeError, match="never recorded"):
        list(trace)
    with trace:
        pass
    assert len(trace) == 0  # entered and empty: a true answer


def test_a_nested_guard_s_fix_says_to_capture_one_block_at_a_time(cpu):
    import graphcheck as gc
    from tests.producers import DeviceCounter

    sim = DeviceCounter("cpu")
    with pytest.raises(gc.GraphCheckError) as caught:
        with gc.GraphGuard("cpu", sim.step, (sim,)):
            with gc.GraphGuard("cpu", sim.step, (sim,)):
                sim.step()
    (finding,) = caught.value.report.of_kind("capture-error")
    assert finding.fix.startswith("capture one block at a time: end the capture already open on this device")
    assert "readback" not in finding.fix


NOT_FACTORIES = """
import numpy as np
import warp as wp

LIMIT = 3


class Empty:
    def __init__(self, device=None):
        self.n = 4

    def step(self):
        pass


def make_sim(device=None):
    return Empty(device)
"""


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mysim:LIMIT", "graphcheck check: error: mysim.LIMIT is 3, not a class or function that builds the producer"),
        ("mysim:np", "graphcheck check: error: mysim.np is the module numpy, not a class or function"),
        ("mysim:wp_sim", "graphcheck check: error: mysim has no callable 'wp_sim'"),  # not "did you mean 'wp'"
        ("mysim:make_sm", "graphcheck check: error: mysim has no callable 'make_sm' (did you mean 'make_sim'?)"),
        ("mysim:make_sim",
         "graphcheck check: error: mysim:make_sim() built an Empty that holds no Warp arrays: check validates"),
    ],
)  # fmt: skip
def test_check_names_what_the_target_is(tmp_path, target, message):
    (tmp_path / "mysim.py").write_text(NOT_FACTORIES)
    result = graphcheck("check", "--device", "cpu", target, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = stderr_lines(result)
    assert line.startswith(message) and "did you mean 'wp'" not in line, line
    assert "raised" not in line


MORE_TARGETS = """
import warp as wp


class Sim:
    def __init__(self, device=None):
        self.x = wp.zeros(4, dtype=float, device=device)


class Generates(Sim):
    def step(self):
        yield self.x  # calling step() runs none of this


class Awaits(Sim):
    async def step(self):
        self.x.fill_(1.0)


class Exits(Sim):
    def step(self):
        raise SystemExit(5)


def returns_none(device=None):
    Sim(device)


def exits(device=None):
    import sys

    sys.exit("no config")
"""


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("more:Generates", "graphcheck check: error: more:Generates().step is a generator function: calling it returns "
         "a generator and runs none of its body, so it launches nothing to capture"),
        ("more:Awaits", "graphcheck check: error: more:Awaits().step is a coroutine function (async def): calling it "
         "returns a coroutine"),
        ("more:Exits", "graphcheck check: error: more:Exits().step() raised SystemExit(5) at more.py:22: it exited, so "
         "nothing was checked"),
        ("more:exits", "graphcheck check: error: more:exits() raised SystemExit('no config') at more.py:32: it exited"),
        ("more:returns_none", "graphcheck check: error: more:returns_none() returned None: the factory returns the "
         "producer (whose step() launches the work), or a callable to validate"),
    ],
)  # fmt: skip
def test_check_says_what_the_step_did_instead_of_passing_it(tmp_path, target, message):
    """A step that runs nothing is never "replay-safe (0 operations)"; one that exits is the user's exit (one line)."""
    (tmp_path / "more.py").write_text(MORE_TARGETS)
    result = graphcheck("check", "--device", "cpu", target, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = stderr_lines(result)
    assert line.startswith(message), line
    assert not result.stdout


def test_a_module_that_exits_when_imported_says_so(tmp_path):
    (tmp_path / "script.py").write_text("import sys\nsys.exit(3)\n")
    result = graphcheck("check", "--device", "cpu", "script:make", cwd=tmp_path)
    assert_one_line_usage_error(
        result, "graphcheck check: error: importing script raised SystemExit(3) at script.py:2: a module check imports "
        "must not exit when imported (put its script part under `if __name__ == \"__main__\":`)", tmp_path
    )  # fmt: skip


@pytest.mark.parametrize("form", ["mysim.py", "./mysim.py", "ABSOLUTE", "pkg/envs.py", "pkg/"])
def test_check_takes_a_file_path_as_its_module(tmp_path, form):
    """``check ./mysim.py:make_sim`` imports the file as the module it is (in its package, if any),
    as ``check mysim:make_sim`` does."""
    source = NOT_FACTORIES + "\n\nclass Held(Empty):\n    def __init__(self, device=None):\n        self.x = " \
        "wp.zeros(4, dtype=float, device=device)\n\n    def step(self):\n        self.x.fill_(1.0)\n"
    (tmp_path / "mysim.py").write_text(source)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .envs import Held\n")
    relative = "import warp as wp\nfrom . import __name__ as _"  # a relative import: envs.py is imported in pkg
    (tmp_path / "pkg" / "envs.py").write_text(source.replace("import warp as wp", relative))
    module = str(tmp_path / "mysim.py") if form == "ABSOLUTE" else form
    result = graphcheck("check", "--device", "cpu", f"{module}:Held", cwd=tmp_path.parent if form == "ABSOLUTE"
                        else tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Held.step is replay-safe on cpu" in result.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nosuch.py:f", "graphcheck check: error: no such file: nosuch.py (MODULE:FACTORY takes a module "
         "(mysim.envs:make_env) or its file (path/to/mysim.py:make_env))"),
        ("my-sim.py:f", "graphcheck check: error: my-sim.py cannot be imported as a module: 'my-sim' is not a Python "
         "name (rename it, e.g. 'my_sim')"),
        ("notes.txt:f", "graphcheck check: error: notes.txt is not a .py file"),
        ("folder/:f", "graphcheck check: error: folder/ is a folder that is not a package (no __init__.py)"),
    ],
)  # fmt: skip
def test_a_file_path_check_cannot_import_is_one_line(tmp_path, target, message):
    (tmp_path / "my-sim.py").write_text(MARKING_SCRIPT)
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "folder").mkdir()
    result = graphcheck("check", "--device", "cpu", target, cwd=tmp_path)
    assert_one_line_usage_error(result, message, tmp_path)


def test_run_of_a_folder_says_it_is_one_and_runs_one_with_a_main(tmp_path):
    (tmp_path / "app").mkdir()
    result = graphcheck("run", "app", cwd=tmp_path)
    assert_one_line_usage_error(
        result, "graphcheck run: error: app is a folder with no __main__.py: name the program's .py file", tmp_path
    )
    (tmp_path / "app" / "__main__.py").write_text("print('main ran')\n")
    result = graphcheck("run", "app", cwd=tmp_path)  # as `python app` runs app/__main__.py
    assert result.returncode == 0 and "main ran" in result.stdout, result.stderr


def test_what_bool_and_len_of_a_report_mean_is_documented():
    from graphcheck import Report

    doc = " ".join(Report.__doc__.split())
    assert "``len(report)`` counts them" in doc and "``bool(report)`` is :attr:`ok`" in doc
    partial = Report(checks=["allocations"], skipped=[("compare", "no reference call")])
    assert len(partial) == 0 and not partial, "an empty partial report is false, as documented"


# -- errors that are the user's, said as the user's ----------------------------------------

WRONG_ARGUMENTS = """
import warp as wp


@wp.kernel
def scale(a: wp.array(dtype=float), b: wp.array(dtype=float), c: float, d: int):
    i = wp.tid()
    a[i] = b[i] * c


class Sim:
    def __init__(self, device=None):
        self.a = wp.zeros(4, dtype=float, device=device)
        self.b = wp.ones(4, dtype=float, device=device)

    def step(self):
        wp.launch(scale, dim=4, inputs=[self.a, self.b], device=self.a.device)


def make(device=None):
    return Sim(device)
"""


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("import warp as wp\n\ndef make(:\n    pass\n", ["  File \"", "mysim.py\", line 3", "SyntaxError: "]),
        ("import no_such_package_here\n", ["mysim.py\", line 1, in <module>", "ModuleNotFoundError: "]),
        ("raise RuntimeError('no config')\n", ["mysim.py\", line 1, in <module>", "RuntimeError: no config"]),
    ],
)
def test_a_module_that_fails_to_import_shows_the_users_exception_then_one_line(tmp_path, source, shown):
    (tmp_path / "mysim.py").write_text(source)
    result = graphcheck("check", "--device", "cpu", "mysim:make", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = stderr_lines(result)
    type_name = shown[-1].split(":")[0]
    assert lines[-1] == f"graphcheck check: error: importing mysim raised the {type_name} above", lines
    for part in shown:
        assert part in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "importlib" not in result.stderr
    assert f"graphcheck{os.sep}cli.py" not in result.stderr, "no frame of graphcheck's own"


def test_a_step_failing_inside_warp_names_the_users_line_and_traceback_shows_it_all(tmp_path):
    (tmp_path / "mysim.py").write_text(WRONG_ARGUMENTS)
    line = WRONG_ARGUMENTS.splitlines().index(
        "        wp.launch(scale, dim=4, inputs=[self.a, self.b], device=self.a.device)"
    ) + 1
    result = graphcheck("check", "--device", "cpu", "mysim:make", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (said,) = stderr_lines(result)
    assert said == (
        f"graphcheck check: error: mysim:make().step() raised RuntimeError at mysim.py:{line}: Error launching kernel "
        "'scale', passed 2 arguments but kernel requires 4 (--traceback shows the full traceback)"
    ), said
    full = graphcheck("check", "--device", "cpu", "--traceback", "mysim:make", cwd=tmp_path)
    assert full.returncode == 2 and "Traceback (most recent call last)" in full.stderr
    assert "context.py" in full.stderr and f"mysim.py\", line {line}, in step" in full.stderr
    assert stderr_lines(full)[-1].endswith(f"at mysim.py:{line}: Error launching kernel 'scale', passed 2 arguments "
                                           "but kernel requires 4")  # fmt: skip


GOOD_SIM = """
import warp as wp


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = a[i] + b[i]


class Sim:
    def __init__(self, device=None):
        self.a = wp.zeros(4, dtype=float, device=device)
        self.b = wp.ones(4, dtype=float, device=device)

    def step(self):
        print("the producer speaks")
        wp.launch(add, dim=4, inputs=[self.a, self.b], device=self.a.device)


def make(device=None):
    return Sim(device)


if __name__ == "__main__":
    sim = Sim("cpu")
    with wp.ScopedCapture(device="cpu") as capture:
        sim.step()
    wp.capture_launch(capture.graph)
"""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux's full disk")
@pytest.mark.parametrize(
    "command",
    [
        ["check", "--device", "cpu", "--output", "/dev/full", "mysim:make"],
        ["check", "--device", "cpu", "--dot", "/dev/full", "mysim:make"],
        ["run", "--report", "/dev/full", "mysim.py"],
        ["run", "--json", "--output", "/dev/full", "mysim.py"],
    ],
)
def test_a_write_that_fails_is_one_line(tmp_path, command):
    (tmp_path / "mysim.py").write_text(GOOD_SIM)
    result = graphcheck(*command, cwd=tmp_path)
    option = command[command.index("/dev/full") - 1]
    assert result.returncode == 2, result.stdout + result.stderr
    said = [line for line in stderr_lines(result) if "error" in line]
    assert said == [f"graphcheck {command[0]}: error: cannot write {option} /dev/full: No space left on device"], said
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to oneself is POSIX")
@pytest.mark.parametrize("where", ["factory", "step"])
def test_ctrl_c_in_check_exits_130_without_graphcheck_s_frames(tmp_path, where):
    interrupt = "os.kill(os.getpid(), signal.SIGINT); time.sleep(30)"
    (tmp_path / "mysim.py").write_text(
        GOOD_SIM.replace("import warp as wp\n", "import os, signal, time\nimport warp as wp\n").replace(
            "def make(device=None):\n", f"def make(device=None):\n    {interrupt}\n" if where == "factory" else
            "def make(device=None):\n"
        ).replace('print("the producer speaks")', interrupt if where == "step" else 'print("the producer speaks")')
    )  # fmt: skip
    result = graphcheck("check", "--device", "cpu", "mysim:make", cwd=tmp_path)
    assert result.returncode == 130, result.stdout + result.stderr
    assert stderr_lines(result)[-1] == "KeyboardInterrupt", result.stderr
    assert f"graphcheck{os.sep}" not in result.stderr and "internal error" not in result.stderr


#: A ``sitecustomize`` that makes Warp unimportable, as in a Python where it is not installed.
NO_WARP = """
import sys


class NoWarp:
    def find_spec(self, name, path=None, target=None):
        if name == "warp" or name.startswith("warp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoWarp())
"""


def test_without_warp_every_command_that_needs_it_says_how_to_install_it_and_explain_works(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_WARP)
    (tmp_path / "mysim.py").write_text(GOOD_SIM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(ROOT)]), NO_COLOR="1")
    env.pop("GRAPHCHECK_DISABLE", None)

    def without_warp(*args):
        return subprocess.run([sys.executable, "-m", "graphcheck", *args], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600, check=False)  # fmt: skip

    probe = subprocess.run([sys.executable, "-c", "import warp"], capture_output=True, text=True, env=env, check=False)
    assert probe.returncode == 1 and "No module named 'warp'" in probe.stderr, "the shim hides Warp"
    for command in (["demo"], ["demo", "--allow", "scalar-drift"], ["check", "mysim:make"], ["run", "mysim.py"]):
        result = without_warp(*command)
        assert result.returncode == 3, (command, result.stdout + result.stderr)
        (said,) = result.stderr.splitlines()
        assert said.startswith(f"graphcheck {command[0]}: error: Warp is not installed in this Python (")
        assert "-m pip install warp-lang" in said and not result.stdout
    page = without_warp("explain", "scalar-drift")
    assert page.returncode == 0 and page.stdout.startswith("# scalar-drift"), page.stderr


def test_a_device_error_names_where_the_device_came_from_and_that_place_s_syntax(tmp_path):
    import warp as wp

    (tmp_path / "pyproject.toml").write_text('[tool.graphcheck]\ndevice = "cuda:7"\n')
    from_settings = graphcheck("demo", cwd=tmp_path)
    assert from_settings.returncode == 2, from_settings.stdout + from_settings.stderr
    (said,) = stderr_lines(from_settings)
    assert said.startswith(
        "graphcheck demo: error: device in [tool.graphcheck] of pyproject.toml: cannot capture on device 'cuda:7'"
    ), said
    assert "--device" not in said
    from_option = graphcheck("demo", "--device", "cuda:7", cwd=tmp_path)
    (said_too,) = stderr_lines(from_option)
    assert said_too.startswith("graphcheck demo: error: --device: cannot capture on device 'cuda:7'"), said_too
    if not wp.is_cuda_available():  # the suggestion, as each place writes a device
        assert 'use device = "cpu"' in said and "use --device cpu" in said_too

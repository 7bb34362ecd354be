"""The pytest plugin (graphcheck/pytest_plugin.py): fixture, marker, options, reports.

Each test runs an inner pytest session in a subprocess with ``pytester``: an in-process
run would share this process's Warp state and the hooks graphcheck installs. The inner
sessions import graphcheck and ``tests.producers`` from this checkout (PYTHONPATH is set
to the repository root, computed from this file) and load the plugin with
``-p graphcheck.pytest_plugin`` unless the package is installed, when its entry point
loads it already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO_ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "graphcheck.pytest_plugin"


def _loaded_by_entry_point() -> bool:
    """Whether pytest loads the plugin by itself: graphcheck installed, plugin autoload on."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose subprocess sessions import graphcheck and tests.producers from this checkout."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("GRAPHCHECK_DISABLE", raising=False)
    # pytester points HOME at its temporary directory, where Warp would compile every kernel
    # again (seconds per run): share this process's kernel cache instead.
    if "WARP_CACHE_PATH" not in os.environ:
        import warp as wp

        wp.init()
        if wp.config.kernel_cache_dir:
            monkeypatch.setenv("WARP_CACHE_PATH", os.path.dirname(wp.config.kernel_cache_dir))
    return pytester


def run_inner(pytester: pytest.Pytester, *args: str, load_plugin: bool = True) -> pytest.RunResult:
    """Run pytest in a subprocess in ``pytester``'s directory, with the plugin loaded."""
    # Passing -p for a plugin its entry point also loads would register it twice (an error).
    plugin = ["-p", PLUGIN] if load_plugin and not _loaded_by_entry_point() else []
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *plugin, *args)


# -- import-lightness ---------------------------------------------------------------------


def test_importing_the_plugin_imports_neither_warp_nor_the_rest_of_graphcheck():
    # pytest imports the plugin in every session: it must not drag Warp (seconds, and a
    # CUDA probe) into sessions that never use it. This needs graphcheck/__init__.py to load
    # its public names lazily, since importing graphcheck.pytest_plugin runs it first.
    probe = (
        "import sys, graphcheck.pytest_plugin\n"
        "light = {'graphcheck', 'graphcheck._version', 'graphcheck.pytest_plugin'}\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('warp', 'cuda')\n"
        "               or (m.split('.')[0] == 'graphcheck' and m not in light))\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_options_come_from_the_ini_file_and_the_command_line_wins(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    inner.makeini(
        """
        [pytest]
        graphcheck_device = cuda:7
        graphcheck_report = reports/from-ini.json
        """
    )
    inner.makepyfile(
        test_options="""
        import os
        import sys

        def test_device(graphcheck):
            assert graphcheck.device == os.environ["EXPECTED_DEVICE"]
            assert graphcheck.reports == []

        def test_the_plugin_did_not_import_warp():
            assert "warp" not in sys.modules
        """
    )
    monkeypatch.setenv("EXPECTED_DEVICE", "cpu")
    result = run_inner(inner, "--graphcheck-device", "cpu", "--strict-markers")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*graphcheck: 0 validations in 1 test, 0 findings*"])
    from_ini = json.loads((inner.path / "reports" / "from-ini.json").read_text())
    assert from_ini["reports"] == []
    assert from_ini["device"] == "cpu"

    monkeypatch.setenv("EXPECTED_DEVICE", "cuda:7")
    run_inner(inner).assert_outcomes(passed=2)


# -- the fixture --------------------------------------------------------------------------

FIXTURE_TESTS = """
import pytest

from graphcheck import GraphCheckError
from tests import producers as P


def test_safe_producer_passes(graphcheck):
    producer = P.DeviceCounter("cpu")
    checked = graphcheck.validate(producer.step, owners=(producer,))
    assert checked.ok and checked.device == "cpu"
    checked.launch()
    assert [report.ok for report in graphcheck.reports] == [True]


def test_unsafe_producer_fails(graphcheck):
    producer = P.HostCounter("cpu")
    graphcheck.validate(producer.step, owners=(producer,))


def test_guard_keeps_its_report(graphcheck):
    producer = P.ArrayFromNumpyPerCall("cpu")
    with pytest.raises(GraphCheckError):
        with graphcheck.guard(reference=producer.step, owners=(producer,)):
            producer.step()
    assert [set(report.kinds()) for report in graphcheck.reports] == [{"per-call-allocation"}]
"""


def test_fixture_passes_a_safe_producer_and_fails_an_unsafe_one(inner: pytest.Pytester):
    inner.makepyfile(test_fixture=FIXTURE_TESTS)
    result = run_inner(inner, "--graphcheck-device", "cpu", "--graphcheck-report", "out/graphcheck.json", "-rfP")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_unsafe_producer_fails _*",
            "E *GraphCheckError: graphcheck: 1 finding in HostCounter.step on cpu*",
            "E *scalar-drift (1)*",
            # -rP shows the section of a passing test whose validation found something too.
            "*_ test_guard_keeps_its_report _*",
            "*- graphcheck -*",
            "[[]guard[]] graphcheck: 1 finding in ArrayFromNumpyPerCall.step on cpu*",
            "*graphcheck: 3 validations in 3 tests, 2 findings (per-call-allocation: 1, scalar-drift: 1)",
            "graphcheck: JSON report written to *graphcheck.json",
            "FAILED test_fixture.py::test_unsafe_producer_fails - graphcheck: 1 finding*",
        ]
    )
    # The failure shows the report: no graphcheck section repeats it.
    assert result.stdout.str().count("scalar-drift (1)") == 1

    written = json.loads((inner.path / "out" / "graphcheck.json").read_text())
    assert written["totals"] == {
        "tests": 3,
        "validations": 3,
        "findings": 2,
        "allowed": 0,
        "kinds": {"per-call-allocation": 1, "scalar-drift": 1},
    }
    assert written["schema"] == "graphcheck.report/1" and written["status"] == "failed"
    by_test = {v["nodeid"].split("::")[-1]: v for v in written["reports"]}
    assert {name: (v["source"], v["ok"]) for name, v in by_test.items()} == {
        "test_safe_producer_passes": ("validate", True),
        "test_unsafe_producer_fails": ("validate", False),
        "test_guard_keeps_its_report": ("guard", False),
    }
    (drift,) = by_test["test_unsafe_producer_fails"]["findings"]
    assert drift["kind"] == "scalar-drift"
    assert by_test["test_unsafe_producer_fails"]["device"] == "cpu"


# -- the marker ---------------------------------------------------------------------------

MARKER_TESTS = """
import pytest
import warp as wp

from tests.internals import _warp
from tests import producers as P


@pytest.mark.graphcheck
def test_safe_capture_passes():
    producer = P.DeviceCounter("cpu")
    with wp.ScopedCapture(device="cpu") as capture:
        producer.step()
    wp.capture_launch(capture.graph)


@pytest.mark.graphcheck
def test_per_call_allocation_fails():
    producer = P.ArrayFromNumpyPerCall("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()


@pytest.mark.graphcheck(allow=["per-call-allocation"])
def test_allowed_kind_passes():
    producer = P.ArrayFromNumpyPerCall("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()


@pytest.mark.graphcheck(device="cpu")
def test_marker_device_is_the_default_device(graphcheck):
    assert graphcheck.device == "cpu"
    assert wp.get_device().is_cpu
    producer = P.DeviceCounter("cpu")
    with wp.ScopedCapture() as capture:
        producer.step()
    wp.capture_launch(capture.graph)


def test_unmarked_test_is_not_guarded():
    producer = P.ArrayFromNumpyPerCall("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()


@pytest.mark.graphcheck
def test_own_exception_propagates():
    producer = P.DeviceCounter("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()
        raise KeyError("the test's own error")


def test_nothing_left_behind():
    assert wp.ScopedCapture is _warp.ORIGINAL_SCOPED_CAPTURE
    assert wp.capture_launch is _warp.ORIGINAL_CAPTURE_LAUNCH
    assert not _warp.hooks_installed()
    assert not _warp.capture_in_progress("cpu")


@pytest.mark.graphcheck(allow=["no-such-kind"])
def test_unknown_kind_fails():
    pass
"""


def test_marker_guards_every_capture_of_the_test(inner: pytest.Pytester):
    inner.makepyfile(test_marker=MARKER_TESTS)
    result = run_inner(inner, "--strict-markers", "--graphcheck-report", "marker.json", "-rf")
    result.assert_outcomes(passed=5, failed=3)
    failed = {line.split("::")[1].split(" ")[0] for line in result.stdout.lines if line.startswith("FAILED ")}
    assert failed == {"test_per_call_allocation_fails", "test_own_exception_propagates", "test_unknown_kind_fails"}
    result.stdout.fnmatch_lines(
        [
            "*_ test_per_call_allocation_fails _*",
            # the marker's summary says plainly what was not compared, and how to compare
            "graphcheck: 1 capture guarded, 1 finding; the capture was NOT compared with an eager call: mark the "
            "test `@pytest.mark.graphcheck(reference_call=True)`",
            # the marker's own way to compare, not the command line's
            "graphcheck: NOT checked: compare: no reference call*`@pytest.mark.graphcheck(reference_call=True)`*",
            "graphcheck: 1 finding in capture at test_marker.py:* on cpu*",
            "per-call-allocation (1):*",
            "*_ test_own_exception_propagates _*",
            "*KeyError*the test's own error*",
            "*_ test_unknown_kind_fails _*",
            "*allow=*unknown finding kind 'no-such-kind'*",
        ]
    )
    written = json.loads((inner.path / "marker.json").read_text())
    by_test: dict[str, list[dict]] = {}
    for validation in written["reports"]:
        by_test.setdefault(validation["nodeid"].split("::")[-1], []).append(validation)
    assert sorted(by_test) == [
        "test_allowed_kind_passes",
        "test_marker_device_is_the_default_device",
        "test_own_exception_propagates",
        "test_per_call_allocation_fails",
        "test_safe_capture_passes",
    ]
    # A capture whose block raised is kept, as checking nothing.
    (raised,) = by_test["test_own_exception_propagates"]
    assert raised["status"] == "not-checked" and raised["skipped"] == [
        {"check": "all checks", "reason": "the guarded block raised KeyError: nothing was checked"}
    ]
    (allowed,) = by_test["test_allowed_kind_passes"]
    assert allowed["status"] == "partial", "no reference call: compare did not run"
    assert [f["kind"] for f in allowed["suppressed"]] == ["per-call-allocation"]
    (failed,) = by_test["test_per_call_allocation_fails"]
    assert failed["source"] == "marker" and [f["kind"] for f in failed["findings"]] == ["per-call-allocation"]
    # Printed once: the failure holds the report, no graphcheck section repeats it.
    assert result.stdout.str().count("per-call-allocation (1)") == 1
    # Its accept line is the marker's argument, paste-ready.
    assert 'accept: @pytest.mark.graphcheck(allow=[gc.Allow("per-call-allocation", kernel="axpy", arg="x")])' in (
        result.stdout.str()
    )
    result.stdout.fnmatch_lines(["FAILED test_marker.py::test_per_call_allocation_fails - graphcheck: 1 capture*"])
    assert written["totals"]["allowed"] == 1


# -- turning it off -----------------------------------------------------------------------


def test_no_graphcheck_disables_the_plugin_its_entry_point_loads(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    tomllib = pytest.importorskip("tomllib")
    # Install the entry point the way pip would (a dist-info on the path), taken from
    # pyproject.toml, so this also checks that the declared entry point loads the plugin.
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert declared == {"graphcheck": PLUGIN}
    site = inner.mkdir("site")
    dist_info = site / "graphcheck_entry_point-0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: graphcheck-entry-point\nVersion: 0\n")
    (dist_info / "entry_points.txt").write_text(f"[pytest11]\ngraphcheck = {PLUGIN}\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ["PYTHONPATH"]]))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    inner.makepyfile(
        test_off="""
        def test_uses_the_fixture(graphcheck):
            assert graphcheck.reports == []
        """
    )

    pytester_args = ("-p", "no:cacheprovider")
    inner.runpytest_subprocess(*pytester_args).assert_outcomes(passed=1)

    disabled = inner.runpytest_subprocess(*pytester_args, "-p", "no:graphcheck")
    disabled.assert_outcomes(errors=1)
    disabled.stdout.fnmatch_lines(["*fixture 'graphcheck' not found*"])


# -- honest verdicts and CI surfaces ---------------------------------------------------------

SURFACE_TESTS = """
from tests import producers as P


def test_unsafe(graphcheck):
    producer = P.HostCounter("cpu")
    graphcheck.validate(producer.step, owners=(producer,))


def test_safe(graphcheck):
    producer = P.DeviceCounter("cpu")
    graphcheck.validate(producer.step, owners=(producer,))
"""


def test_header_junit_properties_and_the_json_envelope(inner: pytest.Pytester):
    from tests.test_report import validate_document

    inner.makepyfile(test_surface=SURFACE_TESTS)
    result = run_inner(inner, "--graphcheck-device", "cpu", "--junitxml", "junit.xml", "--graphcheck-report", "r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["graphcheck *, warp *, device: cpu, checking: on"])
    import xml.etree.ElementTree as ET

    cases = {case.get("name"): case for case in ET.parse(inner.path / "junit.xml").iter("testcase")}
    unsafe = [(p.get("name"), p.get("value")) for p in cases["test_unsafe"].iter("property")]
    assert unsafe[0][0] == "graphcheck.validate" and unsafe[0][1].startswith("failed: graphcheck: 1 finding")
    assert unsafe[1][0] == "graphcheck.finding" and unsafe[1][1].startswith("scalar-drift: ")
    safe = [(p.get("name"), p.get("value")) for p in cases["test_safe"].iter("property")]
    (prop,) = safe
    assert prop[0] == "graphcheck.validate" and prop[1].startswith(
        "passed: graphcheck: DeviceCounter.step is replay-safe"
    )
    document = json.loads((inner.path / "r.json").read_text())
    validate_document(document)
    assert document["command"] == "pytest" and document["status"] == "failed" and document["totals"]["tests"] == 2


def test_disabled_checking_says_not_checked(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    from tests.test_report import validate_document

    monkeypatch.setenv("GRAPHCHECK_DISABLE", "yes")
    inner.makepyfile(test_surface=SURFACE_TESTS)
    result = run_inner(inner, "--graphcheck-report", "r.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "graphcheck *, device: Warp's default device, checking: OFF (GRAPHCHECK_DISABLE is set)",
            "graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, 2 validations in 2 tests ran unchecked",
        ]
    )
    document = json.loads((inner.path / "r.json").read_text())
    validate_document(document)
    assert document["status"] == "not-checked" and document["checking"] is False


def test_pyproject_settings_reach_the_fixture_and_the_marker(inner: pytest.Pytester):
    inner.makefile(
        ".toml", pyproject='[tool.graphcheck]\nallow = ["scalar-drift", "per-call-allocation"]\ndevice = "cpu"\n'
    )
    inner.makepyfile(
        test_settings="""
        import pytest
        import warp as wp
        from tests import producers as P

        def test_allowed_by_the_project(graphcheck):
            assert graphcheck.device == "cpu"
            producer = P.HostCounter("cpu")
            checked = graphcheck.validate(producer.step, owners=(producer,))
            assert [f.kind for f in checked.report.suppressed] == ["scalar-drift"]

        @pytest.mark.graphcheck
        def test_marker_allowed_by_the_project():
            producer = P.ZerosPerCall("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()
        """
    )
    run_inner(inner).assert_outcomes(passed=2)
    inner.makefile(".toml", pyproject='[tool.graphcheck]\non_failure = "rise"\n')
    bad = run_inner(inner)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*graphcheck: *[[]tool.graphcheck[]]: on_failure must be one of*(did you mean 'raise'?)"])


def test_marker_reference_call_compares_the_block_with_an_eager_run(inner: pytest.Pytester):
    inner.makepyfile(
        test_reference="""
        import pytest
        import warp as wp
        from tests import producers as P

        @pytest.mark.graphcheck(reference_call=True)
        def test_counter():
            producer = P.HostCounter("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()
        """
    )
    result = run_inner(inner, "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*scalar-drift (1)*"])


def test_marker_reference_call_leaves_the_tests_own_graph_guard_alone(inner: pytest.Pytester):
    inner.makepyfile(
        test_own_guard="""
        import numpy as np
        import pytest
        import graphcheck as gc
        from tests import producers as P

        @pytest.mark.graphcheck(reference_call=True)
        def test_guarded_by_the_test_itself(graphcheck):
            sim, twin = P.DeviceCounter("cpu"), P.DeviceCounter("cpu")
            with gc.GraphGuard(device="cpu", reference=sim.step, owners=(sim,)) as guard:
                sim.step()
            with graphcheck.guard(reference=sim.step, owners=(sim,)) as again:
                sim.step()
            assert guard.report.ok and again.report.ok, str(guard.report)
            for _ in range(2):  # two reference calls, then replays: the graph computes what eager steps do
                twin.step()
            for _ in range(3):
                guard.launch()
                twin.step()
            np.testing.assert_array_equal(sim.x.numpy(), twin.x.numpy())

        @pytest.mark.graphcheck(reference_call=True)
        def test_its_finding_fails_the_test():
            sim = P.HostCounter("cpu")
            with gc.GraphGuard(device="cpu", reference=sim.step, owners=(sim,), on_failure="log"):
                sim.step()
        """
    )
    result = run_inner(inner, "-rf", "--graphcheck-report", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*scalar-drift (1)*", "graphcheck: 3 validations in 2 tests, 1 finding (scalar-*"])
    assert "launch-sequence-drift" not in result.stdout.str()
    validations = json.loads((inner.path / "report.json").read_text())["reports"]
    assert [(v["source"], v["status"]) for v in validations] == [
        ("guard", "passed"),
        ("marker", "passed"),
        ("marker", "failed"),
    ]


def test_marker_strict_ownership_reports_device_temporaries(inner: pytest.Pytester):
    inner.makepyfile(
        test_strict="""
        import pytest
        import warp as wp
        from tests import producers as P

        @pytest.mark.graphcheck(strict_ownership=True)
        def test_strict():
            producer = P.ZerosPerCall("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()

        @pytest.mark.graphcheck
        def test_default():
            producer = P.ZerosPerCall("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()
        """
    )
    result = run_inner(inner, "-rf")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*test_strict*", "*per-call-allocation (1)*"])


STRICT_TESTS = """
import pytest
import warp as wp
from tests import producers as P

@pytest.mark.graphcheck
def test_swap_and_counter_without_reference_call():
    producer = P.HostCounter("cpu")
    with wp.ScopedCapture(device="cpu") as capture:
        producer.step()
    wp.capture_launch(capture.graph)

@pytest.mark.graphcheck(reference_call=True)
def test_compared_and_safe():
    producer = P.DeviceCounter("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()

def test_validated_in_full(graphcheck):
    producer = P.DeviceCounter("cpu")
    graphcheck.validate(producer.step, owners=(producer,))  # raises on findings
"""


def test_strict_fails_a_partial_marked_test_from_the_command_line_or_the_ini(inner: pytest.Pytester):
    inner.makepyfile(test_strict=STRICT_TESTS)
    run_inner(inner).assert_outcomes(passed=3)  # by default partial passes, and says NOT checked
    strict = run_inner(inner, "--graphcheck-strict", "-rf")
    strict.assert_outcomes(passed=2, failed=1)
    strict.stdout.fnmatch_lines([
        "*graphcheck: 1 validation NOT fully checked (--graphcheck-strict)*",
        "*NOT checked: compare: no reference call*",
        "FAILED test_strict.py::test_swap_and_counter_without_reference_call - graph*",
    ])  # fmt: skip
    inner.makeini("[pytest]\ngraphcheck_strict = true\n")
    run_inner(inner).assert_outcomes(passed=2, failed=1)


def test_disable_flag_turns_checking_off_for_the_session_and_strict_leaves_it(inner: pytest.Pytester):
    inner.makepyfile(test_strict=STRICT_TESTS, test_unsafe="""
        import pytest
        import graphcheck as gc
        from tests import producers as P

        def test_unsafe_is_not_checked(graphcheck):
            producer = P.HostCounter("cpu")
            report = graphcheck.validate(producer.step, owners=(producer,)).report
            assert report.status == "not-checked" and not gc.checking_enabled()
        """)  # fmt: skip
    result = run_inner(inner, "--graphcheck-disable", "--graphcheck-strict")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "graphcheck *checking: OFF (GRAPHCHECK_DISABLE is set)",
        "graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, *",
    ])  # fmt: skip
    # Without the flag the same unsafe producer is found.
    run_inner(inner, "test_unsafe.py").assert_outcomes(failed=1)


def test_marker_values_are_checked_where_they_enter(inner: pytest.Pytester):
    inner.makepyfile(
        test_values="""
        import pytest

        @pytest.mark.graphcheck(reference_call="yes")
        def test_reference_call_not_a_bool():
            pass

        @pytest.mark.graphcheck(strict_ownership=1)
        def test_strict_ownership_not_a_bool():
            pass

        @pytest.mark.graphcheck(reference_call=True, strict_ownership=False)
        def test_both_bools():
            pass
        """
    )
    result = run_inner(inner, "--strict-markers", "-rf")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.graphcheck(reference_call=...): expected True or False, got 'yes' (a str)*",
            "*@pytest.mark.graphcheck(strict_ownership=...): expected True or False, got 1 (an int)*",
        ]
    )


def test_a_marked_test_with_reference_call_is_told_why_its_capture_was_not_compared(inner: pytest.Pytester):
    """reference_call=True is set already: the summary says why the block could not run again, not to set it."""
    inner.makepyfile(
        test_loop="""
        import pytest
        import warp as wp
        from tests import producers as P

        @pytest.mark.graphcheck(reference_call=True)
        def test_loop():
            producer = P.HostCounter("cpu")
            with wp.ScopedCapture(device="cpu"):
                for _ in range(2):
                    producer.step()

        @pytest.mark.graphcheck
        def test_unmarked_compare():
            producer = P.DeviceCounter("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()
        """
    )
    result = run_inner(inner)
    result.assert_outcomes(passed=2)
    (line,) = [line for line in result.outlines if line.startswith("graphcheck: 2 validations")]
    assert "(1 marked capture was NOT compared with an eager call: @pytest.mark.graphcheck(reference_call=True) " \
        "compares them)" in line, line
    assert "(1 marked capture with reference_call=True could NOT be compared; capture at test_loop.py:8: the " \
        "capture block cannot run again as it is: test_loop.py:9, `for _ in range(2):`, is not a call" in line, line


def test_the_marker_says_an_unused_allowance_once_in_the_marker_s_words(inner: pytest.Pytester):
    inner.makepyfile(
        test_unused="""
        import pytest
        import warp as wp
        import graphcheck as gc
        from tests import producers as P

        @pytest.mark.graphcheck(allow=[gc.Allow("SCALAR-DRIFT", kernel="nokernel")], reference_call=True)
        def test_counter():
            producer = P.HostCounter("cpu")
            with wp.ScopedCapture(device="cpu"):
                producer.step()

        @pytest.mark.graphcheck(allow=["Per-Call-Allocation"])
        def test_kinds_in_any_case():
            pass

        def test_fixture_repr(graphcheck):
            assert repr(graphcheck) == "<graphcheck fixture on the default device: 0 reports>"
            producer = P.DeviceCounter("cpu")
            graphcheck.validate(producer.step, owners=(producer,))
            assert repr(graphcheck) == "<graphcheck fixture on the default device: 1 report>"
        """
    )
    result = run_inner(inner)
    result.assert_outcomes(passed=2, failed=1)
    said = [line for line in result.outlines if "allowance matched nothing" in line]
    assert said == [
        'graphcheck: allowance matched nothing: gc.Allow("scalar-drift", kernel="nokernel") (check the kernel and '
        "argument names)"
    ], result.outlines


DEVICE_TESTS = """
import pytest
import warp as wp
from tests import producers as P

def test_fixture(graphcheck):
    producer = P.DeviceCounter("cpu")
    graphcheck.validate(producer.step, owners=(producer,))

@pytest.mark.graphcheck
def test_marked_body_stays_where_it_is():
    assert str(wp.get_device()) == "cpu"
    producer = P.DeviceCounter("cpu")
    with wp.ScopedCapture(device="cpu"):
        producer.step()
"""


def test_a_device_setting_is_the_fixture_s_and_its_error_names_where_it_came_from(inner: pytest.Pytester):
    """[tool.graphcheck] device and --graphcheck-device choose where the fixture captures; a device this
    machine lacks fails the fixture's test in one line naming that place, in its syntax. A marked test's
    captures stay where the test makes them (only the marker's own device= moves its body)."""
    import warp as wp

    wp.init()
    missing = f"cuda:{wp.get_cuda_device_count()}"  # one past the last: no machine has it
    inner.makepyfile(test_devices=DEVICE_TESTS)
    inner.makefile(".toml", pyproject=f'[tool.graphcheck]\ndevice = "{missing}"\n')
    result = run_inner(inner, "-rf")
    result.assert_outcomes(passed=1, failed=1)
    text = "\n".join(result.outlines)
    assert f"graphcheck: device in [tool.graphcheck] of pyproject.toml: cannot capture on device '{missing}'" in text
    assert "Traceback" not in text and "guard.py" not in text and "device='cpu'" not in text, text
    if not wp.is_cuda_available():
        assert 'use device = "cpu"' in text, text
    result = run_inner(inner, "-rf", f"--graphcheck-device={missing}")
    result.assert_outcomes(passed=1, failed=1)
    text = "\n".join(result.outlines)
    assert f"graphcheck: --graphcheck-device: cannot capture on device '{missing}'" in text, text
    if not wp.is_cuda_available():
        assert "use --graphcheck-device=cpu" in text, text

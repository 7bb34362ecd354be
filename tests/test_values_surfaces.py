"""verify_replay and check_producer from the command line and the pytest fixture (subprocesses)."""

from __future__ import annotations

import json

import pytest

from tests.test_cli import graphcheck
from tests.test_pytest_plugin import inner, run_inner  # noqa: F401  (inner is a fixture)

pytest_plugins = ["pytester"]

FACTORIES = """
from tests import value_producers as P


def host_view(device=None):
    return P.HostViewWrite(device or "cpu")


def shared(device=None):
    return P.ModuleCache(device or "cpu")


def plain(device=None):
    return P.Plain(device or "cpu")
"""


@pytest.fixture
def factories(tmp_path):
    (tmp_path / "valuefactories.py").write_text(FACTORIES)
    return tmp_path


def test_check_values_finds_the_divergence_the_structure_misses(factories):
    structural = graphcheck("check", "valuefactories:host_view", "--device", "cpu", cwd=factories)
    assert structural.returncode == 0, structural.stdout + structural.stderr
    result = graphcheck("check", "valuefactories:host_view", "--device", "cpu", "--values", cwd=factories)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "replay-divergence (2)" in result.stdout and "producer.x after step 3" in result.stdout
    as_json = graphcheck("check", "valuefactories:host_view", "--values", "--json", "--steps", "3", cwd=factories)
    document = json.loads(as_json.stdout)
    (report,) = document["reports"]
    assert {f["kind"] for f in report["findings"]} == {"replay-divergence"} and report["source"] == "values"
    allowed = graphcheck("check", "valuefactories:host_view", "--values", "--allow", "replay-divergence", cwd=factories)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_check_conformance_finds_a_shared_buffer(factories):
    result = graphcheck("check", "valuefactories:shared", "--device", "cpu", "--conformance", cwd=factories)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "shared-buffer (1)" in result.stdout and "module global tests.value_producers._SCRATCH" in result.stdout
    clean = graphcheck("check", "valuefactories:plain", "--device", "cpu", "--conformance", cwd=factories)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "replay-safe" in clean.stdout


def test_check_values_and_conformance_are_exclusive(factories):
    result = graphcheck("check", "valuefactories:plain", "--values", "--conformance", cwd=factories)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


FIXTURE_TESTS = """
import pytest
import graphcheck as gc
from tests import value_producers as P


def test_values(graphcheck):
    assert graphcheck.verify_replay(P.Plain, steps=3).ok
    with pytest.raises(gc.GraphCheckError):
        graphcheck.verify_replay(P.HostViewWrite)


def test_kit(graphcheck):
    assert graphcheck.check_producer(P.Plain).ok
    report = graphcheck.check_producer(P.ClassBuffer, on_failure="ignore")
    assert set(report.kinds()) == {"shared-buffer"}
    assert len(graphcheck.reports) == 2
"""


def test_fixture_methods_keep_their_reports(inner: pytest.Pytester):  # noqa: F811
    inner.makepyfile(test_values_fixture=FIXTURE_TESTS)
    result = run_inner(inner, "--graphcheck-device", "cpu", "--graphcheck-report", "out.json")
    result.assert_outcomes(passed=2)
    written = json.loads((inner.path / "out.json").read_text())
    sources = [v["source"] for v in written["reports"]]
    assert sources == ["verify_replay", "verify_replay", "check_producer", "check_producer"]
    assert written["totals"]["kinds"] == {"replay-divergence": 2, "shared-buffer": 1}

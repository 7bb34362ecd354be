"""``--output-format sarif``: a SARIF 2.1.0 log for code scanning, valid against the OASIS schema.

The schema is vendored in tests/schemas (see its README: copied unchanged from the OASIS
SARIF committee's repository), since the tests run offline.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from graphcheck.findings import KINDS
from tests.test_cli import graphcheck

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())


def validate(log):
    jsonschema.Draft4Validator(SCHEMA).validate(log)  # the schema is draft-04


# A producer in the user's project (the working directory): its lines are relative to %SRCROOT%.
FACTORY = """
import warp as wp

from tests import kernels as K


class Counter:
    def __init__(self, device="cpu"):
        self.x = wp.zeros(8, dtype=float, device=device)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(K.counter_step, dim=8, inputs=[self.x, self.frame], device="cpu")


def unsafe(device=None):
    return Counter()
"""


@pytest.fixture
def factories(tmp_path):
    (tmp_path / "myfactories.py").write_text(FACTORY)
    return tmp_path


def test_check_writes_a_valid_sarif_log_with_a_result_per_finding(factories):
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--output-format", "sarif", cwd=factories)
    assert result.returncode == 1, result.stderr
    log = json.loads(result.stdout)
    validate(log)
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "graphcheck"
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == list(KINDS)
    (finding,) = run["results"]
    assert finding["ruleId"] == "scalar-drift" and finding["level"] == "error"
    assert run["tool"]["driver"]["rules"][finding["ruleIndex"]]["id"] == "scalar-drift"
    (location,) = finding["locations"]
    artifact = location["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "myfactories.py", "uriBaseId": "%SRCROOT%"}
    line = location["physicalLocation"]["region"]["startLine"]
    assert "launch(" in (factories / "myfactories.py").read_text().splitlines()[line - 1]
    assert "graphcheck explain scalar-drift" in run["tool"]["driver"]["rules"][0]["help"]["text"]


def test_an_allowed_finding_is_a_suppressed_result(factories, tmp_path):
    out = tmp_path / "gc.sarif"
    result = graphcheck("check", "myfactories:unsafe", "--device", "cpu", "--allow", "scalar-drift",
                        "--output-format", "sarif", "--output", str(out), cwd=factories)  # fmt: skip
    assert result.returncode == 0, result.stderr
    log = json.loads(out.read_text())
    validate(log)
    (finding,) = log["runs"][0]["results"]
    assert finding["suppressions"][0]["kind"] == "external"


def test_run_s_sarif_keeps_out_of_the_program_s_output_and_says_what_was_not_checked(factories):
    program = "import warp as wp\nwp.config.log_level = wp.LOG_WARNING\n"  # no start-up banner: the program's call
    program += "from myfactories import unsafe\nsim = unsafe()\nsim.step()\n"
    program += "with wp.ScopedCapture(device='cpu'):\n    sim.step()\nprint('the program ran')\n"
    (factories / "prog.py").write_text(program)
    result = graphcheck("run", "--output-format", "sarif", "--output", "gc.sarif", "prog.py", cwd=factories)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("the program ran")
    log = json.loads((factories / "gc.sarif").read_text())
    validate(log)
    assert log["runs"][0]["results"] == []  # no reference call: the scalar could not be compared...
    notifications = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    levels = {n["message"]["text"].split(": ", 1)[1].split(" NOT")[0]: n["level"] for n in notifications}
    assert levels["compare"] == "warning"  # ...and the log says so
    assert "graph" not in levels  # the CPU graph's cross-check ran


def test_run_of_a_program_that_crashed_is_no_successful_execution(factories):
    program = "import warp as wp\nwp.config.log_level = wp.LOG_WARNING\n"
    program += "from myfactories import unsafe\nsim = unsafe()\nsim.step()\n"
    program += "with wp.ScopedCapture(device='cpu'):\n    sim.step()\nraise RuntimeError('the program crashed')\n"
    (factories / "crashes.py").write_text(program)
    result = graphcheck("run", "--output-format", "sarif", "--output", "gc.sarif", "crashes.py", cwd=factories)
    assert result.returncode == 1, result.stderr
    log = json.loads((factories / "gc.sarif").read_text())
    validate(log)
    (invocation,) = log["runs"][0]["invocations"]
    assert (invocation["exitCode"], invocation["executionSuccessful"]) == (1, False)
    assert {"level": "error", "message": {"text": "the program exited with status 1: only the captures made before "
            "it ended were checked"}} in invocation["toolExecutionNotifications"]  # fmt: skip

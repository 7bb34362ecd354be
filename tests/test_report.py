"""Honest verdicts: Report.status, what was and was not checked, accept lines, the JSON
envelope and its schema, the environment switch and [tool.graphcheck] settings.

Reports come from real captures of the producer corpus on Warp's CPU device.
"""

import json
import os
from pathlib import Path

import jsonschema
import pytest

import graphcheck as gc
from graphcheck import config, schema
from graphcheck.findings import Report, make_finding
from tests import producers as P

DEVICE = "cpu"


def validate_document(document: dict) -> None:
    """Validate a graphcheck.report/1 document against the JSON Schema shipped in the package."""
    jsonschema.Draft202012Validator.check_schema(schema.json_schema())
    jsonschema.Draft202012Validator(schema.json_schema()).validate(document)


# -- status -------------------------------------------------------------------------------


def test_status_is_failed_passed_partial_or_not_checked_and_ok_only_when_passed():
    finding = make_finding("scalar-drift", "k", kernel="m.k", arg="t", values="1 in the reference call, 2 captured")
    cases = {
        "failed": Report([finding], checks=["compare"]),
        "passed": Report(checks=["compare", "allocations", "ownership"]),
        "partial": Report(checks=["allocations"], skipped=[("compare", "no reference call")]),
        "not-checked": Report(skipped=[("all checks", "checking disabled by GRAPHCHECK_DISABLE")]),
    }
    for status, report in cases.items():
        assert report.status == status
        assert report.ok is (status == "passed") and bool(report) is report.ok
        assert report.to_dict()["status"] == status and report.to_dict()["ok"] is report.ok
    assert "NOT checked: compare" in cases["partial"].headline()
    assert "NOT checked" in cases["not-checked"].headline()


def test_a_capture_without_reference_call_is_partial_and_says_which_check_did_not_run():
    sim = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(device=DEVICE, owners=(sim,)) as guard:
        sim.step()
    report = guard.report
    assert report.status == "partial" and not report.ok and not report.findings
    assert report.checks == ("allocations", "ownership", "graph")
    text = str(report)
    assert "checked: allocations, ownership, graph" in text
    assert "NOT checked: compare: no reference call" in text
    assert report.to_dict()["skipped"] == [{"check": "compare", "reason": dict(report.skipped)["compare"]}]
    assert report.not_run == (("compare", dict(report.skipped)["compare"]),)
    assert report.headline().endswith("but NOT checked: compare")


def test_a_full_validation_passes():
    sim = P.DeviceCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,))
    assert checked.report.status == "passed" and checked.ok and not checked.report.not_run


def test_a_partial_report_does_not_raise():
    sim = P.DeviceCounter(DEVICE)
    with gc.GraphGuard(device=DEVICE, owners=(sim,), on_failure="raise") as guard:
        sim.step()
    assert guard.report.status == "partial"


@pytest.mark.parametrize(
    ("value", "enabled"),
    [("1", False), ("true", False), ("TRUE", False), ("Yes", False), ("on", False), (" on ", False),
     ("0", True), ("false", True), ("no", True), ("off", True), ("", True), ("2", True), ("disable", True)],
)  # fmt: skip
def test_only_1_true_yes_on_disable_checking(monkeypatch, value, enabled):
    monkeypatch.setenv("GRAPHCHECK_DISABLE", value)
    assert gc.checking_enabled() is enabled
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    assert checked.report.status == ("failed" if enabled else "not-checked")


# -- reading a finding --------------------------------------------------------------------


def test_each_finding_has_a_paste_ready_accept_line_and_its_docs_page():
    sim = P.HostCounter(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    line = finding.accept_line()
    assert line == 'allow=[gc.Allow("scalar-drift", kernel="counter_step", arg="step")]'
    text = str(checked.report)
    assert f"accept: {line}" in text
    assert "docs: graphcheck explain scalar-drift (or https://graphcheck.readthedocs.io/en/latest/findings/" in text
    assert (Path(__file__).parents[1] / "docs" / "findings" / "scalar-drift.md").exists()
    data = finding.to_dict()
    assert data["accept"] == line and data["docs"].endswith("/findings/scalar-drift.html")
    # Pasted, the line accepts the finding.
    allow = eval(line.removeprefix("allow="), {"gc": gc})
    again = gc.capture(P.HostCounter(DEVICE).step, device=DEVICE, on_failure="ignore", allow=allow)
    assert not again.report.findings and len(again.report.suppressed) == 1


def test_the_text_puts_values_on_their_own_line_and_the_fix_once_per_kind():
    sim = P.OddPingPong(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    text = str(checked.report)
    fix = gc.KINDS["buffer-drift"].fix
    assert text.count(fix) == 1
    lines = text.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("  - "))
    assert lines[title + 1].startswith("      ") and "in the reference call" in lines[title + 1]
    assert "fix:" not in lines[title]


def test_text_wraps_to_the_width_asked():
    sim = P.OddPingPong(DEVICE)
    report = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore").report
    for line in report.text(width=60).splitlines():
        assert len(line) <= 60 or " " not in line.strip(), line
    assert report.text(quiet=True) == report.headline()


def test_an_allowance_that_matched_nothing_is_reported():
    sim = P.HostCounter(DEVICE)
    misspelt = gc.Allow("scalar-drift", kernel="counter_stpe")
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore", allow=[misspelt])
    assert checked.report.findings, "the misspelt allowance accepted nothing"
    assert checked.report.unused_allow == (misspelt,)
    assert 'allowance matched nothing: gc.Allow("scalar-drift", kernel="counter_stpe")' in str(checked.report)
    assert checked.report.to_dict()["unused_allow"] == [
        {"kind": "scalar-drift", "kernel": "counter_stpe", "arg": None, "comment": None}
    ]


def test_an_unknown_kind_suggests_the_nearest():
    with pytest.raises(ValueError, match=r"unknown finding kind 'scaler-drift' \(did you mean 'scalar-drift'\?\)"):
        gc.Allow("scaler-drift")


# -- the JSON envelope --------------------------------------------------------------------


def test_findings_about_several_arguments_carry_each_argument_s_values_and_buffers():
    sim = P.OddPingPong(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.to_dict()["findings"]
    swapped = set(finding["arg"].split(", "))
    assert finding["kind"] == "buffer-drift" and len(swapped) == 2
    arguments = finding["detail"]["arguments"]
    assert set(arguments) == swapped
    for values in arguments.values():
        assert values["reference"]["ptr"] != values["captured"]["ptr"]
        assert values["reference_buffer"].startswith("owner.") and values["captured_buffer"].startswith("owner.")
    assert all(key == key.lower() and " " not in key for key in finding["detail"])
    assert finding["site"]["file"] == os.path.join("tests", "producers.py"), "relative to the working directory"
    validate_document(schema.report_document([checked.report], command="check"))


def test_the_envelope_combines_statuses():
    assert schema.combined_status(["passed", "passed"]) == "passed"
    assert schema.combined_status(["passed", "partial"]) == "partial"
    assert schema.combined_status(["passed", "not-checked"]) == "partial"
    assert schema.combined_status(["not-checked"]) == schema.combined_status([]) == "not-checked"
    assert schema.combined_status(["passed", "failed", "not-checked"]) == "failed"
    document = schema.report_document([], command="run")
    assert document["schema"] == "graphcheck.report/1" and document["ok"] is False
    assert document["graphcheck"] == gc.__version__ and document["warp"]
    validate_document(document)


def test_the_schema_ships_in_the_package_and_rejects_a_wrong_document():
    assert schema.SCHEMA_PATH.parent == Path(gc.__file__).parent
    sim = P.HostCounter(DEVICE)
    document = schema.report_document([gc.capture(sim.step, device=DEVICE, on_failure="ignore").report])
    validate_document(document)
    broken = json.loads(json.dumps(document))
    broken["reports"][0]["status"] = "ok"
    with pytest.raises(jsonschema.ValidationError):
        validate_document(broken)


# -- [tool.graphcheck] ----------------------------------------------------------------------


def test_settings_come_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.graphcheck]\n'
        'allow = ["stale-pointer", { kind = "scalar-drift", kernel = "integrate", arg = "t" }]\n'
        'replay_check = "always"\non_failure = "warn"\nstrict_ownership = true\ndevice = "cpu"\n'
    )
    (tmp_path / "sub").mkdir()
    settings = config.load(config.find_pyproject(tmp_path / "sub"))
    assert settings.allow == (gc.Allow("stale-pointer"), gc.Allow("scalar-drift", "integrate", "t"))
    assert (settings.replay_check, settings.on_failure, settings.strict_ownership, settings.device) == (
        "always", "warn", True, "cpu"
    )  # fmt: skip
    assert config.load(None) == config.Settings()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('allow = ["scaler-drift"]', "unknown finding kind 'scaler-drift' (did you mean 'scalar-drift'?)"),
        ('replay_chek = "always"', "unknown key 'replay_chek' (did you mean 'replay_check'?)"),
        ('on_failure = "rise"', "on_failure must be one of"),
        ('strict_ownership = "yes"', "strict_ownership must be true or false"),
    ],
)
def test_bad_settings_say_where_and_what(tmp_path, table, message):
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.graphcheck]\n{table}\n")
    with pytest.raises(config.ConfigError) as error:
        config.load(path)
    assert message in str(error.value) and "[tool.graphcheck]" in str(error.value)


def test_strict_ownership_is_accepted_and_forwarded():
    sim = P.DeviceCounter(DEVICE)
    guard = gc.GraphGuard(device=DEVICE, reference=sim.step, owners=(sim,), strict_ownership=True)
    assert guard.strict_ownership is True
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), strict_ownership=True, revalidate=True)
    assert checked.report.findings == ()


def test_the_picture_highlights_every_operation_that_uses_a_flagged_buffer():
    from graphcheck import dot

    sim = P.ModuleGlobalScratch(DEVICE)
    checked = gc.capture(sim.step, device=DEVICE, owners=(sim,), on_failure="ignore")
    (finding,) = checked.report.findings
    assert finding.kind == "foreign-buffer" and finding.index == 0
    source = dot.to_dot(checked)
    # The CPU graph's operations in the order its replay runs them.
    first, second = [line for line in source.splitlines() if line.startswith("  n") and "[label=" in line][:2]
    assert "#f4c7c3" in first and "foreign-buffer" in first, "the operation with the finding"
    assert "#fce8b2" in second, "the next operation reads the same foreign scratch buffer"
    assert "x=owner.x" in first and "=owner.v" in second


def test_every_kind_s_docs_link_names_a_page_in_the_docs():
    pages = Path(__file__).parents[1] / "docs" / "findings"
    for kind in gc.KINDS:
        assert gc.findings.docs_page(kind).endswith(f"/findings/{kind}.html")
        assert (pages / f"{kind}.md").exists(), kind


def test_findings_and_reports_can_be_handled_without_warp():
    import subprocess
    import sys

    code = (
        "import sys, graphcheck.findings as f, graphcheck.site as s; "
        "r = f.Report([f.make_finding('scalar-drift', 'k', site=s.Site('a.py', 1, 'step'))]); "
        "assert r.status == 'failed' and 'a.py:1' in str(r); "
        "assert 'warp' not in sys.modules, 'warp was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

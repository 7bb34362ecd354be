"""What a new user reads first: the README's sample is real output, nothing cites a file the
repository lacks, the commands it gives say how to get their tools, and the demo keeps the exit-code table."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.test_cli import ROOT, graphcheck, graphcheck_env


def readme_sample(marker_text: str = "<!-- README-SAMPLE") -> str:
    text = (ROOT / "README.md").read_text()
    marker = text.index(marker_text)
    block = re.search(r"```\n(.*?)\n```", text[marker:], re.S)
    assert block is not None
    return block.group(1)


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="the sample names functions with their class, as Python 3.11 and later can"
)
def test_the_readme_sample_is_what_the_demo_prints_today(cpu):
    import graphcheck as gc
    from graphcheck.cli import allow_option
    from graphcheck.demo import Particles

    buggy = Particles("cpu", fixed=False)
    report = gc.capture(buggy.step, device="cpu", owners=(buggy,), on_failure="ignore").report
    # As the command prints it: its accept lines are --allow options.
    assert readme_sample() == report.text(accept=allow_option), (
        "update the README's sample from `graphcheck demo --device cpu`"
    )


def test_the_readme_run_sample_catches_the_planted_counter_with_reference_call_only():
    """The README's `graphcheck run --reference-call` sample is what the command prints today, and
    plain `run` of the same program finds nothing and says it did not compare."""
    command = ["run", "--reference-call", "examples/frame_counter.py", "--device", "cpu"]
    compared = graphcheck_env(*command, env={"NO_COLOR": "1"})
    assert compared.returncode == 1, compared.stdout + compared.stderr
    # As a terminal shows it: graphcheck's line on stderr first (before the program runs), then stdout.
    said = [line for line in compared.stderr.splitlines() if line.startswith("graphcheck: ")]
    assert readme_sample("<!-- README-RUN-SAMPLE") == "\n".join([*said, compared.stdout.strip()]), (
        "update the README's run sample from `graphcheck run --reference-call examples/frame_counter.py --device cpu`"
    )
    plain = graphcheck_env("run", "examples/frame_counter.py", "--device", "cpu", env={"NO_COLOR": "1"})
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "no findings in what was checked; the capture was NOT compared with an eager call" in plain.stdout


def test_the_readme_leads_with_what_a_user_does_and_keeps_benchmark_internals_in_the_docs():
    text = (ROOT / "README.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:2] == ["Try it", "Check your capture site"], headings
    for internal in ("callgrind", "fifth pass", "instructions"):
        assert internal not in text, internal
    assert "python -m benchmarks.run" in (ROOT / "docs" / "performance.md").read_text()
    assert "performance" in (ROOT / "docs" / "index.md").read_text()


def test_nothing_cites_a_file_the_repository_lacks():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    files = tracked.split() or [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")]
    spec = "SPEC" + ".md"  # the product specification lives outside the repository
    citing = [name for name in files if name.endswith((".py", ".md", ".toml")) and spec in (ROOT / name).read_text()]
    assert citing == []


def test_every_nox_command_the_readme_gives_says_how_to_install_nox():
    text = (ROOT / "README.md").read_text()
    assert "python -m pip install nox && nox -s docs" in text
    assert "(`python -m pip install nox`)" in text


def test_the_demo_follows_the_exit_code_table_and_its_json_says_the_same():
    normal = graphcheck("demo", "--device", "cpu", "--replays", "1", "--json")
    assert normal.returncode == 0 and json.loads(normal.stdout)["demo"] == "passed", normal.stderr
    off = {"GRAPHCHECK_DISABLE": "1"}
    disabled = graphcheck_env("demo", "--device", "cpu", "--replays", "1", "--json", env=off)
    document = json.loads(disabled.stdout)
    assert disabled.returncode == 0 and document["status"] == "not-checked" and document["checking"] is False
    strict = graphcheck_env("demo", "--device", "cpu", "--strict", env=off)
    assert strict.returncode == 1 and "NOT checked" in strict.stdout


def test_the_docs_front_page_says_what_graphcheck_reports_of_an_array_made_in_the_call():
    index = (ROOT / "docs" / "index.md").read_text()
    assert "- an array allocated inside the call," not in index, "a device temporary is a note, not a finding"
    bullet = index[index.index("host data uploaded inside the call") :].split("\n- ")[0]
    assert "graph-owned" in " ".join(bullet.split()) and "strict_ownership=True" in bullet

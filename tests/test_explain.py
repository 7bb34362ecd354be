"""``graphcheck explain KIND``: a finding kind's page in the terminal, from a checkout and from a wheel."""

from __future__ import annotations

import pytest

from graphcheck.explain import explain, pages_dir
from graphcheck.findings import KINDS
from tests.test_cli import graphcheck


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_has_a_page_that_reads_as_plain_text(kind):
    page = explain(kind)
    assert page.startswith(f"# {kind}\n")
    assert "```{" not in page and "{literalinclude}" not in page, "directives are written out"
    assert "{func}`" not in page and "{download}`" not in page, "roles become plain code"
    assert (pages_dir() / f"{kind}.md").is_file()


def test_the_page_includes_its_example_and_its_report():
    page = explain("scalar-drift")
    assert "    class Sim:" in page and "self.frame += 1" in page, "the example code, indented"
    assert "    graphcheck: 1 finding in Sim.step on cpu (1 operation)" in page, "the report the example prints"
    assert "(`scalar_drift.py`)" in page


def test_the_command_prints_the_page_and_names_a_misspelt_kind(tmp_path):
    result = graphcheck("explain", "per-call-allocation", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# per-call-allocation\n")
    result = graphcheck("explain", "scaler-drift", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "graphcheck explain: error: unknown finding kind 'scaler-drift' (did you mean 'scalar-drift'?); "
        "`graphcheck explain list` lists them"
    )
    listing = graphcheck("explain", cwd=tmp_path)
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == len(KINDS)
    assert listing.stdout.startswith("scalar-drift ")


def test_every_report_line_that_links_to_the_docs_names_the_command(cpu):
    import graphcheck as gc
    from graphcheck.cli import github_annotations
    from tests.producers import HostCounter

    sim = HostCounter("cpu")
    checked = gc.capture(sim.step, owners=(sim,), on_failure="ignore")
    docs = [line for line in checked.report.text().splitlines() if "readthedocs" in line]
    assert docs == [
        "  docs: graphcheck explain scalar-drift (or https://graphcheck.readthedocs.io/en/latest/findings/"
        "scalar-drift.html)"
    ]
    (error, _) = github_annotations(checked.report)[:2]
    assert "%0Adocs: graphcheck explain scalar-drift (or https://" in error


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("drift", "(did you mean 'dim-drift', 'copy-drift', 'scalar-drift', 'buffer-drift', 'launch-sequence-drift' or "
                  "'stream-drift'?)"),
        ("allocation", "(did you mean 'per-call-allocation'?)"),
        ("stale", "(did you mean 'stale-pointer'?)"),
        ("buffer_drfit", "(did you mean 'buffer-drift'?)"),
    ],
)  # fmt: skip
def test_explain_takes_any_case_and_suggests_every_near_miss(tmp_path, given, said):
    for spelt in ("SCALAR-DRIFT", "Scalar_Drift"):
        page = graphcheck("explain", spelt, cwd=tmp_path)
        assert page.returncode == 0 and page.stdout.startswith("# scalar-drift\n"), page.stderr
    result = graphcheck("explain", given, cwd=tmp_path)
    assert result.returncode == 2 and said in result.stderr, result.stderr


def test_explain_lists_the_kinds_in_any_case():
    from graphcheck.explain import explain

    assert explain("LIST") == explain("list") and explain("List").startswith("scalar-drift ")

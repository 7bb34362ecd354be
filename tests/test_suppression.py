"""Suppression comments: ``# graphcheck: allow[kind]`` on the capture line or a launch line, as linters have.

The comments are in this file's source: graphcheck reads the lines the capture and the
launches come from, as linters read theirs.
"""

from __future__ import annotations

import re

import pytest
import warp as wp

import graphcheck as gc
from graphcheck import schema
from tests import kernels as K
from tests.producers import N
from tests.test_report import validate_document


class TwoCounters:
    """Two launches, each passing a Python counter by value: two scalar-drift findings, one per line."""

    def __init__(self, device="cpu"):
        self.device = device
        self.x = wp.zeros(N, dtype=float, device=device)
        self.frame = 0

    def step(self):
        self.frame += 1
        x, device = self.x, self.device
        wp.launch(K.counter_step, dim=N, inputs=[x, self.frame], device=device)  # graphcheck: allow[scalar-drift]
        wp.launch(K.counter_step, dim=N, inputs=[x, self.frame + 1], device=device)


def test_a_comment_on_a_launch_line_allows_the_findings_at_that_line_only(cpu):
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report
    (kept,) = report.findings
    (allowed,) = report.suppressed
    assert kept.kind == allowed.kind == "scalar-drift"
    assert allowed.site.lineno == kept.site.lineno - 1, "the commented line is allowed, the next is not"
    assert not report.unused_allow


def test_a_comment_on_the_capture_line_allows_its_kinds_in_the_whole_capture(cpu):
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report  # graphcheck: allow[scalar-drift]
    assert report.status == "passed" and len(report.suppressed) == 2
    assert "2 allowed" in report.headline()


def test_a_comment_that_matches_nothing_is_reported_like_an_unused_ignore_comment(cpu):
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report  # graphcheck: allow[buffer-drift]
    (unused,) = report.unused_allow
    assert unused.kind == "buffer-drift" and unused.comment is not None
    where = f"test_suppression.py:{unused.comment.lineno}"
    line = f"allowance matched nothing: # graphcheck: allow[buffer-drift] at {where}"
    assert f"{line} (remove the comment: nothing it names is reported there)" in report.text()
    (entry,) = report.to_dict()["unused_allow"]  # JSON says where the comment is, as the text does
    validate_document(schema.report_document([report]))
    assert entry["comment"]["file"].endswith("test_suppression.py")
    assert entry["comment"]["line"] == unused.comment.lineno


def test_a_misspelt_kind_in_a_comment_is_a_note_with_the_nearest_kind(cpu):
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report  # graphcheck: allow[scaler-drift]
    assert len(report.findings) == 1  # the launch line's own comment still allows the first
    (note,) = [n for n in report.notes if "comment" in n]
    assert note.startswith("the comment `# graphcheck: allow[scaler-drift]` at test_suppression.py:")
    assert note.endswith("unknown finding kind 'scaler-drift' (did you mean 'scalar-drift'?)")


def test_a_comment_naming_a_kernel_and_argument_says_comments_name_kinds_only(cpu):
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report  # graphcheck: allow[scalar-drift:k:t]
    (note,) = [n for n in report.notes if "comment" in n]
    assert "a comment names kinds only, and allows them on its own statement (write `# graphcheck: " \
        "allow[scalar-drift]` on the launch;" in note, note


def test_a_comment_on_a_guarded_scoped_capture_line_counts_too(cpu):
    from graphcheck.autoguard import AutoGuard

    x = wp.zeros(N, dtype=float, device="cpu")
    host = [1.0] * N
    with AutoGuard(None) as guard:
        with wp.ScopedCapture(device="cpu"):  # graphcheck: allow[per-call-allocation]
            staged = wp.array(host, dtype=float, device="cpu")  # host data that dies with the call
            wp.launch(K.axpy, dim=N, inputs=[staged, x, 1.0], device="cpu")
    (report,) = guard.reports
    assert not report.findings and [f.kind for f in report.suppressed] == ["per-call-allocation"]


# -- as forgiving as a linter's noqa comments -----------------------------------------------------------------


class BlackFormatted:
    """Two launches split over lines as black formats them, each passing a Python counter."""

    def __init__(self, device="cpu"):
        self.device = device
        self.x = wp.zeros(N, dtype=float, device=device)
        self.frame = 0

    def step(self):
        self.frame += 1
        wp.launch(
            K.counter_step,
            dim=N,
            inputs=[self.x, self.frame],
            device=self.device,
        )  # graphcheck: allow[scalar-drift]
        wp.launch(
            K.counter_step,
            dim=N,  # GRAPHCHECK: ALLOW[SCALAR-DRIFT]
            inputs=[self.x, self.frame + 1],
            device=self.device,
        )


def test_a_comment_on_any_line_of_a_multi_line_launch_counts_in_any_case(cpu):
    sim = BlackFormatted()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report
    assert not report.findings, report.text()
    assert [f.kind for f in report.suppressed] == ["scalar-drift", "scalar-drift"]
    assert not report.unused_allow and not [n for n in report.notes if "comment" in n]


class StrayComments:
    """A comment on a launch's middle line that matches nothing there, one on a line that
    issues nothing, and a bare allow."""

    def __init__(self, device="cpu"):
        self.device = device
        self.x = wp.zeros(N, dtype=float, device=device)
        self.frame = 0

    def step(self):
        self.frame += 1
        # graphcheck: allow[scalar-drift]
        wp.launch(
            K.counter_step,
            dim=N,
            inputs=[self.x, self.frame],  # graphcheck: allow[buffer-drift]
            device=self.device,
        )
        wp.launch(K.counter_step, dim=N, inputs=[self.x, 1], device=self.device)  # graphcheck: allow


def test_a_comment_that_matches_nothing_is_reported_wherever_it_is_and_a_bare_allow_allows_nothing(cpu):
    sim = StrayComments()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore").report
    (finding,) = report.findings
    assert finding.kind == "scalar-drift" and finding.arg == "step", "no comment allowed it"
    unused = {(a.kind, a.comment.lineno) for a in report.unused_allow}
    source = StrayComments.step.__code__
    first = source.co_firstlineno
    assert unused == {("scalar-drift", first + 2), ("buffer-drift", first + 6)}, report.text()
    (bare,) = [n for n in report.notes if "comment" in n]
    assert bare.startswith(f"the comment `# graphcheck: allow` at test_suppression.py:{first + 9}: it names no kind")
    assert "allow[scalar-drift]" in bare


def test_a_comment_on_a_multi_line_capture_header_allows_in_the_whole_capture(cpu):
    from graphcheck.autoguard import AutoGuard

    x = wp.zeros(N, dtype=float, device="cpu")
    host = [1.0] * N
    with AutoGuard(None) as guard:
        with wp.ScopedCapture(
            device="cpu",
        ):  # graphcheck: allow[per-call-allocation]
            staged = wp.array(host, dtype=float, device="cpu")
            wp.launch(K.axpy, dim=N, inputs=[staged, x, 1.0], device="cpu")
    (report,) = guard.reports
    assert not report.findings and [f.kind for f in report.suppressed] == ["per-call-allocation"]


def test_the_closing_lines_count_allowed_findings_and_say_to_remove_an_unused_comment(cpu):
    from graphcheck.autoguard import AutoGuard

    sim = StrayComments()
    sim.step()
    with AutoGuard(None, reference_call=True) as guard:
        with wp.ScopedCapture(device="cpu"):  # graphcheck: allow[scalar-drift]
            sim.step()
    closing = guard.verdict().splitlines()
    assert closing[0].startswith("graphcheck: 1 capture guarded, no findings, 1 allowed; "), closing
    first = StrayComments.step.__code__.co_firstlineno
    assert (
        f"graphcheck: allowance matched nothing: # graphcheck: allow[buffer-drift] at test_suppression.py:{first + 6} "
        "(remove the comment: nothing it names is reported there)"
    ) in closing, closing


def test_a_kind_is_taken_in_any_case_wherever_an_allowance_is_given(cpu, tmp_path):
    """As comments and ``graphcheck explain`` take it: ``gc.Allow``, ``allow=`` strings, ``--allow``, pyproject."""
    from graphcheck import config
    from graphcheck.findings import allowances

    assert gc.Allow("SCALAR-DRIFT") == gc.Allow("scalar-drift")
    assert allowances(["Buffer-Drift"]) == (gc.Allow("buffer-drift"),)
    assert config.parse_allow(["SCALAR-DRIFT:Counter_Step:Frame"]) == (
        gc.Allow("scalar-drift", kernel="Counter_Step", arg="Frame"),  # kernel and argument names keep their case
    )
    (tmp_path / "pyproject.toml").write_text('[tool.graphcheck]\nallow = ["Stale-Pointer"]\n')
    assert config.load(tmp_path / "pyproject.toml").allow == (gc.Allow("stale-pointer"),)
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore", allow=["SCALAR-DRIFT"]).report
    assert report.status == "passed" and len(report.suppressed) == 2


def test_an_allowed_finding_about_several_arguments_names_each(cpu):
    from tests import producers as P

    sim = P.OddPingPong("cpu")
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore", allow=["buffer-drift"]).report
    (allowed,) = report.suppressed
    names = allowed.arg.split(", ")
    assert len(names) == 2, allowed.arg
    line = next(line for line in report.text().splitlines() if line.startswith("allowed"))
    assert line.endswith(f"arguments {names[0]!r}, {names[1]!r}"), line


def test_the_colon_form_every_report_prints_is_one_allowance_wherever_it_is_given(cpu, tmp_path):
    """``KIND:KERNEL:ARG`` in pyproject, the marker's and capture()'s ``allow=`` is what ``--allow`` takes:
    one argument of one kernel, never the whole kind."""
    from graphcheck import config
    from graphcheck.findings import allowances

    one = gc.Allow("scalar-drift", kernel="counter_step", arg="step")
    assert gc.Allow.parse("scalar-drift:counter_step:step") == one
    assert allowances(["scalar-drift:counter_step:step"]) == (one,)  # capture()'s and the marker's allow=
    assert config.parse_allow(["scalar-drift:counter_step:step"]) == (one,)
    (tmp_path / "pyproject.toml").write_text('[tool.graphcheck]\nallow = ["scalar-drift:counter_step:step"]\n')
    assert config.load(tmp_path / "pyproject.toml").allow == (one,)
    sim = TwoCounters()
    report = gc.capture(sim.step, owners=(sim,), on_failure="ignore", allow=["scalar-drift:counter_step:nope"]).report
    assert [f.kind for f in report.findings] == ["scalar-drift"], "an allowance of another argument allows nothing"
    assert report.unused_allow


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("scalar-drift::", "is KIND, KIND:KERNEL or KIND:KERNEL:ARG, got 'scalar-drift::' (an empty part)"),
        ("scalar-drift:k:a:b", "got 'scalar-drift:k:a:b' (more than three parts)"),
    ],
)
def test_an_allowance_with_an_empty_part_or_too_many_is_refused_in_one_line(tmp_path, spec, message):
    from graphcheck import config

    with pytest.raises(config.ConfigError, match=re.escape(message)):
        config.parse_allow([spec])
    (tmp_path / "pyproject.toml").write_text(f'[tool.graphcheck]\nallow = ["{spec}"]\n')
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        config.load(tmp_path / "pyproject.toml")
    with pytest.raises(ValueError, match=re.escape(message)):
        gc.capture(lambda: None, allow=[spec])


def test_allow_with_the_colon_form_as_its_kind_says_to_name_the_kernel_and_argument_apart():
    with pytest.raises(ValueError, match="^Allow\\(\\) takes the kind alone") as error:
        gc.Allow("scalar-drift:add_frame:frame")
    assert "gc.Allow('scalar-drift', kernel='add_frame', arg='frame')" in str(error.value)
    assert "did you mean" not in str(error.value)

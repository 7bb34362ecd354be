"""``--output-format sarif``: reports as a SARIF 2.1.0 log, for code-scanning upload.

One run of the tool ``graphcheck``: a rule per finding kind (its summary, its fix, its
page and the ``graphcheck explain`` command), a result per finding at the user's file and
line (an allowed finding is a result with a suppression), and each check that did not
run as a warning notification of the invocation, so a partial verdict is not read as a
clean one (an error under ``--strict``, whose invocation then did not succeed; the
invocation's ``exitCode`` is the command's exit status). Paths below the working directory
are relative to ``%SRCROOT%``, as GitHub code scanning expects.

A module that imports no Warp.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._version import __version__
from .findings import KINDS, Finding, docs_line, docs_page
from .schema import relative_path

__all__ = ["SARIF_SCHEMA", "sarif_log"]

#: The schema a SARIF 2.1.0 log names.
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_RULES = {kind: index for index, kind in enumerate(KINDS)}


def sarif_log(
    reports: list[tuple[str, Any]],
    command: str,
    *,
    exit_status: int | None = None,
    exit_reason: str | None = None,
    strict: bool = False,
    program_exit: int = 0,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log of ``(source, report)`` pairs from one ``graphcheck`` command.

    Args:
        reports: the ``(source, report)`` pairs.
        command: the subcommand.
        exit_status: the exit status the command ends with: the invocation's ``exitCode``.
        exit_reason: why it ends with it: the invocation's ``exitCodeDescription``.
        strict: ``--strict`` failed the command for checks that did not run: their
            notifications are errors, and the invocation did not succeed (its analysis is
            incomplete, which ``--strict`` refuses).
        program_exit: ``run``: the program's own exit status; a program that crashed or
            exited with a non-zero status did not run to its end, so neither did the
            invocation (an error notification says so).
    """
    results = []
    notifications = []
    for source, report in reports:
        results += [_result(f, report, source) for f in report.findings]
        results += [_result(f, report, source, suppressed=True) for f in report.suppressed]
        # A check that could not apply (the graph on the CPU) is a note; one that applies and did not run, a warning.
        not_run = set(report.not_run)
        notifications += [
            {
                "level": ("error" if strict else "warning") if (check, reason) in not_run else "note",
                "message": {"text": f"{report.name}: {check} NOT checked: {reason}"},
            }
            for check, reason in report.skipped
        ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "graphcheck",
                        "version": __version__,
                        "informationUri": "https://graphcheck.readthedocs.io",
                        "rules": [_rule(kind) for kind in KINDS],
                    }
                },
                "invocations": [_invocation(command, notifications, exit_status, exit_reason, strict, program_exit)],
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
                "results": results,
            }
        ],
    }


def _invocation(
    command: str,
    notifications: list[dict[str, Any]],
    exit_status: int | None,
    exit_reason: str | None,
    strict: bool,
    program_exit: int,
) -> dict[str, Any]:
    """The run's invocation: it succeeded unless ``--strict`` failed it for checks that did not
    run, or the program ``run`` ran did not end normally (findings are results of a
    successful analysis)."""
    if program_exit:
        notifications = [
            *notifications,
            {
                "level": "error",
                "message": {
                    "text": f"the program exited with status {program_exit}: only the captures made before it ended "
                    "were checked"
                },
            },
        ]
    invocation: dict[str, Any] = {
        "executionSuccessful": not strict and not program_exit,
        "commandLine": f"graphcheck {command}",
        "toolExecutionNotifications": notifications,
    }
    if exit_status is not None:
        invocation["exitCode"] = exit_status
    if exit_reason is not None:
        invocation["exitCodeDescription"] = exit_reason
    return invocation


def _rule(kind: str) -> dict[str, Any]:
    info = KINDS[kind]
    return {
        "id": kind,
        "name": "".join(part.capitalize() for part in kind.split("-")),
        "shortDescription": {"text": info.summary},
        "help": {"text": f"Fix: {info.fix}.\nRead more: {docs_line(kind)}"},
        "helpUri": docs_page(kind),
        "defaultConfiguration": {"level": "error"},
    }


def _result(finding: Finding, report: Any, source: str, *, suppressed: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.kind,
        "ruleIndex": _RULES[finding.kind],
        "level": "error",
        "message": {"text": finding.message},
        "properties": {"capture": report.name, "source": source, "accept": finding.accept_line()},
    }
    if finding.site is not None:
        path = relative_path(finding.site.filename)
        location: dict[str, Any] = (
            {"uri": Path(path).as_uri()}
            if Path(path).is_absolute()
            else {"uri": path.replace("\\", "/"), "uriBaseId": "%SRCROOT%"}
        )
        result["locations"] = [
            {"physicalLocation": {"artifactLocation": location, "region": {"startLine": finding.site.lineno}}}
        ]
    if suppressed:
        result["suppressions"] = [{"kind": "external", "justification": "allowed (allow= or a suppression comment)"}]
    return result

"""The ``graphcheck`` command (also ``python -m graphcheck``).

- ``graphcheck demo``: validate a bundled producer with planted bugs, then the fixed one;
- ``graphcheck run SCRIPT [ARGS...]``: run a Warp program unchanged, every capture guarded;
- ``graphcheck check MODULE:FACTORY``: validate the step of a producer a factory builds.

Every subcommand keeps one exit-code contract (:data:`EXIT_CODES`), answers a usage
mistake with one line on stderr, and writes text, JSON (the ``graphcheck.report/1``
envelope), GitHub workflow annotations or JUnit XML.

It is longer than most modules on purpose: one front end, read top to bottom in four
sections (the parser; the settings checked before anything runs; the output writers for
text, JSON, GitHub annotations and JUnit XML; the subcommands), which all share the exit-
code contract and the writers; nothing but ``__main__`` imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import importlib
import os
import re
import runpy
import shutil
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ._words import article

__all__ = ["EXIT_CODES", "main"]

EXIT_PASSED, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as Python exits on it
#: The exit codes of every subcommand.
EXIT_CODES = {
    EXIT_PASSED: "passed (or partial, or not checked, without --strict)",
    EXIT_FINDINGS: "findings (or partial or not checked under --strict)",
    EXIT_USAGE: "usage or configuration error",
    EXIT_INTERNAL: "internal error or unsupported Warp",
}
FORMATS = ("text", "json", "github", "junit", "sarif")
#: The formats that write one document a program reads back (not lines for a person or a log).
DOCUMENT_FORMATS = ("json", "junit", "sarif")

_RED, _GREEN, _YELLOW, _BOLD, _DIM, _RESET = "\033[31m", "\033[32m", "\033[33m", "\033[1m", "\033[2m", "\033[0m"


class WarpMissing(Exception):
    """Warp is not installed in the Python that runs graphcheck: one line, exit status 3."""

    def __init__(self, prog: str) -> None:
        super().__init__(
            f"{prog}: error: Warp is not installed in this Python ({sys.executable}): install it with "
            f"`{Path(sys.executable).name} -m pip install warp-lang` (graphcheck explain works without it)"
        )


class UsageError(Exception):
    """A mistake in how the command was called or configured: one line, exit status 2."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


def _use_colour(stream: TextIO, choice: str) -> bool:
    """``--colour``, else ``NO_COLOR`` (off), else ``FORCE_COLOR`` (on), else whether ``stream`` is a terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def _width(stream: TextIO) -> int | None:
    """The columns to wrap text to: the terminal's (or ``COLUMNS``); None when writing to a file."""
    if "COLUMNS" in os.environ or (hasattr(stream, "isatty") and stream.isatty()):
        return max(shutil.get_terminal_size().columns, 40)
    return None


def _allow(kind: str, kernel: str | None, arg: str | None) -> str:
    return "--allow " + ":".join([kind, kernel or "", arg or ""]).rstrip(":")


def allow_option(finding: Any) -> str:
    """The ``--allow KIND[:KERNEL[:ARG]]`` that accepts ``finding`` on the command line."""
    return _allow(finding.kind, *finding.accepted())


def allow_spec(allow: Any) -> str:
    """An :class:`~graphcheck.Allow` as the ``--allow KIND[:KERNEL[:ARG]]`` that gives it."""
    return _allow(allow.kind, allow.kernel, allow.arg)


def render(
    report: Any,
    colour: bool,
    *,
    quiet: bool = False,
    width: int | None = None,
    allowance: Callable[[Any], str] | None = None,
    unused: bool = True,
) -> str:
    """A report as text (accept lines as ``--allow`` options; ``allowance``, ``unused``: as
    :meth:`Report.text` takes them), its verdict and kinds coloured for a terminal."""
    text = report.text(quiet=quiet, width=width, accept=allow_option, allowance=allowance, unused=unused)
    if not colour:
        return text
    verdict = {"passed": _GREEN, "failed": _RED}.get(report.status, _YELLOW)
    out = []
    for line in text.splitlines():
        if line.startswith("graphcheck:"):
            line = f"{_BOLD}{verdict}{line}{_RESET}"
        elif line.startswith("NOT checked"):
            line = f"{_YELLOW}{line}{_RESET}"
        elif line.startswith(("note:", "checked:", "allowed", "allowance")):
            line = f"{_DIM}{line}{_RESET}"
        elif not line.startswith(" "):
            kind, _, rest = line.partition(" ")
            line = f"{_RED}{kind}{_RESET} {rest}"
        out.append(line)
    return "\n".join(out)


class _Progress:
    """Short stage messages on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"graphcheck: {message}...", file=sys.stderr, flush=True)


# -- the parser ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (with the nearest choice), not usage text."""

    def error(self, message: str) -> Any:
        # ARGS (run's program arguments) may be empty: only SCRIPT is required.
        message = message.replace("required: SCRIPT, ARGS", "required: SCRIPT")
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if wrong:
            choices = [choice.strip().strip("'") for choice in wrong.group(2).split(",")]
            near = difflib.get_close_matches(wrong.group(1), choices, n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"choose from {', '.join(choices)}"
            message = f"{message[: wrong.start()]}invalid choice {wrong.group(1)!r} ({hint})"
        raise UsageError(self.prog, f"{message} (see {self.prog} --help)")


def _at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number no smaller than ``minimum`` (else one line naming the value, and ``why``)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{f' ({why})' if why else ''}, got {value}")
        return value

    return whole_number


_EPILOG = (
    "exit status: "
    + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    + (". Settings come from [tool.graphcheck] in the nearest pyproject.toml; options win.")
)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graphcheck", description="Prove a Warp capture site is replay-safe before you replay it.", epilog=_EPILOG
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def reporting(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--allow",
            action="append",
            default=[],
            metavar="KIND[:KERNEL[:ARG]]",
            help="accept findings of a kind, optionally at one kernel and argument (repeat for more)",
        )
        p.add_argument(
            "--colour",
            "--color",
            choices=("auto", "always", "never"),
            default="auto",
            help="colour the text (auto: on a terminal, unless NO_COLOR; FORCE_COLOR forces it)",
        )
        p.add_argument(
            "--output-format", choices=FORMATS, default=None, help="text (default), json, github, junit or sarif"
        )
        p.add_argument("--json", action="store_true", help="the same as --output-format json")
        p.add_argument("--output", metavar="PATH", help="write the report there instead of standard output")
        p.add_argument("--strict", action="store_true", help="exit 1 also when some checks could not run")
        p.add_argument("--quiet", "-q", action="store_true", help="print the verdicts only")
        p.add_argument("--strict-ownership", action="store_true", default=None, help="ask that every buffer be owned")
        p.add_argument("--dot", metavar="PATH", help="write a picture of the graph (DOT; SVG too with Graphviz)")

    def device(p: argparse.ArgumentParser) -> None:
        p.add_argument("--device", default=None, help="capture device (default: Warp's default device)")

    def warmup(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument(
            "--warmup",
            type=_at_least(0),
            default=None,
            metavar="N",
            help=f"call {what} N times eagerly before the reference call, for set-up only the first calls do",
        )

    demo = commands.add_parser(
        "demo", help="validate a bundled producer with planted bugs, then the fixed one", epilog=_EPILOG
    )
    device(demo)
    reporting(demo)
    demo.add_argument("--replays", type=_at_least(0), default=100, help="replays of the fixed graph (default 100)")

    run = commands.add_parser("run", help="run a Warp program with every wp.ScopedCapture guarded", epilog=_EPILOG)
    reporting(run)
    run.add_argument("--report", metavar="PATH", help="also write every report as JSON to PATH")
    run.add_argument(
        "--reference-call",
        action="store_true",
        help="compare each capture with an eager run of its block (made only of plain calls) right after it; the "
        "graph stays the program's own, and the program takes one extra step per capture",
    )
    run.add_argument("--warmup", default=None, help=argparse.SUPPRESS)  # refused, with why: see _run
    run.add_argument("script", metavar="SCRIPT", help="the program to run")
    run.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="its arguments")

    explain = commands.add_parser(
        "explain", help="print a finding kind's documentation page (graphcheck explain list: every kind)"
    )
    explain.add_argument("kind", metavar="KIND", nargs="?", default="list", help="e.g. scalar-drift (default: list)")

    check = commands.add_parser("check", help="validate the step of a producer built by MODULE:FACTORY", epilog=_EPILOG)
    device(check)
    reporting(check)
    check.add_argument("target", metavar="MODULE:FACTORY", help="e.g. mysim.envs:make_env, or mysim/envs.py:make_env")
    check.add_argument("--method", default="step", help="the method to capture (default: step)")
    check.add_argument(
        "--traceback", action="store_true", help="show the full traceback of an exception the factory or step raises"
    )
    check.add_argument("--replays", type=_at_least(0), default=1, help="replays after validation (default 1)")
    warmup(check, "the method")
    by_values = check.add_mutually_exclusive_group()
    by_values.add_argument(
        "--values",
        action="store_true",
        help="replay the graph beside an eagerly stepped twin and compare every buffer (gc.verify_replay)",
    )
    by_values.add_argument(
        "--conformance",
        action="store_true",
        help="run the producer conformance kit: calls, shared buffers, capture, values (gc.check_producer)",
    )
    check.add_argument(
        "--steps",
        type=_at_least(2, "step 1 is the captured producer's reference call; replays start at step 2"),
        default=None,
        metavar="N",
        help="steps (calls) for --values and --conformance (default 4, at least 2)",
    )
    check.add_argument(
        "--show-graph",
        action="store_true",
        help="print the captured graph: one line per node (on the CPU, per operation its replay runs) and the "
        "source line that made it",
    )
    parser.set_defaults(commands={"demo": demo, "run": run, "explain": explain, "check": check})
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, parsed; an option the subcommand does not take is a usage error of
    that subcommand, with the nearest option it takes and its help."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = args.commands[args.command]
        options = [o for action in command._actions for o in action.option_strings]
        unknown = next((word for word in extra if word.startswith("-")), extra[0]).split("=")[0]
        near = difflib.get_close_matches(unknown, options, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise UsageError(
            command.prog, f"unrecognized arguments: {' '.join(extra)}{hint} (see {command.prog} --help)"
        )  # fmt: skip
    return args


def _version() -> str:
    """The version line: graphcheck's, and the Warp and cuda-python it runs with (read, not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    from ._version import __version__

    def installed(distribution: str) -> str:
        try:
            return version(distribution)
        except PackageNotFoundError:
            return "not installed"

    return f"{__version__} (warp-lang {installed('warp-lang')}, cuda-python {installed('cuda-python')})"


# -- settings, checked before anything runs -----------------------------------------------


def _settings(args: argparse.Namespace, prog: str) -> Any:
    """``[tool.graphcheck]`` merged with the options; every value checked (UsageError otherwise)."""
    from . import config

    pyproject = config.find_pyproject(Path.cwd())
    try:
        settings = config.load(pyproject)
        given = config.parse_allow(args.allow)
    except config.ConfigError as error:
        raise UsageError(prog, str(error).replace(str(Path.cwd()) + os.sep, "")) from None
    allow = settings.allow + given
    in_project = config.allow_spelling(settings.allow, pyproject)
    # An allowance that matched nothing is named as it was given: an --allow option, or a line of pyproject.toml.
    args.allowance = lambda a: allow_spec(a) if a in given else in_project(a)
    args.output_format = "json" if args.json else (args.output_format or "text")
    if getattr(args, "device", None) is not None and not args.device.strip():
        raise UsageError(prog, "--device needs a device name (cpu, cuda, cuda:0...), got an empty one")
    from ._outputs import OutputPathError, check_output_path

    for option in ("--dot", "--output", "--report"):
        path = getattr(args, option.removeprefix("--"), None)
        if path is not None:
            try:
                check_output_path(option, path)
            except OutputPathError as error:
                raise UsageError(prog, str(error)) from None
    if args.dot is not None:
        from . import dot

        fmt = dot.renders(args.dot)
        if fmt is not None and shutil.which("dot") is None:
            source = str(Path(args.dot).with_suffix(".dot"))
            raise UsageError(
                prog, f"--dot {args.dot}: a .{fmt} picture needs Graphviz's dot program, which is not installed: "
                f"install Graphviz, or write the DOT text (--dot {source}) and render it where Graphviz is (dot "
                f"-T{fmt} {source} -o {args.dot})"
            )  # fmt: skip
    if getattr(args, "device", None):
        args.device_from = ("--device", "--device {}".format)
    elif settings.device is not None and pyproject is not None:
        where = f"device in [tool.graphcheck] of {_shown_path(pyproject)}"
        args.device_from = (where, 'device = "{}"'.format)
    return dataclasses.replace(
        settings,
        allow=tuple(dict.fromkeys(allow)),
        strict_ownership=settings.strict_ownership if args.strict_ownership is None else args.strict_ownership,
        device=getattr(args, "device", None) or settings.device,
    )


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _warp_and_device(
    device: str | None,
    prog: str,
    device_from: tuple[str, Callable[[str], str]] = ("--device", "--device {}".format),
    *,
    init: bool = True,
) -> str | None:
    """Load Warp, check it is supported, and resolve ``device`` (UsageError for one Warp lacks,
    naming where it came from, ``device_from``: the place and how it writes a device).

    ``init``: initialise Warp quietly now (no start-up banner in graphcheck's own output);
    ``run`` leaves Warp's configuration and its initialisation to the program, as ``python`` does.
    """
    try:
        import warp as wp
    except ModuleNotFoundError as error:
        if error.name != "warp":
            raise
        raise WarpMissing(prog) from None

    from . import _warp

    if init:
        wp.config.log_level = wp.LOG_WARNING
        wp.init()
    _warp.check_warp(initialise=init)
    if device is None:
        return None
    from .guard import check_device

    where, spell = device_from
    try:
        return check_device(device, spell)
    except ValueError as error:
        raise UsageError(prog, f"{where}: {error}") from None


def _device_from(args: argparse.Namespace) -> list[tuple[str, Callable[[str], str]]]:
    """Where the device came from (``--device``, or ``[tool.graphcheck]``), as ``_settings`` found it."""
    return [args.device_from] if hasattr(args, "device_from") else []


@dataclasses.dataclass(frozen=True)
class Exit:
    """The exit status a command ends with, and why: every output format says both.

    Attributes:
        status: the exit status (see :data:`EXIT_CODES`; ``run`` keeps a failing program's own).
        reason: why, in words (``"partial: some checks did not run (--strict)"``).
        strict: whether ``--strict`` decided it (a partial or not-checked verdict fails).
    """

    status: int
    reason: str
    strict: bool = False

    def document(self) -> dict[str, Any]:
        """The envelope's ``exit_status`` and ``exit_reason``."""
        return {"exit_status": self.status, "exit_reason": self.reason}


def _exit_for(verdict: str, strict: bool, program_exit: int = 0) -> Exit:
    """The exit status for a verdict (``run``: and the program's own status), and why."""
    if program_exit:
        return Exit(program_exit, f"the program exited with status {program_exit}")
    if verdict == "failed":
        return Exit(EXIT_FINDINGS, "failed: findings")
    what = {"partial": "partial: some checks did not run", "not-checked": "not checked: no check ran"}.get(verdict)
    if what is None:
        return Exit(EXIT_PASSED, "passed")
    if strict:
        return Exit(EXIT_FINDINGS, f"{what} (--strict)", strict=True)
    return Exit(EXIT_PASSED, f"{what} (exit status 1 with --strict)")


# -- output -------------------------------------------------------------------------------


def _emit(
    reports: list[tuple[str, Any]],
    args: argparse.Namespace,
    outcome: Exit,
    failed: Sequence[tuple[str, str]] = (),
    **extra: Any,
) -> None:
    """Write ``(source, report)`` pairs in the chosen format, to ``--output`` or standard output,
    each format agreeing with ``outcome``, the exit status (``failed``: what else fails the
    command, for JUnit: see :func:`junit_xml`)."""
    from ._outputs import write_output
    from .schema import report_document

    fmt = args.output_format
    out = sys.stdout
    allowance = getattr(args, "allowance", None)
    if fmt == "text":
        to_file = bool(args.output)  # a file gets plain, unwrapped text
        colour, width = _use_colour(out, args.colour) and not to_file, None if to_file else _width(out)
        # run's closing lines say the allowances that matched nothing once, for all its reports.
        unused = args.command != "run"
        parts: list[str] = []
        for source, r in reports:
            if source == "replay" and not r.findings and args.command == "check":
                # check's replay without findings: one line under the verdict it follows.
                if parts and not args.quiet:
                    parts[-1] += "\n" + _replayed(r, args.replays)
                continue
            parts.append(render(r, colour, quiet=args.quiet, width=width, allowance=allowance, unused=unused))
        text = "\n\n".join(parts)
    elif fmt == "json":
        import json

        document = report_document(
            [{**r.to_dict(), "source": s} for s, r in reports], command=args.command, **extra, **outcome.document()
        )
        text = json.dumps(document, indent=2)
    elif fmt == "github":
        text = "\n".join(line for _, r in reports for line in github_annotations(r, strict=outcome.strict))
    elif fmt == "sarif":
        import json

        from .sarif import sarif_log

        log = sarif_log(reports, args.command, exit_status=outcome.status, exit_reason=outcome.reason,
                        strict=outcome.strict, program_exit=extra.get("program_exit", 0))  # fmt: skip
        text = json.dumps(log, indent=2)
    else:
        text = junit_xml(reports, args.command, strict=args.strict, failed=failed, allowance=allowance)
    if args.output:
        write_output(Path(args.output), text + "\n", "--output")
        for (
            source,
            report,
        ) in reports:  # the verdicts still show in the job's log (a passed replay's is the validation's)
            if source != "replay" or report.findings:
                print(report.headline())
    elif text:
        out.write(text + "\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: Any, *, strict: bool = False) -> list[str]:
    """GitHub Actions workflow commands: an error per finding at its file and line, a
    warning for each check that did not run (an error under ``--strict``, which fails it)."""
    from .findings import docs_line
    from .schema import relative_path

    lines = []
    for finding in report.findings:
        where = ""
        if finding.site is not None:
            where = f"file={_escape_property(relative_path(finding.site.filename))},line={finding.site.lineno},"
        text = finding.title or finding.message
        if finding.values:
            text += f": {finding.values}"
        text += f"\naccept: {allow_option(finding)}\ndocs: {docs_line(finding.kind)}"
        lines.append(f"::error {where}title={_escape_property(finding.kind)}::{_escape_data(text)}")
    level = _not_checked_level(strict)
    for check, reason in report.not_run:
        title = _escape_property(f"graphcheck: {check} NOT checked")
        lines.append(f"::{level} title={title}::{_escape_data(f'{report.name}: {reason}')}")
    lines.append(report.headline())
    return lines


def _not_checked_level(strict: bool) -> str:
    """The annotation level of a check that did not run: an error where ``--strict`` fails for it."""
    return "error" if strict else "warning"


def run_warnings(guard: Any, *, strict: bool = False) -> list[str]:
    """``graphcheck run``'s GitHub annotations of what was NOT checked: one per check the
    program's captures did not run, or one saying nothing was checked (``::warning``, or
    ``::error`` under ``--strict``, which fails for them)."""
    level = _not_checked_level(strict)
    if not guard.reports or not _checking():
        why = guard.verdict().splitlines()[0].removeprefix("graphcheck: NOT checked: ")
        return [f"::{level} title={_escape_property('graphcheck: NOT checked')}::{_escape_data(why)}"]
    return [
        f"::{level} title={_escape_property(f'graphcheck: {check} NOT checked')}::{_escape_data(why)}"
        for check, why in guard.not_checked()
    ]


def junit_xml(
    reports: list[tuple[str, Any]],
    command: str,
    *,
    strict: bool = False,
    failed: Sequence[tuple[str, str]] = (),
    allowance: Callable[[Any], str] | None = None,
) -> str:
    """A JUnit XML document: a test case per report, failed with its findings (with ``strict``,
    also when partial or not checked, as the exit status is), skipped when not checked; and a
    failed test case per ``(name, message)`` in ``failed`` (what else made the exit status 1).
    ``allowance``: how an allowance that matched nothing is named (``--allow KIND:KERNEL``)."""
    import xml.etree.ElementTree as ET

    suite = ET.Element("testsuite", name=f"graphcheck {command}", tests=str(len(reports) + len(failed)))
    failures = skipped = 0
    for name, message in failed:
        failures += 1
        case = ET.SubElement(suite, "testcase", classname=f"graphcheck.{command}", name=name)
        ET.SubElement(case, "failure", message=message, type="exit-status")
    for source, report in reports:
        case = ET.SubElement(suite, "testcase", classname=f"graphcheck.{command}.{source}", name=report.name)
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="graphcheck.status", value=report.status)
        ET.SubElement(properties, "property", name="graphcheck.checks", value=", ".join(report.checks))
        for check, reason in report.skipped:
            ET.SubElement(properties, "property", name=f"graphcheck.not_checked.{check}", value=reason)
        if report.findings:
            failures += 1
            kinds = ", ".join(dict.fromkeys(f.kind for f in report.findings))
            failure = ET.SubElement(case, "failure", message=report.headline(), type=kinds)
            failure.text = report.text(accept=allow_option, allowance=allowance)
        elif strict and report.status != "passed":
            failures += 1
            not_run = "; ".join(f"{check}: {why}" for check, why in report.not_run or report.skipped)
            ET.SubElement(case, "failure", message=f"{report.headline()} (--strict)", type=report.status).text = (
                f"NOT checked: {not_run}" if not_run else None
            )
        elif report.status == "not-checked":
            skipped += 1
            ET.SubElement(case, "skipped", message=report.headline())
        ET.SubElement(case, "system-out").text = report.text(accept=allow_option, allowance=allowance)
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _show_graph(checked: Any) -> None:
    """The graph as the cross-check read it, to standard error (the report keeps standard output)."""
    match = checked.graph_match
    if match is None:
        why = dict(checked.report.skipped).get("graph") or "there is no graph"
        print(f"graphcheck: the graph was not read: {why}", file=sys.stderr)
        return
    print(f"graphcheck: the {match.device.upper()} graph, {len(match.nodes)} node(s):", file=sys.stderr)
    for line in match.lines():
        print(f"  {line}", file=sys.stderr)


def _write_dot(checked: Any, path: str) -> None:
    import subprocess

    from . import dot
    from ._outputs import OutputPathError

    try:
        written = dot.write(checked, path)
    except OSError as error:
        raise OutputPathError(f"cannot write --dot {path}: {error.strerror or error}") from None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise OutputPathError(f"cannot write --dot {path}: Graphviz's dot failed ({error})") from None
    for name in written:
        print(f"graphcheck: wrote {name}", file=sys.stderr)
    if len(written) == 1 and dot.renders(path) is None:
        svg = str(Path(path).with_suffix(".svg"))
        print(f"graphcheck: for an SVG, install Graphviz and run: dot -Tsvg {path} -o {svg}", file=sys.stderr)


def _document_on_stdout(args: argparse.Namespace) -> bool:
    """Whether graphcheck writes a document or annotations (not text) to standard output."""
    return args.output_format != "text" and not args.output


@contextlib.contextmanager
def users_output_to_stderr(active: bool) -> Iterator[None]:
    """While ``active``, what the user's code prints (Python's ``print`` and native ``printf``
    alike) goes to standard error, as pytest captures a test's output: standard output then
    carries graphcheck's document alone."""
    if not active:
        yield
        return
    sys.stdout.flush()
    try:
        fd, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (an in-process caller's buffer)
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    saved = os.dup(fd)
    os.dup2(err, fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, fd)
        os.close(saved)


# -- the subcommands ----------------------------------------------------------------------


def _demo(args: argparse.Namespace, settings: Any) -> int:
    device = _warp_and_device(settings.device, "graphcheck demo", *_device_from(args))
    import warp as wp

    import graphcheck as gc

    from .demo import Particles

    device = str(wp.get_device(device))
    progress = _Progress()
    options = settings.capture_options(on_failure="ignore")
    progress("validating the producer with planted bugs")
    buggy = Particles(device, fixed=False)
    checked = gc.capture(buggy.step, device=device, owners=(buggy,), options=options)
    progress("validating the fixed producer")
    fixed = Particles(device, fixed=True)
    good = gc.capture(fixed.step, device=device, owners=(fixed,), options=options)
    replayed = 0
    if not good.report.findings and good.report.status != "not-checked":
        progress(f"replaying the fixed graph {args.replays} times")
        for _ in range(args.replays):
            good.launch()
            replayed += 1
        wp.synchronize_device(device)
    reports = [("with-bugs", checked.report), ("fixed", good.report)]
    if args.output_format == "text" and not args.output:
        out = sys.stdout
        colour = _use_colour(out, args.colour)
        heading = (lambda s: f"{_BOLD}{s}{_RESET}") if colour else (lambda s: s)
        width, quiet = _width(out), args.quiet
        print(heading(f"1. A particle simulation with two planted bugs, captured on {device}:"))
        out.write(render(checked.report, colour, quiet=quiet, width=width, allowance=args.allowance) + "\n\n")
        print(heading("2. The same simulation, fixed:"))
        out.write(render(good.report, colour, quiet=quiet, width=width, allowance=args.allowance) + "\n")
        if good.report.status == "not-checked":
            print("NOT checked: GRAPHCHECK_DISABLE is set; nothing was validated and no replay was checked.")
        elif replayed:
            times = f"{replayed} time{'s' if replayed != 1 else ''}"
            print(f"Replayed the fixed graph {times}; every address it holds is still an owned buffer.")
    status = _demo_status(checked.report.status, good.report.status)
    outcome = _exit_for(status, args.strict)
    if not (args.output_format == "text" and not args.output):
        _emit(reports, args, outcome, replays=replayed, checking=gc.checking_enabled(), demo=status)
    if args.dot:
        _write_dot(checked, args.dot)
    return outcome.status


def _demo_status(with_bugs: str, fixed: str) -> str:
    """The demo's verdict, by the exit-code table: ``passed`` when the planted bugs were found and the fixed
    producer passed; ``failed`` when a bug was missed or the fixed one failed; ``not-checked`` when nothing ran."""
    if with_bugs == fixed == "not-checked":
        return "not-checked"
    if fixed == "failed" or with_bugs != "failed":
        return "failed"
    return fixed  # passed, or partial: some check of the fixed producer could not run


def _check(args: argparse.Namespace, settings: Any) -> int:
    prog = "graphcheck check"
    # The last colon: a file path may hold one (C:\\sim.py:make_sim); a factory's name does not.
    module_name, _, factory_name = args.target.rpartition(":")
    if not module_name or not factory_name:
        raise UsageError(
            prog, f"expected MODULE:FACTORY (e.g. mysim.envs:make_env, or path/to/mysim.py:make_env), got "
            f"{args.target!r}"
        )  # fmt: skip
    flag = "--values" if args.values else "--conformance" if args.conformance else None
    if flag and args.warmup is not None:
        raise UsageError(prog, f"--warmup applies to the capture check; it does not apply to {flag}")
    if flag and args.dot:
        raise UsageError(prog, f"--dot draws one capture; it does not apply to {flag}")
    if not flag and args.steps is not None:
        raise UsageError(
            prog, f"--steps {args.steps} applies to --values and --conformance (how many steps they take); the "
            "capture check makes one reference call and one capture (--replays N replays the graph N times)"
        )  # fmt: skip
    device = _warp_and_device(settings.device, prog, *_device_from(args))
    sys.path.insert(0, os.getcwd())
    module_name = _module_named(prog, module_name)
    checked = None
    # The user's code prints to standard error while a document goes to standard output.
    with users_output_to_stderr(_document_on_stdout(args)):
        factory = _factory(prog, module_name, factory_name, args.traceback)
        if flag:
            _refuse_generator(prog, getattr(factory, args.method, None) if isinstance(factory, type) else None,
                              f"{args.target}().{args.method}")  # fmt: skip
            reports = [(flag.removeprefix("--"), _check_by_values(factory, args, settings, device))]
        else:
            checked, reports = _validate_step(factory, args, settings, device)
    from .schema import combined_status

    outcome = _exit_for(combined_status(r.status for s, r in reports if s != "replay" or r.findings), args.strict)
    _emit(reports, args, outcome, **({"replays": args.replays} if not flag else {}), checking=_checking())
    if args.show_graph and checked is not None:
        _show_graph(checked)
    if args.dot and checked is not None:
        _write_dot(checked, args.dot)
    return outcome.status


def _module_named(prog: str, target: str) -> str:
    """The module ``MODULE`` names: a module name as it is; a file (``sim.py``, ``./envs/sim.py``,
    a package's folder) as the module it is, with the folder above it (and above its package,
    if it is in one) first on ``sys.path``, as pytest imports a test file."""
    if not (target.endswith(".py") or "/" in target or os.sep in target or os.path.isfile(target)):
        return target
    path = Path(target)
    form = "MODULE:FACTORY takes a module (mysim.envs:make_env) or its file (path/to/mysim.py:make_env)"
    if not path.exists():
        raise UsageError(prog, f"no such file: {target} ({form})")
    if path.is_dir() and not (path / "__init__.py").is_file():
        raise UsageError(prog, f"{target} is a folder that is not a package (no __init__.py): name the .py file")
    if not path.is_dir() and path.suffix != ".py":
        raise UsageError(prog, f"{target} is not a .py file ({form})")
    path = path.resolve()
    parts = [] if path.name == "__init__.py" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    bad = [part for part in parts if not part.isidentifier()]
    if bad:
        renamed = re.sub(r"\W", "_", bad[0])
        raise UsageError(
            prog, f"{target} cannot be imported as a module: {bad[0]!r} is not a Python name (rename it, e.g. "
            f"{renamed!r})"
        )  # fmt: skip
    name = ".".join(parts)
    sys.path.insert(0, str(folder))
    known = getattr(sys.modules.get(name), "__file__", None)
    if known is not None and Path(known).resolve() != (path / "__init__.py" if path.is_dir() else path):
        raise UsageError(prog, f"{target} would import as {name!r}, which is already {known}: rename the file")
    return name


def _refuse_generator(prog: str, fn: Any, what: str) -> None:
    """A usage error for a step whose call runs none of its body (a generator or a coroutine function)."""
    from ._words import step_that_runs_nothing

    refused = step_that_runs_nothing(fn, what)
    if refused is not None:
        raise UsageError(prog, refused)


def _factory(prog: str, module_name: str, factory_name: str, full_traceback: bool) -> Any:
    """The callable ``MODULE:FACTORY`` names, checked (UsageError naming what it is instead)."""
    import warp as wp

    module = _import_users_module(prog, module_name, full_traceback)
    factory = getattr(module, factory_name, None)
    if isinstance(factory, (wp.Kernel, wp.Function)):
        raise UsageError(
            prog, f"{module_name}.{factory_name} is a Warp {'kernel' if isinstance(factory, wp.Kernel) else 'function'}"
            ": check takes the class or function that builds the producer (whose step() launches it), e.g. "
            f"{module_name}:make_env"
        )  # fmt: skip
    if factory is not None and not callable(factory):
        raise UsageError(
            prog, f"{module_name}.{factory_name} is {_shown(factory)}, not a class or function that builds the "
            "producer"
        )  # fmt: skip
    if factory is None:
        # Only what could be a factory: a module's imports (np, wp) and its constants are no answer.
        names = [
            n for n, v in vars(module).items() if not n.startswith("_") and callable(v) and not _imported(v, module)
        ]
        near = difflib.get_close_matches(factory_name, names, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UsageError(prog, f"{module_name} has no callable {factory_name!r}{hint}")
    return factory


def _validate_step(
    factory: Any, args: argparse.Namespace, settings: Any, device: str | None
) -> tuple[Any, list[tuple[str, Any]]]:
    """``check``: build the producer, validate its method with gc.capture and replay it; the
    checked graph and the ``(source, report)`` pairs to write."""
    import graphcheck as gc

    prog = "graphcheck check"
    progress = _Progress()
    progress(f"building {args.target}")
    producer = _users_code(prog, f"{args.target}()", lambda: _call_factory(factory, device), args.traceback)
    method = getattr(producer, args.method, None)
    owners: Any = None
    if callable(method):
        fn, owners = method, (producer,)
        if not gc.buffers_of(producer):
            raise UsageError(
                prog, f"{args.target}() built {article(type(producer).__name__)} that holds no Warp arrays: check "
                f"validates a producer whose {args.method}() works on arrays it holds (attributes, lists or dicts of "
                "wp.array)"
            )  # fmt: skip
    elif callable(producer):
        fn = producer
    elif producer is None:
        raise UsageError(
            prog, f"{args.target}() returned None: the factory returns the producer (whose {args.method}() launches "
            "the work), or a callable to validate"
        )  # fmt: skip
    else:
        raise UsageError(
            prog, f"{args.target}() returned {article(type(producer).__name__)} with no {args.method}() method"
        )  # fmt: skip
    _refuse_generator(prog, fn, f"{args.target}().{args.method}" if fn is method else f"{args.target}()")
    progress("reference call, capture and checks")
    options = settings.capture_options(on_failure="ignore", warmup=args.warmup)
    checked = _users_code(
        prog,
        f"{args.target}().{args.method}()",
        lambda: gc.capture(fn, device=device, owners=owners, options=options),
        args.traceback,
    )
    reports = [("validate", checked.report)]
    if not checked.report.findings and checked.graph is not None:

        def replay() -> Any:
            for _ in range(args.replays):
                checked.launch()
            return checked.check_replay(on_failure="ignore")

        if args.replays:
            report = _users_code(prog, f"replaying {args.target}().{args.method}()", replay, args.traceback)
        else:  # nothing replayed: no replay check is claimed
            report = gc.Report(name=checked.report.name, device=checked.report.device, skipped=[NO_REPLAYS])
        reports.append(("replay", report))
    return checked, reports


#: What ``check --replays 0`` did not check.
NO_REPLAYS = ("replay", "--replays 0 replayed nothing")


def _replayed(report: Any, replays: int) -> str:
    """``check``'s text line for a replay report with no findings: how many replays ran, and
    what was checked (or why nothing was)."""
    if not replays:
        return "NOT checked: {}: {}".format(*NO_REPLAYS)
    lines = [
        f"replayed the graph {replays} time{'s' if replays != 1 else ''}, then checked: {', '.join(report.checks)}"
    ]
    lines += [f"NOT checked: {check}: {why}" for check, why in report.skipped]
    return "\n".join(lines)


def _shown(value: Any) -> str:
    import types

    if isinstance(value, types.ModuleType):
        return f"the module {value.__name__}"
    text = repr(value)
    return text if len(text) <= 40 else article(type(value).__name__)


def _imported(value: Any, module: Any) -> bool:
    """Whether ``value`` came into ``module`` from elsewhere (a module, or a class or function defined in another)."""
    import types

    return isinstance(value, types.ModuleType) or getattr(value, "__module__", module.__name__) != module.__name__


def _import_users_module(prog: str, name: str, full_traceback: bool) -> Any:
    """The user's module ``name``. Not found: one line. Its own code raised (a SyntaxError, an
    import it makes): the exception as Python shows it, then one line (exit status 2)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not (name == error.name or name.startswith(error.name + ".")):
            _show_program_error(error, full=full_traceback)
            raise UsageError(prog, f"importing {name} raised the ModuleNotFoundError above") from None
        raise UsageError(
            prog, f"cannot import {name!r}: {error} (run graphcheck from the folder that holds it, or put that folder "
            "on PYTHONPATH)"
        ) from None  # fmt: skip
    except SystemExit as error:
        site = _users_line(error)
        where = f" at {_site_text(site)}" if site is not None else ""
        raise UsageError(
            prog, f"importing {name} raised {_exit_call(error)}{where}: a module check imports must not exit when "
            "imported (put its script part under `if __name__ == \"__main__\":`)"
        ) from None  # fmt: skip
    except Exception as error:
        _show_program_error(error, full=full_traceback)
        raise UsageError(prog, f"importing {name} raised the {type(error).__name__} above") from None


def _exit_call(error: SystemExit) -> str:
    """The user's code's exit as its exception: ``SystemExit(5)``."""
    return f"SystemExit({error.code!r})" if error.code is not None else "SystemExit"


def _site_text(site: Any) -> str:
    from .schema import relative_path

    return f"{relative_path(site.filename)}:{site.lineno}"


def _users_code(prog: str, what: str, call: Callable[[], Any], full_traceback: bool = False) -> Any:
    """``call()``; an exception the user's code raised becomes one line naming the user's line
    that raised it or called into Warp (exit status 2); ``full_traceback`` prints the whole
    traceback before it."""
    from . import _warp
    from .findings import GraphCheckError
    from .schema import relative_path

    try:
        return call()
    except (_warp.UnsupportedWarpError, GraphCheckError):
        raise
    except SystemExit as error:
        # The user's code exiting is not graphcheck's exit status: one line, as for any error of theirs.
        site = _users_line(error)
        where = f" at {relative_path(site.filename)}:{site.lineno}" if site is not None else ""
        raise UsageError(prog, f"{what} raised {_exit_call(error)}{where}: it exited, so nothing was checked") from None
    except Exception as error:
        site = _users_line(error)
        where = f" at {relative_path(site.filename)}:{site.lineno}" if site is not None else ""
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        if full_traceback:
            traceback.print_exception(error)
        hint = "" if full_traceback else " (--traceback shows the full traceback)"
        first = f": {first.rstrip('.')}" if first else ""
        raise UsageError(prog, f"{what} raised {type(error).__name__}{where}{first}{hint}") from None


def _users_line(error: BaseException) -> Any:
    """The user's last line in ``error``'s traceback: the one that raised it, or that called
    into Warp (or the standard library) where it was raised."""
    import sysconfig

    from . import _warp
    from .site import CodeKind, site_of

    library = (sysconfig.get_paths()["stdlib"] + os.sep, "<frozen ")
    site, tb = None, error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if _warp.code_kind(code) is CodeKind.USER and not code.co_filename.startswith(library):
            site = site_of(code, tb.tb_lasti)
        tb = tb.tb_next
    return site


def _check_by_values(factory: Any, args: argparse.Namespace, settings: Any, device: str | None) -> Any:
    """``check --values`` (gc.verify_replay) and ``check --conformance`` (gc.check_producer): the report."""
    import graphcheck as gc

    from .findings import Report

    prog, flag = "graphcheck check", "--values" if args.values else "--conformance"
    options = {"device": device, "method": args.method, "on_failure": "ignore"}
    steps = args.steps if args.steps is not None else 4
    if args.values:
        _Progress()("replaying beside an eagerly stepped twin")
        report = _users_code(
            prog,
            f"{flag} {args.target}",
            lambda: gc.verify_replay(factory, steps=steps, **options),
            args.traceback,
        )
    else:
        _Progress()("running the conformance kit")
        report = _users_code(
            prog,
            f"{flag} {args.target}",
            lambda: gc.check_producer(factory, calls=steps, **options),
            args.traceback,
        )
    if settings.allow:
        report = Report(report.findings + report.suppressed, allow=settings.allow, name=report.name,
                        device=report.device, operations=report.operations, checks=report.checks,
                        skipped=report.skipped, notes=report.notes)  # fmt: skip
    return report


def _call_factory(factory: Any, device: str | None) -> Any:
    import inspect

    try:
        takes_device = "device" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_device = False
    return factory(device=device) if takes_device and device is not None else factory()


def _run(args: argparse.Namespace, settings: Any) -> int:
    prog = "graphcheck run"
    script = args.script
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        raise UsageError(prog, f"{script} is a folder with no __main__.py: name the program's .py file in it")
    if not os.path.exists(script):
        raise UsageError(prog, f"no such file: {script}")
    if args.warmup is not None:
        raise UsageError(
            prog, f"--warmup {args.warmup} does not apply to run: warm-up calls would run before the program's capture "
            "and change the graph it keeps (--reference-call compares the capture with an eager call after it). Warm "
            "up in the program before capturing, or validate the step with graphcheck check MODULE:FACTORY --warmup N"
        )  # fmt: skip
    _warp_and_device(None, prog, init=False)
    from .autoguard import AutoGuard

    script_args = list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    if args.reference_call and not args.quiet:
        print(
            "graphcheck: --reference-call: GRAPHCHECK_DISABLE is set, so no capture block runs eagerly (no extra step)"
            if not _checking()
            else "graphcheck: --reference-call: each capture block made of plain calls runs once more eagerly right "
            "after it is captured, to compare with the capture: the program takes one extra step per capture (the "
            "graphs it keeps are its own captures)",
            file=sys.stderr,
        )
    saved_argv, saved_path = sys.argv, list(sys.path)
    guard = AutoGuard(
        settings.capture_options(), reference_call=args.reference_call, keep_graphs=bool(args.dot),
        allowance=args.allowance,
    )  # fmt: skip

    def restore() -> None:
        sys.argv, sys.path[:] = saved_argv, saved_path

    program_exit = 0
    try:
        with contextlib.ExitStack() as running:
            running.callback(restore)
            sys.argv = [script, *script_args]  # as python sets them: argv[0] as given, the script's folder first
            if not os.path.isdir(script):
                sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            # With a document on standard output, the program prints to standard error while it runs.
            running.enter_context(users_output_to_stderr(_document_on_stdout(args)))
            running.enter_context(guard)

            def finish_at_os_exit(status: int) -> int:
                running.close()  # graphcheck's hooks out and standard output back, as at the program's end
                return _finish_run(args, guard, status)

            running.enter_context(_reporting_at_os_exit(finish_at_os_exit))
            _run_program(script)
    except SystemExit as exit_:
        program_exit = _exit_status(exit_.code)
    except BaseException as error:
        # The program's own error: shown as Python would show it, and its exit status kept.
        _show_program_error(error)
        program_exit = EXIT_INTERRUPTED if isinstance(error, KeyboardInterrupt) else 1
    return _finish_run(args, guard, program_exit)


def _run_program(script: str) -> None:
    """Run ``script`` as ``python SCRIPT`` runs it: as ``__main__``, its ``__file__`` absolute and
    ``sys.argv[0]`` as given (runpy would make it the path it was given); a folder or zip file
    with a ``__main__.py`` through runpy, which sets ``sys.argv[0]`` to it as python does."""
    import builtins
    import importlib.machinery
    import io
    import pkgutil
    import types
    import zipfile

    if os.path.isdir(script) or zipfile.is_zipfile(script):
        runpy.run_path(script, run_name="__main__")
        return
    path = os.path.abspath(script)
    with io.open_code(path) as file:
        code = pkgutil.read_code(file)  # a compiled .pyc, as python runs one
    loader: Any = importlib.machinery.SourcelessFileLoader("__main__", path)
    if code is None:
        with io.open_code(path) as file:
            # dont_inherit: the program is compiled with its own __future__ imports only, not graphcheck's.
            code = compile(file.read(), path, "exec", dont_inherit=True)
        loader = importlib.machinery.SourceFileLoader("__main__", path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=loader, __package__=None, __spec__=None,
                         __builtins__=builtins)  # fmt: skip
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


@contextlib.contextmanager
def _reporting_at_os_exit(finish: Callable[[int], int]) -> Iterator[None]:
    """While the program runs, its ``os._exit(n)`` (which skips every ``finally`` and exit
    handler, graphcheck's too) first has graphcheck report as at the program's end, then exits
    with ``finish(n)``'s status. A forked child's ``os._exit`` is left as it is."""
    real_exit, pid = os._exit, os.getpid()

    def _exit(status: int) -> Any:
        if os.getpid() == pid:
            try:
                status = finish(status)
            except BaseException as error:  # a write that failed: said, and the program still exits
                print(f"graphcheck run: error: {error}", file=sys.stderr)
                status = status or EXIT_USAGE
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
        real_exit(status)

    os._exit = _exit
    try:
        yield
    finally:
        os._exit = real_exit


def _finish_run(args: argparse.Namespace, guard: Any, program_exit: int) -> int:
    """``run`` after the program ended (or called ``os._exit``): the reports, the closing lines,
    ``--report`` and ``--dot``; the exit status."""
    script = args.script
    outcome = _exit_for(guard.status, args.strict, program_exit)
    reports = [("capture", r) for r in guard.reports] + [("replay", r) for r in guard.replay_reports]
    shown = [(s, r) for s, r in reports if r.findings] if args.output_format in ("text", "github") else reports
    failed = []  # for JUnit: what else makes the exit status 1
    if program_exit:
        failed.append((script, f"the program exited with status {program_exit}"))
    elif args.strict and guard.status != "passed" and not guard.reports:
        failed.append(("graphcheck run", f"{guard.verdict().splitlines()[0]} (--strict)"))
    if shown or args.output or args.output_format in DOCUMENT_FORMATS:
        _emit(shown, args, outcome, failed, program_exit=program_exit, checking=_checking())
    if args.output_format == "github" and not args.output:
        # The closing lines' NOT checked, as workflow annotations (the reports' own are summed up there).
        for line in run_warnings(guard, strict=args.strict):
            print(line)
    if args.output_format in ("text", "github") or args.output:
        width = _width(sys.stdout)
        for line in guard.verdict().splitlines():
            print("\n".join(textwrap.wrap(line, width, subsequent_indent="  ")) if width else line)
    if args.report:
        import json

        from ._outputs import write_output
        from .schema import report_document

        document = report_document(
            [{**r.to_dict(), "source": s} for s, r in reports],
            command="run",
            program_exit=program_exit,
            checking=_checking(),
            **outcome.document(),
        )
        write_output(Path(args.report), json.dumps(document, indent=2) + "\n", "--report")
    if args.dot and guard.graphs:
        flagged = [c for c in guard.graphs if c.report.findings]
        _write_dot((flagged or guard.graphs)[0], args.dot)
    # A program that failed keeps its own exit status, as `python SCRIPT` would exit: the step
    # fails either way, and the JSON's program_exit and status tell the two apart.
    if program_exit:
        print(
            f"graphcheck: exit status {program_exit} is the program's own (graphcheck's exit codes apply when the "
            "program exits with 0)",
            file=sys.stderr,
        )
    return outcome.status


def _exit_status(code: object) -> int:
    """The exit status Python gives ``sys.exit(code)``: an int as it is, None 0, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _show_program_error(error: BaseException, *, full: bool = False) -> None:
    """Print the program's uncaught exception as ``python SCRIPT`` would: through ``sys.excepthook``,
    without the frames of graphcheck, runpy and importlib that ran the program (``full``: all frames)."""
    import types

    if full:
        sys.excepthook(type(error), error, error.__traceback__)
        return
    ours = (
        str(Path(__file__).resolve().parent) + os.sep,
        str(Path(runpy.__file__).resolve()),
        str(Path(importlib.__file__).resolve().parent) + os.sep,
        "<frozen runpy>",
        "<frozen importlib",
    )
    frames = []
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(ours) and not str(Path(filename).resolve()).startswith(ours):
            frames.append(tb)
        tb = tb.tb_next
    kept = None
    for frame in reversed(frames):
        kept = types.TracebackType(kept, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    sys.excepthook(type(error), error.with_traceback(kept), kept)


def _explain(kind: str, prog: str) -> int:
    """``graphcheck explain KIND``: the kind's page on standard output (no Warp, no settings)."""
    from .explain import ExplainError, explain

    try:
        page = explain(kind)
    except ExplainError as error:
        raise UsageError(prog, str(error)) from None
    sys.stdout.write(page if page.endswith("\n") else page + "\n")
    return EXIT_PASSED


def _checking() -> bool:
    from .guard import checking_enabled

    return checking_enabled()


_COMMANDS: dict[str, Callable[[argparse.Namespace, Any], int]] = {"demo": _demo, "check": _check, "run": _run}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``graphcheck`` command; returns its exit status (see :data:`EXIT_CODES`)."""
    prog = "graphcheck"
    try:
        args = _parse(argv)
        prog = f"graphcheck {args.command}"
        if args.command == "explain":
            return _explain(args.kind, prog)
        settings = _settings(args, prog)
        code = _COMMANDS[args.command](args, settings)
        sys.stdout.flush()  # here, where a failed write is said in one line, not at exit
        return code
    except UsageError as error:
        print(f"{error.prog}: error: {error.message}", file=sys.stderr)
        return EXIT_USAGE
    except WarpMissing as error:
        print(error, file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt as error:
        # Ctrl-C in the user's factory or step (or anywhere): as Python shows it, without
        # graphcheck's own frames, and the exit status Python gives it.
        _show_program_error(error)
        return EXIT_INTERRUPTED
    except Exception as error:
        from ._outputs import OutputPathError

        if isinstance(error, OutputPathError):  # a write that failed after the path was checked
            print(f"{prog}: error: {error}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(error, OSError) and _is_output_error(error):
            print(f"{prog}: error: cannot write standard output: {error.strerror or error}", file=sys.stderr)
            return EXIT_USAGE
        warp_adapter = sys.modules.get("graphcheck._warp")  # not imported when Warp is missing
        if warp_adapter is not None and isinstance(error, warp_adapter.UnsupportedWarpError):
            print(f"graphcheck: error: {str(error).strip().splitlines()[0]}", file=sys.stderr)
            return EXIT_INTERNAL
        traceback.print_exc()
        print(
            f"graphcheck: internal error: {type(error).__name__}: {error}. This is a bug in graphcheck: please "
            "report it with the traceback above.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _is_output_error(error: OSError) -> bool:
    """Whether ``error`` is standard output failing to take graphcheck's text (a full disk, a closed pipe)."""
    import errno

    return error.filename is None and error.errno in (errno.ENOSPC, errno.EPIPE)


if __name__ == "__main__":
    raise SystemExit(main())

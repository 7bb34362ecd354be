"""The ``graphcheck`` command (also ``python -m graphcheck``).

- ``graphcheck demo``: validate a bundled producer with planted bugs, then the fixed one;
- ``graphcheck run SCRIPT [ARGS...]``: run a Warp program unchanged, every capture guarded;
- ``graphcheck check MODULE:FACTORY``: validate the step of a producer a factory builds.
"""

from __future__ import annotations

import argparse
import importlib
import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["main"]

_RED, _GREEN, _BOLD, _DIM, _RESET = "\033[31m", "\033[32m", "\033[1m", "\033[2m", "\033[0m"


def _use_colour(stream: TextIO, choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ


def render(report: Any, colour: bool) -> str:
    """A report as text, kinds and verdict coloured for a terminal."""
    text = str(report)
    if not colour:
        return text
    out = []
    for line in text.splitlines():
        if line.startswith("graphcheck:"):
            line = f"{_BOLD}{_GREEN if report.ok else _RED}{line}{_RESET}"
        elif not line.startswith((" ", "note:", "allowed")):
            kind, _, rest = line.partition(" ")
            line = f"{_RED}{kind}{_RESET} {rest}"
        elif line.startswith("note:"):
            line = f"{_DIM}{line}{_RESET}"
        out.append(line)
    return "\n".join(out)


class _Progress:
    """Short stage messages on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"graphcheck: {message}...", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphcheck",
        description="Prove a Warp capture site is replay-safe before you replay it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def reporting(p: argparse.ArgumentParser) -> None:
        p.add_argument("--allow", action="append", default=[], metavar="KIND", help="accept a finding kind")
        p.add_argument("--colour", "--color", choices=("auto", "always", "never"), default="auto")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--device", default=None, help="capture device (default: Warp's default device)")
        p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
        p.add_argument("--dot", metavar="PATH", help="write a picture of the graph (DOT; SVG too with Graphviz)")
        reporting(p)

    demo = commands.add_parser("demo", help="validate a bundled producer with planted bugs, then the fixed one")
    common(demo)
    demo.add_argument("--replays", type=int, default=100, help="replays of the fixed graph (default 100)")

    run = commands.add_parser("run", help="run a Warp program with every wp.ScopedCapture guarded")
    reporting(run)
    run.add_argument("--report", metavar="PATH", help="also write every report as JSON to PATH")
    run.add_argument("script", help="the program to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")

    check = commands.add_parser("check", help="validate the step of a producer built by MODULE:FACTORY")
    common(check)
    check.add_argument("target", metavar="MODULE:FACTORY", help="e.g. mysim.envs:make_env")
    check.add_argument("--method", default="step", help="the method to capture (default: step)")
    check.add_argument("--replays", type=int, default=1, help="replays after validation (default 1)")
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
    check.add_argument("--steps", type=int, default=4, help="steps (calls) for --values and --conformance (default 4)")
    return parser


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


def _quiet_warp() -> Any:
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    return wp


def _emit(checked: Any, args: argparse.Namespace, out: TextIO) -> None:
    if args.json:
        out.write(checked.report.to_json(indent=2) + "\n")
    else:
        out.write(render(checked.report, _use_colour(out, args.colour)) + "\n")
    if args.dot:
        _write_dot(checked, args.dot)


def _write_dot(checked: Any, path: str) -> None:
    from . import dot

    for written in dot.write(checked, path):
        print(f"graphcheck: wrote {written}", file=sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    wp = _quiet_warp()
    import graphcheck as gc

    from .demo import Particles

    progress = _Progress()
    device = str(wp.get_device(args.device))
    out = sys.stdout
    colour = _use_colour(out, args.colour)
    heading = (lambda s: f"{_BOLD}{s}{_RESET}") if colour else (lambda s: s)
    progress("validating the producer with planted bugs")
    buggy = Particles(device, fixed=False)
    checked = gc.capture(buggy.step, device=device, owners=(buggy,), on_failure="ignore", allow=args.allow)
    progress("validating the fixed producer")
    fixed = Particles(device, fixed=True)
    good = gc.capture(fixed.step, device=device, owners=(fixed,), on_failure="ignore", allow=args.allow)
    replayed = 0
    if good.ok:
        progress(f"replaying the fixed graph {args.replays} times")
        for _ in range(args.replays):
            good.launch()
            replayed += 1
        wp.synchronize_device(device)
    if args.json:
        import json

        document = {"with_bugs": checked.report.to_dict(), "fixed": good.report.to_dict(), "replays": replayed}
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        print(heading(f"1. A particle simulation with two planted bugs, captured on {device}:"))
        out.write(render(checked.report, colour) + "\n\n")
        print(heading("2. The same simulation, fixed:"))
        out.write(render(good.report, colour) + "\n")
        if replayed:
            print(f"Replayed the fixed graph {replayed} times; every address it holds is still an owned buffer.")
    if args.dot:
        _write_dot(checked, args.dot)
    return 0 if (good.ok and not checked.ok) else 1


def _check(args: argparse.Namespace) -> int:
    _quiet_warp()
    import graphcheck as gc

    module_name, _, factory_name = args.target.partition(":")
    if not module_name or not factory_name:
        print(f"graphcheck check: expected MODULE:FACTORY (e.g. mysim.envs:make_env), got {args.target!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        print(f"graphcheck check: cannot import {module_name!r}: {error}", file=sys.stderr)
        return 2
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        print(f"graphcheck check: {module_name} has no callable {factory_name!r}", file=sys.stderr)
        return 2
    if args.values or args.conformance:
        return _check_by_values(factory, args)
    progress = _Progress()
    progress(f"building {args.target}")
    producer = _call_factory(factory, args.device)
    method = getattr(producer, args.method, None)
    owners: Any = None
    if callable(method):
        fn, owners = method, (producer,)
    elif callable(producer):
        fn = producer
    else:
        print(f"graphcheck check: {args.target}() returned a {type(producer).__name__} with no "
              f"{args.method}() method", file=sys.stderr)  # fmt: skip
        return 2
    progress("reference call, capture and checks")
    checked = gc.capture(fn, device=args.device, owners=owners, on_failure="ignore", allow=args.allow)
    _emit(checked, args, sys.stdout)
    if checked.ok:
        for _ in range(args.replays):
            checked.launch()
        replay = checked.check_replay(on_failure="ignore")
        if not replay.ok:
            sys.stdout.write(render(replay, _use_colour(sys.stdout, args.colour)) + "\n")
            return 1
    return 0 if checked.ok else 1


def _check_by_values(factory: Any, args: argparse.Namespace) -> int:
    """``check --values`` (gc.verify_replay) and ``check --conformance`` (gc.check_producer)."""
    import graphcheck as gc

    from .findings import Report, allowances

    flag = "--values" if args.values else "--conformance"
    if args.dot:
        print(f"graphcheck check: --dot draws one capture; it does not apply to {flag}", file=sys.stderr)
        return 2
    options = {"device": args.device, "method": args.method, "on_failure": "ignore"}
    if args.values:
        _Progress()("replaying beside an eagerly stepped twin")
        report = gc.verify_replay(factory, steps=args.steps, **options)
    else:
        _Progress()("running the conformance kit")
        report = gc.check_producer(factory, calls=args.steps, **options)
    if args.allow:
        report = Report(report.findings, allow=allowances(args.allow), name=report.name, device=report.device,
                        operations=report.operations, checks=report.checks, notes=report.notes)  # fmt: skip
    out = sys.stdout
    out.write((report.to_json(indent=2) if args.json else render(report, _use_colour(out, args.colour))) + "\n")
    return 0 if report.ok else 1


def _call_factory(factory: Any, device: str | None) -> Any:
    import inspect

    try:
        takes_device = "device" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_device = False
    return factory(device=device) if takes_device and device is not None else factory()


def _run(args: argparse.Namespace) -> int:
    _quiet_warp()
    from .autoguard import AutoGuard

    script = args.script
    if not os.path.exists(script):
        print(f"graphcheck run: no such file: {script}", file=sys.stderr)
        return 2
    script_args = list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    guard = AutoGuard(allow=args.allow or None)
    try:
        with guard:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        out = sys.stdout
        colour = _use_colour(out, args.colour)
        for report in guard.reports + guard.replay_reports:
            if not report.ok:
                out.write(render(report, colour) + "\n")
        out.write(guard.verdict() + "\n")
        if args.report:
            import json

            reports = [r.to_dict() for r in guard.reports + guard.replay_reports]
            with open(args.report, "w") as f:
                json.dump({"ok": guard.ok, "reports": reports}, f, indent=2)
    if not guard.ok:
        return code or 1
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``graphcheck`` command; returns its exit status."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    if args.command == "check":
        return _check(args)
    return _run(args)


if __name__ == "__main__":
    raise SystemExit(main())

"""Warp's own test suite, run untraced and traced: graphcheck must not change an outcome.

``nox -s warp_suite`` (or ``python -m tests_warp.warp_suite``) runs a chosen CPU subset
of the tests Warp ships inside its wheel (``warp/tests``) twice, each time in a fresh
process: untraced, then with two nested traces (one with ``include_warp=True``) around
every test, and every CPU graph a test captures read back and cross-checked against a
trace of its capture. It fails on any test whose outcome differs, on any graphcheck hook
left installed after a test, on any error raised from inside graphcheck, when either run
ran no test (a module or ``-k`` that selects nothing, or every test skipped), and on any
``unrecorded-node`` or ``node-mismatch`` the cross-check finds in Warp's own captures (the
``capture-error`` findings, what Warp's CPU graphs leave out, are counted and listed).

Usage::

    python -m tests_warp.warp_suite [--modules test_copy,test_launch] [-k SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from typing import Any

#: The subset: the modules that exercise what graphcheck hooks (launches, replays,
#: copies, memsets and fills, allocations and the allocation tracker, the Tape and its
#: caller metadata, write-after-read warnings, CPU graph captures, conditionals, structs,
#: indexed arrays) and Warp's own tests of its CPU graphs (APIC: some 130 captures the
#: graph cross-check reads), which run on the CPU in about three minutes with a warm
#: kernel cache. A module the installed Warp does not ship, or that is unstable on it
#: (``UNSTABLE``), is left out.
MODULES = (
    "test_apic",
    "test_apic_utility_algorithms",
    "test_apic_mesh",
    "test_allocation_tracker",
    "test_overwrite",
    "test_copy",
    "test_launch",
    "test_tape",
    "test_struct",
    "test_indexedarray",
    "test_conditional",
    "test_graph",
    "test_context",
    "test_ctypes",
    "test_devices",
    "test_lerp",
)


#: Modules whose outcome varies from run to run on a release without graphcheck (untraced,
#: two runs give different failures and errors): the comparison would put Warp's own
#: instability down to graphcheck, so they are left out there. ``--modules`` still runs them.
UNSTABLE = {"test_struct": ("1.15",)}


def _shipped(module: str) -> bool:
    """Whether the installed Warp ships ``warp.tests.<module>`` and it runs steadily there."""
    import importlib.util

    import warp as wp

    release = ".".join(wp.__version__.split(".")[:2])
    if release in UNSTABLE.get(module, ()):
        return False
    return importlib.util.find_spec(f"warp.tests.{module}") is not None


def _cases(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    out: list[unittest.TestCase] = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            out.extend(_cases(item))
        else:
            out.append(item)
    return out


def _from_graphcheck(exc_info: Any) -> bool:
    """Whether an exception was raised from inside graphcheck's own code."""
    import graphcheck

    package = os.path.dirname(os.path.abspath(graphcheck.__file__)) + os.sep
    tb = exc_info[2]
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return bool(last and os.path.abspath(last).startswith(package))


class CrossChecking:
    """While active, every CPU capture is recorded (a trace from ``wp.capture_begin`` to
    ``wp.capture_end``) and its graph cross-checked when it ends; the findings are kept."""

    def __init__(self) -> None:
        self.open: list[Any] = []
        self.findings: list[tuple[str, Any]] = []  # (test, finding)
        self.partial: list[tuple[str, str]] = []
        self.graphs = 0
        self.test = ""

    def __enter__(self) -> CrossChecking:
        from graphcheck import _warp

        begin, end = _warp.ORIGINAL_CAPTURE_BEGIN, _warp.ORIGINAL_CAPTURE_END

        def capture_begin(*args: Any, **kwargs: Any) -> Any:
            import warp as wp

            import graphcheck as gc

            device = wp.get_device(kwargs.get("device", args[0] if args else None))
            trace = gc.trace_launches(include_warp=True) if device.is_cpu else None
            if trace is not None:
                trace.__enter__()
            try:
                result = begin(*args, **kwargs)
            except BaseException:
                if trace is not None:
                    trace.__exit__(None, None, None)
                raise
            self.open.append(trace)
            return result

        def capture_end(*args: Any, **kwargs: Any) -> Any:
            from graphcheck import crosscheck

            trace = self.open.pop() if self.open else None
            try:
                graph = end(*args, **kwargs)
            finally:
                if trace is not None:
                    trace.__exit__(None, None, None)
            if trace is not None and _warp.cpu_graph_state(graph) is not None:
                self.graphs += 1
                result = crosscheck.check_graph(graph, trace)
                self.findings += [(self.test, finding) for finding in result.findings]
                self.partial += [(self.test, note) for note in result.notes]
            return graph

        self._restore = _warp.patch_capture_api(
            _warp.ORIGINAL_SCOPED_CAPTURE, _warp.ORIGINAL_CAPTURE_LAUNCH, capture_begin, capture_end
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()


def run(modules: list[str], traced: bool, keyword: str | None) -> dict[str, Any]:
    """Run the subset in this process; ``{test id: outcome}`` and what went wrong."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    import graphcheck as gc
    from graphcheck import _warp

    loader = unittest.TestLoader()
    outcomes: dict[str, str] = {}
    problems: list[str] = []
    checking = CrossChecking()
    for module in modules:
        cases = _cases(loader.loadTestsFromName(f"warp.tests.{module}"))
        for case in cases:
            name = case.id()
            if "cuda" in name.lower() or (keyword and keyword not in name):
                continue
            result = unittest.TestResult()
            if traced:
                checking.test = name
                with gc.trace_launches(), gc.trace_launches(include_warp=True), checking:
                    case.run(result)
                if _warp.hooks_installed():
                    problems.append(f"{name}: a graphcheck hook was left installed")
                    _warp.HOOKS.remove()
            else:
                case.run(result)
            for _test, text in result.errors + result.failures:
                if "/graphcheck/" in text.replace("\\", "/") and traced:
                    problems.append(f"{name}: graphcheck appears in the error:\n{text}")
            if result.errors:
                outcomes[name] = "error: " + result.errors[0][1].strip().splitlines()[-1][:200]
            elif result.failures:
                outcomes[name] = "fail: " + result.failures[0][1].strip().splitlines()[-1][:200]
            elif result.skipped:
                outcomes[name] = "skip"
            elif result.expectedFailures:
                outcomes[name] = "xfail"
            elif result.unexpectedSuccesses:
                outcomes[name] = "xpass"
            else:
                outcomes[name] = "pass"
    dropped = []
    for test, finding in checking.findings:
        line = f"{test}: {finding.kind}: {finding.message}"
        if finding.kind in ("unrecorded-node", "node-mismatch"):
            problems.append(f"the graph cross-check of a capture Warp's test makes found {line}")
        else:
            dropped.append(line)
    partial = [f"{test}: {note}" for test, note in checking.partial]
    cross_check = {"graphs": checking.graphs, "findings": dropped, "partial": partial}
    return {"outcomes": outcomes, "problems": problems, "cross-check": cross_check}


def main(argv: list[str] | None = None) -> int:
    """Run the subset untraced and traced, each in a fresh process; 1 when they differ."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", help=f"comma-separated modules of warp.tests (default: {', '.join(MODULES)})")
    parser.add_argument("-k", dest="keyword", help="only tests whose id contains this")
    parser.add_argument("--one", choices=["untraced", "traced"], help=argparse.SUPPRESS)  # a child process
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modules = args.modules.split(",") if args.modules else [m for m in MODULES if _shipped(m)]
    if args.one:
        try:
            result = run(modules, args.one == "traced", args.keyword)
        except BaseException:
            result = {"outcomes": {}, "problems": [f"the {args.one} run failed:\n{traceback.format_exc()}"]}
        with open(args.out, "w") as f:
            json.dump(result, f)
        return 0

    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("untraced", "traced"):
            out = os.path.join(tmp, f"{mode}.json")
            command = [sys.executable, "-m", "tests_warp.warp_suite", "--one", mode, "--out", out]
            if args.modules:
                command += ["--modules", args.modules]
            if args.keyword:
                command += ["-k", args.keyword]
            start = time.perf_counter()
            subprocess.run(command, check=True)
            with open(out) as f:
                runs[mode] = json.load(f)
            print(f"{mode}: {len(runs[mode]['outcomes'])} tests in {time.perf_counter() - start:.0f} s", flush=True)
    untraced, traced = runs["untraced"]["outcomes"], runs["traced"]["outcomes"]
    problems = runs["untraced"]["problems"] + runs["traced"]["problems"]
    for mode, outcomes in runs.items():
        if not any(outcome != "skip" for outcome in outcomes["outcomes"].values()):
            selected = f"modules {', '.join(modules)}" + (f", -k {args.keyword}" if args.keyword else "")
            problems.append(f"the {mode} run ran no test ({selected}): a run of nothing shows nothing")
    cross = runs["traced"].get("cross-check") or {"graphs": 0, "findings": [], "partial": []}
    print(f"the graph cross-check read {cross['graphs']} CPU graph(s) Warp's tests capture: "
          f"{len(cross['findings'])} other finding(s), {len(cross['partial'])} partial")  # fmt: skip
    for line in cross["findings"] + cross["partial"]:
        print("  " + line[:400])
    for name in sorted(set(untraced) | set(traced)):
        if untraced.get(name) != traced.get(name):
            problems.append(f"{name}: untraced {untraced.get(name)!r}, traced {traced.get(name)!r}")
    counts: dict[str, int] = {}
    for outcome in untraced.values():
        key = outcome.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    print(f"{len(untraced)} tests of {len(modules)} modules untraced: {counts}")
    if problems:
        print(f"{len(problems)} problem(s) with graphcheck tracing every test:")
        for problem in problems:
            print("  " + problem)
        return 1
    print("the same outcome traced and untraced for every test; no hook left behind; nothing raised by graphcheck")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

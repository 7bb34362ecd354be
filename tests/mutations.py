"""Regressions of the CUDA bookkeeping the CPU suite must catch, each applied alone to a
scratch copy of the tree and run against the tests that guard it.

Usage, from the repository's root::

    python -m tests.mutations            # every mutation
    python -m tests.mutations M3 M9      # some
    python -m tests.mutations --list

Each mutation is one textual edit of graphcheck (found exactly once, so a refactor that
moves the code makes the script say so instead of testing nothing). A mutation is caught
when at least one of its tests fails; the script exits 1 if any survives. The ``unfixed``
entries put a defect the suite guards against back, to show its test fails without the fix.
The CPU suite only: what a GPU must settle is in tests_gpu/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
BOOKKEEPING = "tests/test_cuda_bookkeeping.py"
STRUCTS = "tests/test_graph_structs.py"


class Mutation(NamedTuple):
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...] = (BOOKKEEPING,)
    also: tuple[tuple[str, str, str], ...] = ()  # more (path, old, new) edits of the same mutation

    def edits(self) -> list[tuple[str, str, str]]:
        return [(self.path, self.old, self.new), *self.also]


MUTATIONS: dict[str, Mutation] = {
    "M1": Mutation(
        "wp.copy's span is never started",
        "graphcheck/_session.py",
        "        self.before_cuda_op(record, handle)  # finish() takes the other side of its span\n",
        "",
    ),
    "M2": Mutation(
        "a launch's 'before' capture query is taken after the native launch",
        "graphcheck/_warp/hooks.py",
        "            session.after_cuda_op(record, stream_handle(stream))\n",
        "            session.before_cuda_op(record, stream_handle(stream))\n"
        "            session.after_cuda_op(record, stream_handle(stream))\n",
        also=(
            (
                "graphcheck/_session.py",
                "        self.before_cuda_op(record, handle)\n        return record\n",
                "        return record\n",
            ),
        ),
    ),
    "M2b": Mutation(
        "a memset's (any _run operation's) 'before' query is taken after Warp's memset",
        "graphcheck/_session.py",
        "        finally:\n            ops.pop()\n        if stream:\n",
        "        finally:\n            ops.pop()\n        if stream:\n"
        "            self.before_cuda_op(record, stream)\n",
        also=(
            (
                "graphcheck/_session.py",
                "            self.before_cuda_op(record, stream)\n        ops = self.ops\n",
                "            pass\n        ops = self.ops\n",
            ),
        ),
    ),
    "M3": Mutation(
        "the memset node reader ignores elementSize",
        "graphcheck/_cuda.py",
        "    row = element * width\n",
        "    row = width\n",
        (BOOKKEEPING, STRUCTS),
    ),
    "M4": Mutation(
        "an adjoint launch is read with the forward layout",
        "graphcheck/_session.py",
        "sizes = [spec.size for spec in _warp.kernel_layout(kernel, adjoint)] if kernel is not None else []",
        "sizes = [spec.size for spec in _warp.kernel_layout(kernel, False)] if kernel is not None else []",
    ),
    "M5": Mutation(
        "a device-to-host copy loses the fallback to the source's stream",
        "graphcheck/_session.py",
        "            if handle is None:\n                source = _warp.array_device(src)\n",
        "            if False:\n                source = _warp.array_device(src)\n",
    ),
    "M7": Mutation(
        "the positional stream= of capture_if / capture_while is misread",
        "graphcheck/_session.py",
        "    at = len(_BODIES.get(name, ()))\n",
        "    at = 1\n",
    ),
    "M8": Mutation(
        "after_cuda_op keeps a span that ended in another graph",
        "graphcheck/_session.py",
        "if state is not None and state[0] == span.graph else None",
        "if state is not None else None",
    ),
    "M9": Mutation(
        "graphcheck's hook on Warp's capture_resume is removed",
        "graphcheck/_warp/hooks.py",
        '    attr("capture_resume", _context, "capture_resume", _make_capture_resume_hook(_context.capture_resume))\n',
        "",
    ),
    # The defects the suite now guards against, put back one at a time.
    "unfixed-deterministic": Mutation(
        "Warp's deterministic machinery recorded as the user's work",
        "graphcheck/_session.py",
        '        if self.deterministic and record.kind != "launch":\n            record.internal = True\n',
        "",
    ),
    "unfixed-device": Mutation(
        "a launch's device not taken from its context (the stream lookup found none for this stream)",
        "graphcheck/_session.py",
        "_warp.device_of_context(context)",
        "None",
    ),
    "unfixed-copy-to-host": Mutation(
        "a copy to the host recorded on the destination's device (the CPU)",
        "graphcheck/_session.py",
        "                if handle is not None:\n                    device = source\n",
        "",
    ),
    "unfixed-refused-conditional": Mutation(
        "a conditional Warp refuses keeps its record",
        "graphcheck/_session.py",
        "            self.retract(record)  # Warp refused it, or a body's error broke the capture: nothing to match\n",
        "            pass\n",
    ),
    "unfixed-two-queries": Mutation(
        "a reference call asks the driver twice per operation",
        "graphcheck/_session.py",
        "        if self.eager and on_cpu and _warp.capturing_now(record.device, None):",
        "        if self.eager and _warp.capturing_now(record.device, record.stream):",
    ),
    "unfixed-skipped-empty-bytes": Mutation(
        "the cross-check skips every parameter recorded empty",
        "graphcheck/crosscheck.py",
        "            if got == want or (not want and (i >= len(sizes) or not sizes[i])):",
        "            if got == want or not want:",
    ),
}


def run(name: str, mutation: Mutation, keep: bool) -> bool:
    """Apply ``mutation`` to a scratch copy of the tree and run its tests; whether one failed."""
    scratch = Path(tempfile.mkdtemp(prefix=f"graphcheck-{name}-"))
    try:
        for part in ("graphcheck", "tests", "tests_gpu", "pyproject.toml"):
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, scratch / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, scratch / part)
        for path, old, new in mutation.edits():
            target = scratch / path
            text = target.read_text()
            found = text.count(old)
            if found != 1:
                print(f"{name}: the code to mutate is found {found} times in {path}: update this script")
                return False
            target.write_text(text.replace(old, new))
        # The scratch copy first on the path: its graphcheck, not the installed (editable) one.
        env = {**os.environ, "PYTHONPATH": str(scratch)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *mutation.tests]
        done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, check=False)
        failed = [line.split(" - ")[0] for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        where = subprocess.run(
            [sys.executable, "-c", "import graphcheck; print(graphcheck.__file__)"],
            cwd=scratch, env=env, capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        if not where.startswith(str(scratch)):
            print(f"{name}: the scratch copy's graphcheck is not the one imported ({where})")
            return False
        caught = done.returncode != 0 and bool(failed)
        print(f"{name}: {'caught' if caught else 'SURVIVED'} ({mutation.what}) {'; '.join(failed)}")
        if not caught and done.returncode not in (0, 1):
            print(done.stdout[-3000:] + done.stderr[-3000:])
        return caught
    finally:
        if keep:
            print(f"  kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--keep", action="store_true", help="keep each scratch copy")
    args = parser.parse_args(argv)
    if args.list:
        for name, mutation in MUTATIONS.items():
            print(f"{name}: {mutation.what} ({mutation.path})")
        return 0
    unknown = [n for n in args.names if n not in MUTATIONS]
    if unknown:
        parser.error(f"unknown mutation(s) {unknown}; --list names them")
    survived = [name for name in args.names or MUTATIONS if not run(name, MUTATIONS[name], args.keep)]
    print(f"{len(survived)} survived: {survived}" if survived else "every mutation was caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())

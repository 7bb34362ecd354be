"""Stage 5 of the pipeline: findings, the report, and what a failure does.

A :class:`Finding` is one cause, said in one line: its kind, the kernel, the argument,
the launch's index, the user's file:line, both values and the usual fix. A
:class:`Report` groups them. Findings of a kind the user allowed (:class:`Allow`) are
kept apart as suppressed.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._warnings import GraphCheckWarning
from .params import ArrayRef
from .record import Site

__all__ = [
    "KINDS",
    "Allow",
    "Finding",
    "GraphCheckError",
    "GraphCheckWarning",
    "Kind",
    "Report",
]

logger = logging.getLogger("graphcheck")


@dataclass(frozen=True)
class Kind:
    """A kind of finding: what it means and the usual fix."""

    name: str
    summary: str
    fix: str


KINDS: Mapping[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "scalar-drift",
            "a scalar argument (or struct field) differs between the reference call and the capture",
            "pass a value that changes between calls through a device array the kernel reads, and update that "
            "array in place outside the graph",
        ),
        Kind(
            "buffer-drift",
            "an array argument points at another buffer, or another offset of one",
            "keep the buffers a captured call uses fixed: swap ping-pong buffers an even number of times per call, "
            "or copy into fixed buffers instead of rebinding names",
        ),
        Kind(
            "per-call-allocation",
            "a buffer made during the call holds host data that dies with the call (with strict_ownership: any "
            "buffer made during the call)",
            "upload host data outside the captured call into a buffer the producer owns (or keep the host staging "
            "array on the producer and copy from it): a replay does not run the upload again",
        ),
        Kind(
            "launch-sequence-drift",
            "operations added, missing, or a different kernel at a position",
            "make the operations a call issues independent of host state: fixed iteration counts, or "
            "wp.capture_if / wp.capture_while for decisions the data makes",
        ),
        Kind(
            "dim-drift",
            "launch dimensions differ",
            "launch with fixed dimensions (the largest needed) and pass the active count through a device array "
            "the kernel checks",
        ),
        Kind(
            "copy-drift",
            "a copy or memset/fill differs (count, offsets, value)",
            "copy fixed ranges and fill with fixed values; keep a value that changes in a device array and copy "
            "from it",
        ),
        Kind(
            "stream-drift",
            "an operation went to another stream",
            "issue captured work on the capture stream, or streams forked from it, on every call",
        ),
        Kind(
            "foreign-buffer",
            "an address lies outside every buffer the owners hold",
            "make the buffer an attribute of the producer, or pass the object that holds it in owners=; a module "
            "global is shared by every producer",
        ),
        Kind(
            "stale-pointer",
            "before replay: an address in the graph no longer lies in a live owned buffer",
            "do not reassign, resize or free a buffer a graph uses: update it in place (assign, wp.copy, fill_), "
            "or capture the graph again",
        ),
        Kind(
            "unrecorded-node",
            "a graph node that no recorded operation created",
            "capture only Warp work in the guarded block, or allow foreign work with allow_foreign_nodes=True",
        ),
        Kind(
            "node-mismatch",
            "a graph node's function, grid, block, shared memory or bytes differ from the record",
            "do not edit a captured graph's nodes; capture it again (and report a bug if nothing edited it)",
        ),
        Kind(
            "capture-error",
            "the capture failed, or on the CPU would fail on CUDA (a sync or readback inside it)",
            "move synchronisation and readbacks (.numpy(), wp.synchronize(), printing an array) out of the "
            "captured call",
        ),
        Kind(
            "replay-divergence",
            "replayed, the graph's results differ from eager stepping (verify_replay)",
            "the structural findings alongside say why; with none, the graph replays other work than Warp launched "
            "(the limits page lists such Warp behaviour, e.g. two overloads of one generic kernel in one CPU "
            "capture): avoid the pattern, or step eagerly there",
        ),
        Kind(
            "shared-buffer",
            "two producers built alike use the same buffer (check_producer)",
            "allocate the buffer per producer, in its constructor: a module-level cache, a class attribute or a "
            "mutable default argument is shared by every producer built alike",
        ),
    )
}


@dataclass(frozen=True)
class Finding:
    """One reason a capture site is not replay-safe.

    Attributes:
        kind: one of :data:`KINDS` (``"scalar-drift"``, ``"buffer-drift"``...).
        message: the whole finding in one line: kernel, argument, launch index, call
            site, both values, and the usual fix.
        kernel: the kernel (or ``"wp.copy"``, ``"array.fill_"``...) concerned, if any.
        arg: the argument's name, if any (``"dt"``, ``"state.x"``, ``"count"``).
        index: the operation's index in the captured call (None when it has none).
        site: the user's call site.
        reference: the value in the reference call (or at capture time, before replay).
        captured: the value in the captured call (or now, before replay).
        fix: the usual fix, one sentence.
        detail: what else is known (``{"allocated at": "step.py:12", ...}``).
    """

    kind: str
    message: str
    kernel: str | None = None
    arg: str | None = None
    index: int | None = None
    site: Site | None = None
    reference: Any = None
    captured: Any = None
    fix: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready data."""
        return {
            "kind": self.kind,
            "message": self.message,
            "kernel": self.kernel,
            "arg": self.arg,
            "index": self.index,
            "site": None
            if self.site is None
            else {"file": self.site.filename, "line": self.site.lineno, "function": self.site.function},  # fmt: skip
            "reference": _jsonable(self.reference),
            "captured": _jsonable(self.captured),
            "fix": self.fix,
            "detail": {k: _jsonable(v) for k, v in self.detail.items()},
        }


def make_finding(
    kind: str,
    what: str,
    *,
    kernel: str | None = None,
    arg: str | None = None,
    index: int | None = None,
    site: Site | None = None,
    reference: Any = None,
    captured: Any = None,
    values: str | None = None,
    detail: Mapping[str, Any] | None = None,
    fix: str | None = None,
) -> Finding:
    """Build a finding and its one-line message.

    The message reads ``<what> [argument 'x'] (launch #i, file.py:12): <values>; fix: ...``;
    ``fix`` replaces the kind's usual fix where the cause calls for another.
    """
    fix = fix or KINDS[kind].fix
    where = []
    if index is not None:
        where.append(f"operation #{index}")
    if site is not None:
        where.append(site.short)
    text = what
    if arg in _LAUNCH_SETTINGS:
        text += f" {_LAUNCH_SETTINGS[arg]}"
    elif arg and ", " in arg:
        text += " arguments " + ", ".join(repr(a) for a in arg.split(", "))
    elif arg:
        text += f" argument {arg!r}"
    if where:
        text += f" ({', '.join(where)})"
    if values:
        text += f": {values}"
    message = f"{text}; fix: {fix}."
    return Finding(kind, message, kernel, arg, index, site, reference, captured, fix, dict(detail or {}))


_LAUNCH_SETTINGS = {"dim": "launch dimensions", "block_dim": "block size", "max_blocks": "max_blocks",
                    "stream": "stream"}  # fmt: skip


def _jsonable(value: Any) -> Any:
    if isinstance(value, ArrayRef):
        return {"ptr": value.ptr, "nbytes": value.nbytes, "shape": list(value.shape), "strides": list(value.strides)}
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


@dataclass(frozen=True)
class Allow:
    """Accept findings of one kind, optionally only at one kernel or argument.

    Like Hypothesis' ``suppress_health_check``, for the rare intentional case: a value
    that may freeze, a buffer that is meant to be shared.

    Args:
        kind: a finding kind (see :data:`KINDS`).
        kernel: a kernel's full name (``"sim.integrate"``) or key (``"integrate"``);
            None for every kernel.
        arg: an argument's name (``"dt"``, ``"state.x"``); None for every argument.

    Example::

        gc.capture(step, allow=[gc.Allow("scalar-drift", kernel="integrate", arg="t")])
    """

    kind: str
    kernel: str | None = None
    arg: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}; the kinds are: {', '.join(KINDS)}")

    def matches(self, finding: Finding) -> bool:
        """Whether this allowance covers ``finding``."""
        if finding.kind != self.kind:
            return False
        if self.kernel is not None:
            name = finding.kernel or ""
            if name != self.kernel and name.rsplit(".", 1)[-1] != self.kernel:
                return False
        # A finding about several arguments (buffers swapped in one launch) names them
        # all: allowing one of them allows the finding.
        return self.arg is None or self.arg in (finding.arg or "").split(", ")


def allowances(allow: Iterable[Allow | str] | Allow | str | None) -> tuple[Allow, ...]:
    """Normalise an ``allow=`` argument: kinds as strings, or :class:`Allow` objects."""
    if allow is None:
        return ()
    if isinstance(allow, (str, Allow)):
        allow = [allow]
    out = []
    for item in allow:
        if isinstance(item, Allow):
            out.append(item)
        elif isinstance(item, str):
            out.append(Allow(item))
        else:
            raise TypeError(
                f"allow= takes finding kinds (str) or graphcheck.Allow objects, got {item!r} (a {type(item).__name__})"
            )
    return tuple(out)


class Report:
    """The verdict on one capture site.

    Attributes:
        findings: what makes the site unsafe, one finding per cause.
        suppressed: findings an :class:`Allow` accepted.
        name: the captured callable.
        device: the capture device.
        operations: how many operations the captured call issued.
        checks: the checks that ran (``"compare"``, ``"allocations"``, ``"ownership"``,
            ``"graph"``, ``"replay"``).
        notes: what could not be checked, and why.
    """

    def __init__(
        self,
        findings: Iterable[Finding] = (),
        *,
        allow: Iterable[Allow] = (),
        name: str = "",
        device: str = "",
        operations: int = 0,
        checks: Iterable[str] = (),
        notes: Iterable[str] = (),
    ) -> None:
        kept: list[Finding] = []
        suppressed: list[Finding] = []
        for finding in findings:
            (suppressed if any(a.matches(finding) for a in allow) else kept).append(finding)
        self.findings: tuple[Finding, ...] = tuple(kept)
        self.suppressed: tuple[Finding, ...] = tuple(suppressed)
        self.name = name
        self.device = device
        self.operations = operations
        self.checks: tuple[str, ...] = tuple(checks)
        self.notes: tuple[str, ...] = tuple(notes)

    @property
    def ok(self) -> bool:
        """Whether nothing was found (suppressed findings do not count)."""
        return not self.findings

    def __bool__(self) -> bool:
        return self.ok

    def kinds(self) -> Counter[str]:
        """How many findings of each kind."""
        return Counter(f.kind for f in self.findings)

    def of_kind(self, kind: str) -> list[Finding]:
        """The findings of one kind."""
        return [f for f in self.findings if f.kind == kind]

    def __iter__(self) -> Any:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def headline(self) -> str:
        """One line: the verdict."""
        where = f" in {self.name}" if self.name else ""
        on = f" on {self.device}" if self.device else ""
        operations = f"{self.operations} operation{'s' if self.operations != 1 else ''}"
        if not self.checks:
            why = f": {self.notes[0]}" if self.notes else ""
            return f"graphcheck: {self.name or 'capture'} was not checked{on}{why}"
        if self.ok:
            extra = f", {len(self.suppressed)} allowed" if self.suppressed else ""
            return f"graphcheck: {self.name or 'capture'} is replay-safe{on} ({operations}{extra})"
        count = len(self.findings)
        return f"graphcheck: {count} finding{'s' if count != 1 else ''}{where}{on} ({operations})"

    def __str__(self) -> str:
        lines = [self.headline()]
        by_kind: dict[str, list[Finding]] = {}
        for finding in self.findings:
            by_kind.setdefault(finding.kind, []).append(finding)
        for kind in KINDS:
            group = by_kind.get(kind)
            if not group:
                continue
            lines.append(f"{kind} ({len(group)}): {KINDS[kind].summary}")
            lines.extend(f"  - {f.message}" for f in group)
        if self.suppressed:
            lines.append(
                f"allowed ({len(self.suppressed)}): " + "; ".join(f"{f.kind} at {f.kernel}" for f in self.suppressed)
            )
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Report {self.name!r}: {'ok' if self.ok else dict(self.kinds())}>"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "ok": self.ok,
            "name": self.name,
            "device": self.device,
            "operations": self.operations,
            "checks": list(self.checks),
            "findings": [f.to_dict() for f in self.findings],
            "suppressed": [f.to_dict() for f in self.suppressed],
            "notes": list(self.notes),
        }

    def to_json(self, **kwargs: Any) -> str:
        """The report as a JSON string (``json.dumps`` keyword arguments pass through)."""
        return json.dumps(self.to_dict(), **kwargs)

    def merged(self, other: Report) -> Report:
        """A report with the findings of both."""
        out = Report(name=self.name, device=self.device, operations=self.operations)
        out.findings = self.findings + other.findings
        out.suppressed = self.suppressed + other.suppressed
        out.checks = tuple(dict.fromkeys(self.checks + other.checks))
        out.notes = self.notes + other.notes
        return out


class GraphCheckError(AssertionError):
    """A capture site is not replay-safe. ``.report`` says why."""

    def __init__(self, report: Report) -> None:
        super().__init__(str(report))
        self.report = report


ON_FAILURE = ("raise", "warn", "log", "ignore")


def check_on_failure(on_failure: str) -> str:
    """``on_failure`` itself, or a ValueError listing the accepted values."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {', '.join(map(repr, ON_FAILURE))}, got {on_failure!r}")
    return on_failure


def act(report: Report, on_failure: str, stacklevel: int = 3) -> None:
    """Do what ``on_failure`` says with a report that has findings."""
    __tracebackhide__ = True  # pytest shows the user's frame, not this one
    if report.ok:
        return
    if on_failure == "raise":
        raise GraphCheckError(report)
    if on_failure == "warn":
        warnings.warn(str(report), GraphCheckWarning, stacklevel=stacklevel)
    elif on_failure == "log":
        logger.warning("%s", report)

"""Stage 5 of the pipeline: findings, the report, and what a failure does.

A :class:`Finding` is one cause, said in one line: its kind, the kernel, the argument,
the launch's index, the user's file:line, both values and the usual fix. A
:class:`Report` groups them. Findings of a kind the user allowed (:class:`Allow`) are
kept apart as suppressed.

It is longer than most modules on purpose: a finding, the allowances that suppress it
(given in code, on the command line, in pyproject.toml or in a comment, read by one parser)
and the report that groups them are the vocabulary every front end prints; together, a
kind's wording and the way to allow it cannot drift apart.
"""

from __future__ import annotations

import difflib
import json
import logging
import textwrap
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._choices import ON_FAILURE
from ._warnings import GraphCheckWarning, user_stacklevel
from ._words import article
from .kinds import KINDS, Kind
from .params import ArrayRef
from .schema import relative_path
from .site import Site

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
        detail: what else is known (``{"allocated at": Site(...), ...}``).
        title: the message's first part: what, which argument, where (no values, no fix).
        values: the message's values part (``"1 in the reference call, 2 captured"``).
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
    title: str = ""
    values: str = ""

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"

    @property
    def docs(self) -> str:
        """The address of the documentation page of this finding's kind."""
        return docs_page(self.kind)

    def accept_line(self) -> str:
        """A paste-ready ``allow=`` argument that accepts this finding (and its like)."""
        kernel, arg = self.accepted()
        parts = [f'"{self.kind}"', *([f'kernel="{kernel}"'] if kernel else []), *([f'arg="{arg}"'] if arg else [])]
        return f"allow=[gc.Allow({', '.join(parts)})]"

    def accepted(self) -> tuple[str | None, str | None]:
        """The kernel (by its key) and argument an allowance that accepts this finding names."""
        kernel = self.kernel.rsplit(".", 1)[-1] if self.kernel else None
        # Allowing one argument of a finding about several allows the finding.
        arg = self.arg.split(", ")[0] if self.arg and self.arg not in _LAUNCH_SETTINGS else None
        return kernel, arg

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-ready data."""
        return {
            "kind": self.kind,
            "message": self.message,
            "kernel": self.kernel,
            "arg": self.arg,
            "index": self.index,
            "site": site_dict(self.site),
            "reference": _jsonable(self.reference),
            "captured": _jsonable(self.captured),
            "fix": self.fix,
            "accept": self.accept_line(),
            "docs": self.docs,
            "detail": {_snake(k): _jsonable(v) for k, v in self.detail.items()},
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
    message = f"{text}: {values}; fix: {fix}." if values else f"{text}; fix: {fix}."
    return Finding(
        kind, message, kernel, arg, index, site, reference, captured, fix, dict(detail or {}), text, values or ""
    )


_LAUNCH_SETTINGS = {"dim": "launch dimensions", "block_dim": "block size", "max_blocks": "max_blocks",
                    "stream": "stream"}  # fmt: skip


#: Where each finding kind's page lives (``docs/findings/<kind>.md`` in the repository).
DOCS_URL = "https://graphcheck.readthedocs.io/en/latest/findings/{kind}.html"


def docs_page(kind: str) -> str:
    """The documentation page of a finding kind."""
    return DOCS_URL.format(kind=kind)


def docs_line(kind: str) -> str:
    """Where to read about a finding kind: the command that prints its page, then the page's address."""
    return f"graphcheck explain {kind} (or {docs_page(kind)})"


def site_dict(site: Site | None) -> dict[str, Any] | None:
    """A call site as JSON-ready data, its path relative to the working directory when it lies below it."""
    if site is None:
        return None
    return {"file": relative_path(site.filename), "line": site.lineno, "function": site.function}


def _snake(key: str) -> str:
    return key.strip().replace(" ", "_").replace("-", "_").lower()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Site):
        return site_dict(value)
    if isinstance(value, Mapping):
        return {_snake(str(k)): _jsonable(v) for k, v in value.items()}
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
    #: Only findings at these lines, ``(file, first, last)``: a suppression comment on a launch's statement.
    at: tuple[str, int, int] | None = field(default=None, repr=False)
    #: Where the suppression comment that made this allowance is written (None: given in code).
    comment: Site | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str):
            raise TypeError(f"Allow() takes a finding kind (a str, such as 'scalar-drift'), got {self.kind!r}")
        kind = kind_named(self.kind)
        if kind is None and ":" in self.kind:
            raise ValueError(
                f"Allow() takes the kind alone, got {self.kind!r}: name the kernel and the argument apart, "
                f"{_spelt_apart(self.kind)}, or pass the text as it is where allowances are given (allow=[...])"
            )
        if kind is None:
            raise ValueError(unknown_kind(self.kind))
        object.__setattr__(self, "kind", kind)  # in any case, as explain and comments take it
        for name in ("kernel", "arg"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                what, example = ("a kernel", "integrate") if name == "kernel" else ("an argument", "dt")
                raise TypeError(
                    f"Allow({name}=...) takes {what}'s name (a str, such as {example!r}) or None, got {value!r} "
                    f"({article(type(value).__name__)})"
                )

    @classmethod
    def parse(cls, spec: str) -> Allow:
        """The allowance ``spec`` writes as ``KIND``, ``KIND:KERNEL`` or ``KIND:KERNEL:ARG``: the
        form every text report prints, taken alike by ``--allow``, ``[tool.graphcheck] allow``,
        the marker's ``allow=`` and ``allow=`` in code.

        Raises:
            ValueError: an unknown kind (with the nearest one), an empty part, or more than three parts.
        """
        parts = spec.split(":")
        if len(parts) > 3 or not all(part.strip() for part in parts):
            why = "more than three parts" if len(parts) > 3 else "an empty part"
            raise ValueError(f"an allowance is KIND, KIND:KERNEL or KIND:KERNEL:ARG, got {spec!r} ({why})")
        kind, kernel, arg = [*(part.strip() for part in parts), "", ""][:3]
        return cls(kind, kernel or None, arg or None)

    def __str__(self) -> str:
        if self.comment is not None:
            return f"# graphcheck: allow[{self.kind}] at {self.comment.short}"
        parts = [f'"{self.kind}"']
        parts += [f'{name}="{value}"' for name, value in (("kernel", self.kernel), ("arg", self.arg)) if value]
        return f"gc.Allow({', '.join(parts)})"

    def matches(self, finding: Finding) -> bool:
        """Whether this allowance covers ``finding``."""
        if finding.kind != self.kind:
            return False
        if self.at is not None and (
            finding.site is None
            or finding.site.filename != self.at[0]
            or not self.at[1] <= finding.site.lineno <= self.at[2]
        ):
            return False
        if self.kernel is not None:
            name = finding.kernel or ""
            if name != self.kernel and name.rsplit(".", 1)[-1] != self.kernel:
                return False
        # A finding about several arguments (buffers swapped in one launch) names them
        # all: allowing one of them allows the finding.
        return self.arg is None or self.arg in (finding.arg or "").split(", ")


def _spelt_apart(spec: str) -> str:
    """``KIND:KERNEL:ARG`` as ``gc.Allow(...)`` writes it (for a message)."""
    parts = spec.split(":")
    named = [f"{name}={value!r}" for name, value in zip(("kernel", "arg"), parts[1:3]) if value]
    return f"gc.Allow({', '.join([repr(parts[0]), *named])})"


def kind_named(text: str) -> str | None:
    """The finding kind ``text`` names, in any case (``SCALAR-DRIFT``), or None."""
    kind = text.strip().lower()
    return kind if kind in KINDS else None


def unknown_kind(kind: str) -> str:
    """The one-line error for a finding kind that does not exist, with the kinds it nearly names."""
    near = near_kinds(kind)
    if not near:
        return f"unknown finding kind {kind!r}; the kinds are: {', '.join(KINDS)}"
    listed = near[0] if len(near) == 1 else ", ".join(map(repr, near[:-1])) + f" or {near[-1]!r}"
    return f"unknown finding kind {kind!r} (did you mean {listed if len(near) > 1 else repr(listed)}?)"


def near_kinds(kind: str) -> list[str]:
    """The kinds ``kind`` nearly names: spelt alike (whatever the case, ``_`` for ``-``), or
    holding it as a word (``drift``, ``allocation``), the closest first."""
    text = kind.strip().lower().replace("_", "-")
    if text in KINDS:
        return [text]
    ratios = sorted(((difflib.SequenceMatcher(None, text, name).ratio(), name) for name in KINDS), reverse=True)
    # Spelt alike: as close as the closest, give or take a letter (not every kind a typo half resembles).
    near = [name for ratio, name in ratios if ratio >= max(0.6, ratios[0][0] - 0.1)]
    if len(text) >= 4:
        near += [name for name in KINDS if text in name.split("-") or (len(text) >= 5 and text in name)]
    return list(dict.fromkeys(near))


def comment_allowances(capture: Site | None, launches: Iterable[Site | None]) -> tuple[tuple[Allow, ...], list[str]]:
    """The allowances the suppression comments of a capture write, and a note per comment that
    allows nothing (a kind that does not exist, a malformed comment).

    A comment (``# graphcheck: allow[kind, ...]``, any case) on the statement that opened the
    capture (``gc.capture(...)``, the header of ``with wp.ScopedCapture():`` or ``with
    gc.GraphGuard(...)``) allows its kinds in the whole capture; one on any line of a
    statement that issued an operation, the findings of that statement. Any other such
    comment in the code that ran the capture allows nothing, and is reported unused.

    Args:
        capture: the line that opened the capture (None: unknown).
        launches: the user's lines that issued the captured operations.
    """
    from ._suppression import places

    allow: list[Allow] = []
    notes: list[str] = []
    lines = ((s.filename, s.lineno) for s in launches if s is not None)
    for place in places((capture.filename, capture.lineno) if capture is not None else None, lines):
        comment, site = place.comment, Site(place.filename, place.comment.line, "")
        if comment.malformed:
            notes.append(
                f"the comment `{comment.text}` at {site.short}: {comment.malformed} (write `# graphcheck: "
                "allow[kind, ...]`, e.g. `# graphcheck: allow[scalar-drift]`)"
            )
            continue
        at = None if place.lines is None else (place.filename, *place.lines)
        for kind in comment.kinds:
            if kind_named(kind) is not None:
                allow.append(Allow(kind, at=at, comment=site))
            elif ":" in kind and kind_named(kind.split(":")[0]) is not None:
                notes.append(
                    f"the comment `{comment.text}` at {site.short}: a comment names kinds only, and allows them on "
                    f"its own statement (write `# graphcheck: allow[{kind.split(':')[0]}]` on the launch; --allow "
                    "KIND:KERNEL:ARG and gc.Allow(kind, kernel=, arg=) name a kernel and an argument)"
                )
            else:
                notes.append(f"the comment `{comment.text}` at {site.short}: {unknown_kind(kind)}")
    return tuple(dict.fromkeys(allow)), notes


def allowances(allow: Iterable[Allow | str] | Allow | str | None) -> tuple[Allow, ...]:
    """Normalise an ``allow=`` argument: :class:`Allow` objects, or strings (``KIND``,
    ``KIND:KERNEL`` or ``KIND:KERNEL:ARG``, read by :meth:`Allow.parse`)."""
    if allow is None:
        return ()
    if isinstance(allow, (str, Allow)):
        allow = [allow]
    out = []
    for item in allow:
        if isinstance(item, Allow):
            out.append(item)
        elif isinstance(item, str):
            out.append(Allow.parse(item))
        else:
            raise TypeError(
                f"allow= takes finding kinds (str) or graphcheck.Allow objects, got {item!r} "
                f"({article(type(item).__name__)})"
            )
    return tuple(out)


#: A report's verdicts, from best to worst news for CI: what :attr:`Report.status` holds.
STATUSES = ("passed", "partial", "not-checked", "failed")

#: How a skipped check that cannot apply to the capture starts its reason: it is said, but
#: it does not make a report partial.
NOT_APPLICABLE = "not applicable"


class Report:
    """The verdict on one capture site.

    Attributes:
        findings: what makes the site unsafe, one finding per cause.
        suppressed: findings an :class:`Allow` accepted.
        unused_allow: the allowances that matched no finding (a misspelt kernel or
            argument, or a bug since fixed).
        name: the captured callable.
        device: the capture device.
        operations: how many operations the captured call issued.
        checks: the checks that ran (``"compare"``, ``"allocations"``, ``"ownership"``,
            ``"graph"``, ``"replay"``...).
        skipped: the checks that did not run, each as ``(check, reason)``; a reason that
            starts with ``"not applicable"`` names a check that cannot apply here, which does
            not make the report partial.
        notes: anything else worth knowing.

    A report is also the sequence of its findings: ``len(report)`` counts them and
    ``for finding in report`` goes through them; ``bool(report)`` is :attr:`ok`, true only
    when every check ran and found nothing (so an empty partial report is false).
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
        skipped: Iterable[tuple[str, str]] = (),
        notes: Iterable[str] = (),
    ) -> None:
        kept: list[Finding] = []
        suppressed: list[Finding] = []
        allow = tuple(allow)
        used: set[Allow] = set()
        for finding in findings:
            matched = [a for a in allow if a.matches(finding)]
            used.update(matched)
            (suppressed if matched else kept).append(finding)
        self.findings: tuple[Finding, ...] = tuple(kept)
        self.suppressed: tuple[Finding, ...] = tuple(suppressed)
        self.unused_allow: tuple[Allow, ...] = tuple(a for a in dict.fromkeys(allow) if a not in used)
        self.name = name
        self.device = device
        self.operations = operations
        self.checks: tuple[str, ...] = tuple(checks)
        self.skipped: tuple[tuple[str, str], ...] = tuple((str(c), str(r)) for c, r in skipped)
        self.notes: tuple[str, ...] = tuple(notes)

    @property
    def not_run(self) -> tuple[tuple[str, str], ...]:
        """The :attr:`skipped` checks that could have run here and did not (those not
        ``"not applicable"``): what makes a report partial."""
        return tuple(entry for entry in self.skipped if not entry[1].startswith(NOT_APPLICABLE))

    @property
    def status(self) -> str:
        """``"failed"`` (findings), ``"not-checked"`` (no check ran), ``"partial"`` (some
        checks that apply did not run: see :attr:`not_run`) or ``"passed"``."""
        if self.findings:
            return "failed"
        if not self.checks:
            return "not-checked"
        return "partial" if self.not_run else "passed"

    @property
    def ok(self) -> bool:
        """Whether every check ran and none found anything (suppressed findings do not count)."""
        return self.status == "passed"

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
        what = self.name or "capture"
        on = f" on {self.device}" if self.device else ""
        operations = f"{self.operations} operation{'s' if self.operations != 1 else ''}"
        status = self.status
        if status == "not-checked":
            reasons = [reason for _, reason in self.skipped] + list(self.notes)
            why = f": {reasons[0]}" if reasons else ""
            return f"graphcheck: {what} NOT checked{on}{why}"
        if status == "failed":
            count = len(self.findings)
            return f"graphcheck: {count} finding{'s' if count != 1 else ''} in {what}{on} ({operations})"
        extra = f", {len(self.suppressed)} allowed" if self.suppressed else ""
        if status == "partial":
            missing = ", ".join(dict.fromkeys(check for check, _ in self.not_run))
            return f"graphcheck: no findings in {what}{on} ({operations}{extra}), but NOT checked: {missing}"
        return f"graphcheck: {what} is replay-safe{on} ({operations}{extra})"

    def text(
        self,
        *,
        quiet: bool = False,
        width: int | None = None,
        accept: Callable[[Finding], str] | None = None,
        allowance: Callable[[Allow], str] | None = None,
        unused: bool = True,
    ) -> str:
        """The report as text: the verdict, each kind's findings with their values, the
        fix and the docs page once per kind, an accept line per finding, then the checks.

        Args:
            quiet: the verdict line only.
            width: wrap long lines to this many columns (None: do not wrap).
            accept: how a front end accepts a finding (the command line's ``--allow``);
                default :meth:`Finding.accept_line`.
            allowance: how a front end writes an allowance given to it (the command line's
                ``--allow KIND:KERNEL``), where one matched nothing; default ``gc.Allow(...)``.
            unused: list the allowances that matched nothing (a front end that sums up
                several reports says them once itself).
        """
        accept = accept or Finding.accept_line
        lines = [self.headline()]
        if quiet:
            return _wrap(lines, width)
        by_kind: dict[str, list[Finding]] = {}
        for finding in self.findings:
            by_kind.setdefault(finding.kind, []).append(finding)
        for kind in KINDS:
            group = by_kind.get(kind)
            if not group:
                continue
            lines.append(f"{kind} ({len(group)}): {KINDS[kind].summary}")
            for finding in group:
                lines.append(f"  - {finding.title or finding.message}")
                if finding.values:
                    lines.append(f"      {finding.values}")
                if finding.fix != KINDS[kind].fix:  # this cause calls for another fix
                    lines.append(f"      fix: {finding.fix}")
                lines.append(f"      accept: {accept(finding)}")
            if any(f.fix == KINDS[kind].fix for f in group):
                lines.append(f"  fix: {KINDS[kind].fix}")
            lines.append(f"  docs: {docs_line(kind)}")
        if self.suppressed:
            lines.append(f"allowed ({len(self.suppressed)}): " + "; ".join(_allowed(f) for f in self.suppressed))
        if unused:
            lines.extend(unused_line(allow, allowance) for allow in self.unused_allow)
        if self.checks:
            lines.append(f"checked: {', '.join(self.checks)}")
        lines.extend(f"NOT checked: {check}: {reason}" for check, reason in self.skipped)
        lines.extend(f"note: {note}" for note in self.notes)
        return _wrap(lines, width)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<Report {self.name!r}: {self.status if not self.findings else dict(self.kinds())}>"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (one item of the envelope's ``reports``: see :mod:`graphcheck.schema`)."""
        return {
            "name": self.name,
            "device": self.device,
            "status": self.status,
            "ok": self.ok,
            "operations": self.operations,
            "checks": list(self.checks),
            "skipped": [{"check": check, "reason": reason} for check, reason in self.skipped],
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
            "suppressed": [f.to_dict() for f in self.suppressed],
            "unused_allow": [
                {"kind": a.kind, "kernel": a.kernel, "arg": a.arg, "comment": site_dict(a.comment)}
                for a in self.unused_allow
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        """The report as a JSON string (``json.dumps`` keyword arguments pass through)."""
        return json.dumps(self.to_dict(), **kwargs)

    def merged(self, other: Report) -> Report:
        """A report with the findings, checks and skipped checks of both."""
        out = Report(name=self.name, device=self.device, operations=self.operations)
        out.findings = self.findings + other.findings
        out.suppressed = self.suppressed + other.suppressed
        out.unused_allow = tuple(a for a in self.unused_allow if a in other.unused_allow)
        out.checks = tuple(dict.fromkeys(self.checks + other.checks))
        out.skipped = tuple(dict.fromkeys(self.skipped + other.skipped))
        out.notes = self.notes + other.notes
        return out


def unused_line(allow: Allow, spelt: Callable[[Allow], str] | None = None) -> str:
    """The line that says ``allow`` matched nothing, and what to do about it (``spelt``: how
    the front end writes an allowance given in code; a comment is named as the comment)."""
    if allow.comment is not None:
        return f"allowance matched nothing: {allow} (remove the comment: nothing it names is reported there)"
    return f"allowance matched nothing: {(spelt or str)(allow)} (check the kernel and argument names)"


def _allowed(finding: Finding) -> str:
    where = f" at {finding.kernel}" if finding.kernel else ""
    if not finding.arg:
        return f"{finding.kind}{where}"
    names = finding.arg.split(", ")  # a finding about several arguments names them all
    return f"{finding.kind}{where} argument{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}"


def _wrap(lines: list[str], width: int | None) -> str:
    if width is None:
        return "\n".join(lines)
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        hanging = indent + ("    " if line.lstrip().startswith("- ") else "  ")
        out += textwrap.wrap(line, width, initial_indent="", subsequent_indent=hanging, break_on_hyphens=False,
                             break_long_words=False) or [""]  # fmt: skip
    return "\n".join(out)


class GraphCheckError(AssertionError):
    """A capture site is not replay-safe. ``.report`` says why."""

    def __init__(self, report: Report) -> None:
        super().__init__(str(report))
        self.report = report


def check_on_failure(on_failure: str) -> str:
    """``on_failure`` itself, or a ValueError listing the accepted values."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {', '.join(map(repr, ON_FAILURE))}, got {on_failure!r}")
    return on_failure


def act(report: Report, on_failure: str) -> None:
    """Do what ``on_failure`` says with a report that has findings (a partial or
    unchecked report is no failure: its status says what did not run). A warning names
    the user's line that called into graphcheck."""
    __tracebackhide__ = True  # pytest shows the user's frame, not this one
    if not report.findings:
        return
    if on_failure == "raise":
        raise GraphCheckError(report)
    if on_failure == "warn":
        warnings.warn(str(report), GraphCheckWarning, stacklevel=user_stacklevel())
    elif on_failure == "log":
        logger.warning("%s", report)

"""graphcheck's pytest plugin: a fixture and a marker that prove capture sites replay-safe.

pytest loads the plugin from graphcheck's ``pytest11`` entry point once the package is
installed; ``-p no:graphcheck`` turns it off. From a source checkout that is not
installed, load it with ``-p graphcheck.pytest_plugin`` (only then: where the entry point
loads it too, pytest refuses to register the module a second time under that name).

Importing this module imports neither Warp nor the rest of graphcheck (pytest loads the
plugin in every session, and a session that never touches graphcheck should not pay for
Warp): the fixture and the marker import what they need when a test uses them.

The ``graphcheck`` fixture validates one capture site (a reference call, a real capture,
the comparison and the ownership checks; see :func:`graphcheck.capture`)::

    def test_step_is_replay_safe(graphcheck):
        sim = Simulator(device="cpu")
        checked = graphcheck.validate(sim.step, owners=(sim,))  # GraphCheckError if unsafe
        checked.launch()

        with graphcheck.guard(reference=sim.step, owners=(sim,)) as guard:
            sim.step()

It also proves a producer's replay by values, and runs the conformance kit, on producers a
class or factory builds (see :func:`graphcheck.verify_replay`, :func:`graphcheck.check_producer`)::

    def test_simulator_conforms(graphcheck):
        graphcheck.verify_replay(Simulator, steps=4)   # GraphCheckError when the replay diverges
        graphcheck.check_producer(Simulator)

The ``graphcheck`` marker guards every ``wp.ScopedCapture`` the test body opens (per-call
allocations, foreign buffers, and stale pointers before each ``wp.capture_launch``; see
:class:`graphcheck.autoguard.AutoGuard`), and fails the test when any of them has a
finding. Without ``reference_call=True`` it does not compare a capture with an eager call,
so a frame counter or buffers swapped in Python pass it (as ``partial``)::

    @pytest.mark.graphcheck
    def test_training_loop():
        ...

    @pytest.mark.graphcheck(allow=["scalar-drift"], device="cpu")
    def test_with_a_frozen_timestamp():
        ...

``allow`` takes finding kinds or :class:`graphcheck.Allow` objects; ``device`` runs the
test body under ``wp.ScopedDevice(device)`` and is the fixture's default device in that
test; ``reference_call=True`` runs each capture block made of plain calls once more
eagerly right after it is captured and compares the capture with that call (the graph
stays the test's own capture; the test takes one extra step per capture). The closest
marker wins (a function's over its class's).

``[tool.graphcheck]`` in the pyproject.toml of pytest's root directory sets ``allow``,
``replay_check``, ``on_failure`` and ``strict_ownership`` for the fixture and the marker,
and ``device`` for the fixture (see :mod:`graphcheck.config`); the options below win over
its ``device``. A device setting never moves a marked test's captures: they stay where the
test makes them, as ``graphcheck run`` leaves a program's (the marker's own ``device=``
runs the body under ``wp.ScopedDevice``).

Options (on the command line, or as the ini key in brackets; the command line wins):

``--graphcheck-device DEVICE`` [``graphcheck_device``]
    The fixture's default capture device (default: ``device`` in ``[tool.graphcheck]``, else
    Warp's default device). A device this machine lacks fails the test that uses it, in one
    line naming where the device came from.
``--graphcheck-report PATH`` [``graphcheck_report``]
    Write every validation of the session to PATH as JSON: the test's node id, where the
    validation came from and the report. A relative ini path is taken from the ini file's
    directory, a relative command-line path from the current directory.
``--graphcheck-strict`` [``graphcheck_strict = true``]
    Fail a test also when one of its validations is ``partial`` or ``not-checked`` (a
    marked test without ``reference_call=True`` cannot compare), and a marked test that
    opened no capture; not while checking is off.
``--graphcheck-disable`` [``graphcheck_disable = true``]
    Turn every check off for the session, as ``GRAPHCHECK_DISABLE=1`` does (set for the
    session, put back after it).

A test whose validations found something gets a ``graphcheck`` section in its report
(unless its failure already shows the report), each validation's verdict and findings
are JUnit XML properties of the test, the session's header says graphcheck's and Warp's
versions, the device and whether checking is on, and the terminal summary ends with the
session's totals whenever a test used the plugin.

It is longer than most modules on purpose: pytest finds a plugin's hooks by name in the
one module its entry point registers, and the hooks, the fixture, the marker and the
session's reporting share one record of the session (what each test validated), so they
live together.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    # Types only: importing these at run time would import Warp with the plugin.
    from .findings import Allow, Report
    from .guard import CheckedGraph, GraphGuard

__all__ = ["GraphcheckFixture", "Validation"]

MARKER_HELP = (
    "graphcheck(allow=(), device=None, reference_call=False, strict_ownership=False): every wp.ScopedCapture the "
    "test opens is checked for per-call allocations, foreign buffers and stale pointers; with reference_call=True "
    "also compared with an eager call of its block"
)
MARKER_KEYWORDS = ("allow", "device", "reference_call", "strict_ownership")

#: Where a validation came from, as the JSON report and the test report's section name it.
SOURCE_VALIDATE = "validate"  # graphcheck.validate(fn)
SOURCE_GUARD = "guard"  # with graphcheck.guard(...)
SOURCE_MARKER = "marker"  # a wp.ScopedCapture in a test marked @pytest.mark.graphcheck
SOURCE_MARKER_REPLAY = "marker-replay"  # a wp.capture_launch there whose replay check found something
SOURCE_VALUES = "verify_replay"  # graphcheck.verify_replay(make)
SOURCE_CONFORMANCE = "check_producer"  # graphcheck.check_producer(make)


@dataclass
class Validation:
    """One report the plugin saw, and the test that made it.

    Attributes:
        nodeid: the test's pytest node id.
        source: ``"validate"``, ``"guard"``, ``"marker"``, ``"marker-replay"``, ``"verify_replay"``
            or ``"check_producer"``.
        report: the :class:`graphcheck.Report`.
    """

    nodeid: str
    source: str
    report: Report

    def to_dict(self) -> dict[str, Any]:
        """The validation as JSON-ready data: the report's, with the test's node id and the source."""
        return {**self.report.to_dict(), "nodeid": self.nodeid, "source": self.source}


_NOT_SAVED = object()  # GRAPHCHECK_DISABLE was not touched


@dataclass
class _SessionRecord:
    """The plugin's settings and every validation of the session."""

    device: str | None
    report_path: Path | None
    settings: Any = None  # graphcheck.config.Settings from [tool.graphcheck]
    pyproject: Path | None = None  # where the settings came from
    # Where the fixture's default device came from, and how that place writes a device.
    device_from: tuple[str, Callable[[str], str]] = ("the default device", "device={!r}".format)
    validations: list[Validation] = field(default_factory=list)
    tests: int = 0  # how many tests used the fixture or the marker
    written_to: Path | None = None
    strict: bool = False  # --graphcheck-strict: partial or not checked fails the test too
    saved_disable: Any = _NOT_SAVED  # GRAPHCHECK_DISABLE before --graphcheck-disable set it
    write_error: str | None = None  # why the JSON report could not be written at the end
    # The reports of marked captures whose test asked for reference_call=True.
    compare_asked: set[int] = field(default_factory=set)

    def allowance(self) -> Callable[[Allow], str]:
        """How an allowance that matched nothing is named: as ``[tool.graphcheck]`` writes it, or ``gc.Allow(...)``."""
        from .config import allow_spelling

        return allow_spelling(self.settings.allow if self.settings is not None else (), self.pyproject)

    def to_dict(self) -> dict[str, Any]:
        """The session's validations and totals: the ``graphcheck.report/1`` envelope."""
        from .config import disabled_by_environment
        from .schema import report_document  # light: no Warp

        return report_document(
            [v.to_dict() for v in self.validations],
            device=self.device,
            command="pytest",
            checking=not disabled_by_environment(),
            totals=self.totals(),
        )

    def totals(self) -> dict[str, Any]:
        """How many tests, validations, findings (by kind) and allowed findings."""
        kinds: Counter[str] = Counter()
        for validation in self.validations:
            kinds.update(validation.report.kinds())
        return {
            "tests": self.tests,
            "validations": len(self.validations),
            "findings": sum(kinds.values()),
            "allowed": sum(len(v.report.suppressed) for v in self.validations),
            "kinds": dict(sorted(kinds.items())),
        }

    def summary_line(self) -> str:
        """The session's totals in one line, and what was NOT checked."""
        from .config import disabled_by_environment

        totals = self.totals()
        validations, tests, findings = totals["validations"], totals["tests"], totals["findings"]
        counted = (
            f"{validations} validation{'s' if validations != 1 else ''} in {tests} test{'s' if tests != 1 else ''}"
        )
        if disabled_by_environment():
            return f"graphcheck: NOT checked: GRAPHCHECK_DISABLE is set, {counted} ran unchecked"
        line = f"graphcheck: {counted}, {findings} finding{'s' if findings != 1 else ''}"
        if totals["kinds"]:
            line += " (" + ", ".join(f"{kind}: {count}" for kind, count in totals["kinds"].items()) + ")"
        if totals["allowed"]:
            line += f", {totals['allowed']} allowed"
        partial = Counter(check for v in self.validations for check, _ in v.report.not_run)
        if partial:
            line += "; NOT checked: " + ", ".join(f"{check} in {n}" for check, n in partial.items())
        uncompared = [
            v for v in self.validations
            if v.source == SOURCE_MARKER and any(c == "compare" for c, _ in v.report.not_run)
        ]  # fmt: skip
        unasked = sum(1 for v in uncompared if id(v.report) not in self.compare_asked)
        if unasked:
            captures = f"{unasked} marked capture{'s' if unasked != 1 else ''} {'were' if unasked != 1 else 'was'}"
            line += (
                f" ({captures} NOT compared with an eager call: @pytest.mark.graphcheck(reference_call=True) "
                "compares them)"
            )
        asked = [v.report for v in uncompared if id(v.report) in self.compare_asked]
        if asked:
            # reference_call=True is set already: why the capture could not be compared.
            why = dict(asked[0].not_run)["compare"]
            captures = f"{len(asked)} marked capture{'s' if len(asked) != 1 else ''}"
            line += f" ({captures} with reference_call=True could NOT be compared; {asked[0].name}: {why})"
        return line


@dataclass
class _TestRecord:
    """One test's validations, and how many of them its reports already show."""

    nodeid: str
    session: _SessionRecord
    properties: list[tuple[str, object]] = field(default_factory=list)  # the item's JUnit properties
    validations: list[Validation] = field(default_factory=list)
    shown: int = 0
    verdict: str | None = None  # the marker's verdict line, when it failed the test

    def add(self, source: str, report: Report) -> None:
        validation = Validation(self.nodeid, source, report)
        self.validations.append(validation)
        self.session.validations.append(validation)
        self.properties.append((f"graphcheck.{source}", f"{report.status}: {report.headline()}"))
        self.properties.extend(("graphcheck.finding", f"{f.kind}: {f.message}") for f in report.findings)

    def take_unshown_findings(self, shown_already: object = None) -> str:
        """The reports with findings made since the last call, as a report section's text
        (without ``shown_already``, the report the test's failure shows)."""
        new, self.shown = self.validations[self.shown :], len(self.validations)
        allowance = self.session.allowance()
        return "\n\n".join(
            f"[{v.source}] "
            + v.report.text(accept=marker_accept if v.source.startswith(SOURCE_MARKER) else None, allowance=allowance)
            for v in new
            if v.report.findings and v.report is not shown_already
        )


_SESSION = pytest.StashKey[_SessionRecord]()
_TEST = pytest.StashKey[_TestRecord]()


def _test_record(item: pytest.Item) -> _TestRecord:
    record = item.stash.get(_TEST, None)
    if record is None:
        session = item.config.stash[_SESSION]
        record = item.stash[_TEST] = _TestRecord(item.nodeid, session, item.user_properties)
        session.tests += 1
    return record


# -- options and markers ------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--graphcheck-device``, ``--graphcheck-report``, ``--graphcheck-strict``,
    ``--graphcheck-disable`` and their ini keys."""
    group = parser.getgroup("graphcheck", "graphcheck: CUDA-graph capture validation for Warp")
    group.addoption(
        "--graphcheck-device",
        dest="graphcheck_device",
        metavar="DEVICE",
        default=None,
        help="default capture device of the graphcheck fixture (default: Warp's default device; "
        "ini: graphcheck_device)",
    )
    group.addoption(
        "--graphcheck-report",
        dest="graphcheck_report",
        metavar="PATH",
        default=None,
        help="write every graphcheck validation of the session to PATH as JSON (ini: graphcheck_report)",
    )
    group.addoption(
        "--graphcheck-strict",
        dest="graphcheck_strict",
        action="store_true",
        default=None,
        help="fail a test whose graphcheck validations are partial or not checked, not only one with findings "
        "(ini: graphcheck_strict)",
    )
    group.addoption(
        "--graphcheck-disable",
        dest="graphcheck_disable",
        action="store_true",
        default=None,
        help="turn every graphcheck check off for the session, as GRAPHCHECK_DISABLE=1 does (ini: graphcheck_disable)",
    )
    parser.addini("graphcheck_device", "default capture device of the graphcheck fixture", default="")
    parser.addini(
        "graphcheck_strict", "fail a test whose graphcheck validations are partial or not checked", type="bool",
        default=False,
    )  # fmt: skip
    parser.addini("graphcheck_disable", "turn every graphcheck check off for the session", type="bool", default=False)
    parser.addini(
        "graphcheck_report",
        "write every graphcheck validation of the session to this path as JSON (relative to the ini file)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (so ``--strict-markers`` passes) and read the options."""
    config.addinivalue_line("markers", MARKER_HELP)
    from . import config as project

    pyproject = project.find_pyproject(config.rootpath)
    try:
        settings = project.load(pyproject)
    except project.ConfigError as error:
        raise pytest.UsageError(f"graphcheck: {error}") from None
    device, device_from = _device_name(config)
    if device is None and settings.device is not None:
        device = settings.device
        device_from = (f"device in [tool.graphcheck] of {_shown(pyproject)}", 'device = "{}"'.format)
    strict = _flag(config, "graphcheck_strict")
    record = _SessionRecord(device=device, report_path=_report_path(config), settings=settings, strict=strict,
                            pyproject=pyproject, device_from=device_from)  # fmt: skip
    if _flag(config, "graphcheck_disable"):
        # The one switch every surface reads (graphcheck's own, and user code calling
        # gc.capture directly in a test); put back when the session ends.
        record.saved_disable = os.environ.get("GRAPHCHECK_DISABLE")
        os.environ["GRAPHCHECK_DISABLE"] = "1"
    config.stash[_SESSION] = record


def _flag(config: pytest.Config, name: str) -> bool:
    """A switch from the command line, else from the ini file."""
    given = config.getoption(name)
    return bool(given) if given is not None else bool(config.getini(name))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put ``GRAPHCHECK_DISABLE`` back as ``--graphcheck-disable`` found it."""
    record = config.stash.get(_SESSION, None)
    if record is None or record.saved_disable is _NOT_SAVED:
        return
    if record.saved_disable is None:
        os.environ.pop("GRAPHCHECK_DISABLE", None)
    else:
        os.environ["GRAPHCHECK_DISABLE"] = record.saved_disable


def pytest_report_header(config: pytest.Config) -> str:
    """One header line: graphcheck's and Warp's versions, the device, whether checking is on."""
    from ._version import __version__
    from .config import disabled_by_environment
    from .schema import warp_version

    record = config.stash.get(_SESSION, None)
    device = record.device if record is not None and record.device else "Warp's default device"
    checking = "OFF (GRAPHCHECK_DISABLE is set)" if disabled_by_environment() else "on"
    return f"graphcheck {__version__}, warp {warp_version() or 'not installed'}, device: {device}, checking: {checking}"


#: What a device name looks like: checked when the session starts, without importing Warp
#: (whether the machine has that device is checked when a test first uses it).
_DEVICE_NAME = re.compile(r"cpu|cuda(:\d+)?")


def _device_name(config: pytest.Config) -> tuple[str | None, tuple[str, Callable[[str], str]]]:
    """``--graphcheck-device``, else the ini's ``graphcheck_device``, and where it came from (the
    place, and how it writes a device); a name no device has is a usage error."""
    option, device = "--graphcheck-device", config.getoption("graphcheck_device")
    spell = "--graphcheck-device={}".format
    if device is None:
        option, device = "graphcheck_device (ini)", config.getini("graphcheck_device") or None
        ini = config.inipath.name if config.inipath is not None else "the ini file"
        option, spell = f"graphcheck_device in {ini}", "graphcheck_device = {}".format
    if device is not None and not _DEVICE_NAME.fullmatch(device):
        raise pytest.UsageError(f"graphcheck: {option}: {device!r} is not a Warp device name (cpu, cuda, cuda:0...)")
    return device, (option, spell)


def _shown(path: Path | None) -> str:
    """``path`` relative to the working directory where it lies below it."""
    if path is None:
        return "pyproject.toml"
    from .schema import relative_path

    return relative_path(path)


def _checked_device(device: Any, what: str, spell: Callable[[str], str] = "device={!r}".format) -> Any:
    """``device`` when this machine has it, else the test fails with one line naming ``what`` set it
    (``spell``: how that place writes a device, for the suggestion)."""
    __tracebackhide__ = True
    if device is None:
        return None
    from .guard import check_device

    try:
        check_device(device, spell)
    except ValueError as error:
        problem = str(error)
    else:
        return device
    pytest.fail(f"graphcheck: {what}: {problem}", pytrace=False)


def _report_path(config: pytest.Config) -> Path | None:
    """Where the JSON report goes: the command line's path, else the ini file's, else None."""
    from ._outputs import OutputPathError, check_output_path

    from_command_line = config.getoption("graphcheck_report")
    if from_command_line is not None:
        option, path, base = "--graphcheck-report", from_command_line, config.invocation_params.dir
    else:
        option, path = "graphcheck_report (ini)", config.getini("graphcheck_report")
        if not path:
            return None
        base = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        return check_output_path(option, path, base)  # checked now: not after the whole session ran
    except OutputPathError as error:
        raise pytest.UsageError(f"graphcheck: {error}") from None


# -- the fixture --------------------------------------------------------------------------


class GraphcheckFixture:
    """What the ``graphcheck`` fixture gives a test: validation with the session's settings.

    Attributes:
        device: the default capture device (the marker's ``device``, ``--graphcheck-device``
            or ``device`` in ``[tool.graphcheck]``; None: Warp's default device).
        reports: every report this fixture's validations and guards produced, in order.
    """

    def __init__(
        self, device: str | None, record: _TestRecord, device_from: tuple[str, Callable[[str], str]] | None = None
    ) -> None:
        self.device = device
        self.reports: list[Report] = []
        self._record = record
        # Where the default device came from: checked on first use, and a device this machine
        # lacks fails the test in one line naming that place (the marker checks its own).
        self._device_from = device_from

    def _device(self, device: Any) -> Any:
        """``device`` (the test's own argument), else the default :attr:`device`, checked once."""
        __tracebackhide__ = True
        if device is not None:
            return device
        if self._device_from is not None:
            where, spell = self._device_from
            self._device_from = None
            _checked_device(self.device, where, spell)
        return self.device

    def _defaults(self, keywords: dict[str, Any]) -> dict[str, Any]:
        """``keywords`` with their capture options (an ``options=`` object, then option
        keywords) over the ``[tool.graphcheck]`` settings, as one ``options=`` (a test's
        ``allow=`` adds to the project's)."""
        from .options import CaptureOptions

        settings = self._record.session.settings
        given = keywords.pop("options", None)
        if given is None:
            given = settings.capture_options() if settings is not None else CaptureOptions()
        options = CaptureOptions.of(given, **CaptureOptions.split(keywords))
        if settings is not None:
            options = CaptureOptions.of(options, allow=tuple(dict.fromkeys(settings.allow + options.allow)))
        return {**keywords, "options": options}

    def _add(self, source: str, report: Report) -> None:
        self.reports.append(report)
        self._record.add(source, report)

    def validate(
        self, fn: Callable[..., Any], *args: Any, owners: Any = None, device: Any = None, **options: Any
    ) -> CheckedGraph:
        """Validate ``fn(*args)`` as a capture site and return its graph (see :func:`graphcheck.capture`).

        Args:
            fn: the call to capture (a simulator's ``step``...).
            args: its positional arguments.
            owners: the objects holding the call's buffers (None: those reachable from
                ``fn`` and ``args``).
            device: the capture device (None: the fixture's :attr:`device`).
            options: passed to :func:`graphcheck.capture` (``allow=``, ``reference=``,
                ``on_failure=``, which defaults to ``"raise"``..., and the step's own
                ``kwargs=``); ``[tool.graphcheck]`` gives the defaults.

        Returns:
            The :class:`graphcheck.CheckedGraph`; its report is kept in :attr:`reports`.

        Raises:
            GraphCheckError: when the site is not replay-safe (its report is kept too).
        """
        __tracebackhide__ = True  # the failure is the test's, not the plugin's
        from .findings import GraphCheckError
        from .guard import capture

        options = self._defaults(options)
        try:
            checked = capture(fn, *args, device=self._device(device), owners=owners, **options)
        except GraphCheckError as error:
            self._add(SOURCE_VALIDATE, error.report)
            raise
        self._add(SOURCE_VALIDATE, checked.report)
        return checked

    def guard(
        self, reference: Callable[[], Any] | None = None, owners: Any = None, *, device: Any = None, **options: Any
    ) -> GraphGuard:
        """A :class:`graphcheck.GraphGuard` on the fixture's device; its report is kept when its block ends.

        Args:
            reference: a callable doing what the block does (None: no reference call).
            owners: the objects holding the block's buffers.
            device: the capture device (None: the fixture's :attr:`device`).
            options: passed to :class:`graphcheck.GraphGuard` (``on_failure=``, ``allow=``...).
        """
        options = self._defaults(options)
        guard = _reporting_guard_class()(self._device(device), reference, owners, **options)
        guard.on_report = lambda report: self._add(SOURCE_GUARD, report)
        return guard

    def verify_replay(self, make: Callable[..., Any], *, device: Any = None, **options: Any) -> Report:
        """Prove by values that a producer's graph replays what eager stepping computes (see
        :func:`graphcheck.verify_replay`), on the fixture's device by default; the report is kept."""
        __tracebackhide__ = True
        from .values import verify_replay

        return self._keep(SOURCE_VALUES, verify_replay, make, device, options)

    def check_producer(self, make: Callable[..., Any], *, device: Any = None, **options: Any) -> Report:
        """Run the producer conformance kit (see :func:`graphcheck.check_producer`), on the fixture's
        device by default; the report is kept."""
        __tracebackhide__ = True
        from .conformance import check_producer

        return self._keep(SOURCE_CONFORMANCE, check_producer, make, device, options)

    def _keep(self, source: str, check: Callable[..., Report], make: Any, device: Any, options: Any) -> Report:
        __tracebackhide__ = True
        from .findings import GraphCheckError

        try:
            report = check(make, device=self._device(device), **options)
        except GraphCheckError as error:
            self._add(source, error.report)
            raise
        self._add(source, report)
        return report

    def __repr__(self) -> str:
        count = len(self.reports)
        reports = f"{count} report{'s' if count != 1 else ''}"
        return f"<graphcheck fixture on {self.device or 'the default device'}: {reports}>"


@cache
def _reporting_guard_class() -> type[Any]:
    """A :class:`GraphGuard` that hands its report on when its block ends (made on first use: it imports Warp)."""
    from types import TracebackType

    from .guard import GraphGuard

    class ReportingGraphGuard(GraphGuard):
        """A GraphGuard that calls ``on_report(report)`` when its block ends (not on the user's own exception)."""

        on_report: Callable[[Report], None] | None = None

        def __exit__(
            self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> bool:
            try:
                return super().__exit__(exc_type, exc, tb)
            finally:
                # GraphGuard sets .checked once the checks ran, before it raises on findings.
                if self.checked is not None and self.on_report is not None:
                    self.on_report(self.report)

    return ReportingGraphGuard


@pytest.fixture
def graphcheck(request: pytest.FixtureRequest) -> GraphcheckFixture:
    """Validate capture sites: ``graphcheck.validate(sim.step)``, ``with graphcheck.guard(...)``,
    ``graphcheck.verify_replay(Simulator)``, ``graphcheck.check_producer(Simulator)``.

    The default device is the marker's ``device``, else ``--graphcheck-device`` (or the ini's
    ``graphcheck_device``), else ``device`` in ``[tool.graphcheck]``, else Warp's default
    device. Reports with findings appear in the test's report.
    """
    item = request.node
    marker = item.get_closest_marker("graphcheck")
    marker_device = marker.kwargs.get("device") if marker is not None else None
    session = request.config.stash[_SESSION]
    # Not checked here, which would import Warp: checked when first used (the marker checks its own).
    if marker_device is not None:
        return GraphcheckFixture(marker_device, _test_record(item))
    return GraphcheckFixture(session.device, _test_record(item), session.device_from if session.device else None)


# -- the marker ---------------------------------------------------------------------------


def _marker_settings(marker: pytest.Mark) -> tuple[tuple[Allow, ...], Any]:
    """The marker's allowances and device, checked (a typo in a kind fails the test, not silently)."""
    from .findings import allowances

    if "warmup" in marker.kwargs:
        pytest.fail(
            f"@pytest.mark.graphcheck(warmup={marker.kwargs['warmup']!r}): the marker takes no warm-up calls (they "
            "would run before the test's capture and change the graph it keeps); with reference_call=True the capture "
            "is compared with an eager call after it. Warm up in the test before capturing, or validate the step "
            "with graphcheck.validate(step, warmup=N)",
            pytrace=False,
        )
    unknown = sorted(set(marker.kwargs) - set(MARKER_KEYWORDS))
    if marker.args or unknown:
        given = ", ".join([*map(repr, marker.args), *unknown])
        pytest.fail(
            f"@pytest.mark.graphcheck takes the keyword arguments {', '.join(k + '=' for k in MARKER_KEYWORDS)} only, "
            f"got {given}; e.g. @pytest.mark.graphcheck(allow=['scalar-drift'])",
            pytrace=False,
        )
    from ._words import article

    keyword = "allow"
    try:
        allow = allowances(marker.kwargs.get("allow"))
        for keyword in ("reference_call", "strict_ownership"):
            value = marker.kwargs.get(keyword, False)
            if not isinstance(value, bool):
                raise TypeError(f"expected True or False, got {value!r} ({article(type(value).__name__)})")
    except (TypeError, ValueError) as error:
        problem = str(error)
    else:
        return allow, _checked_device(marker.kwargs.get("device"), "@pytest.mark.graphcheck(device=...)")
    # Failed outside the except block, so the report does not chain the ValueError too.
    pytest.fail(f"@pytest.mark.graphcheck({keyword}=...): {problem}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Run a marked test's body under an AutoGuard, and fail it when a capture has findings
    (with ``--graphcheck-strict``, also a test whose validations are partial or not checked)."""
    marker = item.get_closest_marker("graphcheck")
    result = (yield) if marker is None else (yield from _run_marked(item, marker))
    _fail_unchecked(item)
    return result


def _fail_unchecked(item: pytest.Item) -> None:
    """With ``--graphcheck-strict``, fail a test whose validations did not all run every check
    (unless checking is off: GRAPHCHECK_DISABLE or ``--graphcheck-disable`` asked for that)."""
    from .config import disabled_by_environment

    record = item.stash.get(_TEST, None)
    if record is None or not record.session.strict or disabled_by_environment():
        return
    unchecked = [v for v in record.validations if v.report.status in ("partial", "not-checked")]
    if not unchecked:
        return
    count = len(unchecked)
    lines = [f"graphcheck: {count} validation{'s' if count != 1 else ''} NOT fully checked (--graphcheck-strict)"]
    for validation in unchecked:
        report = validation.report
        lines.append(f"[{validation.source}] {report.headline()}")
        lines.extend(f"  NOT checked: {check}: {why}" for check, why in report.not_run or report.skipped)
    record.verdict = lines[0]
    pytest.fail("\n".join(lines), pytrace=False)


def _run_marked(item: pytest.Item, marker: pytest.Mark) -> Generator[None, object, object]:
    """The marked test's body under an AutoGuard (see :func:`pytest_runtest_call`)."""
    allow, device = _marker_settings(marker)
    from .autoguard import AutoGuard
    from .guard import checking_enabled

    record = _test_record(item)
    settings = record.session.settings
    on_failure = settings.on_failure if settings is not None else "raise"
    # The test's captures stay where the test makes them: a device setting ([tool.graphcheck],
    # --graphcheck-device) is the fixture's default; only the marker's own device= moves the body.
    if settings is not None:
        allow = tuple(dict.fromkeys(settings.allow + allow))
    options = settings.capture_options() if settings is not None else None
    reference_call = marker.kwargs.get("reference_call", False)
    autoguard = AutoGuard(
        options,
        allow=allow,
        reference_call=reference_call,
        strict_ownership=marker.kwargs.get("strict_ownership", options.strict_ownership if options else False),
        to_compare="mark the test `@pytest.mark.graphcheck(reference_call=True)`",
        validate_step="the graphcheck fixture, graphcheck.validate(step)",
        allowance=record.session.allowance(),
    )
    try:
        # The with statement exits the AutoGuard however the body ends, so wp.ScopedCapture
        # and wp.capture_launch are Warp's own again before the next test.
        with ExitStack() as stack:
            if device is not None:
                import warp as wp

                stack.enter_context(wp.ScopedDevice(device))
            stack.enter_context(autoguard)
            result = yield
    finally:
        # Kept also when the test raised: the section and the JSON report show what was found.
        for report in autoguard.reports:
            if not any(v.report is report for v in record.validations):  # the fixture's guard kept it already
                record.add(SOURCE_MARKER, report)
                if reference_call:
                    record.session.compare_asked.add(id(report))
        for report in autoguard.replay_reports:
            record.add(SOURCE_MARKER_REPLAY, report)
    if autoguard.findings:
        record.shown = len(record.validations)  # the failure shows the reports: no section repeats them
        record.verdict = autoguard.verdict().splitlines()[0]
        _act(autoguard.summary(accept=marker_accept), on_failure)
    elif record.session.strict and not autoguard.reports and checking_enabled():
        record.verdict = autoguard.verdict()
        pytest.fail(f"{record.verdict} (--graphcheck-strict)", pytrace=False)
    return result


def marker_accept(finding: Any) -> str:
    """The marker argument that accepts ``finding`` in a marked test."""
    return f"@pytest.mark.graphcheck({finding.accept_line()})"


def _act(summary: str, on_failure: str) -> None:
    """What ``on_failure`` (from ``[tool.graphcheck]``) says a marked test with findings does."""
    if on_failure == "raise":
        pytest.fail(summary, pytrace=False)
    elif on_failure == "warn":
        import warnings

        from .findings import GraphCheckWarning

        warnings.warn(summary, GraphCheckWarning, stacklevel=2)
    elif on_failure == "log":
        import logging

        logging.getLogger("graphcheck").warning("%s", summary)


# -- reporting ----------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Add a ``graphcheck`` section to the report of a phase whose validations found something."""
    report = yield
    record = item.stash.get(_TEST, None)
    if record is not None:
        # A GraphCheckError failing the test shows its report already: print it once.
        error = call.excinfo.value if call.excinfo is not None else None
        shown = getattr(error, "report", None)
        text = record.take_unshown_findings(shown)
        verdict = shown.headline() if shown is not None else record.verdict if call.when == "call" else None
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.failed and verdict and crash is not None:
            crash.message = verdict  # the short summary line starts with the verdict
        if text:
            report.sections.append(("graphcheck" if call.when == "call" else f"graphcheck {call.when}", text))
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the JSON report when a path was given."""
    record = session.config.stash.get(_SESSION, None)
    if record is None or record.report_path is None:
        return
    path = record.report_path
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker:
        # Under pytest-xdist each worker writes its own file rather than all overwriting one.
        path = path.with_name(f"{path.stem}.{worker}{path.suffix}")
    from ._outputs import write_output

    try:
        write_output(path, json.dumps(record.to_dict(), indent=2) + "\n")
    except OSError as error:  # checked writable at the start; something changed since
        record.write_error = f"graphcheck: cannot write --graphcheck-report {path}: {error.strerror or error}"
    else:
        record.written_to = path


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """End the session's output with graphcheck's totals, when a test used the plugin."""
    record = config.stash.get(_SESSION, None)
    if record is None or (not record.tests and record.written_to is None and record.write_error is None):
        return
    terminalreporter.write_sep("-", "graphcheck")
    terminalreporter.write_line(record.summary_line())
    if record.written_to is not None:
        from .schema import relative_path

        terminalreporter.write_line(f"graphcheck: JSON report written to {relative_path(record.written_to)}")
    if record.write_error is not None:
        terminalreporter.write_line(record.write_error, red=True)

"""How a capture site is checked: one frozen, validated set of options.

:class:`CaptureOptions` is what :func:`graphcheck.capture`, :class:`graphcheck.GraphGuard`,
:class:`graphcheck.AutoGuard`, the command line and the pytest plugin all take, as an
object or as keywords (as ``cuda.core``'s option dataclasses are)::

    strict = gc.CaptureOptions(strict_ownership=True, allow=["scalar-drift"])
    gc.capture(sim.step, options=strict)
    gc.capture(sim.step, strict_ownership=True, allow=["scalar-drift"])   # the same

Every value is checked once, here, with an error that names the value and what to pass.
Warp-free: a front end can build and validate options before Warp is imported.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._choices import FALLBACKS, REPLAY_CHECKS
from ._words import article
from .findings import Allow, allowances, check_on_failure

__all__ = [
    "FALLBACKS",
    "REPLAY_CHECKS",
    "CaptureOptions",
    "check_count",
    "check_fallback",
    "check_method",
    "check_option_names",
    "check_stream",
    "check_tolerance",
    "check_warmup",
]


def check_fallback(fallback: str | None) -> str | None:
    """``fallback`` itself, or a ValueError listing the accepted values."""
    if fallback is not None and fallback not in FALLBACKS:
        raise ValueError(
            f"fallback must be None, 'eager' (call the step instead of replaying a graph that fails its checks) "
            f"or 'recapture' (capture it again), got {fallback!r}"
        )
    return fallback


def check_warmup(warmup: Any) -> int | None:
    """``warmup`` itself, or a ValueError saying what to pass."""
    if warmup is not None and (not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0):
        raise ValueError(
            f"warmup must be None (the default: one more eager call after the capture when it differs from the "
            f"reference call) or a number of eager calls >= 0 before the reference call, got {warmup!r}"
        )
    return warmup


def check_count(name: str, value: Any, least: int, why: str = "") -> int:
    """``value`` itself when it is an integer (not a bool) >= ``least``, else a one-line
    ValueError naming ``name``, ``why`` that least and the value given."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        because = f" ({why})" if why else ""
        raise ValueError(f"{name} must be an integer >= {least}{because}, got {value!r}")
    return value


def check_tolerance(name: str, value: Any) -> float:
    """``value`` itself when it is a number (not a bool) >= 0, else a one-line ValueError naming it."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return value


def check_method(method: Any) -> str:
    """``method`` itself when it is a non-empty str, else a one-line TypeError naming it."""
    if not isinstance(method, str) or not method:
        raise TypeError(f"method must be the name of the producer's step method (a str, like 'step'), got {method!r}")
    return method


def check_stream(stream: Any) -> Any:
    """``stream`` itself when it is None or a ``wp.Stream``, else a TypeError saying what to pass
    (told by its type's name: this module imports no Warp)."""
    if stream is not None and not (type(stream).__name__ == "Stream" and hasattr(stream, "cuda_stream")):
        raise TypeError(
            f"stream must be None (the device's current stream) or a wp.Stream, got {stream!r} "
            f"({article(type(stream).__name__)})"
        )
    return stream


#: ``wp.CaptureMode``'s values (GLOBAL, THREAD_LOCAL, RELAXED), which mirror CUDA's stream capture modes.
CAPTURE_MODES = (0, 1, 2)


def check_option_names(keywords: Iterable[str], *, also: Sequence[str] = (), call: str = "capture()") -> None:
    """A TypeError for the first of ``keywords`` that is neither a capture option nor one of
    ``also``, naming the closest name and where a step's own keyword arguments go."""
    accepted = (*also, *_FIELDS)
    for name in keywords:
        if name not in accepted:
            close = difflib.get_close_matches(name, accepted, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(
                f"{call} got an unknown option {name!r}{hint}; pass the step's own keyword arguments as "
                f"kwargs={{{name!r}: ...}}. The options are: {', '.join(accepted)}"
            )


@dataclass(frozen=True)
class CaptureOptions:
    """How graphcheck checks a capture site.

    Attributes:
        on_failure: ``"raise"`` (:class:`~graphcheck.GraphCheckError`), ``"warn"``
            (:class:`~graphcheck.GraphCheckWarning`), ``"log"`` (a warning on the
            ``graphcheck`` logger) or ``"ignore"`` (keep the report, do nothing).
        allow: finding kinds, or :class:`~graphcheck.Allow` objects, to accept (a kind,
            or an iterable of them; kept as a tuple of ``Allow``).
        replay_check: when :meth:`CheckedGraph.launch` checks the baked addresses:
            ``"always"`` (every launch; a full check only when the owners' baked arrays
            changed), ``"first"`` (the first launch only) or ``"never"``.
        revalidate: validate again, reference call and all, a site that passed before in
            this process (by default a second capture at the same place, of the same
            buffers, skips the reference call and is compared with the validated capture).
        allow_foreign_nodes: on CUDA, accept graph nodes no Warp operation made (work of
            other libraries captured in the block).
        strict_ownership: report every buffer made during the call as a
            ``per-call-allocation``, device temporaries included (by default those are
            fine: Warp makes memory allocated during a capture graph-owned).
        fallback: ``"eager"`` or ``"recapture"``: ``launch()`` calls the step (or captures
            it again) in place of a graph that fails its checks, and findings warn instead
            of raising (see :mod:`graphcheck.fallback`); None: replay.
        stream: passed to ``wp.ScopedCapture``: None or a ``wp.Stream``.
        force_module_load: passed to ``wp.ScopedCapture``: None, True or False.
        capture_mode: passed to ``wp.ScopedCapture``: None (Warp's default) or a
            ``wp.CaptureMode``.
        warmup: eager calls of the reference before the reference call, for work only
            the first calls do (lazy set-up, a warm start). None (the default): none, and
            when the capture differs from the reference call (its operations, a scalar, a
            dimension, a copy, a buffer), graphcheck replays the capture once, calls the
            step once more eagerly and captures it again, and judges and returns that
            capture (two extra steps; see the first call page of the docs); 0: none and no
            such retry.
    """

    on_failure: str = "raise"
    allow: tuple[Allow, ...] = ()
    replay_check: str = "always"
    revalidate: bool = False
    allow_foreign_nodes: bool = False
    strict_ownership: bool = False
    fallback: str | None = None
    stream: Any = None
    force_module_load: bool | None = None
    capture_mode: Any = None
    warmup: int | None = None

    def __post_init__(self) -> None:
        check_on_failure(self.on_failure)
        object.__setattr__(self, "allow", allowances(self.allow))
        if self.replay_check not in REPLAY_CHECKS:
            raise ValueError(
                f"replay_check must be one of {', '.join(map(repr, REPLAY_CHECKS))}, got {self.replay_check!r}"
            )
        check_fallback(self.fallback)
        check_warmup(self.warmup)
        for name in ("revalidate", "allow_foreign_nodes", "strict_ownership"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r} ({article(type(value).__name__)})")
        if self.force_module_load is not None and not isinstance(self.force_module_load, bool):
            raise TypeError(
                f"force_module_load must be None, True or False, got {self.force_module_load!r} "
                f"({article(type(self.force_module_load).__name__)})"
            )
        check_stream(self.stream)
        mode = self.capture_mode
        if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int) or mode not in CAPTURE_MODES):
            raise ValueError(
                f"capture_mode must be None (Warp's default) or a wp.CaptureMode (GLOBAL, THREAD_LOCAL or RELAXED), "
                f"got {mode!r}"
            )

    @classmethod
    def of(cls, options: CaptureOptions | None = None, /, **keywords: Any) -> CaptureOptions:
        """``options`` (or the defaults) with ``keywords`` in place of their fields.

        Raises:
            TypeError: for an unknown keyword (naming the closest option) or an
                ``options`` that is not a CaptureOptions.
        """
        unknown = [name for name in keywords if name not in _FIELDS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], _FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"unknown capture option {unknown[0]!r}{hint}; the options are: {', '.join(_FIELDS)}")
        if options is None:
            return cls(**keywords)
        if not isinstance(options, cls):
            raise TypeError(
                f"options= takes a graphcheck.CaptureOptions, got {options!r} ({article(type(options).__name__)}); "
                "or pass the options as keywords"
            )
        return dataclasses.replace(options, **keywords) if keywords else options

    @classmethod
    def split(cls, keywords: dict[str, Any]) -> dict[str, Any]:
        """Take the capture options out of ``keywords`` (what is left is the step's own)."""
        return {name: keywords.pop(name) for name in _FIELDS if name in keywords}

    def scoped_capture(self) -> dict[str, Any]:
        """The keyword arguments for ``wp.ScopedCapture``."""
        out: dict[str, Any] = {"stream": self.stream, "force_module_load": self.force_module_load}
        if self.capture_mode is not None:
            out["capture_mode"] = self.capture_mode
        return out


_FIELDS = tuple(f.name for f in dataclasses.fields(CaptureOptions))

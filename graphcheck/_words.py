"""Small words for messages: the indefinite article (``an int``, ``a str``, ``an Empty``), and
why a callable cannot be a step (it runs none of its body when called).

A leaf module with no imports of graphcheck's or Warp's.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["article", "note_on", "step_result_that_ran_nothing", "step_that_runs_nothing"]


def article(noun: str) -> str:
    """``noun`` after its indefinite article, by its first letter: ``an int``, ``a Sim``, ``an ndarray``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def step_that_runs_nothing(fn: Any, what: str) -> str | None:
    """Why ``fn`` cannot be a step, named ``what`` in the line: a generator or a coroutine
    function runs none of its body when called, so it launches nothing to capture; None for
    any other callable (one that issues no operation on purpose included)."""
    kind = (
        "a generator function" if inspect.isgeneratorfunction(fn)
        else "an async generator function" if inspect.isasyncgenfunction(fn)
        else "a coroutine function (async def)" if inspect.iscoroutinefunction(fn)
        else None
    )  # fmt: skip
    if kind is None:
        return None
    returned = "a coroutine" if "async def" in kind else "a generator"
    return f"{what} is {kind}: calling it returns {returned} and {_RUNS_NOTHING}"


def step_result_that_ran_nothing(result: Any, what: str) -> str | None:
    """Why a step's call that returned ``result`` ran nothing (it returned a generator or a
    coroutine, closed here so that Python does not warn it was never awaited); None for any
    other result."""
    returned = (
        "a generator" if inspect.isgenerator(result)
        else "a coroutine" if inspect.iscoroutine(result)
        else "an async generator" if inspect.isasyncgen(result)
        else None
    )  # fmt: skip
    if returned is None:
        return None
    if returned != "an async generator":
        result.close()
    return (
        f"{what} returned {returned}: its body has not run, so the call launched nothing to capture: check a "
        "step that does its work when called"
    )


_RUNS_NOTHING = "runs none of its body, so it launches nothing to capture: check a step that does its work when called"


def note_on(error: BaseException, note: str) -> None:
    """Add ``note`` to the user's exception ``error`` (PEP 678, Python 3.11+; nothing on 3.10):
    which of graphcheck's calls of the step raised it. The exception itself is unchanged."""
    if hasattr(error, "add_note"):
        error.add_note(note)

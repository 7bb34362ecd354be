"""Newton's examples built as their own command line builds them, headless on the CPU, for judging."""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from typing import Any
from unittest import mock

import warp as wp


class _Built(Exception):  # carries the example out of the module's main block
    def __init__(self, example: Any):
        super().__init__("built")
        self.example = example


def without_graphs(example: Any) -> Any:
    """Drop the graphs the example captured itself (graphcheck captures its call; twins hold no graphs)."""
    for name, value in list(vars(example).items()):
        if isinstance(value, wp.Graph):
            setattr(example, name, None)
    return example


def build_example(module: str, argv: Sequence[str] = ()) -> Any:
    """Run ``module``'s main block with a null viewer on the CPU, stopping before it steps: the Example it built."""
    import newton.examples

    def stop(example: Any, args: Any) -> None:
        raise _Built(example)

    command = [module, "--device", "cpu", "--viewer", "null", "--quiet", *argv]
    with mock.patch.object(sys, "argv", command), mock.patch.object(newton.examples, "run", stop):
        try:
            runpy.run_module(module, run_name="__main__")
        except _Built as built:
            return without_graphs(built.example)
    raise RuntimeError(f"{module}'s main block returned without building an example through newton.examples.run")

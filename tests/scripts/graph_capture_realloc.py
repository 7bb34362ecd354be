"""Warp's example_graph_capture with its output reallocated before each replay.

``Example.__init__`` captures ``fbm`` (which writes ``pixel_values``) in a graph; here each
frame first replaces ``pixel_values`` with a fresh array, so the graph keeps writing the old
one and the picture stays black. Run it under ``graphcheck run``: every ``wp.capture_launch``
must report a ``stale-pointer``.
"""

import warp as wp
from warp.examples.core.example_graph_capture import Example

wp.config.log_level = wp.LOG_WARNING  # no start-up banner

with wp.ScopedDevice("cpu"):
    example = Example()
    for _ in range(2):
        example.pixel_values = wp.zeros_like(example.pixel_values)  # the bug: the graph holds the old address
        example.step()
    print("picture written:", bool(example.pixel_values.numpy().any()))

"""Warp's example_graph_capture stepped three frames, then a digest of its picture.

``Example.__init__`` captures ``fbm``, which doubles ``self.frequency`` at each of its 16
launches; ``step`` resets the frequency before each replay. The digest is the program's
output: ``graphcheck run`` must leave it as ``python`` computes it, with or without
``--reference-call``.
"""

import hashlib

import warp as wp
from warp.examples.core.example_graph_capture import Example

wp.config.quiet = True

with wp.ScopedDevice("cpu"):
    example = Example()
    for _ in range(3):
        example.step()
    print("picture:", hashlib.sha256(example.pixel_values.numpy().tobytes()).hexdigest())

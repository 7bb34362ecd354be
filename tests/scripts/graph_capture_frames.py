"""Warp's example_graph_capture stepped three frames, then a digest of its picture.

``Example.__init__`` captures ``fbm``, which doubles ``self.frequency`` at each of its 16
launches; ``step`` resets the frequency before each replay. The digest is the program's
output, and so is everything else it prints (Warp's start-up banner, its module-load lines,
the example's timers): ``graphcheck run`` must leave all of it as ``python`` prints it, with
or without ``--reference-call``. Warp's configuration is the program's own: it sets none.
"""

import hashlib

import warp as wp
from warp.examples.core.example_graph_capture import Example

print("log level:", wp.config.log_level)
with wp.ScopedDevice("cpu"):
    example = Example()
    for _ in range(3):
        example.step()
    print("picture:", hashlib.sha256(example.pixel_values.numpy().tobytes()).hexdigest())

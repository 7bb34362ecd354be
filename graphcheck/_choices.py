"""The values every surface accepts for ``on_failure``, ``replay_check`` and ``fallback``.

One definition for the capture options, the findings and the project settings; a leaf
with no imports, so the pytest plugin's settings can check them without loading more.
"""

#: What a failed check does: raise, warn, log, or nothing.
ON_FAILURE = ("raise", "warn", "log", "ignore")

#: When a checked graph's ``launch()`` checks its baked addresses.
REPLAY_CHECKS = ("first", "always", "never")

#: What ``launch()`` runs in place of a graph that fails its checks (see :mod:`graphcheck.fallback`).
FALLBACKS = ("eager", "recapture")

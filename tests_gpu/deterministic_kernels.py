"""A kernel for deterministic mode (``wp.config.deterministic``), in a module of its own:
the mode is part of how Warp builds a module, so no other kernel shares the rebuild."""

import warp as wp


@wp.kernel
def atomic_total(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])

"""The Warp release under test, for tests of a feature an older supported release lacks.

Such a test is skipped there, with a reason naming the release, rather than weakened.
"""

import pytest
import warp as wp

WARP_RELEASE = tuple(int(part) for part in wp.__version__.split(".")[:2])


def needs_warp(release: tuple[int, int], feature: str) -> pytest.MarkDecorator:
    """Skip unless the installed Warp is ``release`` or newer, which added ``feature``."""
    return pytest.mark.skipif(
        release > WARP_RELEASE,
        reason=f"warp-lang {wp.__version__} lacks {feature} (added in Warp {release[0]}.{release[1]})",
    )


#: Warp 1.16 made a CPU capture fail on a reduction read back to the host.
CAPTURE_ERROR_ON_READBACK = needs_warp((1, 16), "the CPU capture error for array_sum() without an out array")

#: Warp 1.16 made CPU graphs record HashGrid.build (before, the graph keeps the capture's grid).
CPU_GRAPH_RECORDS_HASH_GRID = needs_warp((1, 16), "CPU graph capture of HashGrid.build")

#: Warp 1.16 made CPU graphs record array_sum, array_inner, HashGrid.build and BVH refits
#: (before, a graph keeps what the capture computed, and graphcheck adds a capture-error).
CPU_GRAPH_RECORDS_NATIVES = needs_warp(
    (1, 16), "CPU graph capture of array_sum, array_inner, HashGrid.build and BVH refits"
)

#: wp.Texture2D (checked as a resource, like a mesh or volume).
TEXTURES = pytest.mark.skipif(not hasattr(wp, "Texture2D"), reason=f"warp-lang {wp.__version__} has no textures")

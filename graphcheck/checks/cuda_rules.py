"""On the CPU, what would break the same capture on CUDA: a readback or a synchronisation
inside the captured call is a ``capture-error``."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..findings import Finding, make_finding
from .vocabulary import Outcome

if TYPE_CHECKING:
    from ..record import LaunchTrace

__all__ = ["check", "cuda_rules"]


def cuda_rules(captured: LaunchTrace) -> list[Finding]:
    """On the CPU, what would break the same capture on CUDA: one finding per readback or
    synchronisation (and call site) inside the captured call.

    A CPU capture defers its operations and runs a readback at once, so the readback sees
    data the graph has not computed yet; a CUDA capture cannot run one at all.
    """
    findings = []
    for (what, site), count in Counter((sync.what, sync.site) for sync in captured.host_syncs).items():
        times = f" ({count} times)" if count > 1 else ""
        findings.append(
            make_finding(
                "capture-error",
                f"{what} inside the captured call{times}",
                site=site,
                captured=what,
                values=(
                    "works on the CPU, fails in a CUDA capture (a CUDA stream cannot synchronise or copy to the "
                    "host while capturing), and on the CPU it reads data the deferred graph has not computed yet"
                ),
                detail={"cpu_only": True},
            )
        )
    return findings


def check(captured: LaunchTrace, *, device: str) -> Outcome:
    """:func:`cuda_rules` on a CPU capture (a CUDA capture cannot run them at all)."""
    return Outcome(cuda_rules(captured)) if device.startswith("cpu") else Outcome()

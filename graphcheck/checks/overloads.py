"""On the CPU, overloads of one generic kernel launched in one capture: Warp's CPU graphs
replay one overload's code for all of them (a ``capture-error``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _warp
from ..findings import Finding, make_finding
from .vocabulary import Outcome

if TYPE_CHECKING:
    from ..operations import LaunchRecord
    from ..record import LaunchTrace

__all__ = ["check", "cpu_overloads"]


def cpu_overloads(captured: LaunchTrace) -> list[Finding]:
    """On the CPU, one ``capture-error`` per generic kernel launched with two overloads or
    more in one capture.

    Warp's CPU graphs register a launched kernel's code under its module's hash and its key
    (``wp_apic_register_cpu_kernel`` in Warp 1.19's ``native/apic.cpp``; the last launch
    registered wins), which the overloads of a generic kernel share once they are built into
    one module, as a reference call or any warm-up builds them: every replay runs one
    overload's code for all of them. Every launch, address and scalar matches the eager call,
    so it is Warp's rule, not a comparison, that finds it.
    """
    if not _warp.cpu_graph_shares_overload_code():
        return []
    first: dict[int, tuple[int, LaunchRecord]] = {}  # id(kernel) -> its first launch
    for index, record in enumerate(captured.records):
        kernel = record.kernel_object
        if kernel is not None and id(kernel) not in first and record.kind == "launch":
            first[id(kernel)] = (index, record)
    # Kernels of one key and module that are the same code (a kernel factory called twice
    # with the same options) run the same function from the shared entry: one overload.
    overloads: dict[tuple[str, int], dict[Any, tuple[int, LaunchRecord]]] = {}
    for index, record in first.values():
        kernel = record.kernel_object
        key = (str(getattr(kernel, "key", "")), id(getattr(kernel, "module", None)))
        overloads.setdefault(key, {}).setdefault(_warp.cpu_kernel_code(kernel), (index, record))
    findings = []
    for codes in overloads.values():
        launched = list(codes.values())  # in the order of their first launch
        if len(launched) < 2:
            continue
        index, record = launched[0]
        sites = ", ".join(dict.fromkeys(r.site.short for _, r in launched))
        findings.append(
            make_finding(
                "capture-error",
                f"{len(launched)} overloads of the generic kernel {record.kernel} in one CPU capture",
                kernel=record.kernel,
                index=index,
                site=record.site,
                captured=len(launched),
                values=(
                    f"launched at {sites}: warp-lang {_warp.WARP_VERSION}'s CPU graphs keep one entry of code per "
                    "kernel key and module hash, which the overloads share, so every replay runs the last "
                    "launched overload's code for all of them (on other dtypes: wrong values, writes past the smaller "
                    "arrays)"
                ),
                detail={"overloads": len(launched), "launched at": [r.site for _, r in launched]},
                fix=(
                    "give each dtype a kernel of its own (separate @wp.kernel functions, not overloads of one generic "
                    "kernel), or capture on a CUDA device, whose graph nodes each hold their own function"
                ),
            )
        )
    return findings


def check(captured: LaunchTrace, *, device: str) -> Outcome:
    """:func:`cpu_overloads` on a CPU capture (a CUDA graph's nodes each hold their own function)."""
    return Outcome(cpu_overloads(captured)) if device.startswith("cpu") else Outcome()

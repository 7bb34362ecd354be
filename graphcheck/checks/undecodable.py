"""Arguments graphcheck cannot decode: compared by their bytes, so a change is still found,
but an address inside one is not checked; each is said in a note."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .._memo import ByIdentity
from ..params import Opaque, ParamKind, ParamSpec
from .vocabulary import Outcome

if TYPE_CHECKING:
    from ..record import LaunchTrace

__all__ = ["check", "undecoded"]


def undecoded(captured: LaunchTrace) -> list[str]:
    """Notes naming each argument whose type graphcheck cannot decode (compared by its bytes,
    so a change is still found, but an address inside it is not checked).

    Read from each kernel's parameter layout, once per kernel: decoding every launch's
    arguments only to look for such a type would cost more than the checks themselves.
    """
    seen: dict[tuple[str, str], str] = {}
    layouts: set[int] = set()
    kernels: set[tuple[int, bool]] = set()  # (kernel, direction) of the CPU launches read
    for record in captured.records:
        if record.kind == "launch":
            if record.cuda is None:  # a CPU launch has no hidden parameters: one per kernel is enough
                key = (id(record.kernel_object), record.adjoint)
                if key in kernels:
                    continue
                kernels.add(key)
            layout = record.layout
            if id(layout) in layouts and len(record.param_bytes) <= len(layout):
                continue
            layouts.add(id(layout))
            extra = len(record.param_bytes) - len(layout)
            found = [*_opaque_in(layout)]
            found += [(f"param{len(layout) + i}", "hidden parameter") for i in range(max(extra, 0))]
        else:
            found = [(name, value.type_name) for name, value in record.args.items() if isinstance(value, Opaque)]
        for name, type_name in found:
            seen.setdefault((record.kernel, name), type_name)
    return [
        f"{kernel} argument {name!r} has type {type_name}, which graphcheck cannot decode: it is compared by its "
        "bytes, and no address inside it is checked"
        for (kernel, name), type_name in seen.items()
    ]


# (name, type name) of each argument of a layout graphcheck cannot decode. Every capture
# reads the layout of each kernel it launched (MuJoCo Warp's step: about 60, of up to 40
# parameters), almost never finding one: each layout is read once.
_opaque_in: ByIdentity[tuple[ParamSpec, ...], tuple[tuple[str, str], ...]] = ByIdentity(
    lambda layout: tuple((f"{prefix}{spec.name}", str(spec.dtype or "?")) for prefix, spec in _opaque(layout))
)


def _opaque(specs: Iterable[ParamSpec], prefix: str = "") -> Iterator[tuple[str, ParamSpec]]:
    for spec in specs:
        if spec.kind is ParamKind.OPAQUE:
            yield prefix, spec
        elif spec.kind is ParamKind.STRUCT:
            yield from _opaque(spec.children, f"{prefix}{spec.name}.")


def check(captured: LaunchTrace) -> Outcome:
    """:func:`undecoded` as a stage: notes only."""
    return Outcome(notes=undecoded(captured))

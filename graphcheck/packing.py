"""A kernel's parameter block as Warp packs it, for decoding recorded bytes.

Example::

    from graphcheck.packing import expected_params, kernel_layout
    from graphcheck.params import decode

    block = expected_params(integrate, n, inputs=[x, v, 0.01], device="cpu")
    decode(kernel_layout(integrate), block)["dt"]   # 0.01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _warp
from .params import ParamSpec

__all__ = ["expected_params", "kernel_layout"]


def expected_params(
    kernel: Any,
    dim: Any,
    inputs: Sequence[Any] = (),
    outputs: Sequence[Any] = (),
    device: Any = None,
    *,
    adjoint: bool = False,
    adj_inputs: Sequence[Any] = (),
    adj_outputs: Sequence[Any] = (),
) -> tuple[bytes, ...]:
    """The exact parameter block a ``wp.launch`` with these arguments passes, on any device.

    Computed with Warp's own packing, without launching: launch bounds, then every
    argument in the kernel's layout (then every adjoint argument). The recorded
    :attr:`~graphcheck.LaunchRecord.param_bytes` of such a launch equal it byte for byte,
    and so do the parameters of the kernel node a CUDA capture bakes.

    Example::

        block = expected_params(integrate, n, inputs=[x, v, 0.01], device="cpu")
        decode(kernel_layout(integrate), block)["dt"]   # 0.01
    """
    return _warp.pack_params(kernel, dim, inputs, outputs, device, adjoint, adj_inputs, adj_outputs)


def kernel_layout(kernel: Any, adjoint: bool = False) -> tuple[ParamSpec, ...]:
    """A kernel's parameter layout (launch bounds first), for :func:`decode` and :func:`field_at`."""
    return _warp.kernel_layout(kernel, adjoint)

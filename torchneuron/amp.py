"""``torch.neuron.amp``: mixed precision with the shape of ``torch.cuda.amp``.

``autocast``, ``GradScaler``, ``custom_fwd`` and ``custom_bwd`` are PyTorch's device-generic
``torch.amp`` objects bound to the ``neuron`` device, so code written against
``torch.cuda.amp`` runs with one name changed. Unlike ``torch.cuda.amp`` they are not
deprecated here (``torch.amp.*(..., "neuron")`` is the same thing).

The scaler's kernels (``_amp_foreach_non_finite_check_and_unscale_``,
``_amp_update_scale_``) run natively on the device (no CPU fallback).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "amp_definitely_not_available"]


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast("neuron", ...)``; default dtype float16, as ``torch.cuda.amp.autocast``.

    Args: ``enabled`` (bool), ``dtype`` (``torch.float16`` or ``torch.bfloat16``),
    ``cache_enabled`` (bool). Usable as a context manager or a decorator.
    """

    def __init__(
        self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True
    ):
        super().__init__("neuron", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("neuron", ...)`` with ``torch.cuda.amp.GradScaler``'s arguments.

    ``init_scale`` (float, default 2**16), ``growth_factor`` (2.0), ``backoff_factor`` (0.5),
    ``growth_interval`` (steps, 2000), ``enabled`` (bool). The scale and the found-inf flags
    are float32 tensors on the neuron device.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "neuron",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


def custom_fwd(fwd: Callable | None = None, *, cast_inputs: torch.dtype | None = None) -> Any:
    """``torch.amp.custom_fwd(fwd, device_type="neuron", cast_inputs=...)``: a custom
    autograd Function's ``forward`` runs with the caller's autocast state (or, with
    ``cast_inputs``, autocast off and floating inputs cast to that dtype)."""
    return functools.partial(torch.amp.custom_fwd, device_type="neuron")(
        fwd=fwd, cast_inputs=cast_inputs
    )


def custom_bwd(bwd: Callable) -> Callable:
    """``torch.amp.custom_bwd(bwd, device_type="neuron")``: ``backward`` runs with the
    autocast state its ``forward`` had."""
    return functools.partial(torch.amp.custom_bwd, device_type="neuron")(bwd)


def amp_definitely_not_available() -> bool:
    """True when no NeuronCore is visible (``torch.cuda.amp.amp_definitely_not_available``)."""
    return not torch.neuron.is_available()

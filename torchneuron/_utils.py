"""Device-index parsing shared by ``torch.neuron`` (and torch.serialization)."""

from __future__ import annotations

from typing import Any

import torch

from . import _C


def _get_device_index(device: Any, optional: bool = False) -> int:
    """Index of a neuron device given as int, str ("neuron:1") or torch.device.

    None (with ``optional``) and a device without an index mean the current
    device. Raises ValueError for another device type, ``torch.AcceleratorError``
    (a RuntimeError, "invalid device ordinal", as CUDA) for an index that is
    not visible.
    """
    if device is None:
        if optional:
            return _C._get_device()
        raise ValueError("expected a neuron device, got None")
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        idx = device.index if device.index is not None else _C._get_device()
    elif isinstance(device, int):
        idx = device
    else:
        raise TypeError(f"expected a neuron device, int or str, got {type(device).__name__}")
    n = _C._device_count()
    if idx < -1 or idx >= n:
        raise torch.AcceleratorError(
            f"neuron error: invalid device ordinal (invalid neuron device index {idx}: {n} "
            "NeuronCore(s) visible; NEURON_RT_VISIBLE_CORES, NEURON_LOGICAL_NC_CONFIG)"
        )
    return _C._get_device() if idx == -1 else idx

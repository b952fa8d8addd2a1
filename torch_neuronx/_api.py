"""TorchNeuron's top-level device functions (``torch_neuronx.device_count()`` ...) with
TorchNeuron's meanings, computed by torchneuron."""

from __future__ import annotations

from typing import Any

import torch

from torchneuron import device_module as _dm
from torchneuron._utils import _get_device_index as _tn_index

from ._not_emulated import not_emulated


def is_neuron_runtime_initialized() -> bool:
    """True: torchneuron's runtime starts when the package is imported."""
    return _dm.is_initialized()


def _lazy_init() -> None:
    """Nothing to do: the runtime starts on first use (TorchNeuron starts NRT here).
    Raises RuntimeError in a process forked after the device was used, as TorchNeuron."""
    if _dm._is_in_bad_fork():
        raise RuntimeError(
            "Cannot re-initialize Neuron runtime in forked subprocess. To use Neuron with "
            "multiprocessing, use the 'spawn' start method"
        )


def device_count() -> int:
    """Number of visible logical NeuronCores."""
    return _dm.device_count()


def current_device() -> int:
    return _dm.current_device()


def set_device(device: int) -> None:
    """Make NeuronCore ``device`` (an int) current. ValueError outside
    [0, device_count()), as TorchNeuron's."""
    n = device_count()
    if not isinstance(device, int) or device < 0 or device >= n:
        raise ValueError(f"Invalid device id: {device}. Valid range is 0 to {n - 1}")
    _dm.set_device(device)


def get_device_properties(device: Any = None):
    """Properties of a NeuronCore: ``name``, ``total_memory`` (bytes of its HBM), ...
    ``device``: int or "neuron:N"; ValueError for another device or a bad index."""
    if device is None:
        idx = current_device()
    elif isinstance(device, (str, torch.device)):
        d = torch.device(device)
        if d.type != "neuron":
            raise ValueError(f"Expected neuron device, got {d.type}")
        idx = d.index if d.index is not None else current_device()
    else:
        idx = int(device)
    if idx < 0 or idx >= device_count():
        raise ValueError(f"Invalid device id: {idx}")
    return _dm.get_device_properties(idx)


def empty_cache() -> None:
    """Release cached, unused HBM of every NeuronCore."""
    _dm.empty_cache()


def get_fallback_ops() -> list[str]:
    """Names of the operators that ran on the CPU instead of the device since the last
    ``clear_op_tracking()`` (from ``torch.neuron.fallback_stats()``), sorted."""
    return sorted(_dm.fallback_stats())


def get_executed_ops() -> list[str]:
    """Not emulated: torchneuron keeps no per-operator record of native runs (the
    device rows of ``torch.profiler`` with ProfilerActivity.PrivateUse1 name each
    kernel). Raises NotImplementedError."""
    not_emulated(
        "torch_neuronx.get_executed_ops",
        "no per-operator record of native runs is kept; torch.profiler's PrivateUse1 "
        "rows name each kernel that ran",
    )


def clear_op_tracking() -> None:
    """Forget the fallback records (``get_fallback_ops()`` is empty afterwards)."""
    _dm.reset_fallback_stats()


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int | None:
    """Index of ``device`` (int, "neuron:N", torch.device); None for None when
    ``optional`` (TorchNeuron's convention), else the current device."""
    if device is None:
        return None if optional else current_device()
    if isinstance(device, (str, torch.device)) and torch.device(device).type != "neuron":
        raise ValueError(f"Expected neuron device, got {torch.device(device).type}")
    return _tn_index(device)


def synchronize(device: Any = None) -> None:
    """Wait for all work on every stream of the NeuronCore (default: the current one)."""
    _dm.synchronize(device)

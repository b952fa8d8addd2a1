"""``torch_neuronx.distributed.backend``: the c10d backend ``neuron``, here
torchneuron's (csrc/distributed: ProcessGroupNeuron over Gloo's transport)."""

from __future__ import annotations

from torchneuron.distributed import BACKEND_NAME
from torchneuron.distributed import _create_backend as _create_neuron_process_group

from .._not_emulated import cls

# TorchNeuron's Python ProcessGroup subclass; torchneuron's backend is C++.
ProcessGroupNeuron = cls(
    __name__ + ".ProcessGroupNeuron",
    "torchneuron's c10d backend is a C++ class; create groups with "
    'init_process_group("neuron") or new_group(backend="neuron")',
)

__all__ = ["BACKEND_NAME", "ProcessGroupNeuron", "_create_neuron_process_group"]

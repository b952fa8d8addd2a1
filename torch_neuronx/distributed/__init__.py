"""``torch_neuronx.distributed``: the c10d backend ``neuron`` (torchneuron registers it
on import: ``init_process_group("neuron")``). TorchNeuron's ``backend`` and ``tensor``
submodules are its implementation; here they are torchneuron's."""

from __future__ import annotations

from torchneuron import distributed as backend  # noqa: F401
from torchneuron.distributed import BACKEND_NAME  # noqa: F401

from .._not_emulated import not_emulated as _not_emulated


def __getattr__(name: str):
    if name in ("tensor", "ops", "utils"):
        _not_emulated(
            f"torch_neuronx.distributed.{name}",
            "TorchNeuron's internal collective lowerings and DTensor sharding registrations; "
            "DTensor and functional collectives run on torchneuron's c10d backend",
        )
    raise AttributeError(f"module 'torch_neuronx.distributed' has no attribute '{name}'")

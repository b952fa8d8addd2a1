"""``torch_neuronx.distributed``: the c10d backend ``neuron`` (torchneuron registers it
on import: ``init_process_group("neuron")``). TorchNeuron's submodules ``backend``,
``tensor``, ``ops`` and ``utils`` import; their internals (collective lowerings, DTensor
sharding registrations) are not emulated and raise NotImplementedError when used."""

from __future__ import annotations

from torchneuron.distributed import BACKEND_NAME  # noqa: F401

from . import backend, tensor  # noqa: F401

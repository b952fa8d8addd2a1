"""``torch_neuronx.kernels``: TorchNeuron's per-op kernel compiler (XLA/neuronx-cc kernels
of eager ops). Not part of this emulation (torchneuron's eager kernels are C++):
``BaseNeuronKernel`` exists and raises NotImplementedError when instantiated."""

from __future__ import annotations

from .._not_emulated import cls

BaseNeuronKernel = cls(
    __name__ + ".BaseNeuronKernel",
    "TorchNeuron's internal per-op kernel compiler is not part of this emulation "
    "(eager kernels are torchneuron's C++ natives)",
)

__all__ = ["BaseNeuronKernel"]

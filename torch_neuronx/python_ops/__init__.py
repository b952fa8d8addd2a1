"""``torch_neuronx.python_ops``: TorchNeuron's registry of Python (JAX/MLIR) ATen op
implementations. Not part of this emulation (torchneuron registers its C++ kernels
when imported): the registration functions raise NotImplementedError when called."""

from __future__ import annotations

from .._not_emulated import function

_WHY = (
    "TorchNeuron's internal JAX/MLIR op registry is not part of this emulation "
    "(torchneuron registers its C++ kernels on import)"
)

register_python_operations = function(__name__ + ".register_python_operations", _WHY)
register_mlir_ops = function(__name__ + ".register_mlir_ops", _WHY)

__all__ = ["register_mlir_ops", "register_python_operations"]

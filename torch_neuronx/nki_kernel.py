"""``torch_neuronx.nki_kernel``: TorchNeuron's NKI kernel classes (over neuronxcc's
``UnifiedKernel``). NKI kernels are not emulated: the classes exist and raise
NotImplementedError when instantiated."""

from __future__ import annotations

from ._not_emulated import NKI, cls

_P = __name__ + "."

# No NKI v2 compiler here (TorchNeuron's flag of that compiler's presence).
IS_NKI_V2_AVAILABLE = False

TorchNeuronNKIKernel = cls(_P + "TorchNeuronNKIKernel", NKI)
TorchNeuronNKIKernelV1 = cls(_P + "TorchNeuronNKIKernelV1", NKI, TorchNeuronNKIKernel)
TorchNeuronNKIKernelV2 = cls(_P + "TorchNeuronNKIKernelV2", NKI, TorchNeuronNKIKernel)

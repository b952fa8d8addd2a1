"""``torch_neuronx.nki_hop``: TorchNeuron's NKI kernels as PyTorch operators (``nki_op``,
``wrap_nki`` and the higher-order operator under them). NKI kernels are not emulated:
each name exists and raises NotImplementedError when called or instantiated."""

from __future__ import annotations

from ._not_emulated import NKI, cls, function

_P = __name__ + "."

nki_op = function(_P + "nki_op", NKI)
wrap_nki = function(_P + "wrap_nki", NKI)
is_wrap_nki_enabled = function(_P + "is_wrap_nki_enabled", NKI)
set_wrap_nki_enabled = function(_P + "set_wrap_nki_enabled", NKI)
register_kernel_to_torch = function(_P + "register_kernel_to_torch", NKI)
NKIRegistry = cls(_P + "NKIRegistry", NKI)
NKIKernelWrapper = cls(_P + "NKIKernelWrapper", NKI)
NKIHOPCaller = cls(_P + "NKIHOPCaller", NKI)
nki_kernel_wrapper = function(_P + "nki_kernel_wrapper", NKI)

__all__ = [
    "NKIHOPCaller",
    "NKIKernelWrapper",
    "NKIRegistry",
    "is_wrap_nki_enabled",
    "nki_kernel_wrapper",
    "nki_op",
    "register_kernel_to_torch",
    "set_wrap_nki_enabled",
    "wrap_nki",
]

"""The one error of a TorchNeuron name this emulation does not provide."""

from __future__ import annotations

from typing import NoReturn


def not_emulated(name: str, why: str) -> NoReturn:
    """Raise NotImplementedError naming ``name`` (e.g. "torch_neuronx.nki_op") and why."""
    raise NotImplementedError(
        f"{name} is not emulated by torchneuron: {why} (docs/torch_neuronx.md lists the surface)"
    )

"""The StableHLO text of a model, for the projection: torch-mlir's FX importer
(``torch_mlir.fx.export_and_import``: ``torch.export`` then the Torch-to-StableHLO
conversion, the importer the compile path lowers its graphs with). The model is traced
through a wrapper that returns its output tensors only (``tensors.flatten``), so outputs
``torch.export`` cannot carry (a transformers ``Cache``, a dataclass) do not stop it.
Raises RuntimeError naming what is missing.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ..model.tensors import flatten


def lower(model, inputs: Any) -> tuple[str, str]:
    """``(module_text, how)``: the StableHLO module of ``model`` called on ``inputs``
    (a tuple of positional tensors or a dict of keyword tensors, on the CPU). ``model``
    is modified (buffers made persistent): pass a copy."""
    args, kwargs = (tuple(inputs), {}) if not isinstance(inputs, dict) else ((), dict(inputs))
    try:
        from torch_mlir import fx
    except ImportError as e:
        raise RuntimeError(
            "no StableHLO lowering: torch-mlir is not installed "
            "(pip install torch-mlir==20261001 --no-deps)"
        ) from e
    # torch-mlir's importer finds no state for non-persistent buffers (transformers'
    # position_ids, token_type_ids): make them persistent on this copy
    for m in model.modules():
        m._non_persistent_buffers_set.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = fx.export_and_import(
            _TensorOutputs(model), *args, output_type="stablehlo", **kwargs
        )
    # weights elided: the projection needs their types, not their values (BERT-base's text
    # with them is ~900 MB)
    text = module.operation.get_asm(large_elements_limit=16, large_resource_limit=16)
    return text, "torch_mlir.fx.export_and_import (output_type='stablehlo')"


class _TensorOutputs(torch.nn.Module):
    """``model`` returning the tuple of its output tensors (``tensors.flatten``'s order)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        return tuple(flatten(self.model(*args, **kwargs)).values())

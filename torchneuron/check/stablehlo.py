"""The StableHLO text of a model, for the projection: through ``torchneuron.compiler``
when that package is importable (the compile path's own lowering), else through
torch-mlir's FX importer (``torch_mlir.fx.export_and_import``, ``torch.export`` then
the Torch-to-StableHLO conversion). Raises RuntimeError naming what is missing.
"""
from __future__ import annotations

import warnings
from typing import Any


def lower(model, inputs: Any) -> tuple[str, str]:
    """``(module_text, how)``: the StableHLO module of ``model`` called on ``inputs``
    (a tuple of positional tensors or a dict of keyword tensors, on the CPU). ``model``
    is modified (buffers made persistent): pass a copy."""
    args, kwargs = (tuple(inputs), {}) if not isinstance(inputs, dict) else ((), dict(inputs))
    try:
        from .. import compiler   # the compile path (branch `compile`), when merged
        fn = getattr(compiler, "to_stablehlo", None)
        if fn is not None:
            return str(fn(model, *args, **kwargs)), "torchneuron.compiler.to_stablehlo"
    except ImportError:
        pass
    try:
        from torch_mlir import fx
    except ImportError as e:
        raise RuntimeError("no StableHLO lowering: torchneuron.compiler is not available and torch-mlir is not "
                           "installed (pip install torch-mlir==20261001 --no-deps)") from e
    # torch-mlir's importer finds no state for non-persistent buffers (transformers'
    # position_ids, token_type_ids): make them persistent on this copy
    for m in model.modules():
        m._non_persistent_buffers_set.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = fx.export_and_import(model, *args, output_type="stablehlo", **kwargs)
    # weights elided: the projection needs their types, not their values (BERT-base's text
    # with them is ~900 MB)
    text = module.operation.get_asm(large_elements_limit=16, large_resource_limit=16)
    return text, "torch_mlir.fx.export_and_import (output_type='stablehlo')"

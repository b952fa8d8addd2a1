"""The decomposition table AOTAutograd applies before lowering.

PyTorch's core ATen decompositions plus those torch-mlir's FX path relies on
(torch_mlir.extras.fx_decomp_util), plus dropout in terms of ``rand`` (so the
random-op pass sees one kind of random op). Kept as data, one place to extend.
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

# Ours, beyond core ATen and torch-mlir's list (reasons in comments).
_EXTRA = [
    aten.native_dropout,        # -> rand_like < p: random ops become inputs (passes/)
    aten.bernoulli.p,
]


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    """{OpOverload: decomposition}: core ATen + torch-mlir's FX table + ours."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table as tm_table

    table = dict(core_aten_decompositions())
    table.update(tm_table())
    table.update(get_decompositions(_EXTRA))
    return table

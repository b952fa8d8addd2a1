"""Negative index-tensor values wrapped once (``i + size`` where ``i < 0``) before lowering.

``x[idx]``, ``x[:, idx]``, ``x.take(idx)``, ``x[idx] = v`` and their backward reach the
graph as ``index.Tensor`` / ``index_put`` with the index tensors as given. ATen counts a
negative index from the end; torch-mlir lowers these ops to StableHLO ``gather`` /
``scatter``, which clamp an out-of-range start index, so ``x[torch.tensor([-1])]`` read
row 0 instead of the last row, without an error. Shapes are static here, so each index
tensor of integer dtype gets ``where(i < 0, i + size, i)`` with the size of the dim it
indexes (index k of the list indexes dim k; ``None`` entries keep their dim). Bool masks
are left alone. Values already in ``[0, size)`` are unchanged.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# ops whose args are (self, indices, ...): indices[k] indexes self's dim k
_INDEXING = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._unsafe_index.Tensor,
    aten._unsafe_index_put.default,
}


def _wrapped(g: torch.fx.Graph, idx: torch.fx.Node, size: int) -> torch.fx.Node:
    val = idx.meta["val"]
    neg = g.call_function(aten.lt.Scalar, (idx, 0))
    neg.meta["val"] = aten.lt.Scalar(val, 0)
    up = g.call_function(aten.add.Tensor, (idx, size))
    up.meta["val"] = aten.add.Tensor(val, size)
    w = g.call_function(aten.where.self, (neg, up, idx))
    w.meta["val"] = aten.where.self(neg.meta["val"], up.meta["val"], val)
    return w


def wrap_negative_indices(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    for n in list(g.nodes):
        if n.op != "call_function" or n.target not in _INDEXING:
            continue
        src, indices = n.args[0], n.args[1]
        sval = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
        if sval is None or not isinstance(indices, (list, tuple)):
            continue
        new = list(indices)
        for k, idx in enumerate(indices):
            ival = idx.meta.get("val") if isinstance(idx, torch.fx.Node) else None
            if (
                ival is None
                or k >= sval.dim()
                or ival.dtype == torch.bool
                or ival.dtype.is_floating_point
                or not isinstance(sval.shape[k], int)
            ):
                continue
            with g.inserting_before(n):
                new[k] = _wrapped(g, idx, sval.shape[k])
        if new != list(indices):
            n.args = (src, type(indices)(new)) + tuple(n.args[2:])

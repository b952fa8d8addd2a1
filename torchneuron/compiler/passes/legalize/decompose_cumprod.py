"""``cumprod`` as a Hillis-Steele scan, after narrow_64bit.

torch-mlir has no lowering for ``cumprod`` (``torch.constant.int`` left over), so each
node becomes ceil(log2(n)) steps, each multiplying by the running product shifted
``2**k`` along ``dim`` (ones shifted in). Integer results equal ATen's (wrapping
products are associative); float ones differ in rounding order only.

Why here and not in the AOTAutograd decomposition table: eager narrows int64 cumprod's
input to int32, and ATen's cumprod of int32 accumulates in int64 (its integer
promotion), so products past 2**31 are exact in eager. Decomposed before narrow_64bit,
the scan's int64 ``mul`` nodes were each narrowed and wrapped ([2**20, 2**20] gave
[2**20, 0]); narrowed as one ``cumprod`` node, only its input is.
"""

from __future__ import annotations

import torch

from .._fake_mode import fake_node as _node
from .._fake_mode import graph_fake_mode

aten = torch.ops.aten


def _scan(g, x, dim, dtype):
    v = x.meta["val"]
    if dtype is None and not v.dtype.is_floating_point and not v.dtype.is_complex:
        dtype = torch.int64  # ATen's integer promotion
    if dtype is not None:
        x = _node(g, aten._to_copy.default, (x,), {"dtype": dtype})
        v = x.meta["val"]
    if v.dim() == 0:
        return _node(g, aten.clone.default, (x,))
    d = dim % v.dim()
    n, step = v.shape[d], 1
    while step < n:
        ones = _node(
            g,
            aten.ones.default,
            ([*v.shape[:d], step, *v.shape[d + 1 :]],),
            {"dtype": v.dtype, "device": v.device},
        )
        head = _node(g, aten.slice.Tensor, (x, d, 0, n - step))
        x = _node(g, aten.mul.Tensor, (x, _node(g, aten.cat.default, ([ones, head], d))))
        step *= 2
    return x


def decompose_cumprod(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    nodes = [n for n in g.nodes if n.op == "call_function" and n.target is aten.cumprod.default]
    if not nodes:
        return
    mode = graph_fake_mode(g)
    if mode is None:
        return
    with mode:
        for n in nodes:
            x = n.args[0]
            dim = n.args[1] if len(n.args) > 1 else n.kwargs["dim"]
            dtype = n.args[2] if len(n.args) > 2 else n.kwargs.get("dtype")
            with g.inserting_before(n):
                out = _scan(g, x, dim, dtype)
            n.replace_all_uses_with(out)
            g.erase_node(n)

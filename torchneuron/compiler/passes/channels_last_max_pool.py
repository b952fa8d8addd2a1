"""A 2-d max pooling whose indices are unused pools its input in channels-last order:
``permute(x, NHWC)`` -> ``max_pool3d`` over (H, W, 1) -> ``permute`` back.

XLA:CPU runs convolutions channels-last (it transposes NCHW to NHWC around them) but
gives a reduce-window the default row-major layout of its NCHW operand: in the
ResNet of the compile tests the pool after the stem convolution cost a transpose of
the convolution's result to NCHW (~135 us), the pool itself over the strided NCHW
layout (~250 us) and a transpose back to NHWC for the next convolution. Spelled in
NHWC, the transposes meet XLA's own and cancel, and the window runs over contiguous
channels. Same values (max over the same windows; NaN propagates as in ATen's).
Only inference-style pools (the indices feed no node: a backward pass needs them in
NCHW), dilation 1, no ceil_mode (decompositions.py spells ceil_mode out as padding).
"""
from __future__ import annotations

import operator

import torch

from ._fake_mode import graph_fake_mode

aten = torch.ops.aten


def channels_last_max_pool(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    mode = None
    for n in list(g.nodes):
        if n.op != "call_function" or n.target is not aten.max_pool2d_with_indices.default:
            continue
        args = list(n.args) + [None] * (6 - len(n.args))
        x, k, s, p, d, ceil = args[:6]
        d = d if d is not None else n.kwargs.get("dilation", [1, 1])
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        users = list(n.users)
        if (n.kwargs.keys() - {"dilation"} or xv is None or xv.dim() != 4 or ceil
                or any(v != 1 for v in (d or [1]))
                or not all(u.target is operator.getitem and u.args[1] == 0 for u in users)):
            continue
        def pair(v):   # int[2] arguments may be given as one value
            v = [int(e) for e in v] if isinstance(v, (list, tuple)) else [int(v)]
            return v * 2 if len(v) == 1 else v

        k = pair(k)
        s = pair(s) if s else k
        p = pair(p if p is not None else 0)
        mode = mode or graph_fake_mode(g)
        if mode is None:
            return

        def emit(target, *a):
            node = g.call_function(target, a)
            with mode:
                node.meta["val"] = target(*torch.fx.node.map_arg(a, lambda m: m.meta["val"]))
            return node

        with g.inserting_before(n):
            nhwc = emit(aten.permute.default, x, [0, 2, 3, 1])
            five = emit(aten.unsqueeze.default, nhwc, 1)
            pool = emit(aten.max_pool3d_with_indices.default, five, k + [1], s + [1],
                        p + [0], [1, 1, 1], False)
            vals = emit(operator.getitem, pool, 0)
            four = emit(aten.squeeze.dim, vals, 1)
            nchw = emit(aten.permute.default, four, [0, 3, 1, 2])
        for u in users:
            u.replace_all_uses_with(nchw)
            g.erase_node(u)
        g.erase_node(n)

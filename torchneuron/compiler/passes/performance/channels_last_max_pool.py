"""A 2-d max pooling whose indices are unused pools its input in channels-last order,
as the maximum of its kernel's strided slices: ``permute(x, NHWC)``, -inf padding,
``maximum`` over the kh*kw slices ``[:, i::sh, j::sw, :]``, ``permute`` back.

XLA:CPU runs convolutions channels-last (it transposes NCHW to NHWC around them) but
gives a reduce-window the default row-major layout of its NCHW operand: in the
ResNet of the compile tests the pool after the stem convolution cost a transpose of
the convolution's result to NCHW (~135 us), the pool itself over the strided NCHW
layout (~250 us) and a transpose back to NHWC for the next convolution. Spelled in
NHWC, the transposes meet XLA's own and cancel; as slices and ``maximum`` (one
vectorized loop fusion) rather than an NHWC reduce-window (XLA's loop over windows
took ~340 us). Same values: max over the same windows, -inf where ATen pads, NaN
propagated (``maximum`` propagates it, as ATen's pool does).
Only inference-style pools (the indices feed no node: a backward pass needs them in
NCHW), dilation 1, no ceil_mode (decompositions.py spells ceil_mode out as padding).
"""

from __future__ import annotations

import operator

import torch

from .._fake_mode import fake_node, graph_fake_mode

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
        if (
            not users
            or n.kwargs.keys() - {"dilation"}
            or xv is None
            or xv.dim() != 4
            or ceil
            or any(v != 1 for v in (d or [1]))
            or not all(u.target is operator.getitem and u.args[1] == 0 for u in users)
        ):
            continue

        def pair(v):  # int[2] arguments may be given as one value
            v = [int(e) for e in v] if isinstance(v, (list, tuple)) else [int(v)]
            return v * 2 if len(v) == 1 else v

        k = pair(k)
        s = pair(s) if s else k
        p = pair(p if p is not None else 0)
        mode = mode or graph_fake_mode(g)
        if mode is None:
            return

        def emit(target, *a):
            return fake_node(g, target, a)

        ho, wo = (int(v) for v in users[0].meta["val"].shape[2:])
        with g.inserting_before(n), mode:
            y = emit(aten.permute.default, x, [0, 2, 3, 1])
            if any(p):
                y = emit(
                    aten.constant_pad_nd.default, y, [0, 0, p[1], p[1], p[0], p[0]], float("-inf")
                )
            out = None
            for i in range(k[0]):
                rows = emit(aten.slice.Tensor, y, 1, i, i + s[0] * (ho - 1) + 1, s[0])
                for j in range(k[1]):
                    win = emit(aten.slice.Tensor, rows, 2, j, j + s[1] * (wo - 1) + 1, s[1])
                    out = win if out is None else emit(aten.maximum.default, out, win)
            nchw = emit(aten.permute.default, out, [0, 3, 1, 2])
        for u in users:
            u.replace_all_uses_with(nchw)
            g.erase_node(u)
        g.erase_node(n)

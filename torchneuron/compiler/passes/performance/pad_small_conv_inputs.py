"""A convolution whose kernel covers more positions than its (unpadded) input takes
its zero padding as an explicit ``constant_pad_nd`` instead of in the window.

XLA's algebraic simplifier swaps the operands of such a convolution (input as the
kernel, reversed; XLA's ConvOperandSwapper criterion: product of kernel spatial
sizes > product of input spatial sizes). On XLA:CPU the swapped form runs on Eigen's
generic path: in the ResNet of the compile tests, the 3x3 convolution over 2x2 maps
(128 channels, batch 8) took 1.9 ms of the graph's 4.4 ms; padded explicitly (4x4
input, so no swap) it takes ~0.9 ms. Same values: the pad writes the zeros the
window padding implied. Only where the padding makes the input at least as large as
the kernel (else XLA would swap anyway).
"""

from __future__ import annotations

import math

import torch

from .._fake_mode import fake_node, graph_fake_mode

aten = torch.ops.aten


def pad_small_conv_inputs(gm: torch.fx.GraphModule, plan, example_inputs) -> None:
    g = gm.graph
    mode = None
    for n in list(g.nodes):
        if (
            n.op != "call_function"
            or n.target is not aten.convolution.default
            or len(n.args) != 9
            or n.kwargs
        ):
            continue
        x, w, bias, stride, padding, dilation, transposed, out_pad, groups = n.args
        xv, wv = x.meta.get("val"), w.meta.get("val")
        if transposed or groups != 1 or xv is None or wv is None or not any(padding):
            continue
        in_sp, k_sp = list(xv.shape[2:]), list(wv.shape[2:])
        padded = [s + 2 * p for s, p in zip(in_sp, padding)]
        if not (math.prod(k_sp) > math.prod(in_sp) and math.prod(k_sp) <= math.prod(padded)):
            continue
        mode = mode or graph_fake_mode(g)
        if mode is None:
            return
        pad = []
        for p in reversed(list(padding)):  # constant_pad_nd: last dimension first
            pad += [p, p]
        with g.inserting_before(n), mode:
            xp = fake_node(g, aten.constant_pad_nd.default, (x, pad, 0.0))
        n.args = (xp, w, bias, stride, [0] * len(padding), dilation, transposed, out_pad, groups)

"""Convolutions and their gradients in forms torch-mlir lowers.

``convolution``: transposed convolutions with an ``output_padding`` that differs
between spatial dims.

torch-mlir's lowering applies such an ``output_padding`` to the wrong dims: for
``conv_transpose2d(..., output_padding=(2, 3))`` it inferred a ``23x21`` result where
ATen's is ``22x22``, and the compile failed (an equal padding in every dim is unaffected).
Here the transposed convolution runs with no padding and no output padding (its full
result, ``(in - 1) * stride + dilation * (k - 1) + 1`` per dim), and each spatial dim is
cut to ATen's window: from ``padding`` on, ``output_padding`` longer than the symmetric
crop, zero-filled where that runs past the full result (rows only the bias reaches). The
bias is added last, so those rows get it as ATen's do.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if not transposed or len(set(output_padding)) <= 1:
        return NotImplemented
    n = len(output_padding)
    y = aten.convolution.default(x, w, None, stride, [0] * n, dilation, True, [0] * n, groups)
    for j in range(n):
        dim = y.dim() - n + j
        size = (x.shape[dim] - 1) * stride[j] - 2 * padding[j]
        size += dilation[j] * (w.shape[2 + j] - 1) + output_padding[j] + 1
        short = padding[j] + size - y.shape[dim]
        if short > 0:  # output_padding past the full result: zeros there
            pad = [0, 0] * (y.dim() - 1 - dim) + [0, short]
            y = aten.constant_pad_nd.default(y, pad, 0.0)
        y = aten.slice.Tensor(y, dim, padding[j], padding[j] + size)
    if bias is not None:
        shape = [1] * y.dim()
        shape[y.dim() - n - 1] = -1
        y = aten.add.Tensor(y, aten.view.default(bias, shape))
    return y


def convolution_backward(
    grad,
    x,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    """A convolution's gradient in the form torch-mlir lowers: 2-d, groups=1.
    A 1-d convolution is the 2-d one of a height-1 image (each operand given a height-1
    dim; stride/padding/dilation 1/0/1 in it); a grouped one (depthwise included) is one
    groups=1 gradient per group, concatenated. Lowered as they came, every compiled
    ``nn.Conv1d`` backward failed (``torch.constant.int`` left over) and a grouped 2-d
    one failed XLA's feature_group_count check or gave a wrong shape. Where a stride
    leaves input rows/columns past the last window, the padding is made explicit and
    those are cut off (their gradient is zero). A graph so gets
    ``groups`` convolutions per grouped layer (compile time grows with them).
    Transposed, dilated and 3-d: as forward convolutions (``_as_convolutions``)."""
    if transposed or x.dim() not in (3, 4) or any(d != 1 for d in dilation):
        return _as_convolutions(
            grad,
            x,
            weight,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            output_mask,
        )
    if x.dim() == 3:
        g2, x2, w2 = (aten.unsqueeze.default(t, 2) for t in (grad, x, weight))
        dx, dw, db = aten.convolution_backward.default(
            g2,
            x2,
            w2,
            bias_sizes,
            [1, stride[0]],
            [0, padding[0]],
            [1, dilation[0]],
            False,
            [0, output_padding[0]],
            groups,
            output_mask,
        )
        return (
            None if dx is None else aten.squeeze.dim(dx, 2),
            None if dw is None else aten.squeeze.dim(dw, 2),
            db,
        )
    # rows/columns past the last window: torch-mlir's input gradient took one dim's
    # count for the other (an 8x7 input, 3x3 kernel, stride 2, padding 1: shape error)
    k, hw = weight.shape[2:], x.shape[2:]
    rest = [(hw[j] + 2 * padding[j] - dilation[j] * (k[j] - 1) - 1) % stride[j] for j in range(2)]
    if any(rest):
        # padding made explicit and the unused end cut off: then nothing is left over
        xp = aten.constant_pad_nd.default(x, [padding[1]] * 2 + [padding[0]] * 2, 0.0)
        for j in range(2):
            xp = aten.slice.Tensor(xp, 2 + j, 0, hw[j] + 2 * padding[j] - rest[j])
        dx, dw, db = aten.convolution_backward.default(
            grad,
            xp,
            weight,
            bias_sizes,
            stride,
            [0, 0],
            dilation,
            False,
            [0, 0],
            groups,
            output_mask,
        )
        if dx is not None:
            dx = aten.constant_pad_nd.default(dx, [0, rest[1], 0, rest[0]], 0.0)
            for j in range(2):
                dx = aten.slice.Tensor(dx, 2 + j, padding[j], padding[j] + hw[j])
        return dx, dw, db
    if groups == 1:
        return NotImplemented
    o, c = weight.shape[0] // groups, x.shape[1] // groups
    parts = [
        aten.convolution_backward.default(
            aten.slice.Tensor(grad, 1, g * o, (g + 1) * o),
            aten.slice.Tensor(x, 1, g * c, (g + 1) * c),
            aten.slice.Tensor(weight, 0, g * o, (g + 1) * o),
            None,
            stride,
            padding,
            dilation,
            False,
            output_padding,
            1,
            [output_mask[0], output_mask[1], False],
        )
        for g in range(groups)
    ]
    dx = aten.cat.default([p[0] for p in parts], 1) if output_mask[0] else None
    dw = aten.cat.default([p[1] for p in parts], 0) if output_mask[1] else None
    db = aten.sum.dim_IntList(grad, [0, 2, 3]) if output_mask[2] else None
    return dx, dw, db


def _weight_grad(inp, gout, ksize, stride, padding, dilation, groups):
    """``dw[o, c, k] = sum over n, i of gout[n, o, i] * inp_padded[n, c, i*stride + k*dilation]``
    as one forward convolution: ``inp`` with batch and channels swapped is the input,
    ``gout`` likewise the kernel, stride and dilation exchanged; each group's samples
    are its own channel group (``groups`` kept)."""
    nd, n, g = len(ksize), inp.shape[0], groups
    cg, og = inp.shape[1] // g, gout.shape[1] // g
    spatial = list(range(3, 3 + nd))
    a = aten.reshape.default(inp, [n, g, cg] + list(inp.shape[2:]))
    a = aten.reshape.default(
        aten.permute.default(a, [2, 1, 0] + spatial), [cg, g * n] + list(inp.shape[2:])
    )
    b = aten.reshape.default(gout, [n, g, og] + list(gout.shape[2:]))
    b = aten.reshape.default(
        aten.permute.default(b, [1, 2, 0] + spatial), [g * og, n] + list(gout.shape[2:])
    )
    r = aten.convolution.default(a, b, None, dilation, padding, stride, False, [0] * nd, g)
    for j in range(nd):  # the right padding may reach past the last kernel position
        r = aten.slice.Tensor(r, 2 + j, 0, ksize[j])
    return aten.permute.default(r, [1, 0] + list(range(2, 2 + nd)))


def _fit(t, sizes):
    """``t``'s spatial dims cut to ``sizes`` (or zero-padded up to them)."""
    nd = len(sizes)
    for j in range(nd):
        d = t.dim() - nd + j
        if t.shape[d] > sizes[j]:
            t = aten.slice.Tensor(t, d, 0, sizes[j])
        elif t.shape[d] < sizes[j]:
            t = aten.constant_pad_nd.default(
                t, [0, 0] * (nd - 1 - j) + [0, sizes[j] - t.shape[d]], 0.0
            )
    return t


def _as_convolutions(
    grad, x, w, stride, padding, dilation, transposed, output_padding, groups, mask
):
    """A convolution's gradient as forward convolutions (torch-mlir lowers those in every
    form; its ``convolution_backward`` lowering failed with dilation, transposed or 3-d).
    Plain: the input gradient is the transposed convolution of ``grad`` (the output
    padding gives back the rows past the last window), the weight gradient
    ``_weight_grad(x, grad)``. Transposed: the input gradient is the plain convolution
    of ``grad``, the weight gradient ``_weight_grad(grad, x)`` (the roles swap)."""
    nd = x.dim() - 2
    sizes, ksize = list(x.shape[2:]), list(w.shape[2:])
    dx = dw = db = None
    if mask[0]:
        if transposed:
            dx = aten.convolution.default(
                grad, w, None, stride, padding, dilation, False, [0] * nd, groups
            )
        else:
            rest = [
                (sizes[j] + 2 * padding[j] - dilation[j] * (ksize[j] - 1) - 1) % stride[j]
                for j in range(nd)
            ]
            dx = aten.convolution.default(
                grad, w, None, stride, padding, dilation, True, rest, groups
            )
        dx = _fit(dx, sizes)
    if mask[1]:
        if transposed:
            dw = _weight_grad(grad, x, ksize, stride, padding, dilation, groups)
        else:
            dw = _weight_grad(x, grad, ksize, stride, padding, dilation, groups)
    if mask[2]:
        db = aten.sum.dim_IntList(grad, [0] + list(range(2, grad.dim())))
    return dx, dw, db


TABLE = {
    aten.convolution.default: convolution,
    aten.convolution_backward.default: convolution_backward,
}

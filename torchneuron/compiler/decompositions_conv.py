"""Transposed convolutions with an ``output_padding`` that differs between spatial dims.

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


TABLE = {aten.convolution.default: convolution}

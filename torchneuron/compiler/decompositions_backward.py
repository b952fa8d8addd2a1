"""Gradients torch-mlir has no lowering for (each was refused naming the op), for the
decomposition table (decompositions.py):

- ``replication_pad{1,2,3}d_backward``: each output position reads the input position
  ``clamp(p - pad_before, 0, size - 1)`` along each padded dim (negative padding crops:
  the same formula), so the gradient adds the output's gradient into those positions,
  one ``index_add`` per padded dim (last dims first), in ATen's order of additions
  along a dim.
- ``adaptive_max_pool2d_backward``: the indices are flat positions in each ``(H, W)``
  plane, so the gradient is a ``scatter_add`` into the flattened planes (windows may
  overlap: their gradients add, as ATen's).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _replication_pad_backward(dims: int):
    def decomposition(grad, x, padding):
        g = grad
        for i in range(dims):  # padding lists the last dim's (before, after) first
            d = x.dim() - 1 - i
            before, size = padding[2 * i], x.shape[d]
            if size == 0:
                continue
            n = g.shape[d]
            pos = aten.arange.start_step(-before, n - before, 1, dtype=torch.int64, device=x.device)
            pos = aten.clamp.default(pos, 0, size - 1)
            shape = list(g.shape)
            shape[d] = size
            zero = aten.zeros.default(shape, dtype=g.dtype, device=g.device)
            g = aten.index_add.default(zero, d, pos, g)
        return g

    return decomposition


def adaptive_max_pool2d_backward(grad, x, indices):
    plane = x.shape[-2] * x.shape[-1]
    lead = list(x.shape[:-2])
    g = aten.reshape.default(grad, lead + [-1])
    i = aten.reshape.default(indices, lead + [-1])
    zero = aten.zeros.default(lead + [plane], dtype=grad.dtype, device=grad.device)
    return aten.reshape.default(aten.scatter_add.default(zero, -1, i, g), list(x.shape))


TABLE = {
    aten.replication_pad1d_backward.default: _replication_pad_backward(1),
    aten.replication_pad2d_backward.default: _replication_pad_backward(2),
    aten.replication_pad3d_backward.default: _replication_pad_backward(3),
    aten.adaptive_max_pool2d_backward.default: adaptive_max_pool2d_backward,
}

"""Adaptive average pooling as products with averaging matrices: ``_adaptive_avg_pool3d``
and ``_adaptive_avg_pool2d_backward``/``3d_backward`` (``adaptive_avg_pool1d``/``2d`` and ``interpolate(
mode="area")``'s gradient), which torch-mlir does not lower (each failed naming its op).

Adaptive average pooling is linear and separable: output bin ``i`` of a dim of input
size ``n`` and output size ``m`` averages ``[floor(i n / m), ceil((i + 1) n / m))``
(ATen's ``start_index``/``end_index`` in AdaptivePooling.h), so along that dim it is the
``(m, n)`` matrix ``P[i, j] = 1 / len_i`` on the bin, and the pool is ``P_d x P_h x
P_w`` applied to the last dims (one ``einsum``); its gradient applies the transposes.
bfloat16/float16 are computed in float32 and rounded once.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten
_LOW = (torch.bfloat16, torch.float16)


def _bins(n: int, m: int, device):
    """The ``(m, n)`` averaging matrix of adaptive pooling from ``n`` to ``m``, float32."""
    i = aten.arange.default(m, dtype=torch.int64, device=device)
    j = aten.arange.default(n, dtype=torch.int64, device=device)
    start = aten.div.Tensor_mode(aten.mul.Tensor(i, n), m, rounding_mode="floor")
    end = aten.div.Tensor_mode(
        aten.add.Tensor(aten.mul.Tensor(i, n), n + m - 1), m, rounding_mode="floor"
    )
    inside = aten.logical_and(
        aten.ge.Tensor(aten.unsqueeze.default(j, 0), aten.unsqueeze.default(start, 1)),
        aten.lt.Tensor(aten.unsqueeze.default(j, 0), aten.unsqueeze.default(end, 1)),
    )
    length = aten._to_copy.default(aten.sub.Tensor(end, start), dtype=torch.float32)
    ones = aten._to_copy.default(inside, dtype=torch.float32)
    return aten.div.Tensor(ones, aten.unsqueeze.default(length, 1))


def _apply(x, mats, transpose: bool):
    """``x``'s last ``len(mats)`` dims multiplied by ``mats`` (or their transposes)."""
    k = len(mats)
    lead = "".join("ABCDE"[: x.dim() - k])
    ins, outs = "ijk"[:k], "pqr"[:k]
    src, dst = (outs, ins) if transpose else (ins, outs)
    eq = f"{lead}{src}," + ",".join(f"{o}{i}" for o, i in zip(outs, ins)) + f"->{lead}{dst}"
    dtype = x.dtype
    r = aten.einsum.default(eq, [aten._to_copy.default(x, dtype=torch.float32), *mats])
    return aten._to_copy.default(r, dtype=dtype)


def adaptive_avg_pool3d(x, output_size):
    if not x.dtype.is_floating_point:
        return NotImplemented
    sizes = x.shape[-3:]
    mats = [_bins(n, m, x.device) for n, m in zip(sizes, output_size)]
    return _apply(x, mats, transpose=False)


def _backward(k: int):
    def adaptive_avg_pool_backward(grad, x):
        sizes, out = x.shape[-k:], grad.shape[-k:]
        mats = [_bins(n, m, x.device) for n, m in zip(sizes, out)]
        return _apply(grad, mats, transpose=True)

    return adaptive_avg_pool_backward


TABLE = {
    aten._adaptive_avg_pool3d.default: adaptive_avg_pool3d,
    aten._adaptive_avg_pool2d_backward.default: _backward(2),
    aten._adaptive_avg_pool3d_backward.default: _backward(3),
}

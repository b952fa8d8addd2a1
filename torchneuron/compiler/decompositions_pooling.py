"""``avg_pool2d``/``avg_pool3d`` (``avg_pool1d`` reaches ATen as ``avg_pool2d``) and
``max_pool3d`` with ``ceil_mode`` in the form torch-mlir lowers right.

Lowered as they came, ``avg_pool3d`` ignored ``divisor_override`` (silently wrong values),
``avg_pool2d`` with ``divisor_override`` and every ``ceil_mode`` average pool failed to
compile, and ``max_pool3d(ceil_mode=True)`` padded both ends (wrong values, as
``max_pool2d`` did: decompositions.py). Here the input is padded explicitly (zeros for
an average, the dtype's lowest value for a maximum) up to the last window ATen's output
size asks for, the pool runs with no padding and no ceil mode, and an average's window
sums are divided by ATen's divisor: ``divisor_override``, else per output position the
window's size clipped to the padded input (``count_include_pad=True``) or to the input
(False), as ATen's CPU kernel (``AvgPoolKernel.cpp``). Averages of bfloat16/float16 are
computed in float32 and rounded once, as ATen accumulates them. Integer averages are
exact window sums divided toward zero in the input's dtype, as ATen's CPU kernel (lowered
as they came, they returned float32 means).
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten


def _n(v, n: int) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


def _out_size(size, k, s, p, d, ceil) -> int:
    """ATen's pooling_output_shape."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:  # the last window must start inside
        out -= 1
    return out


def _window_sum(xp, k, s, outs):
    """Sum of each pooling window of ``xp`` (already padded), one strided slice per
    kernel offset: exact for integers, which have no pooling lowering."""
    n, total = len(k), None
    for offset in _offsets(k):
        t = xp
        for j, off in enumerate(offset):
            dim = xp.dim() - n + j
            t = aten.slice.Tensor(t, dim, off, off + (outs[j] - 1) * s[j] + 1, s[j])
        total = t if total is None else aten.add.Tensor(total, t)
    return total


def _offsets(k):
    if not k:
        yield ()
        return
    for first in range(k[0]):
        for rest in _offsets(k[1:]):
            yield (first, *rest)


def _divisor(sizes, outs, k, s, p, count_include_pad, divisor_override, dtype, device):
    """ATen's divisor of each output position: ``divisor_override``, else the window's
    size clipped to the padded input (``count_include_pad``) or to the input."""
    if divisor_override is not None:
        return divisor_override
    n, div = len(sizes), None
    for j in range(n):
        o = aten.arange.start_step(0, outs[j], 1, dtype=dtype, device=device)
        start = aten.sub.Tensor(aten.mul.Tensor(o, s[j]), p[j])
        end = aten.clamp_max.default(aten.add.Tensor(start, k[j]), sizes[j] + p[j])
        if count_include_pad:
            size = aten.sub.Tensor(end, start)
        else:
            size = aten.sub.Tensor(
                aten.clamp_max.default(end, sizes[j]), aten.clamp_min.default(start, 0)
            )
        size = aten.view.default(size, [outs[j] if i == j else 1 for i in range(n)])
        div = size if div is None else aten.mul.Tensor(div, size)
    return div


def _add_at(z, g, dims, starts, steps, counts):
    """``z`` with ``g`` added at the strided positions ``start + step * i`` of ``dims``."""
    if not dims:
        return aten.add.Tensor(z, g)
    d, a, st, c = dims[0], starts[0], steps[0], counts[0]
    part = aten.slice.Tensor(z, d, a, a + (c - 1) * st + 1, st)
    part = _add_at(part, g, dims[1:], starts[1:], steps[1:], counts[1:])
    return aten.slice_scatter.default(z, part, d, a, a + (c - 1) * st + 1, st)


def _avg_pool_backward(n: int):
    def avg_pool_backward(
        grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    ):
        """The gradient of an average pool: ``grad / divisor`` added into each window
        (one strided slice per kernel offset) of the padded input, cropped to ``x``
        (the pool's transpose; ATen's kernel spreads each output over its window)."""
        k, p = _n(kernel_size, n), _n(padding, n)
        s = _n(stride, n) if stride else k
        sizes, outs = list(x.shape[-n:]), list(grad.shape[-n:])
        low = grad.dtype in (torch.bfloat16, torch.float16)
        g = aten._to_copy.default(grad, dtype=torch.float32) if low else grad
        div = _divisor(sizes, outs, k, s, p, count_include_pad, divisor_override, g.dtype, g.device)
        g = aten.div.Tensor(g, div)
        padded = [
            max(sz + 2 * pp, (o - 1) * ss + kk) for sz, pp, o, ss, kk in zip(sizes, p, outs, s, k)
        ]
        z = aten.zeros.default(list(x.shape[:-n]) + padded, dtype=g.dtype, device=g.device)
        dims = list(range(x.dim() - n, x.dim()))
        for offset in _offsets(k):
            z = _add_at(z, g, dims, list(offset), s, outs)
        for j, d in enumerate(dims):
            z = aten.slice.Tensor(z, d, p[j], p[j] + sizes[j])
        return aten._to_copy.default(z, dtype=grad.dtype) if low else z

    return avg_pool_backward


def _avg_pool(n: int):
    base = aten.avg_pool2d.default if n == 2 else aten.avg_pool3d.default

    def avg_pool(
        x,
        kernel_size,
        stride=(),
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        k = _n(kernel_size, n)
        s = _n(stride, n) if stride else k
        p = _n(padding, n)
        integral = not x.dtype.is_floating_point
        if not integral and not any(p) and not ceil_mode and divisor_override is None and stride:
            return NotImplemented  # the plain form, lowered right
        sizes = list(x.shape[-n:])
        outs = [_out_size(sz, kk, ss, pp, 1, ceil_mode) for sz, kk, ss, pp in zip(sizes, k, s, p)]
        right = [(o - 1) * ss + kk - sz - pp for o, ss, kk, sz, pp in zip(outs, s, k, sizes, p)]
        pads = []
        for pp, r in zip(reversed(p), reversed(right)):
            pads += [pp, max(r, 0)]
        low = x.dtype in (torch.bfloat16, torch.float16)
        xf = aten._to_copy.default(x, dtype=torch.float32) if low else x
        xp = aten.constant_pad_nd.default(xf, pads, 0)
        if integral:  # exact window sums (a float pool rounds past 2**24)
            total = _window_sum(xp, k, s, outs)
        else:
            total = aten.mul.Tensor(base(xp, k, s, [0] * n, False, True, None), math.prod(k))
        div_dtype = torch.int64 if integral else torch.float32
        div = _divisor(
            sizes, outs, k, s, p, count_include_pad, divisor_override, div_dtype, x.device
        )
        if integral:  # ATen's CPU kernel: integer division (toward zero), in x's dtype
            y = aten.div.Tensor_mode(total, div, rounding_mode="trunc")
            return aten._to_copy.default(y, dtype=x.dtype)
        y = aten.div.Tensor(total, div)
        return aten._to_copy.default(y, dtype=x.dtype) if low else y

    return avg_pool


def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool3d with ``ceil_mode`` as explicit right padding with the dtype's lowest value
    (lowered, both ends were padded: wrong values), by ``_max_pool_windows`` (torch-mlir
    lowers no ``max_pool3d_with_indices``, so every max_pool3d with indices was refused)."""
    n = 3
    k, p, d = _n(kernel_size, n), _n(padding, n), _n(dilation, n)
    s = _n(stride, n) if stride else k
    sizes = list(x.shape[-n:])
    extra = [0] * n
    if ceil_mode:
        for j in range(n):
            out = _out_size(sizes[j], k[j], s[j], p[j], d[j], True)
            extra[j] = max(0, (out - 1) * s[j] + d[j] * (k[j] - 1) + 1 - sizes[j] - 2 * p[j])
    return _max_pool_windows(x, k, s, p, d, extra)


def _max_pool_windows(x, k, s, p, d, extra):
    """max_pool3d with indices as a running maximum over the kernel's offsets (one
    strided slice each, ``x`` padded with the dtype's lowest value), ATen's CPU rule:
    a later element wins when greater or NaN; the index is the flat position in the
    unpadded volume. torch-mlir lowers no ``max_pool3d_with_indices``."""
    n = 3
    low = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    sizes = list(x.shape[-n:])
    pads = []
    for pp, e in zip(reversed(p), reversed(extra)):
        pads += [pp, pp + e]
    xp = aten.constant_pad_nd.default(x, pads, low)
    outs = [
        (sz + 2 * pp + e - dd * (kk - 1) - 1) // ss + 1
        for sz, pp, e, dd, kk, ss in zip(sizes, p, extra, d, k, s)
    ]
    best = pos = None
    for offset in _offsets(k):
        v, flat = xp, None
        for j, off in enumerate(offset):
            dim = xp.dim() - n + j
            a = off * d[j]
            v = aten.slice.Tensor(v, dim, a, a + (outs[j] - 1) * s[j] + 1, s[j])
            o = aten.arange.default(outs[j], dtype=torch.int64, device=x.device)
            c = aten.sub.Tensor(aten.add.Tensor(aten.mul.Tensor(o, s[j]), a), p[j])
            c = aten.view.default(c, [outs[j] if i == j else 1 for i in range(n)])
            flat = c if flat is None else aten.add.Tensor(aten.mul.Tensor(flat, sizes[j]), c)
        flat = aten.expand.default(flat, list(v.shape))
        if best is None:
            best, pos = v, flat
            continue
        take = aten.gt.Tensor(v, best)
        if x.dtype.is_floating_point:
            take = aten.logical_or(take, aten.isnan.default(v))
        best, pos = aten.where.self(take, v, best), aten.where.self(take, flat, pos)
    return best, pos


def max_pool3d_with_indices_backward(
    grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    """The gradient of max_pool3d: ``grad`` scatter-added at ``indices`` (flat positions
    in each (N, C) volume of ``x``; overlapping windows add up, as ATen's kernel)."""
    vol = x.shape[-1] * x.shape[-2] * x.shape[-3]
    planes = x.numel() // max(vol, 1)
    g = aten.reshape.default(grad, [planes, -1])
    i = aten.reshape.default(indices, [planes, -1])
    z = aten.zeros.default([planes, vol], dtype=grad.dtype, device=grad.device)
    return aten.reshape.default(aten.scatter_add.default(z, 1, i, g), list(x.shape))


TABLE = {
    aten.avg_pool2d.default: _avg_pool(2),
    aten.avg_pool3d.default: _avg_pool(3),
    aten.max_pool3d_with_indices.default: max_pool3d_with_indices,
    aten.max_pool3d_with_indices_backward.default: max_pool3d_with_indices_backward,
    aten.avg_pool2d_backward.default: _avg_pool_backward(2),
    aten.avg_pool3d_backward.default: _avg_pool_backward(3),
}

"""Order statistics torch-mlir has no lowering for, from a stable sort (NaN last, as
passes/semantics/nan_aware_sort.py orders it): ``kthvalue``, ``median``/``nanmedian``
(with and without a dim) and ``mode``.

ATen's CPU rules: ``kthvalue`` takes NaN as the largest value; ``median`` is the lower
median, NaN (at the first NaN's index) when the slice has one; ``nanmedian`` the lower
median of the non-NaN values; ``mode`` the most frequent value, the smallest among
equally frequent ones, at the last index of its run in a stable sort (ATen's
``std::sort`` of these short runs keeps their order). Indices of tied values in
``kthvalue``/``median`` are the stable sort's (ATen's quickselect leaves them open).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _sorted(x, dim):
    return aten.sort.stable(x, stable=True, dim=dim, descending=False)


def _pick(t, dim, k, keepdim):
    """``t`` at position ``k`` (an int, or a tensor with a size-1 ``dim``) along ``dim``."""
    if isinstance(k, int):
        r = aten.slice.Tensor(t, dim, k, k + 1)
    else:
        r = aten.gather.default(t, dim, k)
    return r if keepdim else aten.squeeze.dim(r, dim)


def _as_1d(f):
    """``f`` of a 0-dim input, as of that input viewed as ``(1,)``."""

    def decomposition(x, *args, **kwargs):
        if x.dim() != 0:
            return f(x, *args, **kwargs)
        v, i = f(aten.reshape.default(x, [1]), *args, **kwargs)
        return aten.reshape.default(v, []), aten.reshape.default(i, [])

    return decomposition


@_as_1d
def kthvalue(x, k, dim=-1, keepdim=False):
    dim = dim % x.dim()
    s, i = _sorted(x, dim)
    return _pick(s, dim, k - 1, keepdim), _pick(i, dim, k - 1, keepdim)


@_as_1d
def median_dim(x, dim=-1, keepdim=False):
    dim = dim % x.dim()
    s, i = _sorted(x, dim)
    k = (x.shape[dim] - 1) // 2
    v, idx = _pick(s, dim, k, keepdim), _pick(i, dim, k, keepdim)
    if not x.dtype.is_floating_point:
        return v, idx
    nan = aten.isnan.default(x)
    has = aten.any.dim(nan, dim, keepdim)
    first = aten.argmax.default(aten._to_copy.default(nan, dtype=torch.int32), dim, keepdim)
    return aten.where.self(has, aten.add.Tensor(v, float("nan")), v), aten.where.self(
        has, first, idx
    )


@_as_1d
def nanmedian_dim(x, dim=-1, keepdim=False):
    if not x.dtype.is_floating_point:
        return median_dim(x, dim, keepdim)
    dim = dim % x.dim()
    s, i = _sorted(x, dim)
    valid = aten.sum.dim_IntList(
        aten.logical_not(aten.isnan.default(x)), [dim], True, dtype=torch.int64
    )
    k = aten.clamp_min.default(
        aten.div.Tensor_mode(aten.sub.Tensor(valid, 1), 2, rounding_mode="floor"), 0
    )
    return _pick(s, dim, k, keepdim), _pick(i, dim, k, keepdim)


def median(x):
    return median_dim(aten.reshape.default(x, [-1]), 0)[0]


def nanmedian(x):
    return nanmedian_dim(aten.reshape.default(x, [-1]), 0)[0]


@_as_1d
def mode(x, dim=-1, keepdim=False):
    dim = dim % x.dim()
    s, i = _sorted(aten.movedim.int(x, dim, -1), -1)
    n = s.shape[-1]
    pos = aten.expand.default(
        aten.arange.default(n, dtype=torch.int64, device=x.device), list(s.shape)
    )
    changes = aten.ne.Tensor(aten.slice.Tensor(s, -1, 1, n), aten.slice.Tensor(s, -1, 0, n - 1))
    edge = aten.full.default(list(s.shape[:-1]) + [1], True, dtype=torch.bool, device=x.device)
    starts = aten.cat.default([edge, changes], -1)
    ends = aten.cat.default([changes, edge], -1)
    zero = aten.zeros_like.default(pos)
    start = aten.cummax.default(aten.where.self(starts, pos, zero), -1)[0]
    run = aten.where.self(ends, aten.add.Tensor(aten.sub.Tensor(pos, start), 1), zero)
    best = aten.argmax.default(run, -1, True)  # first maximum: the smallest value
    v, idx = aten.gather.default(s, -1, best), aten.gather.default(i, -1, best)
    v, idx = aten.movedim.int(v, -1, dim), aten.movedim.int(idx, -1, dim)
    if not keepdim:
        v, idx = aten.squeeze.dim(v, dim), aten.squeeze.dim(idx, dim)
    return v, idx


TABLE = {
    aten.kthvalue.default: kthvalue,
    aten.median.dim: median_dim,
    aten.median.default: median,
    aten.nanmedian.dim: nanmedian_dim,
    aten.nanmedian.default: nanmedian,
    aten.mode.default: mode,
}

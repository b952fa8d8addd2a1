"""``cummax``/``cummin`` and ``logcumsumexp`` as Hillis-Steele scans, for the
decomposition table (decompositions.py).

torch-mlir lowers none of them to StableHLO (cummax/cummin failed to compile) or lowers
``logcumsumexp`` as ``log(cumsum(exp(x)))``, which overflows: ``logcumsumexp`` of a
float32 ``[100., 100.]`` gave ``[inf, inf]``, ATen ``[100., 100.69]``, silently. Each
scan takes ceil(log2(n)) steps along ``dim``; step ``s`` combines every element with
the one ``s`` before it (positions below ``s`` unchanged), with an associative rule that
equals ATen's sequential CPU kernel:

- cummax/cummin (``cummax_cummin_helper``): the running value is replaced when the new
  one is NaN, or when it is not NaN and the new one is ``>=`` (``<=``) it: ties take
  the latest index, NaN the latest NaN's. Integer and bool values compare exactly (bool and unsigned as
  int32: the lowering compared them as signed).
- logcumsumexp (``_log_add_exp_helper``): ``max + log1p(exp(min - max))``, or the
  value itself where both are the same infinity; NaN propagates. bfloat16/float16 are
  computed in float32 and rounded once, as ATen's CPU kernel accumulates them.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _shifted(x, d: int, s: int):
    """x moved ``s`` positions up along ``d`` (position i holds x[i - s]; the first
    ``s`` positions hold x's first ``s``, masked out by the caller)."""
    n = x.shape[d]
    return aten.cat.default([aten.slice.Tensor(x, d, 0, s), aten.slice.Tensor(x, d, 0, n - s)], d)


def _later(x, d: int, s: int):
    """bool mask, broadcastable to x: position along ``d`` is at least ``s``."""
    n = x.shape[d]
    pos = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=x.device)
    pos = aten.reshape.default(pos, [n] + [1] * (x.dim() - 1 - d))
    return aten.ge.Scalar(pos, s)


def _cum_extreme(greater: bool):
    def decomposition(x, dim):
        d = dim % max(x.dim(), 1)
        n = x.shape[d] if x.dim() else 1
        shape = list(x.shape)
        idx = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=x.device)
        idx = aten.expand.default(
            aten.reshape.default(idx, [n] + [1] * (x.dim() - 1 - d))
            if x.dim()
            else aten.reshape.default(idx, []),
            shape,
        )
        idx = aten.clone.default(idx)
        if x.dim() == 0 or n <= 1:
            return aten.clone.default(x), idx
        # the compared values: bool and unsigned widened (compared as signed otherwise)
        key = (
            aten._to_copy.default(x, dtype=torch.int32)
            if x.dtype in (torch.bool, torch.uint8, torch.uint16)
            else x
        )
        val, s = x, 1
        while s < n:
            pk, pv, pi = _shifted(key, d, s), _shifted(val, d, s), _shifted(idx, d, s)
            # (pk, pi) is earlier: key wins where it is NaN, or >= (<=) a non-NaN pk
            wins = aten.ge.Tensor(key, pk) if greater else aten.le.Tensor(key, pk)
            if x.dtype.is_floating_point:
                wins = aten.logical_or(
                    aten.isnan.default(key),
                    aten.logical_and(wins, aten.logical_not(aten.isnan.default(pk))),
                )
            keep = aten.logical_and(_later(x, d, s), aten.logical_not(wins))
            key = aten.where.self(keep, pk, key)
            val = aten.where.self(keep, pv, val)
            idx = aten.where.self(keep, pi, idx)
            s *= 2
        return val, idx

    return decomposition


def logcumsumexp(x, dim):
    if not x.dtype.is_floating_point:
        return NotImplemented
    d = dim % max(x.dim(), 1)
    n = x.shape[d] if x.dim() else 1
    if x.dim() == 0 or n <= 1:
        return aten.clone.default(x)
    low = x.dtype in (torch.float16, torch.bfloat16)
    y = aten._to_copy.default(x, dtype=torch.float32) if low else x
    s = 1
    while s < n:
        p = _shifted(y, d, s)
        mn, mx = aten.minimum.default(y, p), aten.maximum.default(y, p)
        # both the same infinity: exp(min - max) would be exp(nan)
        same_inf = aten.logical_and(
            aten.eq.Tensor(mn, mx), aten.eq.Scalar(aten.abs.default(mn), float("inf"))
        )
        summed = aten.add.Tensor(mx, aten.log1p.default(aten.exp.default(aten.sub.Tensor(mn, mx))))
        summed = aten.where.self(same_inf, y, summed)
        y = aten.where.self(_later(y, d, s), summed, y)
        s *= 2
    return aten._to_copy.default(y, dtype=x.dtype) if low else y


TABLE = {
    aten.cummax.default: _cum_extreme(True),
    aten.cummin.default: _cum_extreme(False),
    aten.logcumsumexp.default: logcumsumexp,
}

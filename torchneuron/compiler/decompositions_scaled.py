"""Exponentially scaled special functions with no torch-mlir lowering, from the
unscaled ones' formulas in decompositions_special.py, with the scaling folded in so
nothing overflows (each failed to lower naming its op in the OpInfo sweep):

- ``special_i0e`` (``exp(-|x|) i0(x)``): Abramowitz & Stegun 9.8.1 times ``exp(-|x|)``
  below 3.75; above, 9.8.2 is already ``sqrt(x) exp(-x) I0(x)`` as a polynomial in
  ``3.75/x``: ``rsqrt(x) P(3.75/x)`` (0 at +-inf, as ATen).
- ``special_i1e`` (``exp(-|x|) i1(x)``): the power series times ``exp(-|x|)`` below 10,
  above the asymptotic series without its ``exp(x)``: ``rsqrt(x) P(1/x)``; odd.
- ``special_erfcx`` (``exp(x^2) erfc(x)``): Numerical Recipes' ``erfcc`` fit is
  ``t exp(-x^2 + P(t))``, ``t = 1 / (1 + x/2)``, so ``erfcx(x) = t exp(P(t))`` for
  ``x >= 0.5`` (relative error < 1.2e-7; ~``1 / (x sqrt(pi))`` far out, 0 at inf);
  below 0.5 ``exp(x^2) erfc(x)`` (inf past -9.3 where the value passes float32's
  range, as ATen); ``special_log_ndtr``, which core ATen writes with ``erfcx``, follows.
"""

from __future__ import annotations

import torch

from .decompositions_special import (
    _ERFCC,
    _I0_LARGE,
    _I0_SMALL,
    _I1_LARGE,
    _I1_SMALL,
    _erfc,
    _float_op,
    _full,
    _horner,
    _where,
)

aten = torch.ops.aten


def _i0e(x):
    ax = aten.abs.default(x)
    q = aten.mul.Tensor(aten.mul.Tensor(x, 1 / 3.75), aten.mul.Tensor(x, 1 / 3.75))
    small = aten.mul.Tensor(aten.exp.default(aten.neg.default(ax)), _horner(q, _I0_SMALL))
    safe = aten.maximum.default(ax, _full(ax, 3.75))  # no 1/0 in the branch not taken
    large = aten.mul.Tensor(
        aten.rsqrt.default(safe),
        _horner(aten.reciprocal.default(aten.mul.Tensor(safe, 1 / 3.75)), _I0_LARGE),
    )
    return _where(aten.lt.Scalar(ax, 3.75), small, large)


def _i1e(x):
    z = aten.abs.default(x)
    q = aten.mul.Tensor(aten.mul.Tensor(z, 0.5), aten.mul.Tensor(z, 0.5))
    small = aten.mul.Tensor(aten.mul.Tensor(z, 0.5), _horner(q, _I1_SMALL))
    small = aten.mul.Tensor(small, aten.exp.default(aten.neg.default(z)))
    safe = aten.maximum.default(z, _full(z, 10.0))
    large = aten.mul.Tensor(
        aten.rsqrt.default(safe), _horner(aten.reciprocal.default(safe), _I1_LARGE)
    )
    out = _where(aten.lt.Scalar(z, 10.0), small, large)
    return _where(aten.lt.Scalar(x, 0), aten.neg.default(out), out)


def _erfcx(x):
    safe = aten.maximum.default(x, _full(x, 0.5))
    t = aten.reciprocal.default(aten.add.Tensor(aten.mul.Tensor(safe, 0.5), 1.0))
    large = aten.mul.Tensor(t, aten.exp.default(_horner(t, _ERFCC)))
    large = _where(aten.isinf.default(x), _full(x, 0.0), large)  # t * exp(c0): 0 * ...
    small = aten.mul.Tensor(aten.exp.default(aten.mul.Tensor(x, x)), _erfc(x))
    return _where(aten.lt.Scalar(x, 0.5), small, large)


TABLE = {
    aten.special_i0e.default: _float_op(_i0e),
    aten.special_i1e.default: _float_op(_i1e),
    aten.special_erfcx.default: _float_op(_erfcx),
}

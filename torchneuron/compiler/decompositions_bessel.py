"""Bessel, Airy and related special functions of ``torch.special`` with no torch-mlir
lowering (each was refused naming its op in the OpInfo sweep), as float32 graphs with
ATen's CPU values at the edges (``ATen/native/Math.h``, measured). float64 is left to the
lowering (fails naming the op), as in decompositions_special.py; integer inputs are
promoted to float32.

The approximations are Chebyshev fits to mpmath (decompositions_bessel_fits.py: which
function of which variable on which interval), evaluated by Clenshaw's recurrence, in the
textbook forms (DLMF chapters 9, 10, 7):

- ``bessel_j0/j1/y0/y1``: ``x <= 8`` the power series' entire parts in ``x^2`` (Y with
  the ``log`` and ``1/x`` terms apart, DLMF 10.8.2); above, the Hankel form
  ``sqrt(2 / (pi x)) (P cos chi - Q sin chi)`` (Y: ``P sin + Q cos``), ``chi = x - pi/4``
  (order 1: ``3 pi / 4``) taken in float32 as ATen's ``x - c``, so the phase rounds as
  its. J0 even, J1 odd (``j1(-0.0)`` is -0.0); NaN at +-inf (ATen: ``cos(inf)``);
  Y: -inf at +-0, NaN below 0 and at +-inf.
- ``modified_bessel_i0/i1``: decompositions_special.py's ``i0`` and ``special_i1``.
- ``modified_bessel_k0/k1`` and the scaled ``exp(x) K(x)``: ``x <= 2`` DLMF 10.31.2's
  entire parts plus ``-log(x) I0`` (K1: ``log(x) I1 + 1/x``), above ``exp(-x) /
  sqrt(x)`` times a fit in ``2 / x``; inf at +-0, 0 at inf, NaN below 0. Values below
  float32's normal range flush to 0 (compiled graphs have no subnormals; ATen returns
  e.g. 4e-45 for K0(100)).
- ``spherical_bessel_j0``: ``sin(x) / x``, below 0.5 its Taylor series (ATen's split),
  0 at +-inf.
- ``airy_ai``: on [-3, 2] a fit of Ai; above 2 ``exp(-zeta) x^(-1/4)`` times a fit in
  ``1 / zeta`` (DLMF 9.7.5), 0 past 103.892 as ATen; below -3 the modulus form
  ``z^(-1/4) (f sin(theta) - g cos(theta)) / sqrt(pi)`` (DLMF 9.7.9), ``theta`` taken
  as ATen's float32 ``-2 x sqrt(-x) / 3 + pi/4`` (its rounding is the phase);
  NaN at +-inf (ATen's). Below about -130 the CPU's value and this one differ by more
  than float32's tolerance: XLA:CPU's ``sqrt`` and division are not correctly rounded
  (a third of the divisions by 3 differ by an ulp), so ``zeta`` rounds otherwise, and
  one ulp of ``zeta`` there moves the value by 1e-5; both are phase noise about the
  true value (at -1000 the CPU's float32 result is 1.4e-4 off float64's, this 2e-5).
- ``ndtri``: for ``0.08 <= p <= 0.92`` ``q`` times a fit in ``q^2`` (``q = p - 1/2``),
  outside it ``r`` times a fit in ``r = sqrt(-2 log p)`` (of ``1 - p``, exact there,
  above 0.92); -inf at 0, inf at 1, NaN outside [0, 1]. Subnormal ``p`` reads as 0
  (-inf; ATen: about -13.3).
- ``zeta(x, q)`` (Hurwitz): 12 terms ``(q + k)^-x`` and Euler-Maclaurin's tail (8
  Bernoulli terms) at ``q + 12`` (ATen's method, in double there); ATen's rules: inf at
  ``x == 1``, NaN below 1, for ``q <= 0`` inf at the integers and NaN unless ``x`` is an
  integer. ``q < 0`` with integer ``x``: ``zeta(x, f) + (-1)^x (zeta(x, 1 - f) -
  zeta(x, 1 - q))``, ``f = q - floor(q)`` (the terms of ``q + k < 0`` summed in
  closed form); its terms cancel when ``x`` is odd, so it is float32-grade relative to
  ``f^-x``, not to the value.
"""

from __future__ import annotations

import math

import torch

from .decompositions_bessel_fits import FITS, P_CUT, Q2, R0, R1, W_NEG, W_POS
from .decompositions_special import _bernoulli_2k, _float_op, _i0, _i1

aten = torch.ops.aten
_INF = float("inf")
_NAN = float("nan")
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_TWO_OVER_PI = 2 / math.pi


def _full(x, v):
    return aten.full_like.default(x, v)


def _where(c, a, b):
    return aten.where.self(c, a, b)


def _cheb(u, name):
    """sum c_k T_k(u) by Clenshaw's recurrence (u in [-1, 1])."""
    c = FITS[name]
    two_u = aten.add.Tensor(u, u)
    b1, b2 = _full(u, c[-1]), aten.zeros_like.default(u)
    for ck in reversed(c[1:-1]):
        b1, b2 = aten.add.Tensor(aten.sub.Tensor(aten.mul.Tensor(two_u, b1), b2), ck), b1
    return aten.add.Tensor(aten.sub.Tensor(aten.mul.Tensor(u, b1), b2), c[0])


def _small_t(ax, top):
    """u of ``t = x^2`` on [0, top] (clamped: the branch not taken stays finite)."""
    t = aten.clamp_max.default(aten.mul.Tensor(ax, ax), top)
    return aten.sub.Tensor(aten.mul.Tensor(t, 2.0 / top), 1.0)


def _hankel(ax, order):
    """(J, Y) of order 0/1 at ``ax >= 8`` by the Hankel form."""
    safe = aten.clamp_min.default(ax, 8.0)
    r = aten.div.Tensor(_full(safe, 8.0), safe)
    u = aten.sub.Tensor(aten.mul.Tensor(aten.mul.Tensor(r, r), 2.0), 1.0)
    p = _cheb(u, f"P{order}")
    q = aten.mul.Tensor(_cheb(u, f"Q{order}"), r)
    chi = aten.sub.Tensor(safe, (2 * order + 1) * math.pi / 4)
    c, s = aten.cos.default(chi), aten.sin.default(chi)
    amp = aten.div.Tensor(_full(safe, _SQRT_2_OVER_PI), aten.sqrt.default(safe))
    j = aten.mul.Tensor(aten.sub.Tensor(aten.mul.Tensor(p, c), aten.mul.Tensor(q, s)), amp)
    y = aten.mul.Tensor(aten.add.Tensor(aten.mul.Tensor(p, s), aten.mul.Tensor(q, c)), amp)
    return j, y


def _j0_abs(ax):
    small = _cheb(_small_t(ax, 64.0), "J0S")
    return _where(aten.le.Scalar(ax, 8.0), small, _hankel(ax, 0)[0])


def _j1_abs(ax):
    small = aten.mul.Tensor(_cheb(_small_t(ax, 64.0), "J1S"), ax)
    return _where(aten.le.Scalar(ax, 8.0), small, _hankel(ax, 1)[0])


def _bessel_j0(x):
    return _j0_abs(aten.abs.default(x))


def _bessel_j1(x):
    ax = aten.abs.default(x)
    v = _j1_abs(ax)
    v = _where(aten.lt.Scalar(x, 0.0), aten.neg.default(v), v)
    return _where(aten.eq.Scalar(x, 0.0), x, v)  # +-0.0 as given


def _y_edges(x, v):
    v = _where(aten.eq.Scalar(x, 0.0), _full(x, -_INF), v)
    return _where(aten.lt.Scalar(x, 0.0), _full(x, _NAN), v)


def _bessel_y0(x):
    ax = aten.abs.default(x)
    log = aten.log.default(ax)
    small = aten.add.Tensor(
        _cheb(_small_t(ax, 64.0), "Y0S"),
        aten.mul.Tensor(aten.mul.Tensor(log, _j0_abs(ax)), _TWO_OVER_PI),
    )
    v = _where(aten.le.Scalar(ax, 8.0), small, _hankel(ax, 0)[1])
    return _y_edges(x, v)


def _bessel_y1(x):
    ax = aten.abs.default(x)
    safe = aten.clamp_min.default(ax, 1e-38)
    inner = aten.sub.Tensor(
        aten.mul.Tensor(aten.log.default(safe), _j1_abs(ax)), aten.reciprocal.default(safe)
    )
    small = aten.add.Tensor(
        aten.mul.Tensor(_cheb(_small_t(ax, 64.0), "Y1S"), ax), aten.mul.Tensor(inner, _TWO_OVER_PI)
    )
    v = _where(aten.le.Scalar(ax, 8.0), small, _hankel(ax, 1)[1])
    return _y_edges(x, v)


def _k_large(ax, order):
    """``K(x) exp(x) sqrt(x)`` for ``x >= 2`` (the fit in ``2 / x``)."""
    safe = aten.clamp_min.default(ax, 2.0)
    return _cheb(aten.sub.Tensor(aten.div.Tensor(_full(safe, 4.0), safe), 1.0), f"K{order}L")


def _k_small(x, order):
    """K at ``0 < x <= 2`` (x clamped)."""
    safe = aten.clamp.default(x, 1e-38, 2.0)
    log = aten.log.default(safe)
    u = _small_t(safe, 4.0)
    if order == 0:
        return aten.sub.Tensor(_cheb(u, "K0S"), aten.mul.Tensor(log, _i0(safe)))
    rest = aten.add.Tensor(aten.mul.Tensor(log, _i1(safe)), aten.reciprocal.default(safe))
    return aten.add.Tensor(aten.mul.Tensor(_cheb(u, "K1S"), safe), rest)


def _modified_k(order, scaled):
    def f(x):
        safe = aten.clamp_min.default(x, 2.0)
        big = aten.mul.Tensor(_k_large(x, order), aten.rsqrt.default(safe))
        small = _k_small(x, order)
        if scaled:
            small = aten.mul.Tensor(small, aten.exp.default(aten.clamp_max.default(x, 2.0)))
        else:
            big = aten.mul.Tensor(big, aten.exp.default(aten.neg.default(safe)))
        v = _where(aten.le.Scalar(x, 2.0), small, big)
        v = _where(aten.eq.Scalar(x, 0.0), _full(x, _INF), v)
        return _where(aten.lt.Scalar(x, 0.0), _full(x, _NAN), v)

    return f


def _spherical_j0(x):
    x2 = aten.mul.Tensor(x, x)
    coeffs = [(-1) ** k / math.factorial(2 * k + 1) for k in range(7)]
    series = _full(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        series = aten.add.Tensor(aten.mul.Tensor(series, x2), c)
    direct = aten.div.Tensor(aten.sin.default(x), x)
    v = _where(aten.lt.Scalar(aten.abs.default(x), 0.5), series, direct)
    return _where(aten.isinf.default(x), _full(x, 0.0), v)


_INV_SQRT_PI = 1 / math.sqrt(math.pi)


def _airy_ai(x):
    mid = _cheb(aten.div.Tensor(aten.add.Tensor(aten.mul.Tensor(x, 2.0), 1.0), 5.0), "AIM")
    # x >= 2: zeta = 2 x sqrt(x) / 3
    xp = aten.clamp.default(x, 2.0, 104.0)
    zeta = aten.div.Tensor(aten.mul.Tensor(aten.mul.Tensor(xp, 2.0), aten.sqrt.default(xp)), 3.0)
    w = aten.reciprocal.default(zeta)
    fit = _cheb(aten.sub.Tensor(aten.mul.Tensor(w, 2.0 / W_POS), 1.0), "AIP")
    decay = aten.div.Tensor(
        aten.exp.default(aten.neg.default(zeta)), aten.sqrt.default(aten.sqrt.default(xp))
    )
    pos = aten.mul.Tensor(aten.mul.Tensor(fit, decay), 0.5 * _INV_SQRT_PI)
    # x <= -3: theta = -2 x sqrt(-x) / 3 + pi / 4, ATen's float32 steps
    xn = aten.clamp_max.default(x, -3.0)
    z = aten.neg.default(xn)
    zeta = aten.div.Tensor(aten.mul.Tensor(aten.mul.Tensor(xn, -2.0), aten.sqrt.default(z)), 3.0)
    theta = aten.add.Tensor(zeta, 0.25 * math.pi)
    u = aten.sub.Tensor(aten.mul.Tensor(aten.reciprocal.default(zeta), 2.0 / W_NEG), 1.0)
    osc = aten.sub.Tensor(
        aten.mul.Tensor(_cheb(u, "AINF"), aten.sin.default(theta)),
        aten.mul.Tensor(_cheb(u, "AING"), aten.cos.default(theta)),
    )
    neg = aten.div.Tensor(
        aten.mul.Tensor(osc, _INV_SQRT_PI), aten.sqrt.default(aten.sqrt.default(z))
    )
    v = _where(aten.ge.Scalar(x, 2.0), pos, mid)
    v = _where(aten.lt.Scalar(x, -3.0), neg, v)
    v = _where(aten.gt.Scalar(x, 103.892), _full(x, 0.0), v)
    return _where(aten.isinf.default(x), _full(x, _NAN), v)


def _ndtri(p):
    q = aten.sub.Tensor(p, 0.5)
    central = aten.mul.Tensor(
        _cheb(aten.sub.Tensor(aten.mul.Tensor(aten.mul.Tensor(q, q), 2.0 / Q2), 1.0), "NDC"), q
    )
    upper = aten.gt.Scalar(p, 0.5)
    tail_p = _where(upper, aten.rsub.Scalar(p, 1.0), p)  # 1 - p exact above 0.5
    tail_p = aten.clamp.default(tail_p, 1e-38, P_CUT)
    r = aten.sqrt.default(aten.mul.Tensor(aten.log.default(tail_p), -2.0))
    u = aten.sub.Tensor(aten.mul.Tensor(aten.sub.Tensor(r, R0), 2.0 / (R1 - R0)), 1.0)
    tail = aten.mul.Tensor(_cheb(u, "NDT"), r)
    tail = _where(upper, tail, aten.neg.default(tail))
    inside = aten.logical_and(aten.ge.Scalar(p, P_CUT), aten.le.Scalar(p, 1.0 - P_CUT))
    v = _where(inside, central, tail)
    v = _where(aten.eq.Scalar(p, 0.0), _full(p, -_INF), v)
    v = _where(aten.eq.Scalar(p, 1.0), _full(p, _INF), v)
    bad = aten.logical_or(aten.lt.Scalar(p, 0.0), aten.gt.Scalar(p, 1.0))
    return _where(bad, _full(p, _NAN), v)


_ZETA_SHIFT = 12
_ZETA_BERNOULLI = [float(b) for b in _bernoulli_2k(8)]


def _pow_neg(base, s):
    """base ** -s for base > 0 (exp of a product: no pow lowering question)."""
    return aten.exp.default(aten.mul.Tensor(aten.log.default(base), aten.neg.default(s)))


def _hurwitz_positive(s, q):
    """zeta(s, q) for q > 0, s > 1: 12 direct terms, Euler-Maclaurin at q + 12."""
    acc = aten.zeros_like.default(q)
    for k in range(_ZETA_SHIFT):
        acc = aten.add.Tensor(acc, _pow_neg(aten.add.Tensor(q, float(k)), s))
    a = aten.add.Tensor(q, float(_ZETA_SHIFT))
    a_s = _pow_neg(a, s)  # a^-s
    tail = aten.add.Tensor(
        aten.div.Tensor(aten.mul.Tensor(a_s, a), aten.sub.Tensor(s, 1.0)), aten.mul.Tensor(a_s, 0.5)
    )
    # sum_j B_2j / (2j)! s (s + 1) ... (s + 2j - 2) a^(-s - 2j + 1)
    inv_a = aten.reciprocal.default(a)
    rising, power = s, aten.mul.Tensor(a_s, inv_a)
    for j, b in enumerate(_ZETA_BERNOULLI, start=1):
        if j > 1:
            rising = aten.mul.Tensor(
                rising,
                aten.mul.Tensor(aten.add.Tensor(s, 2.0 * j - 3), aten.add.Tensor(s, 2.0 * j - 2)),
            )
            power = aten.mul.Tensor(power, aten.mul.Tensor(inv_a, inv_a))
        term = aten.mul.Tensor(aten.mul.Tensor(rising, power), b / math.factorial(2 * j))
        tail = aten.add.Tensor(tail, term)
    return aten.add.Tensor(acc, tail)


def _zeta(x, q):
    x, q = aten.broadcast_tensors.default([x, q])
    qpos = aten.clamp_min.default(q, 1e-30)
    pos = _hurwitz_positive(x, qpos)
    # q < 0, integer x: zeta(x, f) + (-1)^x (zeta(x, 1 - f) - zeta(x, 1 - q))
    f = aten.sub.Tensor(q, aten.floor.default(q))
    fs = aten.clamp_min.default(f, 1e-30)
    near = _hurwitz_positive(x, fs)
    mirror = _hurwitz_positive(x, aten.rsub.Scalar(fs, 1.0))
    far = _hurwitz_positive(x, aten.clamp_min.default(aten.rsub.Scalar(q, 1.0), 1.0))
    odd = aten.ne.Scalar(aten.fmod.Scalar(x, 2.0), 0.0)
    # the first two first: at f = 1/2 and odd x they cancel exactly
    neg = _where(
        odd,
        aten.add.Tensor(aten.sub.Tensor(near, mirror), far),
        aten.sub.Tensor(aten.add.Tensor(near, mirror), far),
    )
    v = _where(aten.gt.Scalar(q, 0.0), pos, neg)
    x_int = aten.eq.Tensor(x, aten.floor.default(x))
    q_int = aten.eq.Tensor(q, aten.floor.default(q))
    nonpos = aten.le.Scalar(q, 0.0)
    v = _where(aten.logical_and(nonpos, aten.logical_not(x_int)), _full(v, _NAN), v)
    v = _where(aten.logical_and(nonpos, q_int), _full(v, _INF), v)
    # x = inf as ATen's loop: inf for q < 1 (a term below 1 in size), 1 at 1, above NaN
    # (its Euler-Maclaurin step's inf * 0)
    at_inf = _where(aten.lt.Scalar(q, 1.0), _full(v, _INF), _full(v, _NAN))
    at_inf = _where(aten.eq.Scalar(q, 1.0), _full(v, 1.0), at_inf)
    v = _where(aten.eq.Scalar(x, _INF), at_inf, v)
    v = _where(aten.lt.Scalar(x, 1.0), _full(v, _NAN), v)
    return _where(aten.eq.Scalar(x, 1.0), _full(v, _INF), v)


def _binary(f):
    """f(x, q) in float32 (integers promoted, as ATen's result type); float64: left."""

    def decomposition(x, q):
        if not isinstance(x, torch.Tensor):
            x = aten.scalar_tensor.default(x, device=q.device)
        if not isinstance(q, torch.Tensor):
            q = aten.scalar_tensor.default(q, device=x.device)
        if torch.float64 in (x.dtype, q.dtype):
            return NotImplemented
        out = torch.result_type(x, q)
        out = out if out.is_floating_point else torch.get_default_dtype()
        work = torch.float32
        r = f(aten._to_copy.default(x, dtype=work), aten._to_copy.default(q, dtype=work))
        return r if out == work else aten._to_copy.default(r, dtype=out)

    return decomposition


TABLE = {
    aten.special_bessel_j0.default: _float_op(_bessel_j0),
    aten.special_bessel_j1.default: _float_op(_bessel_j1),
    aten.special_bessel_y0.default: _float_op(_bessel_y0),
    aten.special_bessel_y1.default: _float_op(_bessel_y1),
    aten.special_modified_bessel_i0.default: _float_op(_i0),
    aten.special_modified_bessel_i1.default: _float_op(_i1),
    aten.special_modified_bessel_k0.default: _float_op(_modified_k(0, False)),
    aten.special_modified_bessel_k1.default: _float_op(_modified_k(1, False)),
    aten.special_scaled_modified_bessel_k0.default: _float_op(_modified_k(0, True)),
    aten.special_scaled_modified_bessel_k1.default: _float_op(_modified_k(1, True)),
    aten.special_spherical_bessel_j0.default: _float_op(_spherical_j0),
    aten.special_airy_ai.default: _float_op(_airy_ai),
    aten.special_ndtri.default: _float_op(_ndtri),
    aten.special_zeta.default: _binary(_zeta),
    aten.special_zeta.self_scalar: _binary(_zeta),
    aten.special_zeta.other_scalar: _binary(_zeta),
}

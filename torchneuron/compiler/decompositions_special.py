"""Special functions and integer/bit ops with no torch-mlir lowering, for the
decomposition table (decompositions.py). Each failed to compile before; each follows
ATen's CPU results at the special values (inf, -inf, NaN, -0.0, poles, domain edges).

Floating ops compute float16/bfloat16 in float32 and round once (ATen's CPU kernels do
too), integer inputs in float32 (their result dtype). float64 is not decomposed
(``_float_op``): these formulas are float32-grade and eager gives float64 full width.
Measured precision: docs/compile.md. Textbook formulas, not ATen's tables:
- ``erfc``: ``1 - erf`` below 0.5; above, Numerical Recipes' ``erfcc`` fit
  (``t exp(-x^2 + P(t))``, ``t = 1 / (1 + x/2)``, relative error < 1.2e-7) with
  ``x^2`` split in an exact part (as Cephes' ``expx2``), so ``erfc(9)`` keeps its digits
  (``1 - erf`` is 0 past 4); ``erfc(-x) = 2 - erfc(x)``.
- ``lgamma``: Stirling's series, below 8 at ``x + 8`` less ``log`` of the 8 factors,
  in [0.5, 2.5) the Taylor series at 1 (zeta coefficients: relative precision at the
  zeros 1 and 2); below 0 the reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)``
  with ``sin`` of ``x - round(x)`` (exact reduction); poles (0, -0.0, negative
  integers) and +-inf give inf.
- ``digamma``: the asymptotic series, below 10 at ``x + 10`` less ``sum 1/(x + k)``,
  in [0.5, 2.5) the Taylor series at 1; below 0 ``digamma(1 - x) - pi / tan(pi x)``;
  ``digamma(+-0) = -+inf``, NaN at negative integers and -inf (ATen's).
- ``erfinv``: Giles' single-precision approximation (2010), relative error about 4e-7;
  no Newton step (XLA's ``erf`` is not exact enough in the tail); +-1 give +-inf,
  outside [-1, 1] NaN.
- ``i0``: Abramowitz & Stegun 9.8.1/9.8.2 polynomials (below/above 3.75); overflows to
  inf where ATen's ``exp(x)`` does, NaN at +-inf (ATen's: ``inf * 0``).
- ``polygamma(1, x)`` (trigamma, digamma's derivative): ``sum 1/(y + k)^2`` for k < 10
  (squares of reciprocals: no subnormal on the way to 1e38) plus the asymptotic series
  at ``y + 10``; below 0 the reflection ``pi^2 / sin^2(pi x) - trigamma(1 - x)`` with
  ``sin`` of ``x - round(x)``; inf at 0 and the negative integers (ATen's float kernels
  give a large finite value there: their ``sin(pi x)`` is not reduced), NaN at -inf.
  ``polygamma(0, x)`` is ``digamma``.
- ``polygamma(n, x)``, 2 <= n <= 12: ATen's ``(-1)^(n+1) n! zeta(n+1, x)``, the Hurwitz
  zeta of ``y >= 0`` as 12 terms ``(y + k)^-(n+1)`` (powers by repeated squaring) plus
  the Euler-Maclaurin tail (8 Bernoulli terms) at ``y + 12``; below 0 the reflection
  ``(-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x))`` (``P_n`` the n-th derivative of cot
  as a polynomial in it, all coefficients of one sign) with cot of ``x - round(x)``, as
  ``tan(pi (0.5 - |r|))`` near the half-integers; +-inf at the poles and -inf by n's
  parity, NaN at +inf, as ATen. About 2e-6 relative of the true value (mpmath) where
  it is a normal float above 1e-30; the CPU's own kernel sums the series from ``x``,
  which cancels on the negative axis (float64 ``psi_12(-9.5)`` is 3.5e-4, the value
  -3.7e-5). n > 12: not decomposed (the lowering fails naming ``aten.polygamma``).
- ``special_i1`` (``i0``'s derivative): the power series ``(x/2) sum (x^2/4)^k /
  (k! (k+1)!)`` (positive terms) below 10, above it the asymptotic series
  ``exp(x) / sqrt(2 pi x) sum (-1)^k a_k / x^k`` taken as ``exp(x) * rsqrt(x) * P(1/x)``,
  so it overflows to inf where ATen's ``exp(x)`` does (past 88.7); odd through
  ``|x|`` and a sign flip as ATen (``i1(-0.0)`` is 0.0), NaN at +-inf (ATen's ``inf * 0``).
- ``nextafter``: on the bits (``view.dtype`` as the same-width integer) as an ordered
  key (a negative float's key is minus its magnitude), so subnormals and zeros step
  exactly (float compares would read subnormals as 0: compiled graphs set DAZ).
- ``gcd``: Euclid unrolled for the dtype's worst case (Lame: consecutive Fibonacci
  numbers), ``abs`` wrapping as ATen's (``gcd(INT_MIN, INT_MIN)`` is INT_MIN);
  ``lcm``: ``abs(a / gcd * b)``, 0 where the gcd is 0, wrapping as ATen's; for 8/16-bit
  types ``a / gcd * b`` in int32 as C promotes them in ATen's kernel (``lcm(127, -2)``
  of int8 is -2: ``abs(-254)``).
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten
_LOW = (torch.float16, torch.bfloat16)
_INF = float("inf")


def _to(x, dt):
    return x if x.dtype == dt else aten._to_copy.default(x, dtype=dt)


def _float_op(f):
    """``f`` on a float32 tensor; other dtypes converted in and out as ATen. Not float64:
    the formulas are float32-grade (about 1e-7 relative) and eager computes these ops at
    full width (or, ``erfinv``, narrowed only while TORCHNEURON_NARROW_64BIT is on, which
    a graph compiled once cannot follow), so a float64 result would differ from eager's
    silently; the op is left to the lowering, which fails naming it (``fallback_execution``
    runs it eagerly)."""

    def decomposition(x):
        if x.dtype == torch.float64:
            return NotImplemented
        out = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
        work = torch.float32 if out in _LOW else out
        return _to(f(_to(x, work)), out)

    return decomposition


def _horner(t, coeffs):
    """coeffs[0] + t * (coeffs[1] + t * (...))."""
    p = aten.full_like.default(t, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        p = aten.add.Tensor(aten.mul.Tensor(p, t), c)
    return p


def _full(x, v):
    return aten.full_like.default(x, v)


def _where(c, a, b):
    return aten.where.self(c, a, b)


# Numerical Recipes' erfcc: erfc(z) = t exp(-z^2 + sum c_k t^k), t = 1 / (1 + z/2)
_ERFCC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _erfc(x):
    z = aten.abs.default(x)
    t = aten.reciprocal.default(aten.add.Tensor(aten.mul.Tensor(z, 0.5), 1.0))
    # z^2 = zh^2 + (z - zh)(z + zh), zh = z rounded to 1/16: zh^2 is exact
    zh = aten.div.Tensor(aten.floor.default(aten.mul.Tensor(z, 16.0)), 16.0)
    lo = aten.mul.Tensor(aten.sub.Tensor(z, zh), aten.add.Tensor(z, zh))
    e = aten.mul.Tensor(
        aten.exp.default(aten.neg.default(aten.mul.Tensor(zh, zh))),
        aten.exp.default(aten.sub.Tensor(_horner(t, _ERFCC), lo)),
    )
    big = aten.mul.Tensor(t, e)
    big = _where(aten.isinf.default(z), _full(z, 0.0), big)
    big = _where(aten.lt.Scalar(x, 0), aten.rsub.Scalar(big, 2.0), big)
    small = aten.rsub.Scalar(aten.erf.default(x), 1.0)
    return _where(aten.lt.Scalar(z, 0.5), small, big)


def _off_integer(x):
    """x - round(x), in [-0.5, 0.5] and exact (Sterbenz), so sin(pi x) / tan(pi x) are
    taken of a small argument (sin(pi * frac) near pi lost the digits at -3.0000002,
    and frac = x - floor(x) rounds to 1 for x = -1e-9)."""
    return aten.sub.Tensor(x, aten.round.default(x))


def _stirling(z):
    """lgamma(z) for z >= 8: Stirling's series (error below 1e-13)."""
    r = aten.reciprocal.default(z)
    series = aten.mul.Tensor(
        r, _horner(aten.mul.Tensor(r, r), (1 / 12, -1 / 360, 1 / 1260, -1 / 1680))
    )
    st = aten.sub.Tensor(aten.mul.Tensor(aten.sub.Tensor(z, 0.5), aten.log.default(z)), z)
    return aten.add.Tensor(aten.add.Tensor(st, series), 0.5 * math.log(2 * math.pi))


def _zeta(k: int) -> float:
    """Riemann zeta(k), k >= 2: 40 terms and the Euler-Maclaurin tail (error < 1e-16)."""
    n = 40
    return (
        sum(j**-k for j in range(1, n))
        + n ** (1 - k) / (k - 1)
        + n**-k / 2
        + k * n ** (-k - 1) / 12
        - k * (k + 1) * (k + 2) * n ** (-k - 3) / 720
    )


_EULER_GAMMA = 0.5772156649015329
_SERIES_TERMS = 28  # |t| <= 0.5: the last term is below 1e-9
# lgamma(1 + t) = -gamma t + sum_{k>=2} (-1)^k zeta(k) / k t^k
_LGAMMA_1 = (0.0, -_EULER_GAMMA) + tuple((-1) ** k * _zeta(k) / k for k in range(2, _SERIES_TERMS))
# digamma(1 + t) = -gamma + sum_{k>=2} (-1)^k zeta(k) t^(k-1)
_DIGAMMA_1 = (-_EULER_GAMMA,) + tuple((-1) ** k * _zeta(k) for k in range(2, _SERIES_TERMS))


def _near_one_two(y):
    """(in [0.5, 2.5), t = y - 1 below 1.5 else y - 2, whether y >= 1.5): the range
    where the shifted forms cancel to an absolute error (lgamma's zeros at 1 and 2,
    digamma's at 1.46) and the Taylor series at 1 keeps the relative one."""
    upper = aten.ge.Scalar(y, 1.5)
    t = aten.sub.Tensor(y, _where(upper, _full(y, 2.0), _full(y, 1.0)))
    near = aten.logical_and(aten.ge.Scalar(y, 0.5), aten.lt.Scalar(y, 2.5))
    return near, t, upper


def _lgamma_positive(y):
    """lgamma of y > 0 (+-0: inf): below 8, at y + 8 less log of y (y+1) ... (y+7);
    in [0.5, 2.5) the series at 1 (lgamma(2 + t) = lgamma(1 + t) + log1p(t))."""
    prod = y
    for k in range(1, 8):
        prod = aten.mul.Tensor(prod, aten.add.Tensor(y, float(k)))
    shifted = aten.sub.Tensor(
        _stirling(aten.add.Tensor(y, 8.0)), aten.log.default(aten.abs.default(prod))
    )
    near, t, upper = _near_one_two(y)
    series = _horner(t, _LGAMMA_1)
    series = _where(upper, aten.add.Tensor(series, aten.log1p.default(t)), series)
    series = _where(aten.eq.Scalar(t, 0), _full(t, 0.0), series)  # +0.0 at 1 and 2
    out = _where(aten.lt.Scalar(y, 8.0), shifted, _stirling(y))
    return _where(near, series, out)


def _lgamma(x):
    neg = aten.lt.Scalar(x, 0)
    r = _off_integer(x)
    y = _where(neg, aten.rsub.Scalar(x, 1.0), x)
    lg = _lgamma_positive(y)
    sin = aten.abs.default(aten.sin.default(aten.mul.Tensor(r, math.pi)))
    refl = aten.sub.Tensor(aten.rsub.Scalar(aten.log.default(sin), math.log(math.pi)), lg)
    out = _where(neg, refl, lg)
    pole = aten.logical_or(aten.isinf.default(x), aten.logical_and(neg, aten.eq.Scalar(r, 0)))
    return _where(pole, _full(x, _INF), out)


# digamma(z) ~ log z - 1/(2z) - sum B_2k / (2k z^2k), z >= 10
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132)


def _digamma_asymptotic(z):
    """digamma(z) for z >= 10."""
    r = aten.reciprocal.default(z)
    r2 = aten.mul.Tensor(r, r)
    return aten.sub.Tensor(
        aten.sub.Tensor(aten.log.default(z), aten.mul.Tensor(r, 0.5)),
        aten.mul.Tensor(r2, _horner(r2, _DIGAMMA_SERIES)),
    )


def _digamma(x):
    neg = aten.lt.Scalar(x, 0)
    r = _off_integer(x)
    y = _where(neg, aten.rsub.Scalar(x, 1.0), x)
    acc = aten.zeros_like.default(y)
    for k in range(10):
        acc = aten.add.Tensor(acc, aten.reciprocal.default(aten.add.Tensor(y, float(k))))
    shifted = aten.sub.Tensor(_digamma_asymptotic(aten.add.Tensor(y, 10.0)), acc)
    pos = _where(aten.lt.Scalar(y, 10.0), shifted, _digamma_asymptotic(y))
    near, t, upper = _near_one_two(y)  # digamma(2 + t) = digamma(1 + t) + 1 / (1 + t)
    series = _horner(t, _DIGAMMA_1)
    series = _where(
        upper, aten.add.Tensor(series, aten.reciprocal.default(aten.add.Tensor(t, 1.0))), series
    )
    pos = _where(near, series, pos)
    refl = aten.sub.Tensor(
        pos, aten.div.Tensor(_full(x, math.pi), aten.tan.default(aten.mul.Tensor(r, math.pi)))
    )
    out = _where(neg, refl, pos)
    out = _where(aten.logical_and(neg, aten.eq.Scalar(r, 0)), _full(x, float("nan")), out)
    zero = aten.eq.Scalar(x, 0)  # -inf at 0.0, inf at -0.0 (ATen: copysign(inf, -x))
    return _where(zero, aten.copysign.Tensor(_full(x, _INF), aten.neg.default(x)), out)


# Giles (2010), single precision: erfinv(x) = x p(w), w = -log((1 - x)(1 + x))
_GILES_CENTRAL = (
    1.50140941,
    0.246640727,
    -0.00417768164,
    -0.00125372503,
    0.00021858087,
    -4.39150654e-06,
    -3.5233877e-06,
    3.43273939e-07,
    2.81022636e-08,
)
_GILES_TAIL = (
    2.83297682,
    1.00167406,
    0.00943887047,
    -0.0076224613,
    0.00573950773,
    -0.00367342844,
    0.00134934322,
    0.000100950558,
    -0.000200214257,
)


def _erfinv(x):
    ax = aten.abs.default(x)
    w = aten.neg.default(
        aten.log.default(aten.mul.Tensor(aten.rsub.Scalar(ax, 1.0), aten.add.Tensor(ax, 1.0)))
    )
    central = _horner(aten.sub.Tensor(w, 2.5), _GILES_CENTRAL)
    tail = _horner(aten.sub.Tensor(aten.sqrt.default(w), 3.0), _GILES_TAIL)
    r = aten.mul.Tensor(_where(aten.lt.Scalar(w, 5.0), central, tail), x)
    # no Newton step on erf: the lowered erf's rounding, divided by erf's small slope
    # in the tail, moved erfinv(0.9999) by 4e-5 (relative)
    r = _where(aten.eq.Scalar(ax, 1.0), aten.copysign.Tensor(_full(x, _INF), x), r)
    return _where(aten.gt.Scalar(ax, 1.0), _full(x, float("nan")), r)


_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (
    0.39894228,
    0.01328592,
    0.00225319,
    -0.00157565,
    0.00916281,
    -0.02057706,
    0.02635537,
    -0.01647633,
    0.00392377,
)


def _i0(x):
    ax = aten.abs.default(x)
    small = _horner(
        aten.mul.Tensor(aten.mul.Tensor(x, 1 / 3.75), aten.mul.Tensor(x, 1 / 3.75)), _I0_SMALL
    )
    safe = aten.maximum.default(ax, _full(ax, 3.75))  # no 1/0 in the branch not taken
    large = aten.mul.Tensor(
        aten.mul.Tensor(aten.exp.default(safe), aten.rsqrt.default(safe)),
        _horner(aten.reciprocal.default(aten.mul.Tensor(safe, 1 / 3.75)), _I0_LARGE),
    )
    return _where(aten.lt.Scalar(ax, 3.75), small, large)


def _trigamma_asymptotic(z):
    """trigamma(z) for z >= 10: 1/z + 1/(2z^2) + sum B_2k / z^(2k+1) (error below 1e-13)."""
    r = aten.reciprocal.default(z)
    r2 = aten.mul.Tensor(r, r)
    tail = aten.mul.Tensor(r, _horner(r2, (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66)))
    return aten.add.Tensor(r, aten.mul.Tensor(r2, aten.add.Tensor(tail, 0.5)))


def _trigamma(x):
    neg = aten.lt.Scalar(x, 0)
    r = _off_integer(x)
    y = _where(neg, aten.rsub.Scalar(x, 1.0), x)
    acc = aten.zeros_like.default(y)
    for k in range(10):
        inv = aten.reciprocal.default(aten.add.Tensor(y, float(k)))
        acc = aten.add.Tensor(acc, aten.mul.Tensor(inv, inv))
    shifted = aten.add.Tensor(_trigamma_asymptotic(aten.add.Tensor(y, 10.0)), acc)
    pos = _where(aten.lt.Scalar(y, 10.0), shifted, _trigamma_asymptotic(y))
    s = aten.sin.default(aten.mul.Tensor(r, math.pi))
    refl = aten.sub.Tensor(aten.div.Tensor(_full(x, math.pi**2), aten.mul.Tensor(s, s)), pos)
    out = _where(neg, refl, pos)
    pole = aten.logical_and(aten.le.Scalar(x, 0), aten.eq.Scalar(r, 0))  # 0, -0.0, -k
    out = _where(pole, _full(x, _INF), out)
    return _where(aten.isinf.default(x), _where(neg, _full(x, float("nan")), _full(x, 0.0)), out)


def _bernoulli_2k(count: int) -> list:
    """B_2, B_4, ..., B_2count (exact fractions, by the Akiyama-Tanigawa algorithm)."""
    from fractions import Fraction

    out, a = [], []
    for m in range(2 * count + 1):
        a.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        if m >= 2 and m % 2 == 0:
            out.append(a[0])
    return out


_HURWITZ_SHIFT = 12  # direct terms before the Euler-Maclaurin tail at y + 12
_HURWITZ_TERMS = 8  # tail terms: below 2e-8 relative for s <= 13 at a >= 12


def _int_power(r, s: int):
    """r ** s (s >= 1) by repeated squaring (about 1 ulp per multiply, no exp/log)."""
    out, base = None, r
    while s:
        if s & 1:
            out = base if out is None else aten.mul.Tensor(out, base)
        s >>= 1
        if s:
            base = aten.mul.Tensor(base, base)
    return out


def _hurwitz_tail(a, s: int):
    """zeta(s, a) for a >= 12, integer s >= 3, by Euler-Maclaurin: a^(1-s) (1/(s-1) +
    r/2 + sum_j B_2j/(2j)! s (s+1) ... (s+2j-2) r^(2j)), r = 1/a; a^(1-s) the only power
    taken (with a^-s apart, and the direct terms taken at every y, psi_12 near -1e3 was
    14 % off: they flushed to 0, compiled graphs have no subnormals)."""
    coeffs, rising = [], 1
    for j, b in enumerate(_bernoulli_2k(_HURWITZ_TERMS), start=1):
        rising *= (s + 2 * j - 3) * (s + 2 * j - 2) if j > 1 else s
        coeffs.append(float(b * rising / math.factorial(2 * j)))
    r = aten.reciprocal.default(a)
    inner = aten.add.Tensor(aten.mul.Tensor(r, _horner(aten.mul.Tensor(r, r), coeffs)), 0.5)
    series = aten.add.Tensor(aten.mul.Tensor(r, inner), 1.0 / (s - 1))
    return aten.mul.Tensor(_int_power(r, s - 1), series)


def _hurwitz_zeta_positive(y, s: int):
    """zeta(s, y) = sum_k (y + k)^-s for y > 0, integer s >= 3: below 12 the first 12
    terms plus the tail at y + 12 (the terms of a larger y would underflow first)."""
    acc = aten.zeros_like.default(y)
    for k in range(_HURWITZ_SHIFT):
        acc = aten.add.Tensor(
            acc, _int_power(aten.reciprocal.default(aten.add.Tensor(y, float(k))), s)
        )
    shifted = aten.add.Tensor(acc, _hurwitz_tail(aten.add.Tensor(y, float(_HURWITZ_SHIFT)), s))
    return _where(aten.lt.Scalar(y, float(_HURWITZ_SHIFT)), shifted, _hurwitz_tail(y, s))


def _cot_derivative_poly(n: int) -> list:
    """Coefficients (u^0 first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)):
    P_0 = u, P_(k+1) = -(1 + u^2) P_k'."""
    p = [0, 1]
    for _ in range(n):
        d = [i * c for i, c in enumerate(p)][1:] or [0]
        q = [0] * (len(d) + 2)
        for i, c in enumerate(d):
            q[i] -= c
            q[i + 2] -= c
        p = q
    return [float(c) for c in p]


def _cot_pi(r):
    """cot(pi r) for |r| <= 0.5: cos/sin below 0.25, else tan(pi (0.5 - |r|)) with the
    sign of r (0.5 - |r| exact there), so it is 0 at +-0.5 and keeps its relative
    precision near it (cos(pi / 2) is 4e-8 in float32: psi_4(-999.5) was off by 2e-4)."""
    a = aten.mul.Tensor(r, math.pi)
    small = aten.div.Tensor(aten.cos.default(a), aten.sin.default(a))
    ar = aten.abs.default(r)
    big = aten.tan.default(aten.mul.Tensor(aten.rsub.Scalar(ar, 0.5), math.pi))
    big = aten.mul.Tensor(big, aten.sign.default(r))
    return _where(aten.lt.Scalar(ar, 0.25), small, big)


_POLYGAMMA_MAX_N = 12  # the orders tested against mpmath; from 15 the tail's a^(1-s) flushes to 0
# (no subnormals in compiled graphs) where the value, (n-1)! times it, is still ~1e-30


def _polygamma_high(n: int):
    """polygamma(n, x), n >= 2, float32: (-1)^(n+1) n! zeta(n+1, x) (ATen's formula);
    below 0 the reflection psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)) with
    cot of ``x - round(x)``; at 0 and the negative integers (-1)^(n+1) inf, NaN at +inf
    and -inf's (-1)^(n+1) inf, as ATen's kernels."""
    sign = 1.0 if n % 2 else -1.0

    def f(x):
        neg = aten.lt.Scalar(x, 0)
        r = _off_integer(x)
        y = _where(neg, aten.rsub.Scalar(x, 1.0), x)
        pos = aten.mul.Tensor(_hurwitz_zeta_positive(y, n + 1), sign * math.factorial(n))
        u = _cot_pi(r)
        cot = aten.mul.Tensor(_horner(u, _cot_derivative_poly(n)), math.pi ** (n + 1))
        refl = aten.sub.Tensor(aten.mul.Tensor(pos, (-1.0) ** n), cot)
        out = _where(neg, refl, pos)
        pole = aten.logical_or(
            aten.logical_and(aten.le.Scalar(x, 0), aten.eq.Scalar(r, 0)), aten.eq.Scalar(x, -_INF)
        )  # r is NaN there
        out = _where(pole, _full(x, sign * _INF), out)
        return _where(aten.eq.Scalar(x, _INF), _full(x, float("nan")), out)

    return f


def polygamma(n, x):
    """polygamma(0, x) = digamma, polygamma(1, x) = trigamma, 2 <= n <= 12 through the
    Hurwitz zeta function (float32 grade; float64 left, as the others); other n:
    NotImplemented (the lowering then fails naming the op)."""
    if n == 0:
        return _float_op(_digamma)(x)
    if n == 1:
        return _float_op(_trigamma)(x)
    if 2 <= n <= _POLYGAMMA_MAX_N:
        return _float_op(_polygamma_high(n))(x)
    return NotImplemented


def _i1_series_coeffs(terms: int) -> tuple:
    """1 / (k! (k+1)!), k < terms: i1(x) = (x/2) sum c_k (x^2/4)^k."""
    return tuple(1.0 / (math.factorial(k) * math.factorial(k + 1)) for k in range(terms))


_I1_SMALL = _i1_series_coeffs(20)  # x < 10: the last term is below 1e-10 relative


def _i1_asymptotic_coeffs(terms: int) -> tuple:
    """(-1)^k a_k(1) / sqrt(2 pi), a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)."""
    out, a = [], 1.0
    for k in range(terms):
        if k:
            a *= (4 - (2 * k - 1) ** 2) / (8 * k)
        out.append((-1) ** k * a / math.sqrt(2 * math.pi))
    return tuple(out)


_I1_LARGE = _i1_asymptotic_coeffs(13)  # x >= 10: the last term is below 1e-8 relative


def _i1(x):
    z = aten.abs.default(x)
    q = aten.mul.Tensor(aten.mul.Tensor(z, 0.5), aten.mul.Tensor(z, 0.5))
    small = aten.mul.Tensor(aten.mul.Tensor(z, 0.5), _horner(q, _I1_SMALL))
    safe = aten.maximum.default(z, _full(z, 10.0))  # no 1/0 in the branch not taken
    # exp(z) * rsqrt(z) first: inf at z = inf gives NaN, as ATen's
    large = aten.mul.Tensor(
        aten.mul.Tensor(aten.exp.default(safe), aten.rsqrt.default(safe)),
        _horner(aten.reciprocal.default(safe), _I1_LARGE),
    )
    out = _where(aten.lt.Scalar(z, 10.0), small, large)
    return _where(aten.lt.Scalar(x, 0), aten.neg.default(out), out)


_BITS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


def nextafter(x, y):
    it = _BITS[x.dtype]
    width = torch.iinfo(it).bits
    mag = 2 ** (width - 1) - 1

    def key(v):  # ordered: a negative float's key is minus its magnitude bits
        b = aten.view.dtype(v, it)
        m = aten.bitwise_and.Scalar(b, mag)
        return _where(aten.lt.Scalar(b, 0), aten.neg.default(m), m)

    kx, ky = key(x), key(y)
    k = _where(aten.lt.Tensor(kx, ky), aten.add.Tensor(kx, 1), aten.sub.Tensor(kx, 1))
    bits = _where(
        aten.lt.Scalar(k, 0), aten.bitwise_or.Scalar(aten.neg.default(k), -(2 ** (width - 1))), k
    )
    out = aten.view.dtype(bits, x.dtype)
    out = _where(aten.eq.Tensor(kx, ky), y, out)
    nan = aten.logical_or(aten.isnan.default(x), aten.isnan.default(y))
    return _where(nan, aten.add.Tensor(x, y), out)


# Euclid's steps for the worst pair of the width (consecutive Fibonacci numbers)
_GCD_STEPS = {8: 13, 16: 24, 32: 47, 64: 93}


def gcd(a, b):
    dt = torch.result_type(a, b)
    a, b = _to(a, dt), _to(b, dt)
    if dt.is_signed:
        a, b = aten.abs.default(a), aten.abs.default(b)
    zero, one = aten.zeros_like.default(a), aten.ones_like.default(a)
    for _ in range(_GCD_STEPS[torch.iinfo(dt).bits]):
        nz = aten.ne.Scalar(a, 0)
        r = aten.fmod.Tensor(b, _where(nz, a, one))
        a, b = _where(nz, r, zero), _where(nz, a, b)
    return b


def lcm(a, b):
    dt = torch.result_type(a, b)
    a, b = _to(a, dt), _to(b, dt)
    g = gcd(a, b)
    if torch.iinfo(dt).bits < 32:  # a / g * b and abs in int, as C promotes in ATen's
        a, b, g = _to(a, torch.int32), _to(b, torch.int32), _to(g, torch.int32)
    gz = aten.eq.Scalar(g, 0)
    q = aten.div.Tensor_mode(a, _where(gz, aten.ones_like.default(g), g), rounding_mode="trunc")
    m = aten.mul.Tensor(q, b)
    if dt.is_signed:
        m = aten.abs.default(m)
    return _to(_where(gz, aten.zeros_like.default(m), m), dt)


TABLE = {
    aten.erfc.default: _float_op(_erfc),
    aten.lgamma.default: _float_op(_lgamma),
    aten.digamma.default: _float_op(_digamma),
    aten.erfinv.default: _float_op(_erfinv),
    aten.i0.default: _float_op(_i0),
    aten.polygamma.default: polygamma,
    aten.special_i1.default: _float_op(_i1),
    aten.nextafter.default: nextafter,
    aten.gcd.default: gcd,
    aten.lcm.default: lcm,
}

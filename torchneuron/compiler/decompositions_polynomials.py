"""The Chebyshev polynomials of the four kinds and their shifted forms
(``special_chebyshev_polynomial_{t,u,v,w}``, ``special_shifted_chebyshev_polynomial_{t,u,v,w}``;
no torch-mlir lowering: each failed naming its op in the OpInfo sweep), with ATen's
CPU rules (``ATen/native/Math.h``) on ``y = x`` (shifted: ``y = 2x - 1``) and
``n = trunc(n)``:

- ``n < 0``: 0; ``y == 1`` and ``y == -1`` (shifted: ``x == 1``, ``x == 0``): ATen's values
  (T 1 and ``(-1)^n``, U ``n + 1`` and ``(-1)^n (n + 1)``, V 1 and ``(-1)^n (2n + 1)``,
  W ``2n + 1`` and ``(-1)^n``);
- ``|y| < 1`` past ATen's threshold (T 6, U/V/W 8; shifted T/U/V 6, W 4): its
  trigonometric form of ``acos(y)``;
- else ATen's recurrence ``r = 2y q - p`` from its first two terms, unrolled to
  ``_UNROLLED`` steps and the step ``n`` picked (the same operations as ATen's loop);
- ``n > _UNROLLED`` with ``|y| > 1`` (ATen runs its loop to ``n``, which a graph of
  static size cannot): the hyperbolic closed form of ``acosh(|y|)`` with the sign of
  ``y < -1`` (``V(-z) = (-1)^n W(z)``), NaN where the value and the one before overflow
  (ATen's loop gives ``inf - inf`` then). These values differ from ATen's by rounding
  only: its loop's error grows with ``n``, the closed form's with ``log`` of the value.

Computed in float32 (integer inputs promoted as ATen does); float64 is left to the
lowering (fails naming the op), as the special functions in decompositions_special.py.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_UNROLLED = 32
# ATen's thresholds of n past which |y| < 1 takes the trigonometric form
_KINDS = {"t": 6, "u": 8, "v": 8, "w": 8}
_SHIFTED_THRESHOLD = {"t": 6, "u": 6, "v": 6, "w": 4}


def _q1(kind, y):
    if kind == "t":
        return y
    two_y = aten.add.Tensor(y, y)
    if kind == "u":
        return two_y
    return aten.add.Tensor(two_y, -1.0 if kind == "v" else 1.0)


def _trig(kind, y, n):
    """ATen's form for ``|y| < 1`` (its fallbacks where the denominator is 0 or 1)."""
    th = aten.acos.default(y)
    if kind == "t":
        return aten.cos.default(aten.mul.Tensor(n, th))
    if kind == "u":
        s = aten.sin.default(th)
        n1 = aten.add.Tensor(n, 1.0)
        main = aten.div.Tensor(aten.sin.default(aten.mul.Tensor(n1, th)), s)
        alt = aten.div.Tensor(aten.mul.Tensor(n1, aten.cos.default(aten.mul.Tensor(n1, th))), y)
        return aten.where.self(aten.ne.Scalar(s, 0.0), main, alt)
    half = aten.div.Tensor(th, 2.0)
    nh = aten.mul.Tensor(aten.add.Tensor(n, 0.5), th)
    odd = aten.ne.Scalar(aten.fmod.Scalar(n, 2.0), 0.0)
    if kind == "v":
        main = aten.div.Tensor(aten.cos.default(nh), aten.cos.default(half))
        two_n1 = aten.add.Tensor(aten.add.Tensor(n, n), 1.0)
        alt = aten.where.self(odd, aten.neg.default(two_n1), two_n1)
        return aten.where.self(aten.ne.Scalar(aten.sin.default(half), 1.0), main, alt)
    main = aten.div.Tensor(aten.sin.default(nh), aten.sin.default(half))
    one = aten.full_like.default(y, 1.0)
    alt = aten.where.self(aten.gt.Scalar(y, 0.0), aten.add.Tensor(aten.add.Tensor(n, n), 1.0), one)
    alt = aten.where.self(aten.logical_and(aten.le.Scalar(y, 0.0), odd), aten.neg.default(one), alt)
    return aten.where.self(aten.ne.Scalar(aten.cos.default(half), 1.0), main, alt)


def _hyperbolic(kind, z, n):
    """The value at ``z > 1`` (``t = acosh(z)``)."""
    t = aten.acosh.default(z)
    if kind == "t":
        return aten.cosh.default(aten.mul.Tensor(n, t))
    if kind == "u":
        num = aten.sinh.default(aten.mul.Tensor(aten.add.Tensor(n, 1.0), t))
        return aten.div.Tensor(num, aten.sinh.default(t))
    nh = aten.mul.Tensor(aten.add.Tensor(n, 0.5), t)
    half = aten.div.Tensor(t, 2.0)
    if kind == "v":
        return aten.div.Tensor(aten.cosh.default(nh), aten.cosh.default(half))
    return aten.div.Tensor(aten.sinh.default(nh), aten.sinh.default(half))


def _large_n(kind, y, n):
    """``|y| > 1``, any ``n``: the closed form, signed for ``y < -1``."""
    z = aten.abs.default(y)
    neg = aten.lt.Scalar(y, 0.0)
    mirrored = {"t": "t", "u": "u", "v": "w", "w": "v"}[kind]
    v = aten.where.self(neg, _hyperbolic(mirrored, z, n), _hyperbolic(kind, z, n))
    odd = aten.ne.Scalar(aten.fmod.Scalar(n, 2.0), 0.0)
    v = aten.where.self(aten.logical_and(neg, odd), aten.neg.default(v), v)
    before = aten.sub.Tensor(n, 1.0)
    prev = aten.where.self(neg, _hyperbolic(mirrored, z, before), _hyperbolic(kind, z, before))
    both_inf = aten.logical_and(aten.isinf.default(v), aten.isinf.default(prev))
    return aten.where.self(both_inf, aten.full_like.default(v, float("nan")), v)


def _chebyshev(kind, shifted, x, n):
    if x.dtype == torch.float64 or n.dtype == torch.float64:
        return NotImplemented
    out = torch.result_type(x, n)
    out = out if out.is_floating_point else torch.get_default_dtype()
    x, n = aten.broadcast_tensors.default([x, n])
    x = aten._to_copy.default(x, dtype=torch.float32)
    n = aten.trunc.default(aten._to_copy.default(n, dtype=torch.float32))
    y = aten.sub.Tensor(aten.add.Tensor(x, x), 1.0) if shifted else x
    one = aten.full_like.default(y, 1.0)

    # the recurrence, unrolled: r at step k where n == k
    q1 = _q1(kind, y)
    two_y = aten.add.Tensor(y, y)
    p, q = one, q1
    r = aten.where.self(aten.eq.Scalar(n, 1.0), q1, one)
    for k in range(2, _UNROLLED + 1):
        p, q = q, aten.sub.Tensor(aten.mul.Tensor(two_y, q), p)
        r = aten.where.self(aten.eq.Scalar(n, float(k)), q, r)
    ay = aten.abs.default(y)
    r = aten.where.self(
        aten.logical_and(aten.gt.Scalar(n, float(_UNROLLED)), aten.gt.Scalar(ay, 1.0)),
        _large_n(kind, y, n),
        r,
    )
    threshold = (_SHIFTED_THRESHOLD if shifted else _KINDS)[kind]
    r = aten.where.self(
        aten.logical_and(aten.gt.Scalar(n, float(threshold)), aten.lt.Scalar(ay, 1.0)),
        _trig(kind, y, n),
        r,
    )
    # y == +-1 (shifted: x == 1, x == 0)
    odd = aten.ne.Scalar(aten.fmod.Scalar(n, 2.0), 0.0)
    n1 = aten.add.Tensor(n, 1.0)
    two_n1 = aten.add.Tensor(aten.add.Tensor(n, n), 1.0)
    at_one = {"t": one, "u": n1, "v": one, "w": two_n1}[kind]
    mag = {"t": one, "u": n1, "v": two_n1, "w": one}[kind]
    at_minus_one = aten.where.self(odd, aten.neg.default(mag), mag)
    r = aten.where.self(aten.eq.Scalar(y, 1.0), at_one, r)
    r = aten.where.self(aten.eq.Scalar(y, -1.0), at_minus_one, r)
    r = aten.where.self(aten.lt.Scalar(n, 0.0), aten.zeros_like.default(r), r)
    return aten._to_copy.default(r, dtype=out)


def _decomposition(kind, shifted):
    def tensor_tensor(x, n):
        return _chebyshev(kind, shifted, x, n)

    def x_scalar(x, n):
        return _chebyshev(kind, shifted, aten.scalar_tensor.default(x, device=n.device), n)

    def n_scalar(x, n):
        return _chebyshev(kind, shifted, x, aten.scalar_tensor.default(n, device=x.device))

    return tensor_tensor, x_scalar, n_scalar


def _table() -> dict:
    table = {}
    for kind in _KINDS:
        for shifted in (False, True):
            name = f"special_{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
            packet = getattr(aten, name)
            tt, xs, ns = _decomposition(kind, shifted)
            table[packet.default] = tt
            table[packet.x_scalar] = xs
            table[packet.n_scalar] = ns
    return table


TABLE = _table()


# Hermite (physicists' H, probabilists' He), Laguerre L and Legendre P: ATen's recurrences
# (ATen/native/Math.h, DLMF 18.9.1) unrolled to _ORTHOGONAL_STEPS degrees, the step of
# degree n picked, with ATen's rules: n = trunc(n), n < 0 or not finite (its int64 cast)
# gives 0; H and He give NaN past degree 128 (ATen's float limit); L is 1 at x = +-0, P
# is 1 at x = 1 and (-1)^n at x = -1. L and P have no limit in ATen (its loop runs n
# steps); past _ORTHOGONAL_STEPS the graph gives NaN (a static graph cannot loop n times).
_ORTHOGONAL_STEPS = 128


def _orthogonal_step(kind, x, p, q, k: int):
    """The polynomial of degree k + 1 from those of degree k - 1 (p) and k (q), ATen's
    operations in its order."""
    if kind == "h":  # (x + x) q - 2k p
        return aten.sub.Tensor(
            aten.mul.Tensor(aten.add.Tensor(x, x), q), aten.mul.Tensor(p, 2.0 * k)
        )
    if kind == "he":  # x q - k p
        return aten.sub.Tensor(aten.mul.Tensor(x, q), aten.mul.Tensor(p, float(k)))
    if kind == "l":  # ((2k + (1 - x)) q - k p) / (k + 1)
        a = aten.add.Tensor(aten.rsub.Scalar(x, 1.0), 2.0 * k)
    else:  # ((2k + 1) x q - k p) / (k + 1)
        a = aten.mul.Tensor(x, 2.0 * k + 1)
    num = aten.sub.Tensor(aten.mul.Tensor(a, q), aten.mul.Tensor(p, float(k)))
    return aten.div.Tensor(num, float(k + 1))


def _orthogonal(kind, x, n):
    if x.dtype == torch.float64 or n.dtype == torch.float64:
        return NotImplemented
    out = torch.result_type(x, n)
    out = out if out.is_floating_point else torch.get_default_dtype()
    x, n = aten.broadcast_tensors.default([x, n])
    x = aten._to_copy.default(x, dtype=torch.float32)
    n = aten._to_copy.default(n, dtype=torch.float32)
    n = aten.where.self(
        aten.isfinite.default(n), aten.trunc.default(n), aten.full_like.default(n, -1.0)
    )
    one = aten.full_like.default(x, 1.0)
    first = {"h": aten.add.Tensor(x, x), "he": x, "l": aten.rsub.Scalar(x, 1.0), "p": x}[kind]
    p, q = one, first
    r = aten.where.self(aten.eq.Scalar(n, 1.0), first, one)
    for k in range(1, _ORTHOGONAL_STEPS):
        p, q = q, _orthogonal_step(kind, x, p, q, k)
        r = aten.where.self(aten.eq.Scalar(n, float(k + 1)), q, r)
    r = aten.where.self(
        aten.gt.Scalar(n, float(_ORTHOGONAL_STEPS)), aten.full_like.default(r, float("nan")), r
    )
    if kind == "l":
        r = aten.where.self(aten.eq.Scalar(x, 0.0), one, r)
    if kind == "p":
        odd = aten.ne.Scalar(aten.fmod.Scalar(n, 2.0), 0.0)
        minus = aten.where.self(odd, aten.neg.default(one), one)
        r = aten.where.self(aten.eq.Scalar(x, 1.0), one, r)
        r = aten.where.self(aten.eq.Scalar(x, -1.0), minus, r)
    r = aten.where.self(aten.lt.Scalar(n, 0.0), aten.zeros_like.default(r), r)
    return aten._to_copy.default(r, dtype=out)


def _orthogonal_table() -> dict:
    table = {}
    names = {"h": "hermite_polynomial_h", "he": "hermite_polynomial_he"}
    names |= {"l": "laguerre_polynomial_l", "p": "legendre_polynomial_p"}
    for kind, name in names.items():
        packet = getattr(aten, f"special_{name}")

        def tt(x, n, kind=kind):
            return _orthogonal(kind, x, n)

        def xs(x, n, kind=kind):
            return _orthogonal(kind, aten.scalar_tensor.default(x, device=n.device), n)

        def ns(x, n, kind=kind):
            return _orthogonal(kind, x, aten.scalar_tensor.default(n, device=x.device))

        table[packet.default] = tt
        table[packet.x_scalar] = xs
        table[packet.n_scalar] = ns
    return table


TABLE.update(_orthogonal_table())

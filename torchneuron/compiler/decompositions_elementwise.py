"""Elementwise ops computed as ATen's CPU kernels compute them, for the decomposition
table (decompositions.py).

- ``hypot``: torch-mlir has no lowering (it failed to compile). ATen calls C's
  ``std::hypot``, which does not overflow: here ``m * sqrt(1 + (n / m)**2)`` with
  ``m = max(|a|, |b|)``, ``n = min(|a|, |b|)``, 0 where ``m`` is 0, inf where either is
  infinite (NaN beside an infinity included, as C's); bfloat16/float16 in float32.
- ``x ** 0.5`` / ``x ** -0.5``: ATen's ``pow`` takes ``sqrt``/``rsqrt`` for these
  exponents (float32, float64, bfloat16), lowered it was ``stablehlo.power``: ``(-inf) ** 0.5`` gave inf (ATen NaN)
  and ``(-0.0) ** 0.5`` 0.0 (ATen -0.0).
- ``clamp``/``clamp_min``/``clamp_max`` of bool: scalar bounds failed to compile and
  tensor bounds gave other values than the CPU (all False for ``clamp(x, min=m)``).
  ATen converts each bool bound to bool, then takes max/min: computed in int32 and
  compared with 0; a bound of another dtype (a Python int) promotes, as ATen's result
  type (``clamp(x, 0, 1)`` of bool is int64).
- ``xlogy``/``copysign`` with a Python-number operand: with its tensor form and a 0-dim
  tensor (the core decomposition's ``prims.scalar_tensor`` has no lowering).
- ``angle`` of real numbers (no lowering): ``pi`` below 0, else 0, NaN kept (ATen's).
- ``reciprocal`` of integers/bool (its float result) and ``isinf`` of integers/bool
  through float32; ``abs`` of uint8 (StableHLO's ``abs`` takes no unsigned type) is the
  value itself; ``erf`` of integers/bool through float32 (lowered, it failed).
- ``frexp`` (no lowering) on the bits of float32, subnormals included.
- ``trunc`` of floats as ``ceil`` below 0, else ``floor``: torch-mlir lowered it as
  ``sign(x) * floor(|x|)``, whose ``sign(-0.0)`` is 0, so ``trunc(-0.0)`` was 0.0
  (ATen and IEEE: -0.0) and ``frac(-0.0)`` -0.0.
- ``prims.copy_strided`` (the core ``lerp`` decomposition's last step for a
  non-contiguous input: ``torch.lerp(x.t(), y, 0.3)`` failed to compile) is a copy:
  StableHLO tensors have no strides.
- ``prims.fma`` (Inductor's prim: Dynamo traces ``addcmul_``/``addcdiv_`` with a ``value``
  as ``fma(t1 * t2, value, self)``, so every non-foreach Adam, AdamW, NAdam, RAdam, Adagrad
  and RMSprop step failed to compile): ``a * b + c`` as ATen's CPU ``addcmul`` computes it,
  bfloat16/float16 in float32 and rounded once.
"""

from __future__ import annotations

import torch
import torch._inductor.inductor_prims as inductor_prims  # registers prims.fma (15 ms)

aten = torch.ops.aten
_LOW = (torch.float16, torch.bfloat16)


def hypot(a, b):
    dt = torch.result_type(a, b)
    if not dt.is_floating_point:
        return NotImplemented
    wt = torch.float32 if dt in _LOW else dt
    a, b = (aten._to_copy.default(t, dtype=wt) if t.dtype != wt else t for t in (a, b))
    aa, ab = aten.abs.default(a), aten.abs.default(b)
    m, n = aten.maximum.default(aa, ab), aten.minimum.default(aa, ab)
    safe_m = aten.where.self(aten.eq.Scalar(m, 0), aten.ones_like.default(m), m)
    r = aten.div.Tensor(n, safe_m)
    h = aten.mul.Tensor(m, aten.sqrt.default(aten.add.Tensor(aten.mul.Tensor(r, r), 1.0)))
    h = aten.where.self(aten.eq.Scalar(m, 0), aten.zeros_like.default(m), h)
    inf = aten.logical_or(aten.isinf.default(a), aten.isinf.default(b))
    h = aten.where.self(inf, aten.full_like.default(h, float("inf")), h)
    return aten._to_copy.default(h, dtype=dt) if wt != dt else h


def pow_tensor_scalar(x, exponent):
    # float16: ATen's CPU kernel takes its generic pow (-inf ** 0.5 = inf there)
    if (
        x.dtype not in (torch.float32, torch.float64, torch.bfloat16)
        or isinstance(exponent, bool)
        or exponent not in (0.5, -0.5)
    ):
        return NotImplemented
    return aten.sqrt.default(x) if exponent == 0.5 else aten.rsqrt.default(x)


def _bool_bound(b, x):
    """A bound of a bool clamp as an int32 tensor of 0/1 (ATen converts it to bool)."""
    if b is None:
        return None
    if isinstance(b, torch.Tensor):
        return aten._to_copy.default(aten.ne.Scalar(b, 0), dtype=torch.int32)
    return aten.scalar_tensor(int(bool(b)), dtype=torch.int32, device=x.device)


def clamp_bool(x, min=None, max=None):
    if x.dtype != torch.bool:
        return NotImplemented
    dt = torch.result_type(x, min if min is not None else max)
    if max is not None and min is not None:
        dt = torch.promote_types(dt, torch.result_type(x, max))
    if dt != torch.bool:  # a bound of another dtype (a Python int too) promotes
        return aten.clamp.Tensor(
            aten._to_copy.default(x, dtype=dt),
            *(
                b
                if b is None or isinstance(b, torch.Tensor)
                else aten.scalar_tensor(b, dtype=dt, device=x.device)
                for b in (min, max)
            ),
        )
    lo, hi = _bool_bound(min, x), _bool_bound(max, x)
    y = aten._to_copy.default(x, dtype=torch.int32)
    if lo is not None:
        y = aten.maximum.default(y, lo)
    if hi is not None:
        y = aten.minimum.default(y, hi)
    return aten.ne.Scalar(y, 0)


def clamp_min_bool(x, min):
    return clamp_bool(x, min=min)


def clamp_max_bool(x, max):
    return clamp_bool(x, max=max)


def _number_operand(tensor_op, number_first=False):
    def decomposition(a, b):
        t, n = (b, a) if number_first else (a, b)
        if not isinstance(t, torch.Tensor):
            return NotImplemented
        nt = aten.scalar_tensor(n, dtype=torch.result_type(t, n), device=t.device)
        return tensor_op(nt, t) if number_first else tensor_op(t, nt)

    return decomposition


def angle(x):
    if x.dtype.is_complex:
        return NotImplemented
    dt = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    xf = aten._to_copy.default(x, dtype=dt) if x.dtype != dt else x
    zero = aten.zeros_like.default(xf)
    r = aten.where.self(aten.lt.Scalar(xf, 0), aten.full_like.default(xf, torch.pi), zero)
    return aten.where.self(aten.isnan.default(xf), xf, r)


def _through_float(op):
    def decomposition(x):
        if x.dtype.is_floating_point or x.dtype.is_complex:
            return NotImplemented
        return op(aten._to_copy.default(x, dtype=torch.get_default_dtype()))

    return decomposition


def frexp(x):
    """(mantissa, exponent) on float32's bits: a normal number's exponent field less 126
    and its bits with that field set to 126 (0.5 <= |m| < 1); a subnormal's fraction
    converted to float (exact) and read the same way, 149 lower; 0, inf and NaN as
    themselves with exponent 0 (C's frexp, ATen's kernel). float16/bfloat16 through
    float32 (the mantissa converts back exactly); float64 left."""
    if x.dtype not in (torch.float32, *_LOW):
        return NotImplemented
    xf = aten._to_copy.default(x, dtype=torch.float32) if x.dtype != torch.float32 else x
    bits = aten.view.dtype(xf, torch.int32)
    field = aten.div.Tensor_mode(
        aten.bitwise_and.Scalar(bits, 0x7F800000), 1 << 23, rounding_mode="trunc"
    )
    frac = aten.bitwise_and.Scalar(bits, 0x7FFFFF)
    sign = aten.bitwise_and.Scalar(bits, -(1 << 31))
    # a subnormal: frac * 2^-149, frac read as a float (exact below 2^24)
    fbits = aten.view.dtype(aten._to_copy.default(frac, dtype=torch.float32), torch.int32)
    ffield = aten.div.Tensor_mode(
        aten.bitwise_and.Scalar(fbits, 0x7F800000), 1 << 23, rounding_mode="trunc"
    )
    sub = aten.logical_and(aten.eq.Scalar(field, 0), aten.ne.Scalar(frac, 0))
    exp = aten.where.self(sub, aten.sub.Tensor(ffield, 126 + 149), aten.sub.Tensor(field, 126))
    mbits = aten.where.self(sub, aten.bitwise_and.Scalar(fbits, 0x7FFFFF), frac)
    mbits = aten.bitwise_or.Tensor(aten.bitwise_or.Scalar(mbits, 126 << 23), sign)
    mant = aten.view.dtype(mbits, torch.float32)
    special = aten.logical_or(
        aten.eq.Scalar(field, 255),
        aten.logical_and(aten.eq.Scalar(field, 0), aten.eq.Scalar(frac, 0)),
    )
    mant = aten.where.self(special, xf, mant)
    exp = aten.where.self(special, aten.zeros_like.default(exp), exp)
    if x.dtype != torch.float32:
        mant = aten._to_copy.default(mant, dtype=x.dtype)
    return mant, exp


def abs_unsigned(x):
    if x.dtype not in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
        return NotImplemented
    return aten.clone.default(x)


def trunc(x):
    if not x.dtype.is_floating_point:
        return NotImplemented
    return aten.where.self(aten.lt.Scalar(x, 0), aten.ceil.default(x), aten.floor.default(x))


def copy_strided(x, stride):
    return aten.clone.default(x)


def fma(a, b, c):
    dt = torch._prims_common.elementwise_dtypes(
        a, b, c, type_promotion_kind=torch._prims_common.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    )[1]
    if not dt.is_floating_point:
        return aten.add.Tensor(aten.mul.Tensor(a, b), c)
    wt = torch.float32 if dt in _LOW else dt
    a, c = (aten._to_copy.default(t, dtype=wt) if t.dtype != wt else t for t in (a, c))
    if isinstance(b, torch.Tensor) and b.dtype != wt:
        b = aten._to_copy.default(b, dtype=wt)
    r = aten.add.Tensor(aten.mul.Tensor(a, b), c)
    return aten._to_copy.default(r, dtype=dt) if wt != dt else r


TABLE = {
    torch.ops.prims.copy_strided.default: copy_strided,
    inductor_prims.fma: fma,
    aten.trunc.default: trunc,
    aten.xlogy.Scalar_Other: _number_operand(aten.xlogy.Tensor),
    aten.xlogy.Scalar_Self: _number_operand(aten.xlogy.Tensor, number_first=True),
    aten.copysign.Scalar: _number_operand(aten.copysign.Tensor),
    aten.angle.default: angle,
    aten.reciprocal.default: _through_float(aten.reciprocal.default),
    aten.isinf.default: _through_float(aten.isinf.default),
    aten.erf.default: _through_float(aten.erf.default),
    aten.frexp.Tensor: frexp,
    aten.abs.default: abs_unsigned,
    aten.hypot.default: hypot,
    aten.pow.Tensor_Scalar: pow_tensor_scalar,
    aten.clamp.default: clamp_bool,
    aten.clamp.Tensor: clamp_bool,
    aten.clamp_min.default: clamp_min_bool,
    aten.clamp_min.Tensor: clamp_min_bool,
    aten.clamp_max.default: clamp_max_bool,
    aten.clamp_max.Tensor: clamp_max_bool,
}

"""The decomposition table AOTAutograd applies before lowering.

PyTorch's core ATen decompositions plus those torch-mlir's FX path relies on
(torch_mlir.extras.fx_decomp_util), plus dropout in terms of ``rand`` (so the
random-op pass sees one kind of random op). Kept as data, one place to extend.
"""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from . import (
    decompositions_adaptive,
    decompositions_attention,
    decompositions_backward,
    decompositions_bessel,
    decompositions_conv,
    decompositions_copies,
    decompositions_elementwise,
    decompositions_householder,
    decompositions_indexed,
    decompositions_layers,
    decompositions_linalg,
    decompositions_matmul,
    decompositions_nn,
    decompositions_order,
    decompositions_polynomials,
    decompositions_pooling,
    decompositions_reductions,
    decompositions_scaled,
    decompositions_scans,
    decompositions_segment,
    decompositions_special,
)

aten = torch.ops.aten

# Ours, beyond core ATen and torch-mlir's list (reasons in comments).
_EXTRA = [
    aten.native_dropout,  # -> rand_like < p: random ops become inputs (passes/)
    aten.bernoulli.p,
    aten.addmv,  # beta * self + alpha * (mat @ vec): torch-mlir has no lowering for addmv
]


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``empty_like`` of a permuted tensor (SiLU's backward in HF Llama) as a plain
    ``empty``: its values are undefined and StableHLO tensors have no strides, so the
    physical order has nothing to lower to (torch-mlir has no lowering for it)."""
    return aten.empty.memory_format(
        size, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory
    )


def remainder(a, b):
    """Python's modulo (result has the divisor's sign), from ``fmod``: torch-mlir lowers
    ``aten.remainder`` to StableHLO's truncated remainder, C's ``fmod`` (``-7 % 5`` gave
    -2, not 3). Where fmod's result is nonzero and of the other sign than the divisor,
    the divisor is added (PyTorch's definition). A Python-scalar divisor's sign is
    decided here: with it computed in the graph, ``x % 4.0`` still came out wrong
    (the lowered StableHLO xor-ed the sign test with true: torch-mlir folded the
    compare of the constant with an int at random, passes/float_scalar_operands.py). The
    fmod itself is lowered exactly by passes/exact_fmod.py."""
    if not isinstance(b, torch.Tensor) and isinstance(b, int) and not -(2**31) <= b < 2**31:
        # its sign is the graph's to decide: narrowed to int32 (the 64-bit policy),
        # 2**31 is -2**31 (eager: 3 % 2**31 == -2147483645 then)
        b = aten.scalar_tensor(b, dtype=torch.result_type(a, b), device=a.device)
    if isinstance(b, torch.Tensor):
        r = aten.fmod.Tensor(a, b)
        fix = aten.logical_or(
            aten.logical_and(aten.lt.Scalar(b, 0), aten.gt.Scalar(r, 0)),
            aten.logical_and(aten.gt.Scalar(b, 0), aten.lt.Scalar(r, 0)),
        )
        return aten.where.self(fix, aten.add.Tensor(r, b), r)
    # torch-mlir cannot lower fmod.Scalar's scalar operand: a 0-dim tensor instead
    bt = aten.scalar_tensor(b, dtype=torch.result_type(a, b), device=a.device)
    r = aten.fmod.Tensor(a, bt)
    fix = aten.lt.Scalar(r, 0) if b > 0 else aten.gt.Scalar(r, 0)
    return aten.where.self(fix, aten.add.Tensor(r, bt), r)


def div_floor(a, b, *, rounding_mode=None):
    """Float ``div(a, b, rounding_mode="floor")`` as ATen's ``div_floor_floating``: the
    quotient of ``a - fmod(a, b)``, less one where fmod's sign differs from ``b``'s,
    floored and rounded to nearest; ``a / b`` where ``b == 0``; a zero result keeps
    ``a / b``'s sign. torch-mlir lowered it as ``floor(a / b)``: ``inf // 3`` gave inf
    (ATen nan), ``-1e-3 // inf`` and ``5 // -inf`` -0.0 (ATen -1). Integer and other
    modes: NotImplemented (lowered as they come)."""
    dt = torch.result_type(a, b)
    if rounding_mode != "floor" or not dt.is_floating_point:
        return NotImplemented
    if not isinstance(b, torch.Tensor):
        b = aten.scalar_tensor(b, dtype=dt, device=a.device)
    a = aten._to_copy.default(a, dtype=dt) if a.dtype != dt else a
    b = aten._to_copy.default(b, dtype=dt) if b.dtype != dt else b
    mod = aten.fmod.Tensor(a, b)
    div = aten.div.Tensor(aten.sub.Tensor(a, mod), b)
    adjust = aten.logical_and(
        aten.ne.Scalar(mod, 0), aten.ne.Tensor(aten.lt.Scalar(b, 0), aten.lt.Scalar(mod, 0))
    )
    div = aten.where.self(adjust, aten.sub.Tensor(div, 1), div)
    floor = aten.floor.default(div)
    floor = aten.where.self(
        aten.gt.Scalar(aten.sub.Tensor(div, floor), 0.5), aten.add.Tensor(floor, 1), floor
    )
    quotient = aten.div.Tensor(a, b)
    # where div == 0, |a / b| < 1 (finite): times 0.0 is a zero with its sign
    floor = aten.where.self(aten.ne.Scalar(div, 0), floor, aten.mul.Tensor(quotient, 0.0))
    return aten.where.self(aten.eq.Scalar(b, 0), quotient, floor)


def index_put_mask(x, indices, values, accumulate=False):
    """``x[mask] = v`` / ``x[mask] += v`` with one bool mask over x's leading dims and a
    ``v`` that does not vary along the selected rows (one element, or the trailing
    dims' shape) as ``where(mask, v, x)`` (``x + where(mask, v, 0)``): torch-mlir
    has no lowering for a bool index (``torch.constant.int`` left over), so the common
    ``x[x > 0] = 0`` failed in every compiled graph. Other forms: NotImplemented."""
    if (
        len(indices) != 1
        or indices[0] is None
        or indices[0].dtype != torch.bool
        or indices[0].shape != x.shape[: indices[0].dim()]
    ):
        return NotImplemented
    trailing = list(x.shape[indices[0].dim() :])
    v = values
    if v.dim() == len(trailing) + 1 and v.shape[0] == 1:
        v = aten.squeeze.dim(v, 0)
    if v.dim() > len(trailing):  # one value per selected row: a data-dependent count
        return NotImplemented
    try:
        torch.broadcast_shapes(tuple(v.shape), tuple(trailing))
    except RuntimeError:
        return NotImplemented
    v = aten.expand.default(aten._to_copy.default(v, dtype=x.dtype), trailing)
    v = aten.reshape.default(v, [1] * indices[0].dim() + trailing)
    mask = aten.reshape.default(indices[0], list(indices[0].shape) + [1] * len(trailing))
    if accumulate:
        return aten.add.Tensor(x, aten.where.self(mask, v, aten.zeros_like.default(x)))
    return aten.where.self(mask, v, x)


def _diagonal_layout(x, offset, dim1, dim2):
    """(permutation putting dim1, dim2 last, x's other sizes, h, w, flat positions
    ``r * W + c`` of the diagonal in the last two dims flattened)."""
    d1, d2 = dim1 % x.dim(), dim2 % x.dim()
    rest = [d for d in range(x.dim()) if d not in (d1, d2)]
    h, w = x.shape[d1], x.shape[d2]
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(0, min(h - r0, w - c0))
    pos = aten.arange.start_step(
        r0 * w + c0, r0 * w + c0 + n * (w + 1), w + 1, dtype=torch.int64, device=x.device
    )
    return rest + [d1, d2], [x.shape[d] for d in rest], h, w, pos


def diagonal(x, offset=0, dim1=0, dim2=1):
    """``diagonal`` as an ``index_select`` of flat positions after moving ``dim1``/
    ``dim2`` last (ATen's result layout), and ``diagonal_scatter`` (its gradient) as a
    ``scatter`` there: torch-mlir lowers neither (``torch.constant.int`` left over), so
    ``torch.diag``/``torch.trace``/``x.diagonal()`` failed in compiled graphs."""
    perm, sizes, h, w, pos = _diagonal_layout(x, offset, dim1, dim2)
    flat = aten.reshape.default(aten.permute.default(x, perm), sizes + [h * w])
    return aten.index_select.default(flat, -1, pos)


def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    perm, sizes, h, w, pos = _diagonal_layout(x, offset, dim1, dim2)
    flat = aten.reshape.default(aten.permute.default(x, perm), sizes + [h * w])
    index = aten.expand.default(pos, list(src.shape))
    out = aten.reshape.default(aten.scatter.src(flat, -1, index, src), sizes + [h, w])
    inverse = [perm.index(d) for d in range(x.dim())]
    return aten.permute.default(out, inverse)


def unfold(x, dimension, size, step):
    """``x.unfold(dimension, size, step)``: shape x's with ``dimension`` (any sign) of
    length ``n = (L - size) // step + 1`` and a last dim ``size``, ``out[.., i, .., j] =
    x[.., i * step + j, ..]``; as an ``index_select`` of those positions (exact: data
    movement). torch-mlir has no lowering for ``aten.unfold`` (``torch.constant.int``
    left over): ``nn.Unfold``-like sliding windows failed in every compiled graph. Its
    gradient is core ATen's ``unfold_backward`` (windows added in fold order, as eager).
    Bad ``size``/``step`` raise in the meta function (RuntimeError, as eager). A dim of
    2**31 or more: NotImplemented (the lowering fails naming ``aten.unfold``)."""
    if x.dim() == 0:  # a 0-dim tensor unfolds into shape [size], size 0 or 1
        return aten.slice.Tensor(aten.reshape.default(x, [1]), 0, 0, size)
    d = dimension % x.dim()
    if x.shape[d] >= 2**31:
        return NotImplemented
    n = (x.shape[d] - size) // step + 1
    # int32 positions: int64 ones would be added in int32 by passes/narrow_64bit.py,
    # reported to narrowing_stats() as a narrowed unfold (eager narrows nothing here)
    starts = aten.arange.start_step(0, n * step, step, dtype=torch.int32, device=x.device)
    offsets = aten.arange.default(size, dtype=torch.int32, device=x.device)
    pos = aten.add.Tensor(aten.unsqueeze.default(starts, 1), aten.unsqueeze.default(offsets, 0))
    picked = aten.index_select.default(x, d, aten.reshape.default(pos, [n * size]))
    windows = aten.reshape.default(picked, list(x.shape[:d]) + [n, size] + list(x.shape[d + 1 :]))
    order = [k for k in range(x.dim() + 1) if k != d + 1] + [d + 1]
    return aten.permute.default(windows, order)


def _pair(v) -> list:
    v = [v] if isinstance(v, int) else list(v)
    return v * 2 if len(v) == 1 else v


def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d with its stride spelled out and ``ceil_mode`` as explicit right padding.
    torch-mlir lowered an empty stride (``F.max_pool2d(x, 2, return_indices=True)``) as
    stride 1 when the indices are used (shape error), and ``ceil_mode`` by padding both
    sides: ``F.max_pool2d(arange(5.), 2, ceil_mode=True)`` gave [0, 2, 4], ATen [1, 3, 4].
    The right side is padded with -inf (the dtype's minimum for integers) up to the last
    window ATen's output size (``pooling_output_shape``) asks for, and the indices are
    mapped back to the unpadded plane. NotImplemented when already in that form."""
    k, p, d = _pair(kernel_size), _pair(padding), _pair(dilation)
    s = _pair(stride) if len(stride) else k
    if not ceil_mode and len(stride):
        return NotImplemented
    extra = [0, 0]
    if ceil_mode:
        for j, size in enumerate(x.shape[-2:]):
            span = size + 2 * p[j] - d[j] * (k[j] - 1) - 1
            out = -(-span // s[j]) + 1
            if (out - 1) * s[j] >= size + p[j]:  # the last window must start inside
                out -= 1
            extra[j] = max(0, (out - 1) * s[j] + d[j] * (k[j] - 1) + 1 - size - 2 * p[j])
    if not any(extra):
        return aten.max_pool2d_with_indices.default(x, k, s, p, d, False)
    low = float("-inf") if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    xp = aten.constant_pad_nd.default(x, [0, extra[1], 0, extra[0]], low)
    v, i = aten.max_pool2d_with_indices.default(xp, k, s, p, d, False)
    w, wp = x.shape[-1], x.shape[-1] + extra[1]
    row = aten.div.Tensor_mode(i, wp, rounding_mode="floor")
    col = aten.sub.Tensor(i, aten.mul.Tensor(row, wp))
    return v, aten.add.Tensor(aten.mul.Tensor(row, w), col)


def max_pool2d_with_indices_backward(
    grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    """The gradient of max_pool2d as a scatter-add of ``grad`` at ``indices`` (flat
    positions in each (N, C) plane of ``x``, as the forward returns them; overlapping
    windows add up, as ATen's kernel does). torch-mlir has no StableHLO lowering for
    this op: a compiled CNN training step failed (``torch.constant.int`` left over)."""
    planes = x.numel() // max(x.shape[-1] * x.shape[-2], 1)
    g = aten.reshape.default(grad, [planes, -1])
    i = aten.reshape.default(indices, [planes, -1])
    z = aten.zeros.default(
        [planes, x.shape[-2] * x.shape[-1]], dtype=grad.dtype, device=grad.device
    )
    return aten.reshape.default(aten.scatter_add.default(z, 1, i, g), list(x.shape))


_UNSIGNED = decompositions_reductions.UNSIGNED


def _shift(tensor_op, itself=False):
    """``a >> b`` / ``a << b`` and ``bitwise_*_shift`` in every spelling (``a``, ``b``
    scalars or tensors) via ``bitwise_*_shift.Tensor`` (torch-mlir lowers neither
    ``__rshift__``/``__lshift__`` nor a scalar operand, ``torch.constant.int`` was left
    over). Unsigned operands shift as int32 and are cast back: the lowered right shift is
    arithmetic, so ``uint8(244) >> 1`` gave 250 (also through ``torch.bitwise_right_shift``
    before it was decomposed here). ``itself``: the decomposition of ``tensor_op``, which
    keeps two signed tensor operands as they are (NotImplemented: traced unchanged)."""

    def decomposition(a, b):
        dtype = torch.result_type(a, b)
        device = (a if isinstance(a, torch.Tensor) else b).device
        if not isinstance(a, torch.Tensor):
            a = aten.scalar_tensor(a, dtype=dtype, device=device)
        if not isinstance(b, torch.Tensor):
            b = aten.scalar_tensor(b, dtype=dtype, device=device)
        shape = torch.broadcast_shapes(a.shape, b.shape)
        if a.shape != shape:  # a lower-rank left operand crashed torch-mlir's shape inference
            a = aten.expand.default(a, list(shape))
        elif itself and dtype not in _UNSIGNED:
            return NotImplemented
        if dtype in _UNSIGNED:
            wide = aten._to_copy.default(a, dtype=torch.int32)
            r = tensor_op(wide, aten._to_copy.default(b, dtype=torch.int32))
            return aten._to_copy.default(r, dtype=dtype)
        return tensor_op(a, b)

    return decomposition


def _scalar_as_tensor(tensor_op):
    """``op.Scalar(a, b)`` as ``op.Tensor(a, 0-dim tensor b)``: torch-mlir cannot lower
    these ops' scalar operand (``torch.constant.int`` is left over), which made
    ``torch.fmod(x, 2.0)``, ``x & 5`` and ``torch.roll`` (fmod of its index) fail."""

    def decomposition(a, b):
        bt = aten.scalar_tensor(b, dtype=torch.result_type(a, b), device=a.device)
        return tensor_op(a, bt)

    return decomposition


_SCALAR_OPS = {
    aten.fmod.Scalar: aten.fmod.Tensor,
    aten.bitwise_and.Scalar: aten.bitwise_and.Tensor,
    aten.bitwise_or.Scalar: aten.bitwise_or.Tensor,
    aten.bitwise_xor.Scalar: aten.bitwise_xor.Tensor,
}
_RIGHT, _LEFT = aten.bitwise_right_shift, aten.bitwise_left_shift
_SHIFT_OPS = {
    aten.__rshift__.Scalar: _RIGHT.Tensor,
    aten.__rshift__.Tensor: _RIGHT.Tensor,
    _RIGHT.Tensor_Scalar: _RIGHT.Tensor,
    _RIGHT.Scalar_Tensor: _RIGHT.Tensor,
    aten.__lshift__.Scalar: _LEFT.Tensor,
    aten.__lshift__.Tensor: _LEFT.Tensor,
    _LEFT.Tensor_Scalar: _LEFT.Tensor,
    _LEFT.Scalar_Tensor: _LEFT.Tensor,
}

# The _foreach_ ops torch.optim's foreach steps (Adam, AdamW, SGD, RMSprop, ...) use.
_FOREACH = """add sub mul div addcmul addcdiv lerp sqrt rsqrt neg abs exp log reciprocal
sign pow maximum minimum clamp_min clamp_max zero copy""".split()


def _foreach(base: str):
    """``_foreach_<base>(lists, ...)`` as one ``<base>`` per list element (list
    arguments zipped, others passed on; ATen picks the overload). addcmul/addcdiv take
    the per-list value as their keyword ``value``; a tensor of values: NotImplemented.
    torch-mlir has no lowering for any ``_foreach_`` op, so ``torch.compile(
    optimizer.step)`` failed (``aten._foreach_add.Scalar``)."""
    packet = getattr(aten, base)
    valued = base in ("addcmul", "addcdiv")

    def decomposition(*args, **kwargs):
        if valued and len(args) == 4:
            if isinstance(args[3], torch.Tensor):
                return NotImplemented
            kwargs = {**kwargs, "value": args[3]}
            args = args[:3]
        n = next(len(a) for a in args if isinstance(a, (list, tuple)))

        def at(v, i):
            return v[i] if isinstance(v, (list, tuple)) else v

        return [
            packet(*(at(a, i) for a in args), **{k: at(v, i) for k, v in kwargs.items()})
            for i in range(n)
        ]

    return decomposition


def _foreach_table() -> dict:
    table = {}
    for base in _FOREACH:
        packet = getattr(aten, f"_foreach_{base}")
        for name in packet.overloads():
            table[getattr(packet, name)] = _foreach(base)
    return table


_OURS = {
    **{op: _scalar_as_tensor(t) for op, t in _SCALAR_OPS.items()},
    **decompositions_reductions.TABLE,
    **{op: _shift(t) for op, t in _SHIFT_OPS.items()},
    _RIGHT.Tensor: _shift(_RIGHT.Tensor, itself=True),
    _LEFT.Tensor: _shift(_LEFT.Tensor, itself=True),
    aten.max_pool2d_with_indices_backward.default: max_pool2d_with_indices_backward,
    aten.max_pool2d_with_indices.default: max_pool2d_with_indices,
    aten.index_put.default: index_put_mask,
    aten.diagonal.default: diagonal,
    aten.unfold.default: unfold,
    aten.diagonal_scatter.default: diagonal_scatter,
    aten.empty_permuted.default: empty_permuted,
    aten.remainder.Tensor: remainder,
    aten.remainder.Scalar: remainder,
    aten.div.Tensor_mode: div_floor,
    aten.div.Scalar_mode: div_floor,
}


def _before(f, other):
    """``f``, and where it returns NotImplemented, ``other`` (the table's entry it
    takes precedence over: clamp_min of bool is ours, of other dtypes core ATen's)."""

    def decomposition(*args, **kwargs):
        r = f(*args, **kwargs)
        return other(*args, **kwargs) if r is NotImplemented else r

    return decomposition


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    """{OpOverload: decomposition}: core ATen + torch-mlir's FX table + ours."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table as tm_table

    table = dict(core_aten_decompositions())
    table.update(tm_table())
    table.update(get_decompositions(_EXTRA))
    table.update(_OURS)
    for op, f in {
        **decompositions_scans.TABLE,
        **decompositions_elementwise.TABLE,
        **decompositions_special.TABLE,
        **decompositions_pooling.TABLE,
        **decompositions_conv.TABLE,
        **decompositions_indexed.TABLE,
        **decompositions_order.TABLE,
        **decompositions_layers.TABLE,
        **decompositions_copies.TABLE,
        **decompositions_scaled.TABLE,
        **decompositions_adaptive.TABLE,
        **decompositions_polynomials.TABLE,
        **decompositions_bessel.TABLE,
        **decompositions_matmul.TABLE,
        **decompositions_linalg.TABLE,
        **decompositions_householder.TABLE,
        **decompositions_backward.TABLE,
        **decompositions_segment.TABLE,
        **decompositions_attention.TABLE,
    }.items():
        table[op] = _before(f, table[op]) if op in table else f
    for op, f in decompositions_nn.table(table).items():
        table[op] = _before(f, table[op]) if op in table else f
    table.update(_foreach_table())
    return table

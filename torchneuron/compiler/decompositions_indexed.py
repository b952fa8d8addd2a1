"""Reductions into indexed positions that torch-mlir has no lowering for:
``scatter_reduce`` (every ``reduce``), ``scatter`` with ``reduce=``, ``index_reduce``
and ``histc``; and
``value_selecting_reduction_backward`` (the gradient of ``median``/``kthvalue``/``mode``
along a dim), which TorchNeuron's own table decomposes as a ``scatter``.

``scatter_reduce`` with ``"sum"`` is a ``scatter_add`` (after a ``scatter`` of zeros
where ``include_self=False``). ``prod``/``mean``/``amax``/``amin`` have no StableHLO
form torch-mlir emits, so they are dense: each element of ``src`` is compared with every
position of the output along ``dim`` (``index.numel() * size`` elements; beyond
``DENSE_LIMIT`` NotImplemented, and the lowering refuses naming the op), reduced with the
op's identity elsewhere, then combined with ``self`` as ATen's CPU kernel does (NaN
propagates in amax/amin, integer means floor, untouched positions keep ``self``).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

DENSE_LIMIT = 1 << 24


def _identity(reduce, dtype):
    """The value that leaves ``reduce``'s result unchanged."""
    if reduce in ("prod", "mean"):
        return int(reduce == "prod")
    high = reduce == "amin"
    if dtype == torch.bool:
        return high
    if dtype.is_floating_point:
        return float("inf") if high else float("-inf")
    return torch.iinfo(dtype).max if high else torch.iinfo(dtype).min


def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    if x.dim() == 0:  # a 0-dim self: as (1,)
        r = scatter_reduce(
            aten.reshape.default(x, [1]),
            0,
            aten.reshape.default(index, [-1]),
            aten.reshape.default(src, [-1]),
            reduce,
            include_self,
        )
        return aten.reshape.default(r, [])
    dim = dim % x.dim()
    if index.numel() == 0:
        return aten.clone.default(x)
    for d, size in enumerate(index.shape):  # src may be larger than index
        if src.shape[d] != size:
            src = aten.slice.Tensor(src, d, 0, size)
    if reduce == "sum":
        base = x if include_self else aten.scatter.value(x, dim, index, 0)
        return aten.scatter_add.default(base, dim, index, src)
    n = x.shape[dim]
    if index.numel() * n > DENSE_LIMIT:
        return NotImplemented
    last = index.dim() - 1
    idx = aten.movedim.int(index, dim, last)
    s = aten.movedim.int(src, dim, last)
    pos = aten.arange.default(n, dtype=index.dtype, device=x.device)
    mask = aten.eq.Tensor(aten.unsqueeze.default(idx, -1), pos)  # [..., m, n]
    fill = aten.scalar_tensor.default(_identity(reduce, x.dtype), dtype=x.dtype, device=x.device)
    vals = aten.where.self(mask, aten.unsqueeze.default(s, -1), fill)
    if reduce == "prod":
        red = aten.prod.dim_int(vals, -2)
    elif reduce == "amax":
        red = aten.amax.default(vals, [-2])
    elif reduce == "amin":
        red = aten.amin.default(vals, [-2])
    else:
        red = aten.sum.dim_IntList(vals, [-2], dtype=x.dtype)
    count = aten.sum.dim_IntList(mask, [-2], dtype=torch.int64)
    # index may cover fewer positions than self in the other dims: pad to self's shape
    red, count = aten.movedim.int(red, -1, dim), aten.movedim.int(count, -1, dim)
    pad = []
    for d in reversed(range(x.dim())):
        pad += [0, x.shape[d] - red.shape[d]]
    if any(pad):
        red = aten.constant_pad_nd.default(red, pad, 0)
        count = aten.constant_pad_nd.default(count, pad, 0)
    touched = aten.gt.Scalar(count, 0)
    if reduce == "mean":
        total = aten.add.Tensor(red, x) if include_self else red
        cnt = aten.add.Scalar(count, 1) if include_self else aten.clamp_min.default(count, 1)
        if x.dtype.is_floating_point:
            mean = aten.div.Tensor(total, aten._to_copy.default(cnt, dtype=x.dtype))
        else:
            mean = aten.div.Tensor_mode(total, cnt, rounding_mode="floor")
            mean = aten._to_copy.default(mean, dtype=x.dtype)
        return aten.where.self(touched, mean, x)
    if include_self:
        op = {"prod": aten.mul.Tensor, "amax": aten.maximum.default, "amin": aten.minimum.default}
        red = op[reduce](x, red)
    return aten.where.self(touched, aten._to_copy.default(red, dtype=x.dtype), x)


def index_reduce(x, dim, index, source, reduce, include_self=True):
    """``index_reduce`` as ``scatter_reduce`` of ``index`` spread along ``dim``."""
    if source.dim() == 0:
        source = aten.reshape.default(source, [1])
    dim = dim % source.dim()
    shape = [1] * source.dim()
    shape[dim] = -1
    idx = aten.expand.default(aten.reshape.default(index, shape), list(source.shape))
    return scatter_reduce(x, dim, idx, source, reduce, include_self)


def histc(x, bins=100, min=0, max=0):  # noqa: A002  (ATen's argument names)
    """ATen's ``histc``: edges ``min``/``max`` (the input's range when equal, widened by 1
    if that is one value), bin ``(x - lo) * bins / (hi - lo)`` truncated in the input's
    dtype, ``x == hi`` in the last bin, values outside ``[lo, hi]`` (and NaN) dropped."""
    if not x.dtype.is_floating_point:
        return NotImplemented
    if x.numel() == 0:
        return aten.zeros.default([bins], dtype=x.dtype, device=x.device)
    flat = aten.reshape.default(x, [-1])
    if min == max:
        lo, hi = aten.amin.default(flat, [0]), aten.amax.default(flat, [0])
        same = aten.eq.Tensor(lo, hi)
        lo = aten.where.self(same, aten.sub.Tensor(lo, 1), lo)
        hi = aten.where.self(same, aten.add.Tensor(hi, 1), hi)
    else:
        lo = aten.scalar_tensor.default(min, dtype=x.dtype, device=x.device)
        hi = aten.scalar_tensor.default(max, dtype=x.dtype, device=x.device)
    pos = aten.div.Tensor(aten.mul.Tensor(aten.sub.Tensor(flat, lo), bins), aten.sub.Tensor(hi, lo))
    pos = aten._to_copy.default(aten.clamp.default(pos, 0, bins - 1), dtype=torch.int64)
    inside = aten.logical_and(aten.ge.Tensor(flat, lo), aten.le.Tensor(flat, hi))
    ones = aten._to_copy.default(inside, dtype=x.dtype)
    zero = aten.zeros.default([bins], dtype=x.dtype, device=x.device)
    return aten.scatter_add.default(zero, 0, pos, ones)


def value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim):
    """``grad`` scattered at the selected ``indices`` (zeros elsewhere)."""
    if not sizes:
        return aten.reshape.default(grad, [])
    dim = dim % len(sizes)
    if not keepdim:
        grad, indices = aten.unsqueeze.default(grad, dim), aten.unsqueeze.default(indices, dim)
    zero = aten.zeros.default(list(sizes), dtype=grad.dtype, device=grad.device)
    return aten.scatter.src(zero, dim, indices, grad)


def scatter_0d(x, dim, index, src):
    """``scatter`` into a 0-dim tensor as into it viewed as ``(1,)``: torch-mlir's
    lowering failed on rank 0 (``median(x, dim=0)``'s gradient of a 0-dim ``x``)."""
    if x.dim() != 0:
        return NotImplemented
    one = [aten.reshape.default(t, [1]) for t in (x, index, src)]
    return aten.reshape.default(aten.scatter.src(*one[:1], 0, *one[1:]), [])


def scatter_add_0d(x, dim, index, src):
    """``scatter_add`` into a 0-dim tensor as into it viewed as ``(1,)`` (the same
    lowering failure: ``cummax``/``cummin``'s gradient of a 0-dim ``x``)."""
    if x.dim() != 0:
        return NotImplemented
    one = [aten.reshape.default(t, [1]) for t in (x, index, src)]
    return aten.reshape.default(aten.scatter_add.default(*one[:1], 0, *one[1:]), [])


def scatter_with_reduce(x, dim, index, src, reduce):
    """``scatter(..., reduce="add"|"multiply")`` (``src`` a tensor or a number) as
    ``scatter_reduce`` with ``sum``/``prod`` including ``self``, as ATen defines it."""
    if not isinstance(src, torch.Tensor):
        src = aten.full.default(list(index.shape), src, dtype=x.dtype, device=x.device)
    return scatter_reduce(x, dim, index, src, {"add": "sum", "multiply": "prod"}[reduce], True)


def index_put(x, indices, values, accumulate=False):
    """``x[i, j] = v`` (``+=`` with ``accumulate``) with integer index tensors as a
    ``scatter`` (``scatter_add``) into flat ``x``: the positions are ``x``'s flat
    positions indexed alike (``arange(numel).view(x.shape)[i, j]``, so ATen's result
    layout and broadcasting come for free; negative indices are wrapped by
    passes/semantics/wrap_negative_indices.py). torch-mlir failed on these
    (``torch.constant.int`` left over); TorchNeuron's table scatters too. Bool masks:
    NotImplemented (``decompositions.index_put_mask``)."""
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        return NotImplemented
    if x.numel() == 0 or x.numel() >= 2**31:
        return NotImplemented
    flat_pos = aten.arange.default(x.numel(), dtype=torch.int32, device=x.device)
    pos = aten.index.Tensor(aten.reshape.default(flat_pos, list(x.shape)), indices)
    pos = aten._to_copy.default(aten.reshape.default(pos, [-1]), dtype=torch.int64)
    v = aten._to_copy.default(values, dtype=x.dtype) if values.dtype != x.dtype else values
    # the indexed region's shape: pos's before flattening
    shape = list(aten.index.Tensor(aten.reshape.default(flat_pos, list(x.shape)), indices).shape)
    v = aten.reshape.default(aten.expand.default(v, shape), [-1])
    flat = aten.reshape.default(x, [-1])
    op = aten.scatter_add.default if accumulate else aten.scatter.src
    return aten.reshape.default(op(flat, 0, pos, v), list(x.shape))


def _strided_positions(size, stride, offset, device):
    """Flat storage positions of an ``as_strided(size, stride, offset)`` view."""
    pos = aten.full.default([], offset, dtype=torch.int64, device=device)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        step = aten.arange.default(n, dtype=torch.int64, device=device)
        pos = aten.add.Tensor(pos, aten.reshape.default(aten.mul.Tensor(step, st), shape))
    return aten.reshape.default(aten.expand.default(pos, list(size)), [-1])


def _own_storage(x) -> bool:
    """Whether ``x``'s elements are its storage from position 0, in order: what the
    graph's buffer of ``x`` holds. ``as_strided`` offsets and strides address the storage
    (a ``*_scatter`` result keeps its input's storage offset, ATen's
    clone_preserve_strides); over a tensor with an offset or another layout the flat
    buffer is not that storage (wrong values, found by the fused engine's inputs merged
    from several views). Such a graph is refused instead (NeuronCompileError naming the
    op)."""
    return x.storage_offset() == 0 and x.is_contiguous()


def as_strided_copy(x, size, stride, storage_offset=None):
    """The view's elements gathered from ``x``'s (contiguous) storage: TorchNeuron's
    table does the same; torch-mlir had no lowering."""
    if x.numel() == 0 or 0 in size or not _own_storage(x):
        return NotImplemented
    pos = _strided_positions(size, stride, storage_offset or 0, x.device)
    flat = aten.reshape.default(x, [-1])
    return aten.reshape.default(aten.index_select.default(flat, 0, pos), list(size))


def as_strided_scatter(x, src, size, stride, storage_offset=None):
    """``src`` written into ``x``'s (contiguous) storage at the view's positions."""
    if x.numel() == 0 or 0 in size or not _own_storage(x):
        return NotImplemented
    pos = _strided_positions(size, stride, storage_offset or 0, x.device)
    flat = aten.reshape.default(x, [-1])
    out = aten.scatter.src(flat, 0, pos, aten.reshape.default(src, [-1]))
    return aten.reshape.default(out, list(x.shape))


TABLE = {
    aten.as_strided_copy.default: as_strided_copy,
    aten.as_strided_scatter.default: as_strided_scatter,
    aten.index_put.default: index_put,
    aten.scatter.reduce: scatter_with_reduce,
    aten.scatter.value_reduce: scatter_with_reduce,
    aten.scatter.src: scatter_0d,
    aten.scatter_add.default: scatter_add_0d,
    aten.scatter_reduce.two: scatter_reduce,
    aten.index_reduce.default: index_reduce,
    aten.histc.default: histc,
    aten.value_selecting_reduction_backward.default: value_selecting_reduction_backward,
}

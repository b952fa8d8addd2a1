"""``segment_reduce`` and its gradient (``_segment_reduce_backward``) for 1-d ``lengths``
or ``offsets``, as masked reductions over a (segments, rows) mask, for the decomposition
table (decompositions.py). torch-mlir lowers neither (refused naming the op).

ATen's CPU rules: each segment starts from ``initial`` (else the reduction's identity:
-inf, inf, 0, 0, 1), so an empty segment gives ``initial``, or -inf/inf/0/NaN/1 without
it; ``mean`` is ``(initial + sum) / length`` (NaN for an empty one without ``initial``);
NaN propagates through ``max``/``min``. The gradient of ``max``/``min`` goes to the
elements equal to the result (NaN to NaN), and where two or more tie, the positive
gradients are divided by their number (ATen's kernel divides only those > 0); ``mean``'s
is ``grad / length``; ``sum``'s ``grad``. ``prod`` and batched lengths are left to be
refused naming the op.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_REDUCTIONS = ("max", "min", "sum", "mean")


def _layout(data, lengths, offsets, axis):
    """(x with ``axis`` first, mask (S, N, 1...) bool, lengths (S, 1...) of x's dtype)."""
    x = data.movedim(axis, 0)
    if offsets is None:
        zero = lengths.new_zeros([1])
        offsets = torch.cat([zero, lengths.cumsum(0)])
    start, end = offsets[:-1], offsets[1:]
    pos = torch.arange(x.shape[0], device=x.device)
    mask = (pos >= start.unsqueeze(-1)) & (pos < end.unsqueeze(-1))  # (S, N)
    rest = [1] * (x.dim() - 1)
    mask = mask.reshape(list(mask.shape) + rest)
    length = (end - start).to(x.dtype).reshape([-1] + rest)
    return x, mask, length


def _supported(data, reduce, lengths, offsets, axis) -> bool:
    given = offsets if lengths is None else lengths
    return reduce in _REDUCTIONS and given is not None and given.dim() == 1 and data.dim() > 0


def segment_reduce(
    data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None
):
    if indices is not None or not _supported(data, reduce, lengths, offsets, axis):
        return NotImplemented
    axis = axis % data.dim()
    x, mask, length = _layout(data, lengths, offsets, axis)
    xs = x.unsqueeze(0)
    if reduce in ("max", "min"):
        fill = float("-inf") if reduce == "max" else float("inf")
        r = torch.where(mask, xs, fill)
        r = r.amax(1) if reduce == "max" else r.amin(1)
        if initial is not None:
            init = torch.full_like(r, initial)
            pick = torch.maximum if reduce == "max" else torch.minimum
            r = pick(r, init)
    else:
        r = torch.where(mask, xs, 0.0).sum(1)
        if initial is not None:
            r = r + initial
        if reduce == "mean":
            if initial is not None:
                r = torch.where(length == 0, r, r / length)
            else:
                r = r / length
    return r.movedim(0, axis)


def segment_reduce_backward(
    grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None
):
    if not _supported(data, reduce, lengths, offsets, axis):
        return NotImplemented
    axis = axis % data.dim()
    x, mask, length = _layout(data, lengths, offsets, axis)
    g = grad.movedim(axis, 0).unsqueeze(1)  # (S, 1, ...)
    if reduce in ("max", "min"):
        out = output.movedim(axis, 0).unsqueeze(1)
        xs = x.unsqueeze(0)
        hit = mask & ((xs == out) | (xs.isnan() & out.isnan()))
        gi = torch.where(hit, g, 0.0)
        count = hit.sum(1, keepdim=True)
        gi = torch.where((count >= 2) & (gi > 0), gi / count.to(gi.dtype), gi)
    elif reduce == "mean":
        gi = torch.where(mask, g / length.unsqueeze(1), 0.0)
    else:
        gi = torch.where(mask, g, 0.0)
    return gi.sum(0).movedim(0, axis)


TABLE = {
    aten.segment_reduce.default: segment_reduce,
    aten._segment_reduce_backward.default: segment_reduce_backward,
}

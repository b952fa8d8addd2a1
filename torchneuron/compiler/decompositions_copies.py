"""The ``_copy`` variants of view ops, ``put`` and ``dist`` as compositions (torch-mlir
has no lowering for any of them: each failed naming its op in the OpInfo sweep).

- ``view_copy``, ``permute_copy``, ``unbind_copy``, ``narrow_copy``: the view op, then a
  ``clone`` (their definition: the view's values in a new tensor).
- ``put(x, index, source, accumulate)``: ``x`` flattened, ``index_put`` at the flat
  positions (negative ones counted from the end, as ``torch.put`` documents), reshaped
  back; ``take``'s gradient is a ``put`` with ``accumulate=True``.
- ``dist(a, b, p)``: ``linalg_vector_norm(a - b, p)`` (``torch.dist``'s documented
  definition, the p-norm of the difference, broadcast).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def view_copy(x, size):
    return aten.clone.default(aten.reshape.default(x, size))


def permute_copy(x, dims):
    return aten.clone.default(aten.permute.default(x, dims))


def unbind_copy(x, dim=0):
    d = dim % max(x.dim(), 1)
    return [aten.clone.default(aten.select.int(x, d, i)) for i in range(x.shape[d])]


def narrow_copy(x, dim, start, length):
    d = dim % max(x.dim(), 1)
    start = start + x.shape[d] if start < 0 else start
    return aten.clone.default(aten.slice.Tensor(x, d, start, start + length))


def put(x, index, source, accumulate=False):
    """``x.put(index, source, accumulate)``: ``x.view(-1)[index] = source`` (``+=``)."""
    flat = aten.reshape.default(x, [-1])
    i = aten.reshape.default(index, [-1])
    i = aten.where.self(aten.lt.Scalar(i, 0), aten.add.Tensor(i, x.numel()), i)
    src = aten.reshape.default(source, [-1])
    out = aten.index_put.default(flat, [i], src, accumulate)
    return aten.reshape.default(out, list(x.shape))


def dist(a, b, p=2):
    return aten.linalg_vector_norm.default(aten.sub.Tensor(a, b), p)


TABLE = {
    aten.view_copy.default: view_copy,
    aten.permute_copy.default: permute_copy,
    aten.unbind_copy.int: unbind_copy,
    aten.narrow_copy.default: narrow_copy,
    aten.put.default: put,
    aten.dist.default: dist,
}

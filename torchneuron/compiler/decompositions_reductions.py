"""Reductions in the form torch-mlir lowers right: ``var``/``var_mean`` in the input's
dtype, ``any`` over several dims or of uint8, max/min-like reductions of unsigned and
bool tensors widened to int32, ``argmax``/``argmin`` over all elements."""

from __future__ import annotations

import functools

import torch

aten = torch.ops.aten

UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _reduced_numel(x, dim) -> int:
    if x.dim() == 0:  # dim 0 or -1 of a 0-dim tensor: its one element
        return 1
    dims = range(x.dim()) if dim is None else [d % max(x.dim(), 1) for d in dim]
    n = 1
    for d in dims:
        n *= x.shape[d]
    return n


def var_mean_correction(x, dim=None, *, correction=None, keepdim=False):
    """var_mean in the input's dtype from mean/sub/mul/sum (torch-mlir's own lowering
    computes in float64, which a NeuronCore has not; PyTorch's decomposition leaves
    prims that torch-mlir rejects)."""
    c = 1 if correction is None else correction
    dims = list(range(x.dim())) if dim is None else list(dim)
    mean = aten.mean.dim(x, dims, True)
    d = aten.sub.Tensor(x, mean)
    var = aten.div.Scalar(
        aten.sum.dim_IntList(aten.mul.Tensor(d, d), dims, keepdim),
        max(_reduced_numel(x, dim) - c, 0),
    )
    if not keepdim:
        mean = aten.squeeze.dims(mean, dims)
    return var, mean


def var_correction(x, dim=None, *, correction=None, keepdim=False):
    return var_mean_correction(x, dim, correction=correction, keepdim=keepdim)[0]


def any_dims(x, dim=None, keepdim=False):
    """``any`` over a list of dims as one ``any.dim`` per dim (``any.default`` for
    ``None``): torch-mlir has no lowering for ``aten.any.dims``, into which the core
    decompositions turn every ``all()``/``all(dim)`` and ``F.one_hot``'s range check.
    ``dim=[]`` reduces nothing (as ATen: ``x != 0``), nor does any dim of a 0-dim tensor
    (torch-mlir rejected ``any.dim(x, 0)`` there); uint8 stays uint8, as ATen's."""
    if dim is None:
        r = aten.any.default(x)
        return aten.reshape.default(r, [1] * x.dim()) if keepdim else r
    if len(dim) == 0 or x.dim() == 0:
        r = aten.ne.Scalar(x, 0)
        return aten._to_copy.default(r, dtype=torch.uint8) if x.dtype == torch.uint8 else r
    # highest dim first, so the lower ones keep their index when not kept
    for d in sorted({d % x.dim() for d in dim}, reverse=True):
        x = aten.any.dim(x, d, keepdim)
    return x


def _widen_unsigned(op, values_at):
    """``op`` (a max/min-like reduction) of a uint8/uint16/bool tensor computed in int32, its
    value results cast back (``values_at``: None for a single value result, () for a
    single index result, else the value positions in the result tuple). torch-mlir
    lowers these as if the type were signed: ``uint8.max()`` of [1, 0, 3] reduced from
    an init of 128 (int8's minimum bit pattern) and gave 128, ``min()`` of values over
    127 gave 127, ``argmax`` failed XLA's verifier; bool ``max(dim)`` of a False row
    gave True. Other dtypes: NotImplemented (traced unchanged)."""

    def decomposition(x, *args, **kwargs):
        if x.dtype not in (torch.uint8, torch.uint16, torch.bool):
            return NotImplemented
        r = op(aten._to_copy.default(x, dtype=torch.int32), *args, **kwargs)
        back = functools.partial(aten._to_copy.default, dtype=x.dtype)
        if values_at is None:
            return back(r)
        if isinstance(r, torch.Tensor):
            return r
        return tuple(back(v) if i in values_at else v for i, v in enumerate(r))

    return decomposition


def any_uint8(op):
    """``any`` of uint8 as ``any`` of ``x != 0``, back to uint8 (ATen's result: 0 or 1).
    torch-mlir reduces uint8 with a bitwise OR: ``any([1, 2])`` gave 3, ``any(x, 1)``
    of ``[4, 8, 16]`` 28 (``x.all()`` goes through ``any`` of ``x == 0``: right)."""

    def decomposition(x, *args, **kwargs):
        if x.dtype != torch.uint8:
            return NotImplemented
        r = op(aten.ne.Scalar(x, 0), *args, **kwargs)
        return aten._to_copy.default(r, dtype=torch.uint8)

    return decomposition


def _arg_over_all(op):
    """``argmax``/``argmin`` with ``dim=None`` as the same op over the flattened tensor
    (dim 0): the lowering left a ``torch.constant.bool`` over for it (argmax of a 0-dim
    tensor failed to compile). ``keepdim`` keeps every dim as size 1, as ATen."""

    def decomposition(x, dim=None, keepdim=False):
        if dim is not None:
            return _widen_unsigned(op, ())(x, dim, keepdim)
        r = op(aten.reshape.default(x, [-1]), 0, False)
        return aten.reshape.default(r, [1] * x.dim()) if keepdim else r

    return decomposition


_WIDENED = {
    aten.amax.default: None,
    aten.amin.default: None,
    aten.max.default: None,
    aten.min.default: None,
    aten.max.dim: (0,),
    aten.min.dim: (0,),
}


TABLE = {
    **{op: _widen_unsigned(op, at) for op, at in _WIDENED.items()},
    **{op: _arg_over_all(op) for op in (aten.argmax.default, aten.argmin.default)},
    aten.var_mean.correction: var_mean_correction,
    aten.var.correction: var_correction,
    aten.any.dims: any_dims,
    aten.any.default: any_uint8(aten.any.default),
    aten.any.dim: any_uint8(aten.any.dim),
}

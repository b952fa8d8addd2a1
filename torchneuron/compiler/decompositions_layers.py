"""Layer ops with no lowering, or a lowering that lost precision, as compositions.

- ``_trilinear`` (``F.bilinear`` and its gradient) as one ``einsum`` of the three
  operands, in float32 for bfloat16/float16 operands and rounded once: torch-mlir's
  lowering rounded the bfloat16 intermediate (``x1 @ W``, values up to 10) to bfloat16,
  0.305 where the CPU, which accumulates in float32, gives 0.281 (float32: 0.284); the
  gradient's ``_trilinear`` failed to lower ("tensors are not broadcast compatible").
- ``empty``/``empty_strided`` as ``zeros`` (its values are undefined; any are right): torch-mlir lowers it
  to ``tensor.empty``, which XLA rejects where the graph reads it: circular padding
  (slices of an ``empty`` copied into each other) and ``masked.mean``/``std``/``var``'s
  gradients failed to compile, in an error that named no op.
- ``index_select`` of a 0-dim tensor (``index_add``/``index_copy``'s gradient of a 0-dim
  source) on it viewed as ``(1,)``: lowered, the ``stablehlo.convert`` of its result
  had the wrong shape and failed to compile.
- ``_batch_norm_with_update_functional`` (no lowering) as
  ``_native_batch_norm_legit_functional`` in training mode, which the table already
  lowers with eager's statistics dtypes, and the CPU's empty ``(0,)`` uint8 reserve.
"""

from __future__ import annotations

import string

import torch

aten = torch.ops.aten

_LOW = (torch.bfloat16, torch.float16)


def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``_trilinear``: each operand unsqueezed at its ``expand`` dims (all three then of
    one rank), multiplied, summed over ``sumdim`` (ATen's ``_trilinear`` definition in
    Linear.cpp, whose ``unroll_dim`` only picks a loop order)."""
    total = i1.dim() + len(expand1)
    letters = string.ascii_letters[:total]

    def spec(expand):
        return "".join(c for d, c in enumerate(letters) if d not in expand)

    out = "".join(c for d, c in enumerate(letters) if d not in sumdim)
    eq = f"{spec(expand1)},{spec(expand2)},{spec(expand3)}->{out}"
    dtype = i1.dtype
    if dtype in _LOW:
        i1, i2, i3 = (aten._to_copy.default(t, dtype=torch.float32) for t in (i1, i2, i3))
    r = aten.einsum.default(eq, [i1, i2, i3])
    return aten._to_copy.default(r, dtype=dtype) if dtype in _LOW else r


def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    """``empty`` as zeros of the same size, dtype and device: a 0-dim zero expanded
    (``zeros``/``full`` decompose to ``empty`` and a fill)."""
    zero = aten.scalar_tensor.default(0, dtype=dtype, layout=layout, device=device)
    return aten.clone.default(aten.expand.default(zero, list(size)))


def index_select(x, dim, index):
    """``index_select`` of a 0-dim ``x`` (index: one element, 0 or -1; 0-dim result as
    ATen's) as that of ``x`` viewed as ``(1,)``; other shapes NotImplemented."""
    if x.dim() != 0:
        return NotImplemented
    r = aten.index_select.default(
        aten.reshape.default(x, [1]), 0, aten.reshape.default(index, [-1])
    )
    return aten.reshape.default(r, [])


def batch_norm_with_update_functional(x, weight, bias, running_mean, running_var, momentum, eps):
    """(out, save_mean, save_invstd, reserve, new running mean, new running var)."""
    out, mean, rstd, rm, rv = aten._native_batch_norm_legit_functional.default(
        x, weight, bias, running_mean, running_var, True, momentum, eps
    )
    reserve = aten.new_zeros.default(x, [0], dtype=torch.uint8)
    return out, mean, rstd, reserve, rm, rv


def batch_norm_backward(
    grad, x, weight, running_mean, running_var, save_mean, save_var, update, eps, mask, reserve
):
    """``batch_norm_backward`` (``_batch_norm_with_update``'s gradient; ``save_var`` is
    the saved inverse std, ``update`` training) as ``native_batch_norm_backward``."""
    return aten.native_batch_norm_backward.default(
        grad, x, weight, running_mean, running_var, save_mean, save_var, update, eps, mask
    )


TABLE = {
    aten.batch_norm_backward.default: batch_norm_backward,
    aten._batch_norm_with_update_functional.default: batch_norm_with_update_functional,
    aten.index_select.default: index_select,
    aten.empty.memory_format: empty,
    aten.empty_strided.default: lambda size, stride, **kw: empty(size, **kw),
    aten._trilinear.default: trilinear,
}

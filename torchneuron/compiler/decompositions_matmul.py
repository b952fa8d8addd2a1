"""``addbmm`` as ATen's CPU kernel computes it (torch-mlir lowered the float32 op but
failed on bfloat16 and int64, naming ``aten.addbmm.default`` in the OpInfo sweep):
``beta * self + alpha * b1[0] @ b2[0]``, then ``+ alpha * b1[i] @ b2[i]`` batch by batch,
each step an ``addmm`` rounded to the dtype (ATen loops ``addmm_`` over the batches).
bfloat16/float16 steps run in float32 and round once, as the CPU's ``addmm``; an integer
``addbmm`` takes ``beta``/``alpha`` as integers (0.6 is 0, as ATen) and ``beta == 0``
ignores ``self`` (NaN included), as ATen.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_LOW = (torch.bfloat16, torch.float16)


def addbmm(x, b1, b2, *, beta=1, alpha=1):
    dtype = torch.result_type(x, b1)
    if not dtype.is_floating_point:
        beta, alpha = int(beta), int(alpha)
    work = torch.float32 if dtype in _LOW else dtype
    shape = [b1.shape[1], b2.shape[2]]
    r = aten.expand.default(x, shape)
    r = aten._to_copy.default(r, dtype=work)
    r = aten.zeros_like.default(r) if beta == 0 else aten.mul.Tensor(r, beta) if beta != 1 else r
    for i in range(b1.shape[0]):
        a = aten._to_copy.default(aten.select.int(b1, 0, i), dtype=work)
        b = aten._to_copy.default(aten.select.int(b2, 0, i), dtype=work)
        p = aten.mm.default(a, b)
        p = aten.mul.Tensor(p, alpha) if alpha != 1 else p
        r = aten.add.Tensor(r, p)
        if work != dtype:
            r = aten._to_copy.default(aten._to_copy.default(r, dtype=dtype), dtype=work)
    return aten._to_copy.default(r, dtype=dtype)


TABLE = {aten.addbmm.default: addbmm}

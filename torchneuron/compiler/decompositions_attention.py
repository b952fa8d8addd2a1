"""Attention kernels eager runs natively and torch-mlir has no lowering for (each was
refused naming its op, so eager fusion left segments holding them unfused), written in
core ATen from their math (semantics checked against the CPU kernels):

- ``_masked_softmax(x, mask, dim, mask_type)`` (nn.MultiheadAttention's and
  TransformerEncoderLayer's eval fast path): mask True is masked out. A 2-d mask of a 4-d
  input is an ``(L, L)`` source mask (``mask_type`` 0, read as ``(1, 1, L, L)``) or a
  ``(B, L)`` padding mask (1, read as ``(B, 1, 1, L)``); otherwise the mask has the input's
  shape. ``dim`` defaults to the last. The softmax of the input with masked elements at
  -inf, its max subtracted: a slice masked throughout is NaN, as the CPU kernel gives.
- ``_transform_bias_rescale_qkv(qkv, bias, heads)`` (same fast path): ``qkv + bias``
  split in three ``(B, T, D)`` thirds, each as ``(B, heads, T, D / heads)``; q times
  ``1 / sqrt(D / heads)`` (a multiply, bitwise the CPU's).
- ``_scaled_dot_product_flash_attention_for_cpu`` (SDPA's CPU kernel, which eager's
  fused training step calls) returns the output and the rows' logsumexp ``(B, H, L)`` of
  the scaled, masked scores, in float32 for 16-bit inputs: ``s = q k^T * scale`` (scale
  ``1 / sqrt(E)`` unless given), ``+ attn_mask`` (a float mask is added, a bool one keeps
  True), causal keeping ``j <= i`` (top left); ``m`` the row max,
  ``lse = m + log(sum(exp(s - m)))``, output ``exp(s - m) v / sum``. A row masked
  throughout gives output 0 and logsumexp 0, as the CPU kernel. Core ATen's decomposition
  of it returned the attention weights ``(B, H, L, S)`` in the logsumexp's place, so a
  segment whose logsumexp autograd held failed to write it back and was refused.
- its backward from the logsumexp: ``P = exp(s - lse)``, ``dV = P^T dO``,
  ``dP = dO V^T``, ``dS = P * (dP - rowsum(dO * O))``, ``dQ = dS K * scale``,
  ``dK = dS^T Q * scale``.

``dropout_p > 0``: NotImplemented (the table's entry before ours).
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten

_WIDE = (torch.float16, torch.bfloat16)


def _cast(t, dtype):
    return t if t.dtype == dtype else aten._to_copy.default(t, dtype=dtype)


def masked_softmax(x, mask, dim=None, mask_type=None):
    if mask.dtype != torch.bool:
        return NotImplemented
    if x.dim() == 4 and mask.dim() == 2 and mask_type in (0, 1):
        n, m = mask.shape
        view = [1, 1, n, m] if mask_type == 0 else [n, 1, 1, m]
        mask = aten.reshape.default(mask, view)
        mask = aten.expand.default(mask, list(x.shape))
    elif tuple(mask.shape) != tuple(x.shape):
        return NotImplemented
    d = x.dim() - 1 if dim is None else dim % max(x.dim(), 1)
    work = torch.float32 if x.dtype in _WIDE else x.dtype
    xs = _cast(x, work)
    neg = aten.full.default([], float("-inf"), dtype=work, device=x.device)
    xs = aten.where.self(mask, neg, xs)
    e = aten.exp.default(aten.sub.Tensor(xs, aten.amax.default(xs, [d], True)))
    r = aten.div.Tensor(e, aten.sum.dim_IntList(e, [d], True))
    return _cast(r, x.dtype)


def transform_bias_rescale_qkv(qkv, bias, num_heads):
    if qkv.dim() != 3 or qkv.is_nested:
        return NotImplemented
    b, t, d3 = qkv.shape
    d = d3 // 3
    dh = d // num_heads
    x = aten.add.Tensor(qkv, bias)
    outs = []
    for i in range(3):
        part = aten.slice.Tensor(x, 2, i * d, (i + 1) * d)
        if i == 0:
            part = aten.mul.Tensor(part, 1.0 / math.sqrt(dh))
        part = aten.reshape.default(part, [b, t, num_heads, dh])
        part = aten.permute.default(part, [0, 2, 1, 3])
        outs.append(aten.clone.default(part, memory_format=torch.contiguous_format))
    return tuple(outs)


def _scores(q, k, is_causal, attn_mask, scale, work):
    """The scaled, masked scores ``(B, H, L, S)`` in ``work`` dtype."""
    sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = aten.matmul.default(_cast(q, work), aten.transpose.int(_cast(k, work), -2, -1))
    s = aten.mul.Tensor(s, sc)
    neg = aten.full.default([], float("-inf"), dtype=work, device=q.device)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = aten.where.self(attn_mask, s, neg)
        else:
            s = aten.add.Tensor(s, _cast(attn_mask, work))
    if is_causal:
        lq, lk = q.shape[-2], k.shape[-2]
        keep = aten.ones.default([lq, lk], dtype=torch.bool, device=q.device)
        s = aten.where.self(aten.tril.default(keep), s, neg)
    return s, sc


def flash_attention_for_cpu(
    query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None
):
    if dropout_p > 0:
        return NotImplemented
    work = torch.float32 if query.dtype in _WIDE else query.dtype
    s, _ = _scores(query, key, is_causal, attn_mask, scale, work)
    m = aten.amax.default(s, [-1], True)
    m = aten.where.self(aten.isinf.default(m), aten.zeros_like.default(m), m)
    e = aten.exp.default(aten.sub.Tensor(s, m))
    total = aten.sum.dim_IntList(e, [-1], True)
    empty = aten.eq.Scalar(total, 0)
    lse = aten.add.Tensor(m, aten.log.default(total))
    lse = aten.where.self(empty, aten.zeros_like.default(lse), lse)
    total = aten.where.self(empty, aten.ones_like.default(total), total)
    out = aten.div.Tensor(aten.matmul.default(e, _cast(value, work)), total)
    return _cast(out, query.dtype), aten.squeeze.dim(lse, -1)


def flash_attention_for_cpu_backward(
    grad_out,
    query,
    key,
    value,
    out,
    logsumexp,
    dropout_p=0.0,
    is_causal=False,
    *,
    attn_mask=None,
    scale=None,
):
    if dropout_p > 0:
        return NotImplemented
    work = torch.float32 if query.dtype in _WIDE else query.dtype
    s, sc = _scores(query, key, is_causal, attn_mask, scale, work)
    p = aten.exp.default(aten.sub.Tensor(s, aten.unsqueeze.default(_cast(logsumexp, work), -1)))
    go, q, k, v = (_cast(t, work) for t in (grad_out, query, key, value))
    dv = aten.matmul.default(aten.transpose.int(p, -2, -1), go)
    dp = aten.matmul.default(go, aten.transpose.int(v, -2, -1))
    row = aten.sum.dim_IntList(aten.mul.Tensor(go, _cast(out, work)), [-1], True)
    ds = aten.mul.Tensor(p, aten.sub.Tensor(dp, row))
    dq = aten.mul.Tensor(aten.matmul.default(ds, k), sc)
    dk = aten.mul.Tensor(aten.matmul.default(aten.transpose.int(ds, -2, -1), q), sc)
    return tuple(_cast(t, query.dtype) for t in (dq, dk, dv))


TABLE = {
    aten._masked_softmax.default: masked_softmax,
    aten._transform_bias_rescale_qkv.default: transform_bias_rescale_qkv,
    aten._scaled_dot_product_flash_attention_for_cpu.default: flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: (
        flash_attention_for_cpu_backward
    ),
}

"""Operands broadcast before ops whose lowering did not broadcast, normalization
statistics in eager's shapes and dtypes, and the ``nn.TransformerEncoderLayer`` eval fast
path as its composition.

- ``clamp_min``/``clamp_max``/``clamp`` with tensor bounds, ``fmin``/``fmax``: torch-mlir
  broadcast the bound to ``self``'s shape only (a bound that widens the result failed to
  lower: "The size of tensor a (3) must match"); ``fmin``/``fmax`` of two shapes failed
  in ``chlo.broadcast_compare``. Both operands are expanded to the result's shape first.
- ``native_batch_norm``/``_native_batch_norm_legit_no_training`` in eval mode return
  empty ``(0,)`` saved statistics on the CPU (the decomposition gave ``(C,)``); in
  training, and ``native_layer_norm``'s mean/rstd, are in the input's dtype when no
  parameter is float32 (bfloat16 gave float32 statistics).
- ``aten._transformer_encoder_layer_fwd`` (what ``nn.TransformerEncoderLayer`` calls in
  eval mode without grad) had no lowering: written as the layer's math (PyTorch's
  ``transformer_encoder_layer_forward``: attention, residual, layer norm, feed-forward).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _broadcast_first(op):
    def decomposition(a, *rest, **kw):
        tensors = [a] + [t for t in rest if isinstance(t, torch.Tensor)]
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
        if all(tuple(t.shape) == tuple(shape) for t in tensors):
            return NotImplemented
        device = next((t.device for t in tensors if t.device.type != "cpu" or t.dim()), a.device)

        def ex(t):
            if not isinstance(t, torch.Tensor):
                return t
            if t.device != device:  # a CPU 0-dim operand (a.clamp(min=torch.tensor(2)))
                t = aten._to_copy.default(t, device=device)
            return aten.expand.default(t, list(shape))

        return op(ex(a), *(ex(t) for t in rest), **kw)

    return decomposition


def _stats_dtype(x, *params):
    low = x.dtype in (torch.bfloat16, torch.float16)
    mixed = any(isinstance(p, torch.Tensor) and p.dtype != x.dtype for p in params)
    return x.dtype if low and not mixed else None


def _fix_stats(out, x, training: bool, params, dtype_rule=True):
    y, m, r = out
    if not training:
        e = aten.new_zeros.default(
            y, [0], dtype=torch.float32 if x.dtype != torch.float64 else x.dtype
        )
        return y, e, aten.new_zeros.default(y, [0], dtype=e.dtype)
    d = _stats_dtype(x, *params) if dtype_rule else None
    if d is not None and m.dtype != d:
        m, r = aten._to_copy.default(m, dtype=d), aten._to_copy.default(r, dtype=d)
    return y, m, r


def _native_batch_norm(base):
    def decomposition(x, weight, bias, running_mean, running_var, training, momentum, eps):
        out = base(x, weight, bias, running_mean, running_var, training, momentum, eps)
        return _fix_stats(out, x, training, (weight, bias, running_mean, running_var))

    return decomposition


def _no_training(base):
    def decomposition(x, weight, bias, running_mean, running_var, momentum, eps):
        out = base(x, weight, bias, running_mean, running_var, momentum, eps)
        return _fix_stats(out, x, False, ())

    return decomposition


def _no_stats(base):
    def decomposition(x, weight, bias, training, momentum, eps):
        out = base(x, weight, bias, training, momentum, eps)
        return _fix_stats(out, x, training, (weight, bias))

    return decomposition


def _legit_functional(base):
    def decomposition(x, weight, bias, running_mean, running_var, training, momentum, eps):
        out = base(x, weight, bias, running_mean, running_var, training, momentum, eps)
        # eval: saved stats of shape (0,) as ATen's (the in-place op reaches us this way)
        y, m, r = _fix_stats(out[:3], x, training, (weight, bias, running_mean, running_var))
        return (y, m, r, *out[3:])

    return decomposition


def _layer_norm(base):
    def decomposition(x, normalized_shape, weight, bias, eps):
        out = base(x, normalized_shape, weight, bias, eps)
        return _fix_stats(out, x, True, (weight, bias))

    return decomposition


def _layer_norm_f(x, w, b, eps):
    return aten.native_layer_norm.default(x, [x.shape[-1]], w, b, eps)[0]


def transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    b, t, e = src.shape
    hd = embed_dim // num_heads

    def attention(x):
        qkv = aten.linear.default(x, qkv_weight, qkv_bias)
        qkv = aten.permute.default(
            aten.view.default(qkv, [b, t, 3, num_heads, hd]), [2, 0, 3, 1, 4]
        )
        q, k, v = aten.unbind.int(qkv, 0)
        scores = aten.div.Tensor(aten.matmul.default(q, aten.transpose.int(k, -2, -1)), hd**0.5)
        if mask is not None:
            m = mask
            if m.dim() == 2 and mask_type == 1:  # key padding mask (B, T)
                m = aten.view.default(m, [b, 1, 1, t])
            if m.dtype == torch.bool:
                scores = aten.masked_fill.Scalar(scores, m, float("-inf"))
            else:
                scores = aten.add.Tensor(scores, m)
        a = aten.matmul.default(aten._softmax.default(scores, -1, False), v)
        a = aten.clone.default(
            aten.permute.default(a, [0, 2, 1, 3]), memory_format=torch.contiguous_format
        )
        a = aten.view.default(a, [b, t, e])
        return aten.linear.default(a, proj_weight, proj_bias)

    def ffn(x):
        h = aten.linear.default(x, ffn_weight_1, ffn_bias_1)
        h = aten.gelu.default(h) if use_gelu else aten.relu.default(h)
        return aten.linear.default(h, ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = aten.add.Tensor(x, attention(_layer_norm_f(x, norm_weight_1, norm_bias_1, eps)))
        return aten.add.Tensor(x, ffn(_layer_norm_f(x, norm_weight_2, norm_bias_2, eps)))
    x = _layer_norm_f(aten.add.Tensor(x, attention(x)), norm_weight_1, norm_bias_1, eps)
    return _layer_norm_f(aten.add.Tensor(x, ffn(x)), norm_weight_2, norm_bias_2, eps)


def table(base: dict) -> dict:
    """Our entries; ``base`` is the table so far (the normalizations wrap its entries)."""
    t = {
        op: _broadcast_first(op)
        for op in (
            aten.clamp_min.Tensor,
            aten.clamp_max.Tensor,
            aten.clamp.Tensor,
            aten.fmin.default,
            aten.fmax.default,
        )
    }
    t[aten._transformer_encoder_layer_fwd.default] = transformer_encoder_layer_fwd
    for op, wrap in (
        (aten.native_batch_norm.default, _native_batch_norm),
        (aten._native_batch_norm_legit_no_training.default, _no_training),
        (aten.native_layer_norm.default, _layer_norm),
        (aten._native_batch_norm_legit_functional.default, _legit_functional),
        (aten._native_batch_norm_legit.default, _native_batch_norm),
        (aten._native_batch_norm_legit.no_stats, _no_stats),
    ):
        if op in base:
            t[op] = wrap(base[op])
    return t

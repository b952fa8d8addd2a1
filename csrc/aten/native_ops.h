// The operators computed natively on `neuron` (the rest take the CPU
// fallback). Kept as data: one entry per operator overload; entries whose
// operator has no CPU kernel in this PyTorch are skipped at registration
// (they are composites that decompose into entries of this list).
#pragma once

namespace torchneuron {

// Computed asynchronously on the current stream by ATen's CPU kernel over
// device memory, after shape inference on the Meta device.
inline constexpr const char* kNativeOps[] = {
    // matmul family
    "mm", "mm.out", "bmm", "bmm.out", "addmm", "addmm.out", "addmm_", "_addmm_activation",
    "_addmm_activation.out", "baddbmm", "baddbmm.out", "baddbmm_", "mv", "mv.out", "dot",
    "addmv", "addmv.out", "addr", "addr.out", "addr_",  // addr: ATen's math fallback rounds twice
    // convolution and pooling
    "convolution_overrideable", "max_pool2d_with_indices", "max_pool2d_with_indices.out",
    "avg_pool2d", "avg_pool2d.out", "_adaptive_avg_pool2d", "adaptive_max_pool2d",
    "adaptive_max_pool2d.out", "avg_pool3d", "max_pool3d_with_indices",
    // elementwise arithmetic
    "add.Tensor", "add_.Tensor", "add.out", "sub.Tensor", "sub_.Tensor", "sub.out",
    "mul.Tensor", "mul_.Tensor", "mul.out", "div.Tensor", "div_.Tensor", "div.out",
    "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode", "remainder.Tensor",
    "remainder_.Tensor", "remainder.Tensor_out", "fmod.Tensor", "fmod.Tensor_out",
    "pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out", "pow.Tensor_Tensor",
    "pow_.Tensor", "pow.Tensor_Tensor_out", "pow.Scalar", "pow.Scalar_out",
    "neg", "neg_", "neg.out", "abs", "abs_", "abs.out", "sqrt", "sqrt_", "sqrt.out",
    "rsqrt", "rsqrt_", "rsqrt.out", "exp", "exp_", "exp.out", "exp2", "log", "log_", "log.out",
    "log2", "log10", "log1p", "log1p_", "log1p.out", "expm1", "expm1.out", "reciprocal",
    "reciprocal_", "reciprocal.out", "sign", "sign.out", "sgn", "floor", "floor_",
    "floor.out", "ceil", "ceil_", "ceil.out", "round", "round.decimals", "round.out",
    "trunc", "trunc.out", "frac", "clamp", "clamp_", "clamp.out", "clamp.Tensor",
    "clamp.Tensor_out", "clamp_min", "clamp_min_", "clamp_min.out", "clamp_max",
    "clamp_max_", "clamp_max.out", "maximum", "maximum.out", "minimum", "minimum.out",
    "addcmul", "addcmul_", "addcmul.out", "addcdiv", "addcdiv_", "addcdiv.out",
    "lerp.Scalar", "lerp.Scalar_out", "lerp.Tensor", "erf", "erf.out", "erfinv", "sin",
    "sin.out", "cos", "cos.out", "tan", "asin", "acos", "atan", "atan2", "atan2.out",
    "sinh", "cosh", "asinh", "acosh", "atanh", "hypot", "xlogy.Tensor",
    "bitwise_and.Tensor", "bitwise_and.Tensor_out", "bitwise_or.Tensor",
    "bitwise_or.Tensor_out", "bitwise_xor.Tensor", "bitwise_not", "bitwise_not.out",
    "logical_and", "logical_and.out", "logical_or", "logical_or.out", "logical_not",
    "logical_not.out", "logical_xor", "logical_xor.out",
    // comparisons
    "eq.Tensor", "eq.Tensor_out", "eq.Scalar", "eq.Scalar_out", "ne.Tensor",
    "ne.Tensor_out", "ne.Scalar", "ne.Scalar_out", "lt.Tensor", "lt.Tensor_out",
    "lt.Scalar", "lt.Scalar_out", "le.Tensor", "le.Tensor_out", "le.Scalar",
    "le.Scalar_out", "gt.Tensor", "gt.Tensor_out", "gt.Scalar", "gt.Scalar_out",
    "ge.Tensor", "ge.Tensor_out", "ge.Scalar", "ge.Scalar_out", "isnan", "isinf",
    "isposinf", "isneginf", "signbit", "isin.Tensor_Tensor", "isin.Tensor_Tensor_out",
    "isin.Tensor_Scalar", "isin.Scalar_Tensor",  // isin: generate()'s stopping criteria
    // activations
    "relu", "relu_", "gelu", "gelu_", "gelu.out", "silu", "silu_", "silu.out", "tanh",
    "tanh_", "tanh.out", "sigmoid", "sigmoid_", "sigmoid.out", "_softmax", "_softmax.out",
    "_log_softmax", "_log_softmax.out", "hardtanh", "hardtanh_", "hardtanh.out",
    "leaky_relu", "leaky_relu_", "leaky_relu.out", "elu", "elu_", "elu.out", "softplus",
    "softplus.out", "hardswish", "hardswish_", "hardsigmoid", "hardsigmoid_", "mish",
    "threshold", "threshold.out", "glu", "logit", "celu", "selu", "rrelu_with_noise",
    // normalization
    "native_layer_norm", "native_group_norm", "native_batch_norm",
    "_native_batch_norm_legit", "_native_batch_norm_legit.no_stats",
    "_native_batch_norm_legit_no_training",
    // indexing and selection
    "index_select", "index_select.out", "gather", "gather.out", "scatter.src",
    "scatter.value", "scatter_.src", "scatter_.value", "scatter_add", "scatter_add_",
    "index.Tensor", "index_put_", "_index_put_impl_", "index_add", "index_add_",
    "index_fill_.int_Scalar", "index_copy_", "where.self", "where.self_out",
    "masked_fill_.Scalar", "masked_fill_.Tensor", "take", "embedding_dense_backward",
    // shape-building
    "cat", "cat.out", "stack", "stack.out", "flip", "roll", "repeat", "tril", "tril_",
    "tril.out", "triu", "triu_", "triu.out", "constant_pad_nd", "reflection_pad2d",
    "replication_pad2d", "upsample_nearest2d", "upsample_nearest2d.out",
    "upsample_bilinear2d", "upsample_bilinear2d.out", "im2col", "col2im",
    // reductions
    "sum.dim_IntList", "sum.IntList_out", "sum", "mean.dim", "mean.out", "mean",
    "max", "max.dim", "max.dim_max", "min", "min.dim", "min.dim_min", "argmax",
    "argmax.out", "argmin", "argmin.out", "amax", "amax.out", "amin", "amin.out", "prod",
    "prod.dim_int", "any", "any.dim", "any.dims", "all", "all.dim", "all.dims", "std.correction",
    "var.correction", "std_mean.correction", "var_mean.correction", "linalg_vector_norm",
    "linalg_vector_norm.out", "norm.Scalar", "norm.ScalarOpt_dim", "logsumexp",
    "logsumexp.out", "cumsum", "cumsum.out", "cumsum_", "cumprod", "aminmax",
    // gradients and losses (training)
    "threshold_backward", "threshold_backward.grad_input", "native_batch_norm_backward",
    "max_pool2d_with_indices_backward", "max_pool2d_with_indices_backward.grad_input",
    "_log_softmax_backward_data", "_log_softmax_backward_data.out",
    "_softmax_backward_data", "_softmax_backward_data.out", "nll_loss_forward",
    "nll_loss_forward.output", "nll_loss_backward", "nll_loss_backward.grad_input",
    "sigmoid_backward", "sigmoid_backward.grad_input", "tanh_backward",
    "tanh_backward.grad_input", "gelu_backward", "gelu_backward.grad_input",
    "native_layer_norm_backward",
    // random (drawn from the per-core generator)
    "bernoulli_.float", "bernoulli_.Tensor", "bernoulli", "uniform_", "normal_", "random_",
    "random_.from", "random_.to", "exponential_", "multinomial",
    // (native_dropout draws without a Generator argument: see random_ops.cpp)
    // fills and ranges
    "fill_.Scalar", "fill_.Tensor", "zero_", "arange.start_out", "linspace.out",
    "masked_scatter_", "_fused_sdp_choice",
    "_scaled_dot_product_flash_attention_for_cpu",
    // training steps (issue 7): the GradScaler's kernels, dropout and attention
    // backwards; ATen's CPU kernels, so bit for bit the CPU's (fused optimizers:
    // fused_optim.cpp)
    "_amp_foreach_non_finite_check_and_unscale_",
    "_amp_update_scale_", "native_dropout_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    // inference fast paths of nn.TransformerEncoderLayer / nn.MultiheadAttention
    "_transformer_encoder_layer_fwd", "_native_multi_head_attention", "_masked_softmax",
    "_transform_bias_rescale_qkv",
};

// Data-dependent output shapes: computed synchronously (the current stream
// is drained first), as a device must do to size the result.
inline constexpr const char* kSyncNativeOps[] = {
    "nonzero", "nonzero.out", "masked_select", "masked_select.out", "_unique2", "unique_dim",
    "unique_consecutive", "unique_dim_consecutive", "_unique", "repeat_interleave.Tensor",
    "is_nonzero", "equal", "allclose", "nonzero_static",
    "_nested_tensor_from_mask_left_aligned",  // nn.TransformerEncoder's fast-path check
};

// Operators that exist for out-of-tree backends, computed with the CPU
// operator named beside them (same arguments and results).
struct ComputeAlias {
  const char* op;
  const char* computed_as;
};
inline constexpr ComputeAlias kComputeAliases[] = {
    {"convolution_overrideable", "convolution"},
};

// In-place operators that only write `self` (fills and random draws): self
// is their result, never narrowed, so torch.full(..., 2**40) of int64 and a
// float64 draw are exact (the CPU's values).
inline constexpr const char* kWriteOnlySelfOps[] = {
    "fill_.Scalar", "fill_.Tensor", "zero_", "uniform_", "normal_", "random_", "random_.from",
    "random_.to", "exponential_", "bernoulli_.float", "bernoulli_.Tensor",
};

// Operators that only move or select values, computing none (all overloads
// of each name): never narrowed, so gathering, concatenating or masking
// int64 data is exact, like a copy. Narrowing is about arithmetic width.
inline constexpr const char* kDataMovementOps[] = {
    "cat", "stack", "index_select", "gather", "take", "flip", "roll", "repeat", "tril", "tril_",
    "triu", "triu_", "constant_pad_nd", "reflection_pad2d", "replication_pad2d", "where",
    "masked_fill_", "masked_scatter_", "index", "index_put_", "_index_put_impl_", "index_fill_",
    "index_copy_", "scatter", "scatter_", "upsample_nearest2d",
};

// Indexing operators whose `indices` may be CPU tensors, as on CUDA
// (x[torch.tensor([0, 2])] of a device tensor): copied to the device first.
inline constexpr const char* kHostIndexOps[] = {
    "index.Tensor", "index_put_", "_index_put_impl_", "index_put",
    "index_fill_.int_Scalar", "index_fill_.int_Tensor",  // `index` (as CUDA accepts)
};

// Indexing operators computed synchronously, so an index out of range raises
// at the call with the CPU's type (IndexError), as on the CPU.
inline constexpr const char* kCheckedIndexOps[] = {
    "index.Tensor", "index_put_", "_index_put_impl_", "index_put", "take",
};

// Argument names that carry indices, not values: never narrowed to 32 bits
// (ATen's index kernels require int64 there; an index is an address).
inline constexpr const char* kIndexArgNames[] = {"index", "indices", "offsets", "target"};

}  // namespace torchneuron

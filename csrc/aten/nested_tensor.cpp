// Nested tensors on `neuron`, as far as nn.TransformerEncoder's fast path
// needs them. In eval mode (no grad) with a src_key_padding_mask and
// enable_nested_tensor=True (the default) the encoder packs the batch with
// _nested_tensor_from_mask, runs each layer's _transformer_encoder_layer_fwd
// on the packed tokens and pads the result back with to_padded_tensor(0).
//
// Here a nested tensor is ATen's NestedTensorImpl over a contiguous neuron
// buffer (2-D components [length, E], sizes on the host, as ATen keeps them).
// The layer runs as the dense kernel over the padded batch with the padding
// as key-padding mask (mask_type 1): the packed tokens get the values the
// nested kernel computes (padded keys get zero attention weight), and the
// result is repacked. Other nested operations are not supported on neuron
// (PyTorch raises NotImplementedError naming the op and NestedTensorPrivateUse1).
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <vector>

namespace torchneuron {
namespace {

using at::Tensor;

// Rows of the nested sizes [B, 2] (component b is [len_b, E]).
std::vector<int64_t> lengths_of(const Tensor& nested, int64_t* embed) {
  const Tensor& sizes = at::native::get_nested_sizes(nested);
  TORCH_CHECK(
      sizes.dim() == 2 && sizes.size(1) == 2,
      "neuron: nested tensors of 2-D components "
      "([length, E], as nn.TransformerEncoder makes them) are supported, got components of ",
      sizes.size(1), " dims");
  auto acc = sizes.accessor<int64_t, 2>();
  std::vector<int64_t> lengths;
  *embed = sizes.size(0) ? acc[0][1] : 0;
  for (int64_t b = 0; b < sizes.size(0); ++b) {
    TORCH_CHECK(acc[b][1] == *embed, "neuron: nested components must share their last size");
    lengths.push_back(acc[b][0]);
  }
  return lengths;
}

// Pack rows [b, :len_b] of the dense [B, S, E] tensor into a nested tensor.
Tensor pack(const Tensor& dense, const std::vector<int64_t>& lengths) {
  const int64_t embed = dense.size(2);
  std::vector<Tensor> rows;
  auto sizes = at::empty({int64_t(lengths.size()), 2}, at::kLong);
  auto acc = sizes.accessor<int64_t, 2>();
  for (size_t b = 0; b < lengths.size(); ++b) {
    acc[b][0] = lengths[b];
    acc[b][1] = embed;
    if (lengths[b] > 0) rows.push_back(dense.select(0, b).narrow(0, 0, lengths[b]).reshape({-1}));
  }
  Tensor buffer = rows.empty() ? at::empty({0}, dense.options()) : at::cat(rows).contiguous();
  return at::native::wrap_buffer(buffer, sizes);
}

// The nested tensor as a dense [B, max(S, longest), E] tensor filled with `padding`.
Tensor unpack(const Tensor& nested, double padding, int64_t min_seq,
              std::vector<int64_t>* lengths_out = nullptr) {
  int64_t embed = 0;
  auto lengths = lengths_of(nested, &embed);
  int64_t seq = min_seq;
  for (auto l : lengths) seq = std::max(seq, l);
  const Tensor buffer = at::native::get_nested_tensor_impl(nested)->get_buffer();
  Tensor out = at::full({int64_t(lengths.size()), seq, embed}, padding, buffer.options());
  int64_t offset = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] == 0) continue;
    out.select(0, b)
        .narrow(0, 0, lengths[b])
        .copy_(buffer.narrow(0, offset, lengths[b] * embed).view({lengths[b], embed}));
    offset += lengths[b] * embed;
  }
  if (lengths_out) *lengths_out = std::move(lengths);
  return out;
}

Tensor nested_tensor_from_mask(const Tensor& t, const Tensor& mask, bool mask_check) {
  TORCH_CHECK(t.dim() == 3, "_nested_tensor_from_mask: expected a 3-D tensor [B, S, E], got ",
              t.sizes());
  TORCH_CHECK(mask.dim() == 2 && mask.size(0) == t.size(0) && mask.size(1) == t.size(1),
              "_nested_tensor_from_mask: the mask must be [B, S] = ", t.sizes().slice(0, 2),
              ", got ", mask.sizes());
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "_nested_tensor_from_mask: expected a bool mask, got ", mask.scalar_type());
  if (mask_check)
    TORCH_CHECK(at::_nested_tensor_from_mask_left_aligned(t, mask),
                "Mask must be left aligned without gaps");
  // The lengths size the buffer: read on the host (a sync point, as nonzero).
  Tensor lengths = mask.sum(1).cpu();
  std::vector<int64_t> lens(lengths.data_ptr<int64_t>(),
                            lengths.data_ptr<int64_t>() + lengths.numel());
  return pack(t, lens);
}

Tensor to_padded_tensor(const Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  int64_t min_seq = 0;
  if (output_size) {
    TORCH_CHECK(output_size->size() == 3,
                "to_padded_tensor: output_size must have 3 dims for "
                "nested tensors of 2-D components, got ",
                *output_size);
    min_seq = (*output_size)[1];
  }
  Tensor out = unpack(self, padding, min_seq);
  if (output_size) {
    TORCH_CHECK((*output_size)[0] == out.size(0) && (*output_size)[2] == out.size(2) &&
                    (*output_size)[1] == out.size(1),
                "to_padded_tensor: output_size ", *output_size, " cannot hold the nested tensor (",
                out.sizes(), ")");
  }
  return out;
}

Tensor transformer_encoder_layer_fwd(
    const Tensor& src, int64_t embed_dim, int64_t num_heads, const Tensor& qkv_weight,
    const Tensor& qkv_bias, const Tensor& proj_weight, const Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const Tensor& norm_weight_1, const Tensor& norm_bias_1,
    const Tensor& norm_weight_2, const Tensor& norm_bias_2, const Tensor& ffn_weight_1,
    const Tensor& ffn_bias_1, const Tensor& ffn_weight_2, const Tensor& ffn_bias_2,
    const std::optional<Tensor>& mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask || !mask->defined(),
              "neuron: _transformer_encoder_layer_fwd of a nested "
              "tensor takes no mask (the nesting is the mask), as on the CPU");
  std::vector<int64_t> lengths;
  Tensor dense = unpack(src, 0.0, 0, &lengths);
  // Key padding mask [B, S]: true where a position is padding.
  Tensor positions = at::arange(dense.size(1), at::kLong).unsqueeze(0);
  Tensor lens = at::tensor(lengths, at::kLong).unsqueeze(1);
  Tensor padding = positions.ge(lens).to(dense.device());
  Tensor out = at::_transformer_encoder_layer_fwd(
      dense, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
      norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
      ffn_bias_1, ffn_weight_2, ffn_bias_2, padding, /*mask_type=*/1);
  return pack(out, lengths);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", TORCH_FN(nested_tensor_from_mask));
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformer_encoder_layer_fwd));
  m.impl("to_padded_tensor", TORCH_FN(to_padded_tensor));
}

}  // namespace
}  // namespace torchneuron

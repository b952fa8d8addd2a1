// Nested tensors on `neuron`: not supported (no NestedTensorPrivateUse1
// kernels). The one place unmodified programs meet them is
// nn.TransformerEncoder's fast path: in eval mode with a src_key_padding_mask
// and enable_nested_tensor=True (the default) it packs the batch with
// aten::_nested_tensor_from_mask, runs _transformer_encoder_layer_fwd on the
// nested tensor and pads the result back with zeros. Through the CPU
// fallback the packed tensor would have to be copied to the device as a
// nested tensor, which fails with an unrelated "_to_copy ... NestedTensorneuron"
// error. Here the entry op names the cause and the way out instead.
// (_nested_tensor_from_mask_left_aligned, the check before it, is native: a
// synchronous op in native_ops.h.)
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "neuron: nested tensors are not supported on the neuron device "
      "(aten::_nested_tensor_from_mask of a ", t.sizes(), " tensor). nn.TransformerEncoder "
      "uses them in eval mode when given a src_key_padding_mask: construct it with "
      "enable_nested_tensor=False (the output then holds computed values at padded "
      "positions where the nested path gives 0; mask them if you read them).");
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", TORCH_FN(nested_tensor_from_mask));
}

}  // namespace
}  // namespace torchneuron

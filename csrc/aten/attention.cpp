// Which kernel scaled_dot_product_attention uses on `neuron`.
// at::scaled_dot_product_attention asks _fused_sdp_choice_stub (a
// DispatchStub, not the dispatcher) for the backend. With no PrivateUse1
// entry it always took the unfused math path: ~20 small kernels per call,
// about twice the time of the fused kernel, and results that differ from the
// CPU's in the last bits. The CPU's choice applies, since the CPU's kernels
// compute on the device (_scaled_dot_product_flash_attention_for_cpu is in
// native_ops.h); the choice only reads metadata, never device memory.
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_cpu_dispatch.h>

namespace torchneuron {
namespace {

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  return at::cpu::_fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                    enable_gqa);
}

}  // namespace
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::fused_sdp_choice)
}  // namespace at::native

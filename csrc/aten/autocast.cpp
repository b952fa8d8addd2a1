// torch.autocast("neuron"): PyTorch's autocast policy lists (ATen's
// AT_FORALL_* op lists, shared by every backend) registered for the
// AutocastPrivateUse1 key. Matmuls and convolutions run in the autocast
// dtype (bfloat16 or float16), numerically sensitive ops in float32.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

// Names the shared redispatch signatures use unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m){
    AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP) AT_FORALL_FP32(NEURON_FP32)
        AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
            AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
                KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
                AT_FORALL_PROMOTE(NEURON_PROMOTE)}

// Every other op runs unchanged under autocast.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace

// Random operators whose schema has no Generator argument: their CPU kernel
// draws from the CPU's default generator, so the generic native kernel could
// not hand them the neuron one. They run as compositions of neuron kernels
// that do draw from it (the CPU's numbers for one seed, on the stream).
#include <ATen/ops/native_dropout_native.h>
#include <torch/library.h>

namespace torchneuron {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // ATen's CPU implementation is device-generic: empty_like, bernoulli_, mul.
  m.impl("native_dropout", TORCH_FN(at::native::native_dropout_cpu));
}

}  // namespace torchneuron

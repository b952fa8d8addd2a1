// Tensors over a neuron tensor's memory: the CPU alias a kernel computes on,
// and the view a queued kernel captures.
#pragma once

#include <ATen/core/Tensor.h>

namespace torchneuron {

// A CPU tensor viewing the same bytes as neuron tensor `t` (same sizes,
// strides, dtype, conjugate and negative bits). Valid only inside a kernel or
// with_device_access, while `t` is alive. Undefined in, undefined out.
at::Tensor cpu_alias(const at::Tensor& t);

// What a queued kernel captures instead of `t`: a new TensorImpl with t's
// geometry and data pointer as of now, keeping t's storage alive. Later
// in-place metadata changes of `t` (t_, transpose_, squeeze_, as_strided_)
// and storage swaps (resize_ growing it) then leave the queued work as it was
// issued, as on a device where a launch takes addresses, not objects.
// Tensors of other devices get a shallow copy (metadata only).
at::Tensor launch_view(const at::Tensor& t);
// An input the kernel only reads: launch_view, except that a CPU 0-dim tensor
// (a scalar operand) is copied, so the kernel sees its value at the call.
// Never for a destination: writes would go to the copy.
at::Tensor launch_operand(const at::Tensor& t);

}  // namespace torchneuron

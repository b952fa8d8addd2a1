// New neuron tensors of a given geometry (as ATen's empty_strided_cuda),
// defined with the creation natives in tensor_ops.cpp.
#pragma once

#include <ATen/core/Tensor.h>

namespace torchneuron {

// A neuron tensor of the given geometry on `device` (current stream's allocator).
at::Tensor empty_strided_neuron(c10::IntArrayRef size, c10::IntArrayRef stride,
                                c10::ScalarType dtype, c10::DeviceIndex device);

}  // namespace torchneuron

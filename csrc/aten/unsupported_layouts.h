// Layouts neuron does not support (sparse, quantized, MKL-DNN): one clear
// NotImplementedError naming the layout and what to do, in place of the
// dispatcher's "Could not run ... 'Sparseneuron' backend" or a broken tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace torchneuron {

// Throws NotImplementedError if `t` (a CPU kernel's result that would come to
// neuron) is sparse, quantized or otherwise not a strided dense tensor.
void check_supported_layout(const std::string& op, const at::Tensor& t);

}  // namespace torchneuron

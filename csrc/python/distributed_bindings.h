// Python bindings of the c10d backend `neuron` (torchneuron._C._distributed).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchneuron::distributed {
void init_bindings(pybind11::module& m);
}

// The per-core random generators (NeuronGeneratorImpl, hooks.cpp).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace torchneuron {

// The per-core default generator; its state lives in a CPU generator that
// kernels (which reuse ATen's CPU random kernels) draw from.
const at::Generator& default_generator(c10::DeviceIndex device);
// The CPU generator behind a neuron generator (for kernels).
at::Generator cpu_generator_of(const at::Generator& neuron_gen);

}  // namespace torchneuron

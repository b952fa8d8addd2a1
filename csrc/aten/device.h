// The device: the runtime behind `neuron` (started on first use, unusable in
// a forked child), its errors as PyTorch's, the device count and the calling
// thread's current device.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <string>

#include "runtime/runtime.h"

namespace torchneuron {

namespace rt = torchneuron::runtime;

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// The runtime; runtime errors become PyTorch errors (see translate_errors).
rt::Runtime& device_runtime();

// Inside a catch of rt::Error: throws it again as PyTorch's error type,
// OutOfMemoryError -> c10::OutOfMemoryError (torch.OutOfMemoryError),
// others -> c10::Error (RuntimeError).
[[noreturn]] void rethrow_runtime_error();

// Runs `fn`, turning runtime exceptions into PyTorch's error types (above).
// A template, not a std::function: the launch path calls it per op, and a
// std::function of a lambda capturing more than two pointers is a heap block.
template <class F>
void translate_errors(F&& fn) {
  try {
    fn();
  } catch (const rt::Error&) {
    rethrow_runtime_error();
  }
}

c10::DeviceIndex device_count() noexcept;
// Why the runtime could not start ("" if it started or was not tried).
std::string runtime_start_error();
// True in a child forked after the runtime started (the device is unusable).
bool in_bad_fork();
// True once the runtime started (NEURON_RT_VISIBLE_CORES is read then).
bool runtime_started();
// Throws IndexError-like c10::Error naming the index and the count.
void check_device_index(c10::DeviceIndex index);
// The calling thread's current device (as cudaGetDevice), default 0.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// The device guard's noexcept restore: an index out of range is ignored.
void unchecked_set_current_device(c10::DeviceIndex index) noexcept;
// -1 resolves to the current device.
c10::DeviceIndex resolve_device(c10::DeviceIndex index);

}  // namespace torchneuron

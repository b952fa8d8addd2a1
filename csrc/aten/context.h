// Shared helpers of the PyTorch integration: runtime access, current device
// and stream, launching kernels, CPU aliases of device memory.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <functional>
#include <string>

#include "runtime/runtime.h"

namespace torchneuron {

namespace rt = torchneuron::runtime;

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// The runtime; runtime errors become PyTorch errors (see translate_errors).
rt::Runtime& device_runtime();

// Runs `fn`, turning runtime exceptions into PyTorch's error types:
// OutOfMemoryError -> c10::OutOfMemoryError (torch.OutOfMemoryError),
// others -> c10::Error (RuntimeError).
void translate_errors(const std::function<void()>& fn);

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
// -1 resolves to the current device.
c10::DeviceIndex resolve_device(c10::DeviceIndex index);

// The calling thread's current stream on `device` (default stream 0).
rt::StreamId current_stream_id(c10::DeviceIndex device);
void set_current_stream(const c10::Stream& stream);
c10::Stream make_stream(c10::DeviceIndex device, rt::StreamId id);

// Enqueue `fn` on the current stream of `device`.
void launch(c10::DeviceIndex device, const char* name, std::function<void()> fn);
// Wait for the current stream of `device`; rethrows asynchronous kernel errors.
void sync_current_stream(c10::DeviceIndex device);
// Wait for every stream of `device`; rethrows asynchronous kernel errors.
void sync_device(c10::DeviceIndex device);
// Waits that are not sync points (reseeding, a storage's growth): a kernel
// error stays pending for the next sync point.
void wait_current_stream(c10::DeviceIndex device);
void wait_device(c10::DeviceIndex device);

// Every host wait for device work runs through blocking_wait. A worker that
// finishes a kernel drops the kernel's references, and dropping the last C++
// reference of a tensor or storage that has a Python object takes the GIL:
// a wait holding the GIL would deadlock. The Python module installs a hook
// that releases the GIL around the wait (this layer stays free of Python).
void blocking_wait(const std::function<void()>& wait);
using BlockingWaitHook = void (*)(const std::function<void()>& wait);
void set_blocking_wait_hook(BlockingWaitHook hook);

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

// A neuron tensor of the given geometry on `device` (current stream's allocator).
at::Tensor empty_strided_neuron(c10::IntArrayRef size, c10::IntArrayRef stride,
                                c10::ScalarType dtype, c10::DeviceIndex device);

// Device memory as a DataPtr on `device`; throws torch.OutOfMemoryError.
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);

// The per-core default generator; its state lives in a CPU generator that
// kernels (which reuse ATen's CPU random kernels) draw from.
const at::Generator& default_generator(c10::DeviceIndex device);
// The CPU generator behind a neuron generator (for kernels).
at::Generator cpu_generator_of(const at::Generator& neuron_gen);

// Pinned host memory (pinned_memory.cpp): the allocator of pin_memory(),
// whether a host pointer lies in one of its blocks, its byte counts.
struct PinnedHostStats {
  size_t mapped_bytes = 0;  // blocks held, in use or cached
  size_t locked_bytes = 0;  // of those, page-locked (mlock succeeded)
  size_t cached_bytes = 0;  // freed blocks kept for reuse
};
c10::Allocator* pinned_host_allocator();
bool is_pinned_host_ptr(const void* p);
PinnedHostStats pinned_host_stats();
void pinned_host_empty_cache();

// 64-bit policy and fallback statistics, exposed to Python.
bool narrow_64bit_enabled();
void set_narrow_64bit(bool on);

}  // namespace torchneuron

// Launching kernels on the current stream, with one heap block per launch: a
// kernel's closure and the tensors it keeps, made on the launching thread and
// freed on the worker (docs/design/eager-per-op-cost.md: each such block costs
// glibc's slow path).
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <functional>
#include <memory>
#include <stdexcept>

namespace torchneuron {

// Enqueue `fn` on the current stream of `device`.
void launch(c10::DeviceIndex device, const char* name, std::function<void()> fn);

// launch's parts: the launching thread's intra-op thread count, set on the
// worker before the kernel; the enqueue (kernel already wrapped), after the
// stream's buffered kernels (concatenation.h); enqueue_on: on `stream`, with
// no buffer before it (the buffers' own flush).
int launch_thread_count();
void kernel_prologue(int threads);
void enqueue_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel);
void enqueue_on(c10::DeviceIndex device, int64_t stream, const char* name,
                std::function<void()> kernel);
// A native op's kernel: enqueued, or buffered under adaptive eager execution.
// `rec`: what fusion needs of the op (fuse_record.h), or null.
struct FuseRecord;
void buffer_or_enqueue(c10::DeviceIndex device, const char* name, std::shared_ptr<FuseRecord> rec,
                       std::function<void()> kernel);

// What every kernel does around its body on the worker, with the launching
// thread's intra-op thread count. The runtime reports a failed kernel by its
// what(); c10::Error's carries a C++ backtrace, which is noise in an
// asynchronous error message.
template <class F>
void run_wrapped(int threads, F& f) {
  kernel_prologue(threads);
  // A kernel computes; autograd and version counters were handled at the call. Below them,
  // a write into a tensor made under torch.inference_mode is allowed on the worker, which
  // is not in inference mode (x.cpu() inside it had failed: "Inplace update to inference
  // tensor outside InferenceMode").
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    f();
  } catch (const c10::Error& e) {
    throw std::runtime_error(e.what_without_backtrace());
  }
}

// `f` wrapped once: one closure allocation per launch, not two.
template <class F>
std::function<void()> wrap_kernel(F&& f) {
  return [f = std::forward<F>(f), threads = launch_thread_count()]() mutable {
    run_wrapped(threads, f);
  };
}

template <class F>
void launch_flat(c10::DeviceIndex device, const char* name, F&& f) {
  enqueue_kernel(device, name, wrap_kernel(std::forward<F>(f)));
}

// launch_flat for a native op's kernel, which adaptive eager execution may buffer.
template <class F>
void launch_native(c10::DeviceIndex device, const char* name, std::shared_ptr<FuseRecord> rec,
                   F&& f) {
  buffer_or_enqueue(device, name, std::move(rec), wrap_kernel(std::forward<F>(f)));
}

// launch_view's facts as a flat record made at the call; view() builds
// launch_view's tensor on the worker. Queued kernels capture these: every
// heap block made on the launching thread and freed on the worker costs
// glibc's slow path (docs/design/eager-per-op-cost.md); a Storage copy is a
// refcount. `operand`: launch_operand's treatment of CPU scalars.
struct PinnedTensor {
  static PinnedTensor of(const at::Tensor& t, bool operand);
  at::Tensor view() const;

  c10::Storage storage;  // keeps the memory alive
  void* data = nullptr;  // as of the call (a later resize_ may swap it)
  size_t nbytes = 0;
  c10::SmallVector<int64_t, 5> sizes, strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
  c10::DispatchKeySet keys;  // conj/neg bits included
  c10::Device device{c10::kCPU};
  bool neuron = false;
  at::Tensor other;  // not a neuron tensor: launch_view's or launch_operand's
};

}  // namespace torchneuron

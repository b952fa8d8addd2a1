// launch: a kernel enqueued on the current stream, run on the stream's worker
// with the launching thread's intra-op thread count.
#include <functional>
#include <utility>

#include "aten/compiled_launch.h"
#include "aten/concatenation.h"
#include "aten/device.h"
#include "aten/intraop_threads.h"
#include "aten/launch.h"
#include "aten/stream.h"

namespace torchneuron {

void launch(c10::DeviceIndex device, const char* name, std::function<void()> fn) {
  // The kernel runs ATen's CPU kernels on the stream's worker thread with the
  // launching thread's intra-op thread count (torch.set_num_threads), as of the
  // launch: OpenMP's thread count (and MKL's local one) is a per-thread setting,
  // and a worker thread otherwise keeps the count it first saw for good. Without
  // this, `torch.set_num_threads(1)` after the first device op left the
  // emulated core on 2 threads, whose parallel regions wait a scheduler slice
  // whenever the second thread is descheduled (torchneuron check measured a
  // 2-thread worker: docs/design/check-measurement.md, "The latency statistic"). Set on the
  // worker thread only (intraop_threads.h): the user's process-wide count stays.
  // Read without ATen's per-thread lazy init: a launch must not fix the
  // launching thread's count (torch.get_num_threads() would then differ from a
  // CPU program's after another thread's torch.set_num_threads).
  launch_flat(device, name, std::move(fn));
}

int launch_thread_count() { return launching_thread_intraop_threads(); }

void kernel_prologue(int threads) { use_intraop_threads(threads); }

void enqueue_on(c10::DeviceIndex device, int64_t stream, const char* name,
                std::function<void()> kernel) {
  auto enqueue = [&] {
    if (concatenation_enabled()) {
      enqueue_counted(device, stream, name, std::move(kernel));  // the queue depth it reads
      return;
    }
    translate_errors([&] { device_runtime().launch(device, stream, name, std::move(kernel)); });
  };
  // A compiled graph's kernel takes the GIL (compiled_launch.h): while one is
  // queued, a launch that finds the stream's queue full must wait without the
  // GIL, or that kernel could never run and the queue never drain.
  if (device_runtime().config().launch_blocking || compiled_kernels_queued() > 0)
    blocking_wait(enqueue);  // the launch waits for the kernel (or for queue space)
  else
    enqueue();
}

void enqueue_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel) {
  const auto stream = current_stream_id(device);
  flush_stream(device, stream, FlushCause::kLaunch);  // buffered kernels go first
  enqueue_on(device, stream, name, std::move(kernel));
}

void buffer_or_enqueue(c10::DeviceIndex device, const char* name, std::shared_ptr<FuseRecord> rec,
                       std::function<void()> kernel) {
  if (concatenation_enabled())
    buffer_kernel(device, name, std::move(kernel), std::move(rec));
  else
    enqueue_on(device, current_stream_id(device), name, std::move(kernel));
}

}  // namespace torchneuron

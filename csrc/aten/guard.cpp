// Device guard (c10::impl::DeviceGuardImplInterface) for `neuron`: current
// device and stream per thread, streams and events over the runtime.
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <sstream>

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "aten/compiled_launch.h"
#include "aten/context.h"
#include "aten/intraop_threads.h"
#include "aten/launch.h"

namespace torchneuron {

namespace {
std::atomic<bool> g_started{false};
std::atomic<bool> g_bad_fork{false};
std::mutex g_init_error_mu;
std::string g_init_error;  // why the runtime could not start, if it could not

// A forked child inherits the runtime's memory but not its worker threads:
// like CUDA, the device cannot be used there.
void mark_child_after_fork() {
  if (g_started.load()) g_bad_fork.store(true);
}
const bool g_fork_handler = [] {
  pthread_atfork(nullptr, nullptr, &mark_child_after_fork);
  return true;
}();
}  // namespace

bool in_bad_fork() { return g_bad_fork.load(); }
bool runtime_started() { return g_started.load(); }

rt::Runtime& device_runtime() {
  TORCH_CHECK(!g_bad_fork.load(),
              "Cannot re-initialize neuron in forked subprocess. To use the neuron device with "
              "multiprocessing, use the 'spawn' start method");
  static rt::Runtime* rt_ = [] {
    rt::Runtime* r = nullptr;
    translate_errors([&] { r = &rt::get(); });
    g_started.store(true);
    return r;
  }();
  return *rt_;
}

void translate_errors(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const rt::OutOfMemoryError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  } catch (const rt::AsyncError& e) {
    // Raised at a sync point, possibly far from the failing call.
    TORCH_CHECK(!device_runtime().config().launch_blocking, e.what());
    TORCH_CHECK(false, e.what(),
                " (kernels run asynchronously, so the failing call may be an earlier one; "
                "NEURON_LAUNCH_BLOCKING=1 raises the error at that call)");
  } catch (const rt::Error& e) {
    TORCH_CHECK(false, e.what());
  }
}

c10::DeviceIndex device_count() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(device_runtime().device_count());
  } catch (const std::exception& e) {
    // A bad environment shows as "no device", as CUDA does; the reason is
    // kept for the error of the first device use.
    std::lock_guard<std::mutex> lock(g_init_error_mu);
    g_init_error = e.what();
    return 0;
  }
}

std::string runtime_start_error() {
  std::lock_guard<std::mutex> lock(g_init_error_mu);
  return g_init_error;
}

void check_device_index(c10::DeviceIndex index) {
  auto n = device_count();
  if (n == 0) {
    auto why = runtime_start_error();
    TORCH_CHECK(why.empty(), "no neuron device is usable: ", why);
  }
  if (index >= 0 && index < n) return;
  // As CUDA: torch.AcceleratorError (a RuntimeError), "invalid device
  // ordinal"; code 101 is cudaErrorInvalidDevice.
  std::ostringstream msg;
  msg << "neuron error: invalid device ordinal (invalid neuron device index " << int(index) << ": "
      << int(n) << " NeuronCore(s) visible; NEURON_RT_VISIBLE_CORES, NEURON_LOGICAL_NC_CONFIG)";
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 101,
                              msg.str());
}

namespace {
thread_local c10::DeviceIndex tls_device = 0;
// Current stream per device for this thread; empty means all default.
thread_local std::vector<rt::StreamId> tls_streams;
}  // namespace

c10::DeviceIndex current_device() { return tls_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_device = index;
}

c10::DeviceIndex resolve_device(c10::DeviceIndex index) {
  if (index < 0) return current_device();
  check_device_index(index);
  return index;
}

rt::StreamId current_stream_id(c10::DeviceIndex device) {
  return size_t(device) < tls_streams.size() ? tls_streams[device] : 0;
}

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got ", stream);
  check_device_index(stream.device_index());
  if (tls_streams.size() < size_t(device_count())) tls_streams.resize(device_count(), 0);
  tls_streams[stream.device_index()] = stream.id();
}

c10::Stream make_stream(c10::DeviceIndex device, rt::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), id);
}

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

void enqueue_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel) {
  auto enqueue = [&] {
    translate_errors([&] {
      device_runtime().launch(device, current_stream_id(device), name, std::move(kernel));
    });
  };
  // A compiled graph's kernel takes the GIL (compiled_launch.h): while one is
  // queued, a launch that finds the stream's queue full must wait without the
  // GIL, or that kernel could never run and the queue never drain.
  if (device_runtime().config().launch_blocking || compiled_kernels_queued() > 0)
    blocking_wait(enqueue);  // the launch waits for the kernel (or for queue space)
  else
    enqueue();
}

void sync_current_stream(c10::DeviceIndex device) {
  blocking_wait([&] {
    translate_errors(
        [&] { device_runtime().synchronize_stream(device, current_stream_id(device)); });
  });
}

void sync_device(c10::DeviceIndex device) {
  blocking_wait([&] { translate_errors([&] { device_runtime().synchronize_device(device); }); });
}

void wait_current_stream(c10::DeviceIndex device) {
  blocking_wait([&] {
    translate_errors([&] { device_runtime().wait_stream(device, current_stream_id(device)); });
  });
}

void wait_device(c10::DeviceIndex device) {
  blocking_wait([&] { translate_errors([&] { device_runtime().wait_device(device); }); });
}

namespace {
BlockingWaitHook g_wait_hook = nullptr;
}  // namespace

void blocking_wait(const std::function<void()>& wait) {
  if (g_wait_hook)
    g_wait_hook(wait);
  else
    wait();
}

void set_blocking_wait_hook(BlockingWaitHook hook) { g_wait_hook = hook; }

namespace {

rt::EventId to_event(void* e) { return reinterpret_cast<intptr_t>(e) - 1; }
void* from_event(rt::EventId id) { return reinterpret_cast<void*>(intptr_t(id + 1)); }

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "expected a neuron device, got ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) tls_device = d.index();
  }

  c10::Stream getStream(c10::Device d) const override {
    auto idx = resolve_device(d.index());
    return make_stream(idx, current_stream_id(idx));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(resolve_device(d.index()), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    auto idx = resolve_device(d.index());
    rt::StreamId id = 0;
    translate_errors([&] { id = device_runtime().create_stream(idx, priority); });
    return make_stream(idx, id);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    set_current_stream(s);
    return old;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (!event) return;
    try {
      device_runtime().destroy_event(to_event(event));
    } catch (...) {
    }
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event device index ",
                int(device_index), " does not match the recording stream's device ",
                stream.device_index());
    translate_errors([&] {
      if (!*event) {
        bool timing = flag == c10::EventFlag::BACKEND_DEFAULT;
        *event = from_event(device_runtime().create_event(stream.device_index(), timing));
      }
      device_runtime().record_event(to_event(*event), stream.device_index(), stream.id());
    });
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    translate_errors([&] {
      device_runtime().stream_wait_event(stream.device_index(), stream.id(), to_event(event));
    });
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    bool r = false;
    translate_errors([&] { r = device_runtime().query_event(to_event(event)); });
    return r;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  bool queryStream(const c10::Stream& stream) const override {
    bool r = false;
    translate_errors(
        [&] { r = device_runtime().query_stream(stream.device_index(), stream.id()); });
    return r;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    blocking_wait([&] {
      translate_errors(
          [&] { device_runtime().synchronize_stream(stream.device_index(), stream.id()); });
    });
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    blocking_wait(
        [&] { translate_errors([&] { device_runtime().synchronize_event(to_event(event)); }); });
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    sync_device(resolve_device(device_index));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "elapsed_time: both events must be recorded first");
    double ms = 0;
    translate_errors(
        [&] { ms = device_runtime().elapsed_time_ms(to_event(start), to_event(end)); });
    return ms;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torchneuron

// The device: the runtime's start (once, on first use), a forked child's
// refusal, runtime errors as PyTorch's, the device count and index checks, and
// the current device per thread.
#include <c10/util/Exception.h>
#include <sstream>

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "aten/device.h"

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

void rethrow_runtime_error() {
  try {
    throw;
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
}  // namespace

c10::DeviceIndex current_device() { return tls_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_device = index;
}

void unchecked_set_current_device(c10::DeviceIndex index) noexcept {
  if (index >= 0 && index < device_count()) tls_device = index;
}

c10::DeviceIndex resolve_device(c10::DeviceIndex index) {
  if (index < 0) return current_device();
  check_device_index(index);
  return index;
}

}  // namespace torchneuron

// Launching compiled graphs (torch.compile backend "neuron") on streams.
// The executable is a host-side callable (the emulated compiler's output runs
// on the host's CPU); launched as a kernel it runs on the worker thread of
// the current stream, in order with eager kernels, with device memory
// accessible (TORCHNEURON_PROTECT_MEMORY=1 keeps it closed everywhere else).
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "aten/compiled_launch.h"
#include "aten/device.h"
#include "aten/launch.h"
#include "aten/stream.h"

namespace torchneuron {

const char* intern_kernel_name(const std::string& name) {
  // Kernel names are kept as pointers by the runtime (runtime.h): interned
  // here for the life of the process. Graph names are few (one per compiled
  // graph), so the set stays small.
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  return names.insert(name).first->c_str();
}

namespace {
std::atomic<int64_t> g_queued{0};
std::atomic<bool> g_blocking{false};
}  // namespace

void set_compiled_launches_blocking() noexcept { g_blocking.store(true); }

int64_t compiled_kernels_queued() noexcept { return g_queued.load(std::memory_order_relaxed); }

void launch_compiled(c10::DeviceIndex device, const std::string& graph_name,
                     std::function<void()> run) {
  check_device_index(device);
  // Counted before the enqueue, uncounted when the kernel ends (run or failed),
  // or here if the launch itself throws.
  struct Uncount {
    ~Uncount() { g_queued.fetch_sub(1, std::memory_order_relaxed); }
  };
  g_queued.fetch_add(1, std::memory_order_relaxed);
  auto counted = std::make_shared<std::atomic<bool>>(false);
  try {
    launch(device, intern_kernel_name(graph_name), [run = std::move(run), counted] {
      *counted = true;
      Uncount u;
      run();
    });
  } catch (...) {
    if (!*counted) g_queued.fetch_sub(1, std::memory_order_relaxed);
    throw;
  }
  if (g_blocking.load()) sync_device(device);  // the interpreter is exiting
}

}  // namespace torchneuron

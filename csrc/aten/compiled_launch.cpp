// Launching compiled graphs (torch.compile backend "neuron") on streams.
// The executable is a host-side callable (the emulated compiler's output runs
// on the host's CPU); launched as a kernel it runs on the worker thread of
// the current stream, in order with eager kernels, with device memory
// accessible (TORCHNEURON_PROTECT_MEMORY=1 keeps it closed everywhere else).
#include <mutex>
#include <set>
#include <string>

#include "aten/compiled_launch.h"
#include "aten/context.h"

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

void launch_compiled(c10::DeviceIndex device, const std::string& graph_name,
                     std::function<void()> run) {
  check_device_index(device);
  launch(device, intern_kernel_name(graph_name), std::move(run));
}

}  // namespace torchneuron

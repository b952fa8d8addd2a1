// The profiler room's part of torchneuron._C (see python_bindings.cpp).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchneuron::profiler {

// Adds _device_busy_ns, _activity_tracing, _record_memory_history,
// _memory_snapshot to the module and registers the Kineto plugin.
void init_python_bindings(pybind11::module& m);

}  // namespace torchneuron::profiler

// Launching compiled graphs on the current stream (see compiled_launch.cpp).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>

namespace torchneuron {

// A stable C string equal to `name`, valid for the life of the process.
const char* intern_kernel_name(const std::string& name);

// Enqueues `run` (a compiled graph's execution) on the current stream of
// `device` as a kernel named `graph_name`: in order with eager kernels,
// asynchronous like them (NEURON_LAUNCH_BLOCKING=1 waits), run with device
// memory accessible. An exception from `run` is the kernel's error, reported
// at the next synchronization as any asynchronous kernel error.
void launch_compiled(c10::DeviceIndex device, const std::string& graph_name,
                     std::function<void()> run);

// From now on each launch_compiled waits for its kernel before returning.
// Called by the interpreter's exit drains (torchneuron/__init__.py,
// compiler/neuron_cc.py): a compiled kernel (Python code on the stream's
// worker) still running when the interpreter starts finalizing is ended by
// CPython at its next GIL acquire, which aborts the process ("terminate called
// without an active exception"); a launch after the drains (an atexit handler
// registered before torchneuron's import) so finishes first.
void set_compiled_launches_blocking() noexcept;

// Compiled-graph kernels enqueued and not yet finished (all devices). Such a
// kernel takes the GIL when it runs; launch() then enqueues without the GIL.
int64_t compiled_kernels_queued() noexcept;

}  // namespace torchneuron

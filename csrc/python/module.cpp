// torchneuron._C: the Python bindings the front layer (torchneuron/) uses.
#include <ATen/DLConvertor.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "aten/alias.h"
#include "aten/compiled_launch.h"
#include "aten/concatenation.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/kernel_signatures.h"
#include "aten/native_kernel.h"
#include "aten/native_ops.h"
#include "aten/pinned_memory.h"
#include "aten/stats.h"
#include "aten/stream.h"
#include "python/distributed_bindings.h"
#include "python/fusion_bindings.h"
#include "python/profiler_bindings.h"

namespace torchneuron {
namespace {

namespace py = pybind11;

template <class F>
auto released(F&& f) {
  py::gil_scoped_release no_gil;
  return f();
}

py::dict core_properties(int device) {
  check_device_index(device);
  const auto& c = device_runtime().core(device);
  py::dict d;
  d["name"] = c.name;
  d["total_memory"] = c.hbm_bytes;
  d["logical_id"] = c.logical_id;
  d["logical_nc_config"] = c.logical_nc_config;
  return d;
}

// The blocking-wait hook (stream.h): waits for device work release the GIL,
// so that a stream worker can drop Python-visible tensors and storages.
// Not while the interpreter finalizes: a thread taking the GIL then exits.
void release_gil_while(const std::function<void()>& wait) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (Py_IsInitialized() && !finalizing && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    wait();
  } else {
    wait();
  }
}

py::dict runtime_info() {
  py::dict d;
  const auto& c = device_runtime().config();
  d["name"] = device_runtime().name();
  d["version"] = device_runtime().version();
  d["logical_nc_config"] = c.logical_nc_config;
  d["logical_cores_total"] = c.logical_cores_total;
  d["visible"] = c.visible;
  d["hbm_bytes_per_core"] = c.hbm_bytes_per_core;
  d["launch_blocking"] = c.launch_blocking;
  d["protect_memory"] = c.protect_memory;
  return d;
}

// A Python callable run as a kernel (compiled graphs): the worker thread
// takes the GIL to call it and drops the callable right after, under that
// GIL, so the closure's later destruction needs no GIL (a thread taking the
// GIL while the interpreter finalizes is ended, which C++ turns into
// std::terminate). A callable never run is dropped under the GIL, or leaked
// once the interpreter finalizes.
bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

std::function<void()> python_kernel(py::function fn) {
  auto held = std::shared_ptr<py::object>(new py::object(std::move(fn)), [](py::object* o) {
    if (!*o) {
      delete o;  // already dropped by the kernel
    } else if (Py_IsInitialized() && !python_finalizing()) {
      py::gil_scoped_acquire gil;
      delete o;
    }
  });
  return [held] {
    // Queued behind work that outlasted the exit drains: taking the GIL now would
    // end this thread (std::terminate); the kernel fails instead, reported to
    // whoever synchronizes (nobody, once the interpreter is gone).
    if (!Py_IsInitialized() || python_finalizing())
      throw std::runtime_error("the Python interpreter is shutting down: compiled graph not run");
    py::gil_scoped_acquire gil;
    py::object fn = std::move(*held);  // *held is now empty
    try {
      fn();
    } catch (py::error_already_set& e) {
      throw std::runtime_error(e.what());
    }
  };
}

}  // namespace
}  // namespace torchneuron

PYBIND11_MODULE(_C, m) {
  torchneuron::profiler::init_python_bindings(m);  // csrc/profiler
  using namespace torchneuron;
  namespace py = pybind11;
  m.doc() = "torchneuron native module: the `neuron` PrivateUse1 backend";
  set_blocking_wait_hook(&release_gil_while);
  distributed::init_bindings(m);
  m.def("_device_count", [] { return int(device_count()); });
  m.def("_runtime_info", &runtime_info);
  m.def("_is_in_bad_fork", &in_bad_fork);
  m.def("_stream_priority", [](int64_t id) { return rt::stream_priority(id); });
  m.def("_runtime_start_error", &runtime_start_error);
  m.def("_get_device", [] { return int(current_device()); });
  m.def("_set_device", [](int d) { set_current_device(d); });
  m.def("_core_properties", &core_properties);
  m.def("_synchronize", [](int d) {
    auto idx = resolve_device(d);
    sync_device(idx);
  });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(resolve_device(d))));
  });
  // torch.Event.elapsed_time rejects subclasses such as torch.neuron.Event.
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()),
                "elapsed_time: expected two torch.Event objects");
    auto& a = reinterpret_cast<THPEvent*>(start.ptr())->event;
    auto& b = reinterpret_cast<THPEvent*>(end.ptr())->event;
    return released([&] { return a.elapsedTime(b); });
  });
  m.def("_fallback_stats", [] {
    py::dict out;
    for (const auto& [op, s] : fallback_stats()) {
      py::dict e;
      e["calls"] = s.calls;
      e["seconds"] = s.seconds;
      out[py::str(op)] = e;
    }
    return out;
  });
  m.def("_reset_fallback_stats", &reset_fallback_stats);
  m.def("_fallback_mode", &fallback_mode);
  m.def("_set_fallback_mode", &set_fallback_mode);
  m.def("_narrowing_stats", [] {
    py::dict out;
    for (const auto& [op, n] : narrowing_stats()) out[py::str(op)] = n;
    return out;
  });
  m.def("_reset_narrowing_stats", &reset_narrowing_stats);
  m.def("_kernel_signature_stats", [] {
    py::dict out;
    for (const auto& [op, n] : kernel_signature_stats()) out[py::str(op)] = n;
    return out;
  });
  m.def("_reset_kernel_signature_stats", &reset_kernel_signature_stats);
  // Result-geometry probes run so far (tests: a signature is probed once).
  m.def("_geometry_probes", &native::geometry_probes);
  m.def("_concatenation_enabled", &concatenation_enabled);
  m.def("_concatenation_stats", [] {
    const auto s = concatenation_stats();
    py::dict out, flushes;
    out["buffered"] = s.buffered;
    out["direct"] = s.direct;
    flushes["launch"] = s.flush_launch;
    flushes["wait"] = s.flush_wait;
    flushes["event"] = s.flush_event;
    flushes["limit"] = s.flush_limit;
    flushes["queue_low"] = s.flush_queue_low;
    out["flushes"] = flushes;
    return out;
  });
  m.def("_reset_concatenation_stats", &reset_concatenation_stats);
  m.def("_stop_concatenation_buffering", &stop_buffering);
  init_fusion_bindings(m);
  // ((op, calls), ...) of one compiled launch; TORCH_WARN reaches Python as a warning
  m.def("_note_compiled_narrowing",
        [](const std::vector<std::pair<std::string, int64_t>>& ops, bool full_width) {
          torch::PyWarningHandler handler;
          for (const auto& [op, n] : ops) note_compiled_narrowing(op, n, full_width);
        });
  m.def("_full_width_stats", [] {
    py::dict out;
    for (const auto& [op, n] : full_width_stats()) out[py::str(op)] = n;
    return out;
  });
  m.def("_reset_full_width_stats", &reset_full_width_stats);
  // Names eager never narrows: the compile path's 64-bit policy reads them (one list).
  m.def("_data_movement_ops", [] {
    std::vector<std::string> out;
    for (const char* n : kDataMovementOps) out.emplace_back(n);
    return out;
  });
  m.def("_narrow_64bit", &narrow_64bit_enabled);
  m.def("_set_narrow_64bit", &set_narrow_64bit);
  // torch.neuron.set_per_process_memory_fraction (torchneuron/memory.py checks the range).
  m.def("_set_memory_fraction", [](int d, double fraction) {
    translate_errors([&] { device_runtime().set_memory_fraction(resolve_device(d), fraction); });
  });
  m.def("_memory_fraction",
        [](int d) { return device_runtime().memory_fraction(resolve_device(d)); });
  m.def("_counters", [](int d) {
    auto c = device_runtime().counters(resolve_device(d));
    py::dict out;
    out["kernels_launched"] = c.kernels_launched;
    out["kernels_failed"] = c.kernels_failed;
    out["busy_ns"] = c.busy_ns;  // torch.neuron.utilization()
    return out;
  });
  m.def("_pinned_host_stats", [] {
    auto s = pinned_host_stats();
    py::dict out;
    out["mapped_bytes"] = s.mapped_bytes;
    out["locked_bytes"] = s.locked_bytes;
    out["cached_bytes"] = s.cached_bytes;
    return out;
  });
  m.def("_pinned_host_empty_cache", &pinned_host_empty_cache);
  // Compiled graphs (torchneuron/compiler/executable.py).
  m.def("_set_compiled_launches_blocking", &set_compiled_launches_blocking);
  m.def("_launch_compiled", [](int d, const std::string& name, py::function fn) {
    auto idx = resolve_device(d);
    auto kernel = python_kernel(std::move(fn));
    released([&] { launch_compiled(idx, name, std::move(kernel)); });
  });
  // A DLPack capsule (legacy "dltensor") over a neuron tensor's bytes, for XLA's
  // zero-copy import inside a kernel. The capsule holds a C++ tensor that never
  // had a Python object: XLA's threads may drop it at any time (even while the
  // interpreter shuts down) without taking the GIL.
  m.def("_cpu_alias_dlpack", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == kNeuron, "_cpu_alias_dlpack: expected a neuron tensor, got ",
                t.device());
    DLManagedTensor* dl = at::toDLPack(cpu_alias(t));
    PyObject* cap = PyCapsule_New(dl, "dltensor", [](PyObject* c) {
      if (PyCapsule_IsValid(c, "dltensor")) {  // not consumed: release it here
        auto* d = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
        if (d->deleter) d->deleter(d);
      }
    });
    if (!cap) {
      dl->deleter(dl);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(cap);
  });
  // A CPU tensor over a neuron tensor's bytes; read it only inside a kernel.
  m.def("_cpu_alias", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == kNeuron, "_cpu_alias: expected a neuron tensor, got ",
                t.device());
    return cpu_alias(t);
  });
}

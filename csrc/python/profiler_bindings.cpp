// torchneuron._C bindings of the profiler room: device busy time, activity
// tracing state, memory history and snapshots in torch.cuda's format.
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <unordered_map>

// From torch/csrc/profiler/python/combined_traceback.h (exported by
// libtorch_python), declared here: that header needs nlohmann/json, which the
// wheel does not ship.
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
TORCH_API void installCapturedTracebackPython();
}  // namespace torch

#include "aten/device.h"
#include "profiler/kineto_plugin.h"
#include "python/profiler_bindings.h"
#include "runtime/activity.h"

namespace torchneuron::profiler {
namespace {

namespace py = pybind11;
namespace rt = torchneuron::runtime;

// Stack of the calling Python thread (operators run with the GIL released;
// gathering takes it back, as torch.cuda's allocator does); nullptr on threads
// that never ran Python (stream workers freeing memory), which must not block
// on the GIL while a host thread holding it waits for their queue.
rt::MemoryContext gather_python_stack() {
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return nullptr;
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

// Frames lists (torch.cuda's {"filename", "line", "name"} dicts) for contexts.
class Symbolizer {
 public:
  void want(const rt::MemoryContext& c) {
    if (c && index_.emplace(c.get(), order_.size()).second)
      order_.push_back(static_cast<torch::CapturedTraceback*>(c.get()));
  }
  void run() { frames_ = torch::py_symbolize(order_); }
  py::object frames(const rt::MemoryContext& c) const {
    if (!c) return py::list();
    return frames_.at(index_.at(c.get()));
  }

 private:
  std::unordered_map<void*, size_t> index_;
  std::vector<torch::CapturedTraceback*> order_;
  std::vector<py::object> frames_;
};

const char* block_state(const rt::MemoryBlock& b) {
  return b.allocated ? "active_allocated" : "inactive";
}

// torch.cuda.memory._snapshot()'s structure, for every visible core.
py::dict memory_snapshot() {
  auto& runtime = device_runtime();
  const int n = runtime.device_count();
  std::vector<rt::MemorySnapshot> snaps;
  for (int d = 0; d < n; ++d) snaps.push_back(runtime.memory_snapshot(d));
  Symbolizer sym;
  for (auto& s : snaps) {
    for (auto& seg : s.segments)
      for (auto& b : seg.blocks) sym.want(b.context);
    for (auto& e : s.trace) sym.want(e.context);
  }
  sym.run();
  py::list segments;
  py::list device_traces;
  for (int d = 0; d < n; ++d) {
    for (auto& seg : snaps[d].segments) {
      py::dict sd;
      sd["device"] = d;
      sd["address"] = seg.addr;
      sd["total_size"] = seg.size;
      sd["allocated_size"] = seg.allocated;
      sd["active_size"] = seg.allocated;  // a freed block is inactive at once here
      sd["requested_size"] = seg.requested;
      sd["stream"] = 0;
      sd["segment_type"] = seg.small ? "small" : "large";
      sd["segment_pool_id"] = py::make_tuple(0, 0);
      sd["is_expandable"] = false;
      sd["frames"] = py::list();
      py::list blocks;
      for (auto& b : seg.blocks) {
        py::dict bd;
        bd["address"] = b.addr;
        bd["size"] = b.size;
        bd["requested_size"] = b.requested;  // 0 for a free block
        bd["state"] = block_state(b);
        bd["frames"] = sym.frames(b.context);
        blocks.append(bd);
      }
      sd["blocks"] = blocks;
      segments.append(sd);
    }
    py::list trace;
    for (auto& e : snaps[d].trace) {
      py::dict ed;
      ed["action"] = rt::memory_action_name(e.action);
      ed["addr"] = e.addr;
      ed["size"] = e.size;
      ed["stream"] = 0;
      ed["time_us"] = e.time_us;
      ed["frames"] = sym.frames(e.context);
      if (e.action == rt::MemoryEvent::kOom) ed["device_free"] = e.device_free;
      trace.append(ed);
    }
    device_traces.append(trace);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["PYTORCH_NO_NEURON_MEMORY_CACHING"] = false;
  settings["expandable_segments"] = false;
  out["allocator_settings"] = settings;
  out["external_annotations"] = py::list();
  return out;
}

}  // namespace

void init_python_bindings(py::module& m) {
  register_kineto_plugin();
  m.def(
      "_device_busy_ns", [](int d) { return device_runtime().counters(resolve_device(d)).busy_ns; },
      "Nanoseconds the core's streams have spent running kernels since start.");
  m.def(
      "_device_kernel_cpu_ns",
      [](int d) { return device_runtime().counters(resolve_device(d)).kernel_cpu_ns; },
      "CPU nanoseconds the core's stream workers spent inside kernels while counting was on "
      "(thread CPU clocks around each kernel): the emulated core's busy time, not inflated by "
      "preemption or by the queue's hand-offs.");
  m.def(
      "_set_count_kernel_cpu", [](bool on) { return device_runtime().set_count_kernel_cpu(on); },
      "Turns counting of _device_kernel_cpu_ns on or off (off by default: two thread CPU clock "
      "reads per kernel); returns the previous setting.",
      py::arg("on"));
  m.def("_activity_tracing", [] { return rt::activity::enabled(); });
  m.def(
      "_record_memory_history",
      [](bool enabled, size_t max_entries, int context, uint32_t skip_actions, bool clear) {
        TORCH_CHECK(context >= 0 && context <= int(rt::MemoryContextLevel::kAll),
                    "_record_memory_history: context level ", context, " out of range");
        rt::MemoryHistoryOptions o;
        o.enabled = enabled;
        o.max_entries = max_entries;
        o.context = enabled ? rt::MemoryContextLevel(context) : rt::MemoryContextLevel::kNever;
        o.skip_actions = skip_actions;
        o.clear = clear;
        if (o.context != rt::MemoryContextLevel::kNever) {
          torch::installCapturedTracebackPython();
          o.recorder = gather_python_stack;
        }
        translate_errors([&] { device_runtime().record_memory_history(o); });
      },
      py::arg("enabled"), py::arg("max_entries"), py::arg("context"), py::arg("skip_actions"),
      py::arg("clear"),
      "Memory history of every core: context 0..3 = never/state/alloc/all (c10's RecordContext); "
      "skip_actions: bit (1 << action) per MemoryEvent::Action not recorded.");
  m.def("_memory_snapshot", [] {
    py::dict d;
    translate_errors([&] { d = memory_snapshot(); });
    return d;
  });
}

}  // namespace torchneuron::profiler

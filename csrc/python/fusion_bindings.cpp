// The fused-segment runner (fusion_bindings.h).
#include "python/fusion_bindings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include "aten/concatenation_fuse.h"
#include "aten/ivalue_tensors.h"

namespace torchneuron {
namespace {

namespace py = pybind11;

// The Python callable (torchneuron/compiler/fused.py's run), kept to the exit.
py::object* g_callback = nullptr;

bool interpreter_usable() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  return Py_IsInitialized() && !finalizing;
}

py::object operand(const SegmentOperand& o, py::handle ref, py::handle view, py::handle scalar) {
  switch (o.kind) {
    case SegmentOperand::kScalar:
      return torch::jit::toPyObject(o.scalar);
    case SegmentOperand::kScalarInput:
      return scalar(o.index);
    default: {
      py::object r = o.kind == SegmentOperand::kInput ? ref(-1, o.index) : ref(o.step, o.index);
      if (!o.view) return r;
      return view(r, o.sizes, o.strides, o.offset, o.base_sizes, o.base_strides, o.base_offset);
    }
  }
}

// One step as (op name, overload, args, results): the arguments as called,
// each tensor replaced by its operand (the same walk as map_tensors).
py::tuple step_of(const SegmentStep& s, py::handle ref, py::handle view, py::handle scalar) {
  const FuseRecord& r = *s.rec;
  size_t k = 0;
  auto f = s.float_slots.begin();
  py::list args;
  for (int slot = 0; slot < int(r.slots.size()); ++slot) {
    const auto& v = r.slots[slot];
    if (f != s.float_slots.end() && f->first == slot) {
      args.append(scalar((f++)->second));
    } else if (v.isTensor()) {
      args.append(operand(s.operands[k++], ref, view, scalar));
    } else if (v.isTensorList()) {
      py::list l;
      for (size_t n = v.toTensorList().size(); n > 0; --n)
        l.append(operand(s.operands[k++], ref, view, scalar));
      args.append(l);
    } else if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
      py::list l;
      for (const auto& e : v.toListRef())
        l.append(e.isTensor() ? operand(s.operands[k++], ref, view, scalar) : py::none());
      args.append(l);
    } else {
      args.append(torch::jit::toPyObject(v));
    }
  }
  const auto& schema = r.op.schema();
  return py::make_tuple(schema.name(), schema.overload_name(), args,
                        int(r.pins.size() - r.n_operands));
}

bool run_segment(const SegmentCall& call) {
  if (!g_callback || !interpreter_usable()) return false;
  py::gil_scoped_acquire gil;
  // The runner's own ops run as from plain Python: not under the flushing
  // op's dispatch state (below autograd, autocast on) or a dispatch mode.
  const auto saved = c10::impl::tls_local_dispatch_key_set();
  c10::impl::_force_tls_local_dispatch_key_set(
      c10::impl::PODLocalDispatchKeySet{});  // a fresh thread's
  struct Restore {
    c10::impl::LocalDispatchKeySet s;
    ~Restore() { c10::impl::_force_tls_local_dispatch_key_set(s); }
  } restore{saved};
  try {
    py::object steps = py::none();
    if (call.compile) {
      auto fused = py::module::import("torchneuron.compiler.fused");
      py::object ref = fused.attr("Ref"), view = fused.attr("ViewOf");
      py::object scalar = fused.attr("ScalarIn");
      py::list l;
      for (const auto& s : call.steps) l.append(step_of(s, ref, view, scalar));
      steps = l;
    }
    py::list outputs;
    for (const auto& [step, index] : call.outputs) outputs.append(py::make_tuple(step, index));
    py::list scalars;
    for (double v : call.scalars) scalars.append(v);
    return (*g_callback)(call.key, call.compile, steps, outputs, call.inputs, call.dsts, scalars)
        .cast<bool>();
  } catch (py::error_already_set& e) {
    // The runner returns False for what it refuses; an error escaping it is a
    // bug of ours: the segment runs unfused, the error is shown once.
    e.discard_as_unraisable("torchneuron fused segment");
    return false;
  }
}

}  // namespace

void init_fusion_bindings(py::module& m) {
  m.def("_set_segment_runner", [](py::object f) {
    if (!g_callback) g_callback = new py::object();
    *g_callback = std::move(f);
    set_segment_runner(&run_segment);
  });
  m.def("_fusion_enabled", &fusion_enabled);
  m.def("_fusion_stats", [] {
    const auto s = fusion_stats();
    py::dict out;
    out["segments"] = s.segments;
    out["ops_fused"] = s.ops_fused;
    out["ops_unfused"] = s.ops_unfused;
    out["cache_hits"] = s.hits;
    out["cache_misses"] = s.misses;
    out["compiles"] = s.compiles;
    out["unfusable"] = s.unfusable;
    return out;
  });
  m.def("_reset_fusion_stats", &reset_fusion_stats);
}

}  // namespace torchneuron

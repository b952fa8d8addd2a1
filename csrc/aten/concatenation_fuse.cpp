// Fusing runs of buffered native ops (concatenation_fuse.h).
#include "aten/concatenation_fuse.h"

#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "aten/concatenation.h"
#include "aten/env.h"
#include "aten/ivalue_tensors.h"
#include "aten/stream.h"
#include "runtime/activity.h"

namespace torchneuron {

namespace {

SegmentRunner g_runner = nullptr;

std::atomic<int64_t> s_segments{0}, s_ops{0}, s_hits{0}, s_misses{0}, s_compiles{0}, s_unfusable{0},
    s_unfused{0};

struct Signature {
  int misses = 0;
  bool compiled = false, unfusable = false;
};
constexpr size_t kMaxSignatures = 16384;
std::mutex g_sig_mutex;
auto& g_sigs = *new std::unordered_map<std::string, Signature>();  // kept to the exit

bool fusable_dtype(caffe2::TypeMeta t) {
  switch (t.toScalarType()) {
    case at::kFloat:
    case at::kBFloat16:
    case at::kHalf:
    case at::kInt:
    case at::kShort:
    case at::kChar:
    case at::kByte:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

bool fusable_pin(const PinnedTensor& p, bool operand) {
  if (!p.neuron) {
    const at::Tensor& o = p.other;
    // (a Python bool in a Tensor argument fails to trace: `mask & True`)
    return operand && o.defined() && o.dim() == 0 && o.device().is_cpu() &&
           o.unsafeGetTensorImpl()->is_wrapped_number() && o.scalar_type() != at::kBool;
  }
  return fusable_dtype(p.dtype) && !p.keys.has(c10::DispatchKey::Conjugate) &&
         !p.keys.has(c10::DispatchKey::Negative) && p.storage.unsafeGetStorageImpl();
}

// Exact text of an argument that is not a tensor (doubles in hexadecimal).
void put(std::ostream& o, const c10::IValue& v) {
  char b[80];
  if (v.isDouble()) {
    std::snprintf(b, sizeof b, "%a", v.toDouble());
    o << b;
  } else if (v.isInt()) {
    o << v.toInt();
  } else if (v.isBool()) {
    o << (v.toBool() ? 'T' : 'F');
  } else if (v.isNone()) {
    o << 'N';
  } else if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    std::snprintf(b, sizeof b, "%a%+aj", c.real(), c.imag());
    o << b;
  } else if (v.isList()) {
    o << '[';
    for (const auto& e : v.toListRef()) {
      put(o, e);
      o << ',';
    }
    o << ']';
  } else if (v.isString()) {
    o << '"' << v.toStringRef() << '"';
  } else if (v.isDevice()) {
    o << v.toDevice();
  } else {
    o << v.tagKind() << ':' << v;
  }
}

// Ops whose Python floats, with float32 tensors, are inputs of the fused
// executable rather than constants of its signature: an optimizer's step size
// and bias corrections change every step (AdamW's default `capturable=False`
// passes Python floats: `_foreach_div_` with a list of them reaches the device
// as `div_.Tensor` with a wrapped number, `_foreach_addcdiv_` as `addcdiv_`
// with `value`), and a value in the signature made every step miss. A wrapped
// number becomes a 0-dim float32 tensor in its place; a float argument
// (`value`, `alpha`, a Scalar overload's `other`) has its op rewritten to take
// one (fused.py's _FLOAT_INPUT_OPS). The CPU kernels cast the double to
// float32, their opmath type for float32, as that input is.
bool float_inputs_op(const FuseRecord& r) {
  static const std::unordered_set<std::string> ops = {
      "aten::div.Scalar",  "aten::div_.Scalar", "aten::mul.Scalar", "aten::mul_.Scalar",
      "aten::div.Tensor",  "aten::div_.Tensor", "aten::mul.Tensor", "aten::mul_.Tensor",
      "aten::add.Tensor",  "aten::add_.Tensor", "aten::sub.Tensor", "aten::sub_.Tensor",
      "aten::addcdiv.",    "aten::addcdiv_.",   "aten::addcmul.",   "aten::addcmul_.",
      "aten::lerp.Scalar", "aten::lerp_.Scalar"};
  const auto& s = r.op.schema();
  if (!ops.count(s.name() + "." + s.overload_name())) return false;
  for (const auto& p : r.pins)
    if (p.neuron && p.dtype != caffe2::TypeMeta::Make<float>()) return false;
  return true;
}

void put_geometry(std::ostream& o, c10::ArrayRef<int64_t> sizes, c10::ArrayRef<int64_t> strides,
                  int64_t offset) {
  o << sizes << strides << '+' << offset;
}

struct Produced {
  int step, index;
  const PinnedTensor* pin;
};

bool same_view(const PinnedTensor& a, const PinnedTensor& b) {
  return a.offset == b.offset && a.sizes == b.sizes && a.strides == b.strides && a.dtype == b.dtype;
}

bool storage_unmoved(const PinnedTensor& p) {  // not resized since the call
  return p.storage.unsafeGetStorageImpl()->data_ptr().get() == p.data;
}

// The run's operand sources, outputs and signature; false when it cannot be
// described (a storage resized since its call, a view of a result in another
// dtype).
// Inputs that are different views of one storage become one flat input (its
// elements from the first to the last one they reach), each view read from it
// inside the graph: no two inputs of the graph alias, and a write through one
// view is seen through the others. False for views of one storage in two dtypes.
bool merge_aliased_inputs(SegmentCall& call, std::vector<const PinnedTensor*>& inputs,
                          std::deque<PinnedTensor>& flats) {
  std::unordered_map<const c10::StorageImpl*, std::vector<int>> by_storage;
  std::vector<const c10::StorageImpl*> order;
  for (size_t j = 0; j < inputs.size(); ++j) {
    auto* s = inputs[j]->storage.unsafeGetStorageImpl();
    auto& v = by_storage[s];
    if (v.empty()) order.push_back(s);
    v.push_back(int(j));
  }
  if (order.size() == inputs.size()) return true;
  std::vector<const PinnedTensor*> merged;
  std::vector<std::pair<int, const PinnedTensor*>> remap(inputs.size());  // (new index, flat)
  for (auto* s : order) {
    const auto& v = by_storage[s];
    if (v.size() == 1) {
      remap[v[0]] = {int(merged.size()), nullptr};
      merged.push_back(inputs[v[0]]);
      continue;
    }
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (int j : v) {
      const PinnedTensor& p = *inputs[j];
      if (p.dtype != inputs[v[0]]->dtype) return false;
      int64_t end = p.offset + 1;
      bool empty = false;
      for (size_t d = 0; d < p.sizes.size(); ++d) {
        empty = empty || p.sizes[d] == 0;
        end += (p.sizes[d] - 1) * p.strides[d];
      }
      if (empty) continue;
      lo = std::min(lo, p.offset);
      hi = std::max(hi, end);
    }
    if (lo >= hi) return false;
    PinnedTensor& f = flats.emplace_back(*inputs[v[0]]);
    f.sizes.assign({hi - lo});
    f.strides.assign({int64_t(1)});
    f.offset = lo;
    for (int j : v) remap[j] = {int(merged.size()), &f};
    merged.push_back(&f);
  }
  for (auto& step : call.steps)
    for (auto& op : step.operands) {
      if (op.kind != SegmentOperand::kInput) continue;
      const PinnedTensor& p = *inputs[op.index];
      const auto [index, flat] = remap[op.index];
      op.index = index;
      if (!flat) continue;
      op.view = true;
      op.sizes.assign(p.sizes.begin(), p.sizes.end());
      op.strides.assign(p.strides.begin(), p.strides.end());
      op.offset = p.offset;  // as_strided addresses the storage: absolute
      op.base_sizes = {flat->sizes[0]};
      op.base_strides = {1};
      op.base_offset = 0;
    }
  inputs = std::move(merged);
  return true;
}

bool describe(const std::vector<const FuseRecord*>& run, SegmentCall& call,
              std::vector<const PinnedTensor*>& inputs, std::vector<const PinnedTensor*>& dsts,
              std::deque<PinnedTensor>& flats) {
  std::unordered_map<const c10::StorageImpl*, Produced> produced;
  std::unordered_map<const c10::StorageImpl*, int> storage_id;  // inputs' storages, numbered
  std::unordered_map<const c10::StorageImpl*, int64_t> pins_held;
  std::ostringstream key;
  call.steps.reserve(run.size());
  for (size_t i = 0; i < run.size(); ++i) {
    const FuseRecord& r = *run[i];
    SegmentStep step{&r, {}, {}};
    key << r.op.schema().name() << '.' << r.op.schema().overload_name() << '(';
    const bool float_inputs = float_inputs_op(r);
    for (size_t k = 0; k < r.slots.size(); ++k) {
      const auto& v = r.slots[k];
      if (v.isTensor() || v.isTensorList() ||
          (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType)) {
        key << 't';
      } else if (float_inputs && v.isDouble()) {
        key << 'f';  // its value is an input
        step.float_slots.emplace_back(int(k), int(call.scalars.size()));
        call.scalars.push_back(v.toDouble());
      } else {
        put(key, v);
      }
      key << ',';
    }
    key << ")<";
    for (size_t k = 0; k < r.pins.size(); ++k) {
      const PinnedTensor& p = r.pins[k];
      if (!p.neuron) continue;
      if (!storage_unmoved(p)) return false;
      ++pins_held[p.storage.unsafeGetStorageImpl()];
    }
    for (size_t k = 0; k < r.n_operands; ++k) {
      const PinnedTensor& p = r.pins[k];
      SegmentOperand op;
      if (!p.neuron && float_inputs && p.other.scalar_type() == at::kDouble) {
        op.kind = SegmentOperand::kScalarInput;
        op.index = int(call.scalars.size());
        call.scalars.push_back(at::native::_local_scalar_dense_cpu(p.other).toDouble());
        key << "sf";  // its value is an input
      } else if (!p.neuron) {
        op.kind = SegmentOperand::kScalar;
        // the CPU kernel itself: no dispatch (a Python mode of the caller's
        // would see the read, and fail on it)
        op.scalar = c10::IValue(at::native::_local_scalar_dense_cpu(p.other));
        key << 's' << p.other.scalar_type() << '=';
        put(key, op.scalar);
      } else if (auto it = produced.find(p.storage.unsafeGetStorageImpl()); it != produced.end()) {
        op.kind = SegmentOperand::kResult;
        op.step = it->second.step;
        op.index = it->second.index;
        key << 'r' << op.step << '.' << op.index;
        if (!same_view(p, *it->second.pin)) {
          if (p.dtype != it->second.pin->dtype) return false;
          op.view = true;
          op.sizes.assign(p.sizes.begin(), p.sizes.end());
          op.strides.assign(p.strides.begin(), p.strides.end());
          op.offset = p.offset;
          const PinnedTensor& b = *it->second.pin;
          op.base_sizes.assign(b.sizes.begin(), b.sizes.end());
          op.base_strides.assign(b.strides.begin(), b.strides.end());
          op.base_offset = b.offset;
          key << 'v';
          put_geometry(key, p.sizes, p.strides, p.offset);
        }
      } else {
        op.kind = SegmentOperand::kInput;
        op.index = -1;
        for (size_t j = 0; j < inputs.size(); ++j)
          if (inputs[j]->storage.unsafeGetStorageImpl() == p.storage.unsafeGetStorageImpl() &&
              same_view(*inputs[j], p))
            op.index = int(j);
        if (op.index < 0) {
          op.index = int(inputs.size());
          inputs.push_back(&p);
        }
        key << 'i' << op.index;
      }
      key << ',';
      step.operands.push_back(std::move(op));
    }
    key << ">->";
    for (size_t k = r.n_operands; k < r.pins.size(); ++k) {
      const PinnedTensor& p = r.pins[k];
      const int index = int(k - r.n_operands);
      put_geometry(key, p.sizes, p.strides, p.offset);
      key << p.dtype.name() << ';';
      if (r.ret_alias[index] >= 0) continue;  // the argument itself, written
      auto* s = p.storage.unsafeGetStorageImpl();
      if (produced.count(s)) return false;
      produced[s] = {int(i), index, &p};
    }
    key << '\n';
    call.steps.push_back(std::move(step));
  }
  for (size_t j = 0; j < inputs.size(); ++j) {
    const PinnedTensor& p = *inputs[j];
    auto* s = p.storage.unsafeGetStorageImpl();
    if (produced.count(s)) return false;  // written before it was made: not a run's input
    auto id = storage_id.emplace(s, int(storage_id.size())).first->second;
    key << "in" << j << ':' << id << ':' << p.dtype.name();
    put_geometry(key, p.sizes, p.strides, p.offset);
    key << ';';
  }
  // (the merge follows from the inputs' storages and geometry, already in the key)
  if (!merge_aliased_inputs(call, inputs, flats)) return false;
  // Outputs: results whose storage someone besides the run's own pins holds
  // (the caller's tensors, autograd's saved ones, later kernels). The others
  // can be read by nobody: not written (skip-intermediate).
  std::vector<std::pair<std::pair<int, int>, const PinnedTensor*>> outs;
  for (const auto& [s, pr] : produced)
    if (int64_t(c10::raw::intrusive_ptr::use_count(const_cast<c10::StorageImpl*>(s))) >
        pins_held[s])
      outs.push_back({{pr.step, pr.index}, pr.pin});
  std::sort(outs.begin(), outs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  key << "out:";
  for (const auto& [o, pin] : outs) {
    call.outputs.push_back(o);
    dsts.push_back(pin);
    key << o.first << '.' << o.second << ',';
  }
  call.key = key.str();
  return true;
}

// The tensor a pin stands for (a neuron tensor over the same bytes).
at::Tensor tensor_of(const PinnedTensor& p) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(p.storage), p.keys, p.dtype);
  impl->set_sizes_and_strides(p.sizes, p.strides, p.offset);
  return at::Tensor(std::move(impl));
}

// The runner launches on the buffer's stream, which need not be current.
struct CurrentStream {
  CurrentStream(c10::DeviceIndex device, rt::StreamId stream)
      : device_guard(c10::Device(kNeuron, device)),
        saved(make_stream(device, current_stream_id(device))) {
    set_current_stream(make_stream(device, stream));
  }
  ~CurrentStream() { set_current_stream(saved); }
  c10::DeviceGuard device_guard;
  c10::Stream saved;
};

}  // namespace

bool fusable_op(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments()) {
    const std::string t = a.type()->str();
    for (const char* bad : {"Generator", "Dimname", "Storage", "Stream", "Any"})
      if (t.find(bad) != std::string::npos) return false;
  }
  return true;
}

bool fusable_tensors(const FuseRecord& r) {
  for (size_t k = 0; k < r.pins.size(); ++k)
    if (!fusable_pin(r.pins[k], k < r.n_operands)) return false;
  return r.pins.size() > r.n_operands;  // it makes or writes something
}

void set_segment_runner(SegmentRunner runner) { g_runner = runner; }

bool fusion_enabled() {
  static const bool on = env_flag("TORCHNEURON_CONCATENATION_FUSE");
  return on && g_runner && concatenation_enabled();
}

void check_fusion_env() {
  env_flag("TORCHNEURON_CONCATENATION_FUSE");
  fusion_min_ops();
}

size_t fusion_min_ops() {
  static const size_t n = size_t(env_int("TORCHNEURON_CONCATENATION_MIN_OPS", 8, 2));
  return n;
}

bool launch_fused(c10::DeviceIndex device, rt::StreamId stream,
                  const std::vector<const FuseRecord*>& run, uint64_t correlation) {
  SegmentCall call;
  std::vector<const PinnedTensor*> inputs, dsts;
  std::deque<PinnedTensor> flats;
  if (!describe(run, call, inputs, dsts, flats)) {
    s_unfused.fetch_add(int64_t(run.size()));
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(g_sig_mutex);
    // first sights are forgotten past a bound (a program of ever-new segments)
    if (g_sigs.size() >= kMaxSignatures) {
      for (auto it = g_sigs.begin(); it != g_sigs.end();)
        it = it->second.compiled || it->second.unfusable ? std::next(it) : g_sigs.erase(it);
    }
    Signature& sig = g_sigs[call.key];
    if (sig.unfusable) {
      s_unfused.fetch_add(int64_t(run.size()));
      return false;
    }
    if (!sig.compiled) {
      if (sig.misses++ == 0) {  // a first sight: one by one; compiled if seen again
        s_misses.fetch_add(1);
        s_unfused.fetch_add(int64_t(run.size()));
        return false;
      }
      call.compile = true;
    }
  }
  if (!call.compile) call.steps.clear();  // the runner has the executable
  for (const auto* p : inputs) call.inputs.push_back(tensor_of(*p));
  for (const auto* p : dsts) call.dsts.push_back(tensor_of(*p));
  bool ok = false;
  {
    CurrentStream on(device, stream);
    // the profiler's facts: one kernel of kind "fused", linked to the run's
    // first op (not to whatever flushed it: a device-to-host copy's label)
    rt::ActivityScope label(rt::ActivityKind::kFused, 0);
    rt::activity::push_correlation_id(correlation);
    struct Pop {
      ~Pop() { rt::activity::pop_correlation_id(); }
    } pop;
    ok = g_runner(call);
  }
  {
    std::lock_guard<std::mutex> lk(g_sig_mutex);
    Signature& sig = g_sigs[call.key];
    if (call.compile) {
      s_compiles.fetch_add(1);
      (ok ? sig.compiled : sig.unfusable) = true;
      if (!ok) s_unfusable.fetch_add(1);
    }
  }
  if (!ok) {
    s_unfused.fetch_add(int64_t(run.size()));
    return false;
  }
  s_segments.fetch_add(1);
  s_ops.fetch_add(int64_t(run.size()));
  if (!call.compile) s_hits.fetch_add(1);
  return true;
}

FusionStats fusion_stats() {
  FusionStats s;
  s.segments = s_segments.load();
  s.ops_fused = s_ops.load();
  s.hits = s_hits.load();
  s.misses = s_misses.load();
  s.compiles = s_compiles.load();
  s.unfusable = s_unfusable.load();
  s.ops_unfused = s_unfused.load();
  return s;
}

void reset_fusion_stats() {
  for (auto* c : {&s_segments, &s_ops, &s_hits, &s_misses, &s_compiles, &s_unfusable, &s_unfused})
    c->store(0);
}

}  // namespace torchneuron

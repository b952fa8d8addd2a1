// Result geometry: the CPU kernel's own results, learned once per signature on zero-filled
// host copies (probe_geometry) and cached by a key of everything that can change it.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <sstream>
#include <unordered_set>

#include "aten/device.h"
#include "aten/ivalue_tensors.h"
#include "aten/kernel_warnings.h"
#include "aten/native_kernel.h"
#include "aten/stats.h"
#include "aten/unsupported_layouts.h"

namespace torchneuron::native {
namespace {

// Results of the operators computed asynchronously depend only on the
// arguments' metadata, non-tensor values and global state, so their geometry
// is learned once per signature (as a graph compiler compiles per input
// shapes) and cached.
class GeometryCache {
 public:
  std::shared_ptr<const Geometry> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const Geometry> insert(const std::string& key, Geometry g) {
    auto p = std::make_shared<const Geometry>(std::move(g));
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kMaxEntries) map_.clear();  // bounded; refills as used
    map_.emplace(key, p);
    return p;
  }

 private:
  static constexpr size_t kMaxEntries = 1 << 16;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Geometry>> map_;
};

std::atomic<int64_t> g_probes{0};

GeometryCache& geometry_cache() {
  static GeometryCache* c = new GeometryCache();
  return *c;
}

template <class T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_tensor(std::string& k, const at::Tensor& t) {
  if (!t.defined()) return k.push_back('N');
  k.push_back(t.device().type() == kNeuron ? 'T' : 'C');
  put(k, t.scalar_type());
  put(k, t.unsafeGetTensorImpl()->is_wrapped_number());
  put(k, int64_t(t.dim()));
  for (auto s : t.sizes()) put(k, s);
  for (auto s : t.strides()) put(k, s);
  // A CPU integer scalar's value can decide whether the narrowed kernel runs
  // (x % 2**33: the divisor wraps to 0 at 32 bits, so it computes at full
  // width); keyed by shape alone, x % 3 after it had run at full width too.
  // Only what narrowing changes is keyed (not the value: a new key re-probes).
  if (t.device().is_cpu() && t.dim() == 0 && c10::isIntegralType(t.scalar_type(), false)) {
    const int64_t v = t.item<int64_t>();
    put(k, v == int64_t(static_cast<int32_t>(v)));
    put(k, static_cast<int32_t>(v) == 0);
  }
}

// Elementwise arithmetic whose float arguments are operands only (an optimizer's
// step size, a scheduler's learning rate): their value changes no result's
// dtype, shape or strides. It can change one outcome of the probe, an error:
// a value the computation's type cannot hold (c10::checked_convert's
// overflow, e.g. a float16 fill_ with 1e5), so the key keeps that class of
// the value. Keyed by value, AdamW (capturable=False) probed its addcdiv_ and
// div_ anew every step, on host copies of every parameter: 1,281 page faults
// and ~4 ms of a 34 ms GPT-2 training step (docs/design/eager-per-op-cost.md).
bool float_args_are_operands(const c10::FunctionSchema& s) {
  static const std::unordered_set<std::string> ops = {
      "aten::add",        "aten::add_",      "aten::sub",       "aten::sub_",   "aten::rsub",
      "aten::mul",        "aten::mul_",      "aten::div",       "aten::div_",   "aten::addcdiv",
      "aten::addcdiv_",   "aten::addcmul",   "aten::addcmul_",  "aten::lerp",   "aten::lerp_",
      "aten::fill",       "aten::fill_",     "aten::clamp",     "aten::clamp_", "aten::clamp_min",
      "aten::clamp_min_", "aten::clamp_max", "aten::clamp_max_"};
  return ops.count(s.name()) != 0;
}

// A float operand's class: what a conversion to each dtype makes of it (overflow,
// c10::overflows as checked_convert tests it), its sign, zero, inf, nan and
// whether it is an integer.
void put_float_class(std::string& k, double v) {
  uint32_t c = 0;
  int bit = 0;
  auto flag = [&](bool b) { c |= uint32_t(b) << bit++; };
  flag(std::isnan(v));
  flag(std::isinf(v));
  flag(std::signbit(v));
  flag(v == 0);
  flag(c10::overflows<c10::Half, double>(v));
  flag(c10::overflows<c10::BFloat16, double>(v));
  flag(c10::overflows<float, double>(v));
  flag(c10::overflows<uint8_t, double>(v));
  flag(c10::overflows<int8_t, double>(v));
  flag(c10::overflows<int16_t, double>(v));
  flag(c10::overflows<int32_t, double>(v));
  flag(c10::overflows<int64_t, double>(v));
  flag(c10::overflows<uint16_t, double>(v));
  flag(c10::overflows<uint32_t, double>(v));
  flag(c10::overflows<uint64_t, double>(v));
  flag(c10::overflows<c10::Float8_e5m2, double>(v));
  flag(c10::overflows<c10::Float8_e4m3fn, double>(v));
  flag(c10::overflows<c10::Float8_e5m2fnuz, double>(v));
  flag(c10::overflows<c10::Float8_e4m3fnuz, double>(v));
  flag(c10::overflows<c10::Float8_e8m0fnu, double>(v));  // also below 2^-127
  flag(v != std::trunc(v));
  k.push_back('f');
  put(k, c);
}

void put_ivalue(std::string& k, const IValue& v, bool float_operands = false) {
  if (v.isTensor()) return put_tensor(k, v.toTensor());
  if (v.isNone()) return k.push_back('n');
  if (v.isInt()) return k.push_back('i'), put(k, v.toInt());
  if (v.isDouble() && float_operands) return put_float_class(k, v.toDouble());
  if (v.isDouble()) return k.push_back('d'), put(k, v.toDouble());
  if (v.isBool()) return k.push_back('b'), put(k, v.toBool());
  if (v.isString()) return k.push_back('s'), k.append(v.toStringRef()), k.push_back('\0');
  if (v.isGenerator()) return k.push_back('g');
  if (v.isList()) {
    k.push_back('[');
    for (const IValue& e : v.toListRef()) put_ivalue(k, e);
    return k.push_back(']');
  }
  if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    return k.push_back('c'), put(k, c.real()), put(k, c.imag());
  }
  if (v.isDevice()) return k.push_back('D'), k.append(v.toDevice().str()), k.push_back('\0');
  // Anything else: its printed form (rare argument kinds).
  std::ostringstream os;
  os << v;
  k.push_back('?');
  k.append(os.str());
  k.push_back('\0');
}

}  // namespace

int64_t geometry_probes() { return g_probes.load(std::memory_order_relaxed); }

std::shared_ptr<const Geometry> find_geometry(const std::string& key) {
  return geometry_cache().find(key);
}
std::shared_ptr<const Geometry> insert_geometry(const std::string& key, Geometry g) {
  return geometry_cache().insert(key, std::move(g));
}

void geometry_key_into(std::string& k, const c10::OperatorHandle& op, const Stack& st, size_t base,
                       size_t n) {
  k.clear();
  k.reserve(256);
  put(k, static_cast<const void*>(&op.schema()));
  // Global state that changes a result's dtype, shape or strides (or which
  // kernel runs): default dtype (bool / int division, scalar promotion), grad
  // and inference mode, deterministic algorithms, the 64-bit policy.
  put(k, c10::typeMetaToScalarType(c10::get_default_dtype()));
  put(k, c10::GradMode::is_enabled());
  put(k, c10::InferenceMode::is_enabled());
  put(k, at::globalContext().deterministicAlgorithms());
  put(k, narrow_64bit_enabled());
  bool has_float = false;  // the name lookup only for calls with a float argument
  for (size_t i = 0; i < n && !has_float; ++i) has_float = st[base + i].isDouble();
  const bool float_operands = has_float && float_args_are_operands(op.schema());
  for (size_t i = 0; i < n; ++i) put_ivalue(k, st[base + i], float_operands);
  // Which tensors share device memory, and where (out= aliasing an input is
  // an error for some ops, in-place computation for others).
  c10::SmallVector<std::pair<const void*, int64_t>, 8> seen;  // (storage, byte offset)
  for (size_t i = 0; i < n; ++i)
    map_tensors(st[base + i], [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() != kNeuron || t.numel() == 0) return t;
      const void* storage = t.storage().data();
      const int64_t offset = t.storage_offset() * t.dtype().itemsize();
      for (size_t j = 0; j < seen.size(); ++j)
        if (seen[j].first == storage) {
          k.push_back('A');
          put(k, seen.size());
          put(k, j);
          put(k, offset - seen[j].second);
          break;
        }
      seen.emplace_back(storage, offset);
      return t;
    });
}

ResultGeometry geometry_of(const at::Tensor& t) {
  ResultGeometry r;
  r.defined = true;
  r.sizes = t.sizes().vec();
  r.strides = t.strides().vec();
  r.dtype = t.scalar_type();
  return r;
}

// Result geometry: the CPU kernel's own results (the truth; ATen's Meta
// kernels disagree with it on some dtypes, shapes and strides), learned once
// per signature by running it on zero-filled host copies of the inputs: no
// device access, so the call stays asynchronous, and no Python meta kernel
// (whose first use imports torch._dynamo and sympy, seconds). Only operators
// whose result sizes follow from metadata are computed this way (the others
// are kSyncNativeOps). With narrowing, a second probe at 32 bits checks that
// the narrowed kernel exists and agrees in shape; else the signature computes
// at full width. nullopt: the CPU kernel rejects the call (or its zeros);
// the caller computes with the data synchronously, which raises the CPU's
// error at the call.
std::optional<Geometry> probe_geometry(const c10::OperatorHandle& op, const Plan& plan,
                                       const Stack& stack, size_t base, bool narrow,
                                       c10::DeviceIndex device) {
  g_probes.fetch_add(1, std::memory_order_relaxed);
  const auto& s = op.schema();
  const c10::OperatorHandle compute = plan.compute_op ? *plan.compute_op : op;
  std::vector<IValue> args(stack.begin() + base, stack.begin() + base + plan.num_args);
  std::vector<IValue> got;
  std::vector<c10::Warning> warned;
  try {
    RecordWarnings record;
    got = run_cpu_host_outs(compute, plan, args, false, device, /*probe=*/true);
    warned = record.take();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  Geometry geo;
  geo.warnings = std::move(warned);
  for (size_t r = 0; r < got.size(); ++r) {
    const int alias = r < plan.ret_alias.size() ? plan.ret_alias[r] : -1;
    ResultGeometry rg;
    if (alias >= 0) {
      const at::Tensor& t = args[alias].toTensor();
      rg = geometry_of(t);
      if (is_out_arg(s, alias) && got[r].isTensor() && got[r].toTensor().defined() &&
          got[r].toTensor().sizes() != t.sizes()) {
        // the CPU's layout for a resized out= (TensorIterator restrides it as its
        // inputs: a transposed input gives a transposed out), else contiguous
        const at::Tensor& h = got[r].toTensor();
        rg.sizes = h.sizes().vec();
        rg.strides = h.is_non_overlapping_and_dense() ? h.strides().vec() : dense_strides(rg.sizes);
      }
    } else if (got[r].isTensor() && got[r].toTensor().defined()) {
      const at::Tensor& h = got[r].toTensor();
      check_supported_layout(plan.name, h);  // EmbeddingBag(sparse=True)'s gradient
      rg = geometry_of(h);
      if (!h.is_non_overlapping_and_dense()) rg.strides = dense_strides(rg.sizes);
    }
    geo.results.push_back(std::move(rg));
  }
  if (narrow) {
    std::vector<IValue> n;
    try {
      n = run_cpu_host_outs(compute, plan, args, true, device, /*probe=*/true);
    } catch (const std::exception&) {
      geo.full_width = true;  // no 32-bit kernel (int64 convolution, avg_pool2d)
    }
    for (size_t r = 0; r < n.size() && !geo.full_width; ++r)
      if (r < got.size() && got[r].isTensor() && n[r].isTensor() &&
          got[r].toTensor().defined() == n[r].toTensor().defined() && got[r].toTensor().defined() &&
          got[r].toTensor().sizes() != n[r].toTensor().sizes())
        geo.full_width = true;
  }
  return geo;
}

}  // namespace torchneuron::native

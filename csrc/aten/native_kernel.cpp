// The generic native kernel: every operator in native_ops.h runs here.
// 1. check devices; 2. result geometry: the CPU kernel's, learned once per
// signature from zero-filled host copies (errors are raised at once, inputs
// stay intact); 3. allocate results on the device; 4. enqueue ATen's CPU
// kernel over the device memory on the current stream. 64-bit inputs are narrowed to 32 bits
// (TorchNeuron's policy) unless TORCHNEURON_NARROW_64BIT=0.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/library.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "aten/context.h"
#include "aten/ivalue_tensors.h"
#include "aten/kernel_signatures.h"
#include "aten/kernel_warnings.h"
#include "aten/native_ops.h"
#include "aten/stats.h"
#include "aten/unsupported_layouts.h"
#include "runtime/activity.h"

namespace torchneuron {
namespace {

using c10::IValue;
using torch::jit::Stack;

std::atomic<bool> g_narrow{[] {
  const char* v = std::getenv("TORCHNEURON_NARROW_64BIT");
  return !(v && std::string(v) == "0");
}()};

// What we learn once per operator from its schema.
struct Plan {
  std::string name;  // "aten::add.Tensor"
  size_t num_args = 0;
  std::vector<bool> is_index;  // per argument: exempt from narrowing
  std::vector<int> ret_alias;  // per return: aliased (written) argument or -1
  bool returns_tensors_only = true;
  bool writes_args = false;                          // in-place or out=
  std::optional<c10::OperatorHandle> out_op;         // functional -> its out= overload
  std::optional<c10::OperatorHandle> functional_op;  // out= overload -> its functional one
  size_t num_out = 0;  // out= arguments (kwarg-only, written), last in the schema
  std::optional<c10::OperatorHandle> compute_op;  // kComputeAliases
  std::atomic<bool> sync{false};  // kSyncNativeOps / kCheckedIndexOps (set once, any thread)
  int host_indices = -1;          // kHostIndexOps: the `indices` argument
};

bool same_alias(const c10::AliasInfo* a, const c10::AliasInfo* b) {
  return a && b && a->beforeSets() == b->beforeSets();
}

// The overloads of an operator name (aten::add -> add.Tensor, add.out, ...).
std::vector<c10::OperatorHandle> overloads_of(const std::string& name) {
  auto& d = c10::Dispatcher::singleton();
  std::vector<c10::OperatorHandle> out;
  for (const auto& n : d.getAllOpNames())
    if (n.name == name)
      if (auto h = d.findOp(n)) out.push_back(*h);
  return out;
}

bool same_leading_arguments(const c10::FunctionSchema& a, const c10::FunctionSchema& b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a.arguments()[i].name() != b.arguments()[i].name() ||
        a.arguments()[i].type()->str() != b.arguments()[i].type()->str())
      return false;
  return true;
}

// The out= overload of a functional op: same arguments, then one written
// keyword-only tensor per return. Searched by signature, since the names
// are irregular (add.Tensor -> add.out, sum.dim_IntList -> sum.IntList_out,
// max.dim -> max.dim_max); a functional op computed without its out= form
// pays a host allocation and a copy of every result on the device.
std::optional<c10::OperatorHandle> find_out_variant(const c10::FunctionSchema& s) {
  if (s.returns().empty()) return std::nullopt;
  const size_t n = s.arguments().size();
  for (const auto& h : overloads_of(s.name())) {
    const auto& o = h.schema();
    if (o.arguments().size() != n + s.returns().size() || !same_leading_arguments(o, s, n))
      continue;
    bool ok = true;
    for (size_t i = n; i < o.arguments().size() && ok; ++i)
      ok = o.arguments()[i].kwarg_only() && o.arguments()[i].alias_info() &&
           o.arguments()[i].alias_info()->isWrite();
    if (ok && h.hasKernelForDispatchKey(c10::DispatchKey::CPU)) return h;
  }
  return std::nullopt;
}

// The functional overload of an out= overload: the same leading arguments,
// one return per out= argument.
std::optional<c10::OperatorHandle> find_functional_variant(const c10::FunctionSchema& s,
                                                           size_t num_out) {
  const size_t n = s.arguments().size() - num_out;
  for (const auto& h : overloads_of(s.name())) {
    const auto& f = h.schema();
    if (f.arguments().size() != n || f.returns().size() != num_out || f.is_mutable() ||
        !same_leading_arguments(f, s, n))
      continue;
    if (h.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        h.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
      return h;
  }
  return std::nullopt;
}

const Plan& plan_for(const c10::OperatorHandle& op) {
  // Leaked: queued kernels refer to their plan until they have run.
  static std::mutex* mu = new std::mutex();
  static auto* plans = new std::unordered_map<const void*, std::unique_ptr<Plan>>();
  std::lock_guard<std::mutex> lock(*mu);
  auto& slot = (*plans)[&op.schema()];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  const auto& s = op.schema();
  p->name = s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
  p->num_args = s.arguments().size();
  for (const auto& a : s.arguments()) {
    bool idx = false;
    for (const char* n : kIndexArgNames) idx = idx || a.name() == n;
    p->is_index.push_back(idx);
    if (a.alias_info() && a.alias_info()->isWrite()) {
      p->writes_args = true;
      if (a.kwarg_only()) p->num_out += 1;
    }
  }
  for (const auto& r : s.returns()) {
    int alias = -1;
    for (size_t i = 0; i < s.arguments().size(); ++i)
      if (same_alias(r.alias_info(), s.arguments()[i].alias_info())) alias = int(i);
    p->ret_alias.push_back(alias);
    if (r.type()->kind() != c10::TypeKind::TensorType) p->returns_tensors_only = false;
  }
  // Fills and draws only write self: it is their result, not an input.
  for (const char* n : kWriteOnlySelfOps)
    if (p->name == std::string("aten::") + n) p->is_index[0] = true;
  std::string base = s.name().substr(6);  // strip "aten::"
  for (const char* n : kDataMovementOps)
    if (base == n) std::fill(p->is_index.begin(), p->is_index.end(), true);
  for (const auto& ca : kComputeAliases)
    if (base == ca.op)
      p->compute_op =
          c10::Dispatcher::singleton().findOp({std::string("aten::") + ca.computed_as, ""});
  for (const char* n : kSyncNativeOps)
    if (p->name == std::string("aten::") + n) p->sync = true;
  for (const char* n : kCheckedIndexOps)
    if (p->name == std::string("aten::") + n) p->sync = true;
  for (const char* n : kHostIndexOps)
    if (p->name == std::string("aten::") + n)
      for (size_t i = 0; i < s.arguments().size(); ++i)
        if (s.arguments()[i].name() == "indices" || s.arguments()[i].name() == "index")
          p->host_indices = int(i);
  if (!p->returns_tensors_only) p->sync = true;
  bool resizing_out = false;
  for (const char* n : kResizingOutOps) resizing_out = resizing_out || base == n;
  if (!p->writes_args && !p->compute_op && !resizing_out) p->out_op = find_out_variant(s);
  if (p->num_out > 0) p->functional_op = find_functional_variant(s, p->num_out);
  slot = std::move(p);
  return *slot;
}

std::string device_str(const at::Tensor& t) { return t.device().str(); }

// All tensors of one op on one neuron device; CPU 0-dim tensors allowed.
c10::DeviceIndex check_devices(const Plan& plan, const c10::FunctionSchema& s, Stack& args_view,
                               size_t base) {
  c10::DeviceIndex device = -1;
  std::string first;
  auto visit = [&](const at::Tensor& t, const std::string& arg, bool written) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      if (device == -1) {
        device = t.device().index();
        first = arg;
      } else {
        TORCH_CHECK(t.device().index() == device,
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, neuron:",
                    int(device), " and ", device_str(t), "! (when checking argument ", arg, " in ",
                    plan.name, ")");
      }
      return;
    }
    // A scalar operand, as CUDA allows; never a written one (out=, in place).
    if (t.device().is_cpu() && t.dim() == 0 && !written) return;
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at least two "
                "devices, neuron and ",
                device_str(t), "! (when checking argument ", arg, " in ", plan.name, ")");
  };
  for (size_t i = 0; i < plan.num_args; ++i) {
    const IValue& v = args_view[base + i];
    const auto& name = s.arguments()[i].name();
    const auto* ai = s.arguments()[i].alias_info();
    const bool written = ai && ai->isWrite();
    if (v.isTensor()) {
      visit(v.toTensor(), name, written);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t, name, written);
    } else if (v.isList()) {
      for (const IValue& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor(), name, written);
    }
  }
  return device == -1 ? current_device() : device;
}

// CPU index tensors of indexing ops (accepted on CUDA: x[cpu_index]) are
// copied to the device of `self` first.
void indices_to_device(const Plan& plan, Stack& stack, size_t base) {
  const IValue& self = stack[base];
  if (!self.isTensor() || self.toTensor().device().type() != kNeuron) return;
  const c10::Device device = self.toTensor().device();
  IValue& indices = stack[base + plan.host_indices];
  indices = map_tensors(indices, [&](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() ? t.to(device) : t;
  });
}

bool is_narrowable(c10::ScalarType st) { return st == c10::kDouble || st == c10::kLong; }

at::Tensor narrowed(const at::Tensor& t) {
  return t.to(t.scalar_type() == c10::kDouble ? c10::kFloat : c10::kInt);
}

bool is_scalar_arg(const c10::Argument& a) {
  auto type = a.type();
  if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
  return type->kind() == c10::TypeKind::NumberType;
}

// A Scalar beside narrowed tensors is narrowed with them; the CPU kernel
// would otherwise fail on a value float32/int32 cannot hold (masked_fill_
// with torch.finfo(torch.float64).min). Floats saturate to the float32 range;
// integers wrap as int64 tensors do, when the call narrows int64 tensors.
IValue narrowed_scalar(const IValue& v, bool wrap_ints) {
  if (v.isDouble()) {
    constexpr double kMax = std::numeric_limits<float>::max();
    double d = v.toDouble();
    return std::isfinite(d) ? std::clamp(d, -kMax, kMax) : d;
  }
  if (v.isInt() && wrap_ints) return int64_t(static_cast<int32_t>(v.toInt()));
  return v;
}

// Does this call narrow any 64-bit input? (decided on the host, counted once)
bool overlaps_another(const Stack& stack, size_t i);
bool is_out_arg(const c10::FunctionSchema& s, size_t i);

bool wants_narrowing(const Plan& plan, const c10::FunctionSchema& s, const Stack& st, size_t base) {
  if (!g_narrow.load(std::memory_order_relaxed)) return false;
  // An out= over an input's memory: full width, so that the CPU's out= kernel
  // raises its overlap error or computes, as on the CPU (narrowed, the
  // functional form would compute and skip the check: masked_select).
  if (plan.num_out > 0) {
    const Stack args(st.begin() + base, st.begin() + base + plan.num_args);
    for (size_t i = 0; i < plan.num_args; ++i)
      if (is_out_arg(s, i) && args[i].isTensor() && args[i].toTensor().defined() &&
          overlaps_another(args, i))
        return false;
  }
  for (size_t i = 0; i < plan.num_args; ++i) {
    if (plan.is_index[i]) continue;
    const auto* ai = s.arguments()[i].alias_info();
    if (ai && ai->isWrite() && s.arguments()[i].kwarg_only()) continue;  // out= results
    const IValue& v = st[base + i];
    bool hit = false;
    auto check = [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron && is_narrowable(t.scalar_type())) hit = true;
      return t;
    };
    map_tensors(v, check);
    if (hit) return true;
  }
  return false;
}

void note_narrowing(const std::string& name, int64_t calls = 1) {
  record_narrowing(name, calls);
  warn_narrowing(name);
}

at::Tensor zero_host_like(const at::Tensor& t);

// Host views of one call's device tensors: tensors over the same device
// memory share one host storage, so that ATen's overlap checks (out= aliasing
// an input: take, gather, masked_select) see what the device holds. probe: a
// zero-filled private mapping stands in for the device memory.
class HostViews {
 public:
  explicit HostViews(bool probe) : probe_(probe) {}
  at::Tensor view(const at::Tensor& t) {
    if (t.numel() == 0 || !t.has_storage() || !t.storage().data())
      return probe_ ? zero_host_like(t) : cpu_alias(t);
    const c10::Storage& src = t.storage();
    c10::Storage& host = storages_[src.data()];
    if (!host || host.nbytes() < src.nbytes()) host = make(src);
    auto r = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(host), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    r.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) r._set_conj(true);
    if (t.is_neg()) r._set_neg(true);
    return r;
  }

 private:
  c10::Storage make(const c10::Storage& src) const {
    const size_t n = src.nbytes();
    void* p = const_cast<void*>(src.data());
    if (probe_) {
      p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
               0);
      TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "neuron: no host memory for a ", n,
                       "-byte shape probe");
      return at::from_blob(
                 p, {int64_t(n)}, [n](void* q) { munmap(q, n); },
                 at::TensorOptions().dtype(c10::kByte))
          .storage();
    }
    return at::from_blob(
               p, {int64_t(n)}, [](void*) {}, at::TensorOptions().dtype(c10::kByte))
        .storage();
  }
  bool probe_;
  std::unordered_map<const void*, c10::Storage> storages_;
};

// Does host tensor `a` share bytes with any other tensor of `stack`?
bool overlaps_another(const Stack& stack, size_t i) {
  const at::Tensor& a = stack[i].toTensor();
  if (a.numel() == 0 || !a.has_storage()) return false;
  auto span = [](const at::Tensor& t) {
    int64_t last = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const int64_t k = t.dtype().itemsize();
    return std::make_pair(t.storage_offset() * k, (last + 1) * k);
  };
  const auto [lo, hi] = span(a);
  bool hit = false;
  for (size_t j = 0; j < stack.size() && !hit; ++j)
    if (j != i)
      map_tensors(stack[j], [&](const at::Tensor& t) {
        if (t.defined() && t.numel() > 0 && t.has_storage() &&
            t.storage().unsafeGetStorageImpl() == a.storage().unsafeGetStorageImpl()) {
          const auto [tlo, thi] = span(t);
          hit = hit || (tlo < hi && lo < thi);
        }
        return t;
      });
  return hit;
}

// Build the CPU argument list over device memory. Runs where memory is
// accessible (a stream worker, or with_device_access).
struct CpuArgs {
  explicit CpuArgs(bool probe) : views(probe) {}
  Stack stack;
  std::vector<std::pair<at::Tensor, at::Tensor>> writeback;  // (alias, narrowed copy)
  HostViews views;
};

// A zero-filled host tensor of t's geometry (the geometry probe's input).
// An anonymous private mapping reads as the kernel's zero page: read-only
// inputs cost neither memory nor a memset; writes copy only touched pages.
at::Tensor zero_host_like(const at::Tensor& t) {
  const size_t n = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize());
  const auto options = t.options().device(c10::kCPU);
  if (n == 0) return at::empty_strided(t.sizes(), t.strides(), options);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "neuron: no host memory for a ", n,
                   "-byte shape probe");
  return at::from_blob(p, t.sizes(), t.strides(), [n](void* q) { munmap(q, n); }, options);
}

// probe: zero-filled host copies in place of device memory and a scratch
// generator (no device access, no draw from the device's generator).
CpuArgs cpu_args(const Plan& plan, const c10::FunctionSchema& s, const std::vector<IValue>& args,
                 bool narrow, c10::DeviceIndex device, bool probe = false) {
  CpuArgs out(probe);
  out.stack.reserve(args.size() + 4);
  bool narrows_long = false;
  for (size_t i = 0; i < args.size() && narrow; ++i)
    if (!plan.is_index[i])
      map_tensors(args[i], [&](const at::Tensor& t) {
        narrows_long = narrows_long || (t.defined() && t.scalar_type() == c10::kLong);
        return t;
      });
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = s.arguments()[i];
    if (arg.type()->kind() == c10::TypeKind::OptionalType &&
        arg.type()->containedType(0)->kind() == c10::TypeKind::GeneratorType) {
      if (probe) {
        out.stack.emplace_back(at::make_generator<at::CPUGeneratorImpl>(0));
        continue;
      }
      const auto& gen = args[i].isNone() ? default_generator(device) : args[i].toGenerator();
      out.stack.emplace_back(cpu_generator_of(gen));
      continue;
    }
    if (narrow && is_scalar_arg(arg)) {
      out.stack.push_back(narrowed_scalar(args[i], narrows_long));
      continue;
    }
    const auto* ai = arg.alias_info();
    bool is_out = ai && ai->isWrite() && arg.kwarg_only();
    bool writes = ai && ai->isWrite();
    bool narrow_this = narrow && !plan.is_index[i] && !is_out;
    out.stack.push_back(map_tensors(args[i], [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined() || t.device().type() != kNeuron) return t;
      at::Tensor a = out.views.view(t);
      if (narrow_this && is_narrowable(t.scalar_type())) {
        at::Tensor n = narrowed(a);
        if (writes) out.writeback.emplace_back(a, n);
        return n;
      }
      return a;
    }));
  }
  return out;
}

void redispatch_cpu(const c10::OperatorHandle& op, Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// Geometry of an op's results, as the CPU kernel gives it.
struct ResultGeometry {
  bool defined = false;
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::kFloat;
};
struct Geometry {
  std::vector<ResultGeometry> results;
  // The narrowed dtype has no CPU kernel (int64 convolution as int32): this
  // signature computes at full width (counted in full_width_stats).
  bool full_width = false;
  // What the CPU kernel warned for this signature (kernel_warnings.h).
  std::vector<c10::Warning> warnings;
};

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

void put_ivalue(std::string& k, const IValue& v) {
  if (v.isTensor()) return put_tensor(k, v.toTensor());
  if (v.isNone()) return k.push_back('n');
  if (v.isInt()) return k.push_back('i'), put(k, v.toInt());
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

std::string geometry_key(const c10::OperatorHandle& op, const Stack& st, size_t base, size_t n) {
  std::string k;
  k.reserve(256);
  put(k, static_cast<const void*>(&op.schema()));
  // Global state that changes a result's dtype, shape or strides (or which
  // kernel runs): default dtype (bool / int division, scalar promotion), grad
  // and inference mode, deterministic algorithms, the 64-bit policy.
  put(k, c10::typeMetaToScalarType(c10::get_default_dtype()));
  put(k, c10::GradMode::is_enabled());
  put(k, c10::InferenceMode::is_enabled());
  put(k, at::globalContext().deterministicAlgorithms());
  put(k, g_narrow.load(std::memory_order_relaxed));
  for (size_t i = 0; i < n; ++i) put_ivalue(k, st[base + i]);
  // Which tensors share device memory, and where (out= aliasing an input is
  // an error for some ops, in-place computation for others).
  std::vector<std::pair<const void*, int64_t>> seen;  // (storage, byte offset)
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
  return k;
}

std::vector<int64_t> dense_strides(c10::IntArrayRef sizes) {
  auto d = c10::contiguous_strides(sizes);
  return std::vector<int64_t>(d.begin(), d.end());
}

bool on_device_memory(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 && device_runtime().device_of(t.data_ptr()) >= 0;
}

bool is_generator_arg(const c10::Argument& arg) {
  return arg.type()->kind() == c10::TypeKind::OptionalType &&
         arg.type()->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

bool is_out_arg(const c10::FunctionSchema& s, size_t i) {
  const auto* ai = s.arguments()[i].alias_info();
  return ai && ai->isWrite() && s.arguments()[i].kwarg_only();
}

std::vector<IValue> run_cpu_host_outs(const c10::OperatorHandle& compute, const Plan& plan,
                                      const std::vector<IValue>& args, bool narrow,
                                      c10::DeviceIndex device, bool probe = false);
void note_full_width(const std::string& name, int64_t calls = 1);
ResultGeometry geometry_of(const at::Tensor& t);

// Synchronous path: the result's size depends on the data, or the geometry
// probe failed (the real call raises the CPU's error here, at once).
void run_sync(const c10::OperatorHandle& op, const Plan& plan, Stack* stack,
              c10::DeviceIndex device, bool narrow, const std::string* cache_key = nullptr) {
  const auto& s = op.schema();
  std::vector<IValue> args(stack->end() - plan.num_args, stack->end());
  torch::jit::drop(*stack, plan.num_args);
  sync_current_stream(device);
  // Which widths to restore on results.
  bool had_double = false, had_long = false;
  for (const auto& v : args)
    map_tensors(v, [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron) {
        had_double = had_double || t.scalar_type() == c10::kDouble;
        had_long = had_long || t.scalar_type() == c10::kLong;
      }
      return t;
    });
  const c10::OperatorHandle compute = plan.compute_op ? *plan.compute_op : op;
  std::vector<IValue> got;
  bool full_width = false;
  // The host runs it in the current stream's place: a kernel on that stream's
  // profiler row (runtime/activity.h), so its time is device time.
  const int64_t trace_t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
  translate_errors([&] {
    device_runtime().with_device_access([&] {
      try {
        got = run_cpu_host_outs(compute, plan, args, narrow, device);
      } catch (const c10::NotImplementedError&) {
        if (!narrow) throw;
        narrow = false;  // no 32-bit kernel: full width
        got = run_cpu_host_outs(compute, plan, args, false, device);
        note_full_width(plan.name);
        full_width = true;
      }
      for (auto& v : got)
        if (v.isTensor() && on_device_memory(v.toTensor())) v = v.toTensor().clone();
    });
  });
  if (trace_t0)
    rt::activity::record_on_stream(rt::ActivityKind::kKernel, rt::activity::intern(plan.name),
                                   device, current_stream_id(device), trace_t0,
                                   rt::activity::now_ns());
  std::vector<IValue> results;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  bool resized = false;
  for (size_t r = 0; r < got.size(); ++r) {
    const int alias = r < plan.ret_alias.size() ? plan.ret_alias[r] : -1;
    if (alias >= 0) {
      at::Tensor t = args[alias].toTensor();
      if (is_out_arg(s, alias) && got[r].isTensor() && got[r].toTensor().defined()) {
        const at::Tensor& h = got[r].toTensor();
        if (t.sizes() != h.sizes()) {
          t.resize_(h.sizes());  // as the CPU kernel resized its out= tensor
          resized = true;
        }
        copies.emplace_back(t, h);
      }
      results.emplace_back(t);
    } else if (got[r].isTensor() && got[r].toTensor().defined()) {
      const at::Tensor& h = got[r].toTensor();
      auto dt = h.scalar_type();
      if (narrow && dt == c10::kFloat && had_double) dt = c10::kDouble;
      if (narrow && dt == c10::kInt && had_long) dt = c10::kLong;
      auto strides =
          h.is_non_overlapping_and_dense() ? h.strides().vec() : dense_strides(h.sizes());
      at::Tensor d = empty_strided_neuron(h.sizes(), strides, dt, device);
      copies.emplace_back(d, h);
      results.emplace_back(d);
    } else {
      results.push_back(got[r]);
    }
  }
  if (resized) sync_current_stream(device);
  translate_errors([&] {
    device_runtime().with_device_access([&] {
      for (auto& [d, h] : copies) cpu_alias(d).copy_(h);
    });
  });
  if (cache_key) {
    // The geometry probe failed on zeros (multinomial of zero weights) but
    // the data is valid: this call's results give the signature's geometry.
    Geometry g;
    g.full_width = full_width;
    for (const auto& v : results) {
      ResultGeometry rg;
      if (v.isTensor() && v.toTensor().defined()) rg = geometry_of(v.toTensor());
      g.results.push_back(std::move(rg));
    }
    geometry_cache().insert(*cache_key, std::move(g));
  }
  for (auto& v : results) stack->push_back(std::move(v));
}

std::mutex& full_width_mu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::map<std::string, int64_t>& full_width_counts() {
  static auto* m = new std::map<std::string, int64_t>();
  return *m;
}
void note_full_width(const std::string& name, int64_t calls) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(full_width_mu());
    auto& n = full_width_counts()[name];
    first = n == 0;
    n += calls;
  }
  if (first)
    TORCH_WARN("neuron: ", name,
               " has no 32-bit kernel for narrowed float64/int64 inputs; "
               "computed at full width (counted in torch.neuron.full_width_stats()).");
}

// Runs the CPU kernel of `compute` over device memory (host access granted):
// out= arguments are replaced by host tensors the kernel may resize as it
// does on the CPU; with narrowing, an out= op computes its functional form.
// Returns the CPU kernel's results.
std::vector<IValue> run_cpu_host_outs(const c10::OperatorHandle& compute, const Plan& plan,
                                      const std::vector<IValue>& args, bool narrow,
                                      c10::DeviceIndex device, bool probe) {
  if (narrow && plan.functional_op) {
    std::vector<IValue> in(args.begin(), args.end() - plan.num_out);
    CpuArgs ca = cpu_args(plan, plan.functional_op->schema(), in, narrow, device, probe);
    redispatch_cpu(*plan.functional_op, &ca.stack);
    return std::vector<IValue>(ca.stack.begin(), ca.stack.end());
  }
  const auto& s = compute.schema();
  CpuArgs ca = cpu_args(plan, s, args, narrow, device, probe);
  for (size_t i = 0; i < plan.num_args; ++i)
    if (is_out_arg(s, i) && ca.stack[i].isTensor() && ca.stack[i].toTensor().defined()) {
      const at::Tensor& a = ca.stack[i].toTensor();
      // An out= sharing memory with an input stays itself: the CPU kernel
      // raises its overlap error, or computes in place, as on the CPU.
      if (overlaps_another(ca.stack, i)) continue;
      ca.stack[i] = at::empty_strided(a.sizes(), a.strides(), a.options());
    }
  redispatch_cpu(compute, &ca.stack);
  for (auto& [alias, n] : ca.writeback) alias.copy_(n);
  return std::vector<IValue>(ca.stack.begin(), ca.stack.end());
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
        rg.sizes = got[r].toTensor().sizes().vec();  // resize_ makes it contiguous
        rg.strides = dense_strides(rg.sizes);
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

void native_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const Plan& plan = plan_for(op);
  const auto& s = op.schema();
  const size_t base = stack->size() - plan.num_args;
  if (plan.host_indices >= 0) indices_to_device(plan, *stack, base);
  c10::DeviceIndex device = check_devices(plan, s, *stack, base);
  bool narrow = wants_narrowing(plan, s, *stack, base);

  if (plan.sync) {
    note_kernel_signature(plan.name, *stack, base, plan.num_args);
    if (narrow) note_narrowing(plan.name);
    return run_sync(op, plan, stack, device, narrow);
  }

  // Result geometry: from the cache, or from the CPU kernel on zero-filled
  // copies (probe_geometry; errors surface at the call, inputs intact).
  std::string key = geometry_key(op, *stack, base, plan.num_args);
  std::shared_ptr<const Geometry> geo = geometry_cache().find(key);
  if (!geo) {
    // A new signature implies a new geometry key (the key is finer): counted here only.
    note_kernel_signature(plan.name, *stack, base, plan.num_args);
    auto g = probe_geometry(op, plan, *stack, base, narrow, device);
    if (!g) {
      if (narrow) note_narrowing(plan.name);
      return run_sync(op, plan, stack, device, narrow, &key);
    }
    geo = geometry_cache().insert(key, std::move(*g));
  } else {
    for (const auto& w : geo->warnings) c10::warn(w);  // the CPU warns at every call
  }
  if (geo->full_width) {
    narrow = false;
    note_full_width(plan.name);
  } else if (narrow) {
    note_narrowing(plan.name);
  }

  std::vector<IValue> args(stack->begin() + base, stack->end());
  torch::jit::drop(*stack, plan.num_args);

  // Results: written arguments come back as themselves (resized as the CPU
  // kernel resized them, for out= of the wrong size); others are new.
  std::vector<at::Tensor> results;
  for (size_t r = 0; r < geo->results.size(); ++r) {
    const auto& m = geo->results[r];
    int alias = r < plan.ret_alias.size() ? plan.ret_alias[r] : -1;
    if (alias >= 0) {
      at::Tensor t = args[alias].toTensor();
      if (t.sizes() != c10::IntArrayRef(m.sizes)) t.resize_(m.sizes);
      results.push_back(t);
    } else if (!m.defined) {
      results.emplace_back();
    } else {
      results.push_back(empty_strided_neuron(m.sizes, m.strides, m.dtype, device));
    }
  }

  // The out= kernel writes straight into the results, saving a copy; only for
  // contiguous inputs: some out= kernels of ATen's CPU disagree with their
  // functional form on strided inputs (native_batch_norm.out, PyTorch 2.13),
  // and the functional kernel is the truth.
  bool contiguous_inputs = true;
  for (size_t i = 0; i < args.size() && contiguous_inputs; ++i)
    map_tensors(args[i], [&](const at::Tensor& t) {
      if (t.defined() && !t.is_contiguous()) contiguous_inputs = false;
      return t;
    });
  const auto* out_op = plan.out_op && !narrow && contiguous_inputs ? &*plan.out_op : nullptr;
  const c10::OperatorHandle compute = plan.compute_op ? *plan.compute_op : op;
  // The kernel sees the tensors as they are now (launch_view), not as the
  // caller may change them before it runs (rot90 = flip, then transpose_).
  for (auto& a : args) a = map_tensors(a, launch_operand);
  std::vector<at::Tensor> kresults;
  for (const auto& r : results) kresults.push_back(launch_view(r));
  launch(device, plan.name.c_str(),
         [compute, out_op, &plan, args = std::move(args), results = std::move(kresults), narrow,
          device, geo]() mutable {
           std::optional<DropKnownWarnings> given;  // at the call, not again on stderr
           if (!geo->warnings.empty()) given.emplace(geo->warnings);
           if (narrow && plan.functional_op) {
             // out= with narrowed inputs: the out= kernel would insist on
             // 32-bit outs (_softmax.out: "expected out dtype float"), so the
             // functional op computes at 32 bits and its results are written
             // (widened back) into the out= tensors.
             std::vector<IValue> in(args.begin(), args.end() - plan.num_out);
             CpuArgs ca = cpu_args(plan, plan.functional_op->schema(), in, narrow, device);
             redispatch_cpu(*plan.functional_op, &ca.stack);
             for (size_t r = 0; r < results.size() && r < ca.stack.size(); ++r)
               cpu_alias(results[r]).copy_(ca.stack[r].toTensor());
             return;
           }
           CpuArgs ca = cpu_args(plan, compute.schema(), args, narrow, device);
           if (out_op) {
             for (const auto& r : results) ca.stack.emplace_back(cpu_alias(r));
             redispatch_cpu(*out_op, &ca.stack);
             return;
           }
           redispatch_cpu(compute, &ca.stack);
           for (auto& [alias, n] : ca.writeback) alias.copy_(n);
           // Written arguments were written through their aliases (or the
           // writeback); fresh results are copied in, also for ops that do
           // both (_native_batch_norm_legit updates running stats in place).
           for (size_t r = 0; r < results.size() && r < ca.stack.size(); ++r) {
             if (plan.ret_alias[r] >= 0) continue;
             if (!results[r].defined() || !ca.stack[r].isTensor()) continue;
             const at::Tensor& got = ca.stack[r].toTensor();
             at::Tensor dst = cpu_alias(results[r]);
             if (got.sizes() != dst.sizes()) {
               TORCH_CHECK(false, plan.name, ": the CPU kernel returned shape ", got.sizes(),
                           " where its geometry probe gave ", dst.sizes());
             }
             if (got.data_ptr() != dst.data_ptr()) dst.copy_(got);
           }
         });
  for (auto& t : results) stack->emplace_back(std::move(t));
}

}  // namespace

bool narrow_64bit_enabled() { return g_narrow.load(); }

void note_compiled_narrowing(const std::string& op, int64_t calls, bool full_width) {
  if (full_width)
    note_full_width(op, calls);
  else
    note_narrowing(op, calls);
}

std::map<std::string, int64_t> full_width_stats() {
  std::lock_guard<std::mutex> lock(full_width_mu());
  return full_width_counts();
}
void reset_full_width_stats() {
  std::lock_guard<std::mutex> lock(full_width_mu());
  full_width_counts().clear();
}
void set_narrow_64bit(bool on) { g_narrow.store(on); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto& d = c10::Dispatcher::singleton();
  auto reg = [&](const char* name) {
    std::string full(name);
    auto dot = full.find('.');
    std::string base = "aten::" + full.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    auto h = d.findOp({base, overload});
    if (!h) return;
    if (!h->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        !h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      bool alias = false;
      for (const auto& ca : kComputeAliases) alias = alias || full == ca.op;
      if (!alias) return;
    }
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&native_kernel>());
  };
  std::set<std::string> listed;
  for (const char* n : kNativeOps) listed.insert(n);
  for (const char* n : kSyncNativeOps) listed.insert(n);
  for (const auto& n : listed) reg(n.c_str());
  // The out= overload of every native functional operator is native too (it
  // would otherwise take the CPU fallback): same kernel, found by signature.
  std::set<std::string> outs;
  for (const auto& n : listed) {
    auto dot = n.find('.');
    auto h =
        d.findOp({"aten::" + n.substr(0, dot), dot == std::string::npos ? "" : n.substr(dot + 1)});
    if (!h || h->schema().is_mutable()) continue;
    bool resizing_out = false;
    for (const char* r : kResizingOutOps) resizing_out = resizing_out || n == r;
    if (resizing_out) continue;
    if (auto o = find_out_variant(h->schema())) {
      std::string name = o->schema().name().substr(6) + "." + o->schema().overload_name();
      if (!listed.count(name)) outs.insert(name);
    }
  }
  for (const auto& n : outs) reg(n.c_str());
}

}  // namespace torchneuron

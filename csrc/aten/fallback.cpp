// The CPU fallback for operators without a native kernel: inputs copied to
// the host, ATen's CPU kernel, results and mutated inputs copied back.
// Copies keep each tensor's exact geometry (strides, and which tensors share
// memory): CPU kernels choose paths by layout (linalg_det factors A^T of a
// contiguous A and its backward relies on that), return column-major LAPACK
// results, and check out= arguments for overlap with inputs. Counted and
// timed per operator; warned once per process; strict mode
// (TORCHNEURON_FALLBACK=error) raises NotImplementedError.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>

#include "aten/alias.h"
#include "aten/device.h"
#include "aten/empty_tensor.h"
#include "aten/generator.h"
#include "aten/ivalue_tensors.h"
#include "aten/stats.h"
#include "aten/stream.h"
#include "aten/unsupported_layouts.h"
#include "runtime/activity.h"

namespace torchneuron {
namespace {

struct Stats {
  std::mutex mu;
  std::map<std::string, FallbackStat> fallback;
  std::map<std::string, int64_t> narrowing;
  std::string mode = [] {
    const char* v = std::getenv("TORCHNEURON_FALLBACK");
    return std::string(v && *v ? v : "warn");
  }();
};

Stats& stats() {
  static Stats* s = new Stats();
  return *s;
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& s = op.schema();
  return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
}

// A random operator on the CPU would draw from the CPU's default generator
// and reject a neuron one. Give it the CPU state behind the neuron generator
// instead (as native random kernels use), so torch.neuron.manual_seed governs
// it, after the work already queued on the stream has drawn from that state.
void use_neuron_generators(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  std::vector<size_t> gens;
  for (size_t i = 0; i < args.size(); ++i) {
    auto type = args[i].type();
    if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
    if (type->kind() == c10::TypeKind::GeneratorType) gens.push_back(i);
  }
  if (gens.empty()) return;
  c10::DeviceIndex device = -1;  // of the first neuron tensor, device or generator
  for (size_t i = 0; i < args.size() && device < 0; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    std::optional<c10::Device> d;
    if (v.isTensor() && v.toTensor().defined()) d = v.toTensor().device();
    if (v.isDevice()) d = v.toDevice();
    if (v.isGenerator()) d = v.toGenerator().device();
    if (d && d->type() == kNeuron) device = resolve_device(d->index());
  }
  if (device < 0) device = current_device();
  for (size_t i : gens) {
    c10::IValue& v = (*stack)[base + i];
    if (v.isNone())
      v = cpu_generator_of(default_generator(device));
    else if (v.toGenerator().device().type() == kNeuron)
      v = cpu_generator_of(v.toGenerator());
  }
  sync_current_stream(device);
}

bool same_alias(const c10::AliasInfo* a, const c10::AliasInfo* b) {
  return a && b && a->beforeSets() == b->beforeSets();
}

// The byte range [lo, hi) of its storage that a tensor may touch.
std::pair<size_t, size_t> byte_span(const at::Tensor& t) {
  const size_t item = t.dtype().itemsize();
  size_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {t.storage_offset() * item, (last + 1) * item};
}

// Copies between tensors of one kind of memory and fresh buffers of the other,
// one buffer per storage (covering what its tensors touch), so tensors that
// share memory share it after the copy and each keeps its sizes and strides.
class SpanCopy {
 public:
  void add(const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0 || !t.has_storage()) return;
    auto [lo, hi] = byte_span(t);
    auto [it, fresh] = spans_.try_emplace(t.storage().unsafeGetStorageImpl(), Span{t.storage()});
    Span& s = it->second;
    s.lo = fresh ? lo : std::min(s.lo, lo);
    s.hi = fresh ? hi : std::max(s.hi, hi);
  }
  // Allocates the buffers (`alloc(bytes)`) and copies the bytes (`copy(dst, src, n)`).
  template <class Alloc, class Copy>
  void copy(Alloc alloc, Copy copy) {
    for (auto& [_, s] : spans_) {
      s.lo -= s.lo % 16;  // the copy's offsets stay multiples of every itemsize
      s.to = alloc(s.hi - s.lo);
      copy(s.to.mutable_data(), static_cast<const char*>(s.from.data()) + s.lo, s.hi - s.lo);
    }
  }
  // t's counterpart over the copied bytes (t must have been added).
  at::Tensor map(const at::Tensor& t, c10::DispatchKeySet keys) const {
    if (!t.defined()) return t;
    at::Tensor r;
    auto it = t.numel() == 0 || !t.has_storage() ? spans_.end()
                                                 : spans_.find(t.storage().unsafeGetStorageImpl());
    c10::Storage storage = it != spans_.end() ? it->second.to : c10::Storage();
    const int64_t offset =
        it != spans_.end() ? int64_t((t.storage_offset() * t.dtype().itemsize() - it->second.lo) /
                                     t.dtype().itemsize())
                           : 0;
    if (!storage) {  // no elements: a fresh empty buffer of the same geometry
      storage = c10::Storage(
          c10::Storage::use_byte_size_t(), 0,
          keys.has(c10::DispatchKey::CPU) ? c10::GetCPUAllocator() : c10::GetAllocator(kNeuron),
          true);
    }
    r = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys, t.dtype());
    r.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), offset);
    if (t.is_conj()) r._set_conj(true);
    if (t.is_neg()) r._set_neg(true);
    return r;
  }

 private:
  struct Span {
    c10::Storage from;
    size_t lo = 0, hi = 0;
    c10::Storage to;
  };
  std::map<const c10::StorageImpl*, Span> spans_;
};

const c10::DispatchKeySet kCpuKeys{c10::DispatchKey::CPU};
const c10::DispatchKeySet kNeuronKeys{c10::DispatchKey::PrivateUse1};

// All tensors on one neuron device, as CUDA requires; a CPU 0-dim tensor is a
// scalar operand and allowed. Returns the device (-1 if no neuron tensor).
c10::DeviceIndex check_devices(const std::string& name, const c10::FunctionSchema& s,
                               const torch::jit::Stack& stack, size_t base) {
  c10::DeviceIndex device = -1;
  for (size_t i = 0; i < s.arguments().size(); ++i)
    map_tensors(stack[base + i], [&](const at::Tensor& t) {
      if (!t.defined() || t.device().type() != kNeuron) return t;
      if (device == -1) device = t.device().index();
      TORCH_CHECK(t.device().index() == device,
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, neuron:",
                  int(device), " and ", t.device(), "! (when checking argument ",
                  s.arguments()[i].name(), " in ", name, ")");
      return t;
    });
  if (device == -1) return device;
  for (size_t i = 0; i < s.arguments().size(); ++i) {
    const auto* ai = s.arguments()[i].alias_info();
    const bool written = ai && ai->isWrite();  // out= and in place: never a CPU scalar
    map_tensors(stack[base + i], [&](const at::Tensor& t) {
      TORCH_CHECK(
          !t.defined() || t.device().type() == kNeuron || (t.is_cpu() && t.dim() == 0 && !written),
          "Expected all tensors to be on the same device, but found at least two "
          "devices, neuron:",
          int(device), " and ", t.device(), "! (when checking argument ", s.arguments()[i].name(),
          " in ", name, ")");
      return t;
    });
  }
  return device;
}

// Host copies of the device tensors in, ATen's CPU kernel, written arguments
// copied back, results copied to the device with the CPU results' geometry.
void host_fallback(const std::string& name, const c10::OperatorHandle& op,
                   torch::jit::Stack* stack) {
  const auto& s = op.schema();
  const size_t num_args = s.arguments().size();
  const size_t base = stack->size() - num_args;
  c10::DeviceIndex device = check_devices(name, s, *stack, base);
  for (size_t i = 0; i < num_args && device < 0; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    if (v.isDevice() && v.toDevice().type() == kNeuron)
      device = resolve_device(v.toDevice().index());
  }
  if (device < 0) device = current_device();
  std::vector<c10::IValue> args(stack->begin() + base, stack->end());

  // Inputs to the host.
  SpanCopy in;
  for (const auto& v : args)
    map_tensors(v, [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron) in.add(t);
      return t;
    });
  sync_current_stream(device);
  auto device_access = [](const std::function<void()>& fn) {
    translate_errors([&] { device_runtime().with_device_access(fn); });
  };
  // The copies show as such in torch.profiler's device rows.
  auto traced = [&](rt::ActivityKind kind, const char* label, const std::function<size_t()>& fn) {
    const int64_t t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
    size_t bytes = 0;
    device_access([&] { bytes = fn(); });
    if (t0 && bytes)
      rt::activity::record_host(kind, label, device, t0, rt::activity::now_ns(), bytes);
  };
  traced(rt::ActivityKind::kMemcpyDtoH, "copy_d2h", [&] {
    size_t bytes = 0;
    in.copy(
        [](size_t n) {
          return c10::Storage(c10::Storage::use_byte_size_t(), n, c10::GetCPUAllocator(), true);
        },
        [&](void* d, const void* src, size_t n) { std::memcpy(d, src, n), bytes += n; });
    return bytes;
  });
  std::vector<c10::IValue> host(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isDevice() && v.toDevice().type() == kNeuron) {
      host[i] = c10::Device(c10::kCPU);
      continue;
    }
    host[i] = map_tensors(v, [&](const at::Tensor& t) {
      return t.defined() && t.device().type() == kNeuron ? in.map(t, kCpuKeys) : t;
    });
  }
  for (size_t i = 0; i < args.size(); ++i) (*stack)[base + i] = host[i];

  op.redispatchBoxed(kCpuKeys, stack);

  // Written arguments: as the CPU kernel left them (resized and restrided too).
  std::vector<std::pair<at::Tensor, at::Tensor>> writes;  // (device, host)
  bool resized = false;
  for (size_t i = 0; i < num_args; ++i) {
    const auto* ai = s.arguments()[i].alias_info();
    if (!ai || !ai->isWrite()) continue;
    std::vector<at::Tensor> d, h;
    map_tensors(args[i], [&](const at::Tensor& t) { return d.push_back(t), t; });
    map_tensors(host[i], [&](const at::Tensor& t) { return h.push_back(t), t; });
    for (size_t k = 0; k < d.size() && k < h.size(); ++k) {
      if (!d[k].defined() || d[k].device().type() != kNeuron) continue;
      if (d[k].sizes() != h[k].sizes()) {
        d[k].resize_(h[k].sizes());
        resized = true;
      }
      if (d[k].strides() != h[k].strides() && h[k].is_non_overlapping_and_dense())
        d[k].as_strided_(h[k].sizes(), h[k].strides(), d[k].storage_offset());
      writes.emplace_back(d[k], h[k]);
    }
  }

  // Results: written arguments return themselves; the others are copied.
  const auto& rets = s.returns();
  const size_t rbase = stack->size() - rets.size();
  SpanCopy out;
  for (size_t r = 0; r < rets.size(); ++r) {
    const auto* ai = rets[r].alias_info();
    if (ai && ai->isWrite()) continue;
    if (ai)
      TORCH_WARN("neuron: ", name,
                 " is a view operator without a native kernel; its CPU fallback returns a copy, "
                 "not a view");
    map_tensors((*stack)[rbase + r], [&](const at::Tensor& t) {
      // to_sparse, quantize_per_tensor: no such tensor on neuron; say so.
      if (t.defined() && t.is_cpu()) check_supported_layout(name, t), out.add(t);
      return t;
    });
  }
  if (resized) sync_current_stream(device);  // a storage that grew copies its bytes on the stream
  traced(rt::ActivityKind::kMemcpyHtoD, "copy_h2d", [&] {
    size_t bytes = 0;
    for (auto& [d, h] : writes) cpu_alias(d).copy_(h), bytes += h.nbytes();
    out.copy(
        [&](size_t n) {
          return empty_strided_neuron({int64_t(n)}, {1}, c10::kByte, device).storage();
        },
        [&](void* d, const void* src, size_t n) { std::memcpy(d, src, n), bytes += n; });
    return bytes;
  });
  for (size_t r = 0; r < rets.size(); ++r) {
    c10::IValue& v = (*stack)[rbase + r];
    const auto* ai = rets[r].alias_info();
    if (ai && ai->isWrite()) {
      for (size_t i = 0; i < num_args; ++i)
        if (same_alias(ai, s.arguments()[i].alias_info())) v = args[i];
      continue;
    }
    v = map_tensors(v, [&](const at::Tensor& t) {
      return t.defined() && t.is_cpu() ? out.map(t, kNeuronKeys) : t;
    });
  }
}

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_name(op);
  {
    auto& s = stats();
    std::lock_guard<std::mutex> lock(s.mu);
    // A bad value is reported where it matters, not at `import torch`.
    TORCH_CHECK(s.mode == "warn" || s.mode == "error",
                "TORCHNEURON_FALLBACK must be 'warn' or 'error', got '", s.mode, "' (needed by ",
                name, ", which has no native kernel)");
    TORCH_CHECK_NOT_IMPLEMENTED(
        s.mode != "error", "neuron: operator ", name,
        " has no native kernel, and TORCHNEURON_FALLBACK=error forbids its CPU fallback");
  }
  warn_fallback(name);
  auto t0 = std::chrono::steady_clock::now();
  const int64_t trace_t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
  use_neuron_generators(op, stack);
  host_fallback(name, op, stack);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record_fallback(name, secs);
  if (trace_t0)  // marks it in torch.profiler's device rows (csrc/profiler)
    rt::activity::record_host(rt::ActivityKind::kFallback, rt::activity::intern(name),
                              current_device(), trace_t0, rt::activity::now_ns());
}

}  // namespace

void record_fallback(const std::string& op, double seconds) {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& f = s.fallback[op];
  f.calls += 1;
  f.seconds += seconds;
}

std::map<std::string, FallbackStat> fallback_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.fallback;
}

void reset_fallback_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fallback.clear();
}

void record_narrowing(const std::string& op, int64_t calls) {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.narrowing[op] += calls;
}

std::map<std::string, int64_t> narrowing_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.narrowing;
}

void reset_narrowing_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.narrowing.clear();
}

std::string fallback_mode() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.mode;
}

void set_fallback_mode(const std::string& mode) {
  TORCH_CHECK(mode == "warn" || mode == "error", "fallback mode must be 'warn' or 'error', got '",
              mode, "'");
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.mode = mode;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

// Composite kernels that run on any device but refuse all but CPU/CUDA (a
// device check, or a DispatchStub called directly): without these entries
// torch.mode(x, out=...) raises and x.conj_physical_() fails an internal
// assert on neuron. They take the CPU fallback like any unsupported op.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* op : {"mode.values", "conj_physical_"})
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace torchneuron

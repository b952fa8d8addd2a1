// The CPU fallback for operators without a native kernel: inputs copied to
// the host, ATen's CPU kernel, results and mutated inputs copied back
// (at::native::cpu_fallback). Counted and timed per operator; warned once per process;
// strict mode (TORCHNEURON_FALLBACK=error) raises NotImplementedError.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>

#include "aten/context.h"
#include "aten/stats.h"
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
  at::native::cpu_fallback(op, stack);
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

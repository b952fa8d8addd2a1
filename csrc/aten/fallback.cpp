// The CPU fallback for operators without a native kernel: inputs copied to
// the host, ATen's CPU kernel, results and mutated inputs copied back
// (at::native::cpu_fallback). Counted and timed per operator; warned once;
// strict mode (TORCHNEURON_FALLBACK=error) raises NotImplementedError.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>

#include "aten/context.h"
#include "aten/stats.h"

namespace torchneuron {
namespace {

struct Stats {
  std::mutex mu;
  std::map<std::string, FallbackStat> fallback;
  std::map<std::string, int64_t> narrowing;
  std::set<std::string> warned;
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

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_name(op);
  {
    auto& s = stats();
    std::lock_guard<std::mutex> lock(s.mu);
    TORCH_CHECK_NOT_IMPLEMENTED(
        s.mode != "error", "neuron: operator ", name,
        " has no native kernel, and TORCHNEURON_FALLBACK=error forbids its CPU fallback");
    if (s.warned.insert(name).second)
      TORCH_WARN("neuron: operator ", name,
                 " is not supported natively and runs on the CPU (inputs and results are "
                 "copied). Warned once per operator; see torch.neuron.fallback_stats().");
  }
  auto t0 = std::chrono::steady_clock::now();
  at::native::cpu_fallback(op, stack);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record_fallback(name, secs);
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

void record_narrowing(const std::string& op) {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.narrowing[op] += 1;
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
  TORCH_CHECK(mode == "warn" || mode == "error",
              "fallback mode must be 'warn' or 'error', got '", mode, "'");
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mu);
  s.mode = mode;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace torchneuron

// The two warnings a program sees about how its operators ran: 64-bit narrowing
// and CPU fallback. One line per process each, naming the first operator and the
// counters to read (torch.neuron.narrowing_stats() / fallback_stats()); with
// TORCHNEURON_WARN_PER_OP=1, one line per operator instead (the detail).
#include <c10/util/Exception.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "aten/stats.h"

namespace torchneuron {
namespace {

bool per_op() {
  static const bool on = [] {
    const char* v = std::getenv("TORCHNEURON_WARN_PER_OP");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

// True the first time `key` is seen in this process (per-op mode: per operator).
bool first(std::set<std::string>& seen, const std::string& key) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(per_op() ? key : std::string()).second;
}

}  // namespace

void warn_narrowing(const std::string& op) {
  static std::set<std::string> seen;
  if (!first(seen, op)) return;
  if (per_op()) {
    TORCH_WARN("neuron: ", op,
               " computes float64/int64 inputs as float32/int32 and restores the result dtype "
               "(TorchNeuron's 64-bit policy; TORCHNEURON_NARROW_64BIT=0 computes in full "
               "width). Warned once per operator (TORCHNEURON_WARN_PER_OP=1).");
    return;
  }
  TORCH_WARN(
      "neuron: float64/int64 inputs are computed as float32/int32 and results restored "
      "to their dtype (TorchNeuron's 64-bit policy), first by ",
      op,
      ". Warned once per process: torch.neuron.narrowing_stats() counts each operator, "
      "TORCHNEURON_WARN_PER_OP=1 warns per operator, TORCHNEURON_NARROW_64BIT=0 "
      "computes in full width.");
}

void warn_fallback(const std::string& op) {
  static std::set<std::string> seen;
  if (!first(seen, op)) return;
  if (per_op()) {
    TORCH_WARN("neuron: operator ", op,
               " is not supported natively and runs on the CPU (inputs and results are "
               "copied). Warned once per operator (TORCHNEURON_WARN_PER_OP=1); see "
               "torch.neuron.fallback_stats().");
    return;
  }
  TORCH_WARN(
      "neuron: operators without a native kernel run on the CPU (inputs and results "
      "are copied), first ",
      op,
      ". Warned once per process: torch.neuron.fallback_stats() counts and times each "
      "operator, TORCHNEURON_WARN_PER_OP=1 warns per operator, TORCHNEURON_FALLBACK=error "
      "raises instead.");
}

}  // namespace torchneuron

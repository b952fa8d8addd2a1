// TorchNeuron's 64-bit policy in the native kernel: float64/int64 inputs compute as
// float32/int32 (TORCHNEURON_NARROW_64BIT=0 turns it off), scalars narrowed with them, and
// the signatures that have no 32-bit kernel computed at full width (counted).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "aten/device.h"
#include "aten/ivalue_tensors.h"
#include "aten/native_kernel.h"
#include "aten/stats.h"

namespace torchneuron {
namespace native {
namespace {

using torch::jit::Stack;

std::atomic<bool> g_narrow{[] {
  const char* v = std::getenv("TORCHNEURON_NARROW_64BIT");
  return !(v && std::string(v) == "0");
}()};

std::mutex& full_width_mu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::map<std::string, int64_t>& full_width_counts() {
  static auto* m = new std::map<std::string, int64_t>();
  return *m;
}

}  // namespace

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
bool wants_narrowing(const Plan& plan, const c10::FunctionSchema& s, const Stack& st, size_t base) {
  if (!narrow_64bit_enabled()) return false;
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
  // lerp requires its tensors in one dtype; narrowed, float64 `end`/`weight` beside
  // float32 passed ATen's check: full width raises it, as on the CPU.
  if (s.name() == "aten::lerp" || s.name() == "aten::lerp_") {
    std::optional<c10::ScalarType> dt;
    bool mixed = false;
    for (size_t i = 0; i < plan.num_args; ++i)
      map_tensors(st[base + i], [&](const at::Tensor& t) {
        if (t.defined() && t.device().type() == kNeuron) {
          mixed = mixed || (dt && *dt != t.scalar_type());
          dt = t.scalar_type();
        }
        return t;
      });
    if (mixed) return false;
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

void note_narrowing(const std::string& name, int64_t calls) {
  record_narrowing(name, calls);
  warn_narrowing(name);
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

}  // namespace native

bool narrow_64bit_enabled() { return native::g_narrow.load(std::memory_order_relaxed); }
void set_narrow_64bit(bool on) { native::g_narrow.store(on); }

void note_compiled_narrowing(const std::string& op, int64_t calls, bool full_width) {
  if (full_width)
    native::note_full_width(op, calls);
  else
    native::note_narrowing(op, calls);
}

std::map<std::string, int64_t> full_width_stats() {
  std::lock_guard<std::mutex> lock(native::full_width_mu());
  return native::full_width_counts();
}
void reset_full_width_stats() {
  std::lock_guard<std::mutex> lock(native::full_width_mu());
  native::full_width_counts().clear();
}

}  // namespace torchneuron

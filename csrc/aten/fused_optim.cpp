// The fused optimizer steps on `neuron`: _fused_adamw_, _fused_adam_,
// _fused_sgd_ (both the float lr and the tensor lr overloads), as
// torch.optim's fused=True calls them. ATen's CPU kernel runs over device
// memory on the current stream, so a step is bit for bit the CPU's.
//
// Why not the generic native kernel: it caches result geometry per call
// signature, and the signature holds lr, which an LR scheduler changes every
// step; with hundreds of parameters a key is tens of kilobytes, so a long run
// would fill the cache with gigabytes of keys. These ops return nothing and
// write their arguments in place, so there is no geometry to infer: the
// checks the CPU kernel makes are made here, on the host, before anything is
// queued (an error leaves parameters and state untouched).
//
// 64-bit policy: float64 parameters and state are computed as float32 and
// written back (counted, warned once), as for every native operator.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "aten/alias.h"
#include "aten/device.h"
#include "aten/ivalue_tensors.h"
#include "aten/launch.h"
#include "aten/stats.h"

namespace torchneuron {
namespace {

using c10::IValue;
using torch::jit::Stack;

std::string op_name(const c10::FunctionSchema& s) {
  return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
}

// Every tensor of the call (lists and optional tensors) on one neuron device.
c10::DeviceIndex check_devices(const c10::FunctionSchema& s, const Stack& args) {
  c10::DeviceIndex device = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    auto visit = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (t.device().is_cpu() && t.dim() == 0) return;  // a scalar (lr), as CUDA allows
      TORCH_CHECK(
          t.device().type() == kNeuron && (device == -1 || t.device().index() == device),
          "Expected all tensors to be on the same device, but found at least two "
          "devices, ",
          device == -1 ? c10::Device(kNeuron, current_device()) : c10::Device(kNeuron, device),
          " and ", t.device(), "! (when checking argument ", s.arguments()[i].name(), " in ",
          op_name(s), ")");
      device = t.device().index();
    };
    const IValue& v = args[i];
    if (v.isTensor()) visit(v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList()) visit(t);
  }
  return device == -1 ? current_device() : device;
}

// The CPU kernel's own checks, made before queuing: every non-empty list as
// long as `self`, each entry shaped like its parameter, floating dtypes.
void check_lists(const c10::FunctionSchema& s, const Stack& args) {
  const auto params = args[0].toTensorList();
  for (size_t i = 1; i < args.size(); ++i) {
    if (!args[i].isTensorList()) continue;
    const auto list = args[i].toTensorList();
    if (list.empty()) continue;  // max_exp_avg_sqs without amsgrad, momentum_buffer_list
    TORCH_CHECK(list.size() == params.size(), op_name(s), ": expected ", s.arguments()[i].name(),
                " to have ", params.size(), " tensors (one per parameter), got ", list.size());
    const bool steps = s.arguments()[i].name() == "state_steps";
    for (size_t j = 0; j < list.size(); ++j) {
      const at::Tensor p = params[j], t = list[j];
      TORCH_CHECK(steps ? t.numel() == 1 : t.sizes() == p.sizes(), op_name(s), ": ",
                  s.arguments()[i].name(), "[", j, "] has shape ", t.sizes(), ", expected ",
                  steps ? c10::IntArrayRef{} : p.sizes(), " (the shape of self[", j, "])");
    }
  }
  for (const at::Tensor& p : params)
    TORCH_CHECK(at::isFloatingType(p.scalar_type()), op_name(s),
                ": parameters must be floating point, got ", p.scalar_type());
}

bool any_double(const Stack& args) {
  for (const IValue& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() == at::kDouble)
      return true;
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList())
        if (t.scalar_type() == at::kDouble) return true;
  }
  return false;
}

void fused_step(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const auto& s = op.schema();
  const size_t n = s.arguments().size();
  Stack args(stack->end() - n, stack->end());
  torch::jit::drop(*stack, n);
  const c10::DeviceIndex device = check_devices(s, args);
  check_lists(s, args);
  const bool narrow = narrow_64bit_enabled() && any_double(args);
  const std::string name = op_name(s);
  if (narrow) {
    record_narrowing(name);
    warn_narrowing(name);
  }
  // The kernel sees the tensors as they are now (addresses, not objects).
  for (auto& a : args) a = map_tensors(a, [](const at::Tensor& t) { return launch_operand(t); });
  launch(device, name.c_str(), [op, args = std::move(args), narrow] {
    std::vector<std::pair<at::Tensor, at::Tensor>> writeback;
    Stack cpu;
    for (const IValue& a : args)
      cpu.push_back(map_tensors(a, [&](const at::Tensor& t) -> at::Tensor {
        if (!t.defined() || t.device().is_cpu()) return t;
        at::Tensor c = cpu_alias(t);
        if (narrow && c.scalar_type() == at::kDouble) {
          at::Tensor f = c.to(at::kFloat);
          writeback.emplace_back(c, f);
          return f;
        }
        return c;
      }));
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
    for (auto& [dst, src] : writeback) dst.copy_(src);
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"_fused_adamw_", "_fused_adamw_.tensor_lr", "_fused_adam_",
                           "_fused_adam_.tensor_lr", "_fused_sgd_", "_fused_sgd_.tensor_lr"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fused_step>());
}

}  // namespace
}  // namespace torchneuron

// out= overloads of natively computed operators (issue 7: 209 of them took
// the CPU fallback in the OpInfo sweep although their functional form runs
// on the device). Found, not listed: for every functional operator of
// native_ops.h, its out= overload (the same leading arguments, then one
// keyword-only written tensor per return), unless native_ops.h lists it.
//
// The kernel: (1) the same device checks as CUDA (out on the inputs' device);
// (2) the out= call on the Meta device, so that the CPU's errors for out=
// (a result dtype the out cannot hold, a wrong out dtype for ops that insist
// on one) are raised at once with the inputs and outs intact, and the outs'
// final sizes are known; (3) the functional operator on the device (its
// native kernel: narrowing, streams); (4) outs resized as ATen's resize_output
// does (with its warning when a non-empty out has the wrong shape) and the
// results copied in on the stream (a device-to-device copy, casting as out=
// does). All asynchronous.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/context.h"
#include "aten/native_ops.h"

namespace torchneuron {
namespace {

using c10::IValue;
using torch::jit::Stack;

struct OutPlan {
  c10::OperatorHandle functional;
  size_t num_in;   // leading (functional) arguments
  size_t num_out;  // trailing out= tensors
};

std::unordered_map<const void*, std::unique_ptr<OutPlan>>& plans() {
  static auto* p = new std::unordered_map<const void*, std::unique_ptr<OutPlan>>();
  return *p;
}

bool same_leading(const c10::FunctionSchema& a, const c10::FunctionSchema& b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a.arguments()[i].name() != b.arguments()[i].name() ||
        a.arguments()[i].type()->str() != b.arguments()[i].type()->str())
      return false;
  return true;
}

bool is_out_of(const c10::FunctionSchema& o, const c10::FunctionSchema& f) {
  const size_t n = f.arguments().size(), r = f.returns().size();
  if (o.arguments().size() != n + r || o.returns().size() != r || !same_leading(o, f, n))
    return false;
  for (size_t i = n; i < n + r; ++i) {
    const auto& a = o.arguments()[i];
    if (!a.kwarg_only() || !a.alias_info() || !a.alias_info()->isWrite() ||
        a.type()->kind() != c10::TypeKind::TensorType)
      return false;
  }
  return true;
}

bool functional_with_tensor_returns(const c10::FunctionSchema& s) {
  if (s.is_mutable() || s.returns().empty()) return false;
  for (const auto& r : s.returns())
    if (r.type()->kind() != c10::TypeKind::TensorType) return false;
  return true;
}

void check_device(const at::Tensor& out, c10::Device device, const std::string& name,
                  const std::string& arg) {
  TORCH_CHECK(out.device() == device,
              "Expected all tensors to be on the same device, but found at least two devices, ",
              device, " and ", out.device(), "! (when checking argument ", arg, " in ", name, ")");
}

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kNeuron) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

IValue map_meta(const IValue& v) {
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_meta(t));
    return out;
  }
  if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
    c10::List<std::optional<at::Tensor>> out;
    for (const IValue& e : v.toListRef())
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(to_meta(e.toTensor())) : std::nullopt);
    return out;
  }
  return v;
}

c10::Device input_device(const Stack& in) {
  for (const auto& v : in) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNeuron)
      return v.toTensor().device();
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList())
        if (t.defined() && t.device().type() == kNeuron) return t.device();
  }
  return c10::Device(kNeuron, current_device());
}

void out_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const OutPlan& plan = *plans().at(&op.schema());
  const auto& s = op.schema();
  const std::string name = s.name() + "." + s.overload_name();
  const size_t base = stack->size() - plan.num_in - plan.num_out;
  Stack in(stack->begin() + base, stack->begin() + base + plan.num_in);
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < plan.num_out; ++i) outs.push_back((*stack)[base + plan.num_in + i].toTensor());
  torch::jit::drop(*stack, plan.num_in + plan.num_out);

  const c10::Device device = input_device(in);
  for (size_t i = 0; i < outs.size(); ++i)
    check_device(outs[i], device, name, s.arguments()[plan.num_in + i].name());

  // The out= call on Meta: CPU-compatible errors and the outs' final sizes.
  std::vector<std::optional<std::vector<int64_t>>> sizes;  // none: no meta kernel
  {
    Stack meta;
    for (const auto& v : in) meta.push_back(map_meta(v));
    std::vector<at::Tensor> mouts;
    for (const auto& o : outs) mouts.push_back(to_meta(o));
    for (const auto& o : mouts) meta.emplace_back(o);
    bool have_meta = true;
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    } catch (const c10::NotImplementedError&) {
      have_meta = false;
    }
    for (size_t i = 0; i < outs.size(); ++i)
      sizes.push_back(have_meta ? std::optional(mouts[i].sizes().vec()) : std::nullopt);
  }

  // The functional operator on the device, below autograd and autocast (the
  // out= call already passed them).
  plan.functional.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &in);
  TORCH_INTERNAL_ASSERT(in.size() == outs.size(), name, ": unexpected number of results");
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& r = in[i].toTensor();
    TORCH_CHECK(c10::canCast(r.scalar_type(), outs[i].scalar_type()), "result type ",
                r.scalar_type(), " can't be cast to the desired output type ",
                outs[i].scalar_type());
    at::native::resize_output(outs[i], sizes[i] ? c10::IntArrayRef(*sizes[i]) : r.sizes());
    if (outs[i].numel() > 0) outs[i].copy_(r);
  }
  for (auto& o : outs) stack->emplace_back(std::move(o));
}

bool listed(const std::string& full) {
  for (const char* n : kNativeOps)
    if (full == n) return true;
  for (const char* n : kSyncNativeOps)
    if (full == n) return true;
  return false;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto& d = c10::Dispatcher::singleton();
  std::unordered_map<std::string, std::vector<c10::OperatorName>> by_name;
  for (const auto& n : d.getAllOpNames()) by_name[n.name].push_back(n);
  for (const char* entry : kNativeOps) {
    std::string full(entry);
    auto dot = full.find('.');
    auto f = d.findOp({"aten::" + full.substr(0, dot),
                       dot == std::string::npos ? "" : full.substr(dot + 1)});
    if (!f || !functional_with_tensor_returns(f->schema())) continue;
    if (!f->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        !f->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
      continue;  // not registered natively (see native_kernel.cpp)
    for (const auto& on : by_name[f->schema().name()]) {
      auto o = d.findOp(on);
      if (!o || !is_out_of(o->schema(), f->schema())) continue;
      const std::string oname = full.substr(0, dot) + "." + on.overload_name;
      if (listed(oname) || plans().count(&o->schema())) continue;
      plans()[&o->schema()] = std::make_unique<OutPlan>(
          OutPlan{*f, f->schema().arguments().size(), f->schema().returns().size()});
      m.impl(oname.c_str(), torch::CppFunction::makeFromBoxedFunction<&out_kernel>());
    }
  }
}

}  // namespace torchneuron

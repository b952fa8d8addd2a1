// Mapping the tensors held by an operator argument (a tensor, a tensor list or a
// list of optional tensors), shared by the generic native kernel and the fused
// optimizer kernel.
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>

namespace torchneuron {

// A copy of `v` with every tensor in it replaced by f(tensor); other values as they are.
template <class F>
c10::IValue map_tensors(const c10::IValue& v, F&& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(f(t));
    return out;
  }
  if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef())
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(f(e.toTensor())) : std::nullopt);
    return out;
  }
  return v;
}

}  // namespace torchneuron

#include "distributed/arguments.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "aten/alias.h"

namespace torchneuron::distributed {

std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(cpu_alias(t));
  return out;
}

std::vector<std::vector<at::Tensor>> aliases(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ls.size());
  for (const auto& l : ls) out.push_back(aliases(l));
  return out;
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<at::Tensor> out;
  for (const auto& l : ls) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::vector<at::Tensor> cat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<CommOp::Wait> waits_of(c10::intrusive_ptr<c10d::Work> w) {
  CommOp::Wait x([w] { w->wait(); });
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  try {
    fut = w->getFuture();  // Gloo's collectives have one; its send/recv do not
  } catch (const std::exception&) {
  }
  if (fut) {
    x.on_done = [w, fut](CommOp::Done done) {
      fut->addCallback(
          [done](c10::ivalue::Future& f) { done(f.hasError() ? f.exception_ptr() : nullptr); });
    };
  }
  return {x};
}

bool bytes_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!a.numel() || !b.numel()) return false;
  auto lo = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); };
  auto hi = [&](const at::Tensor& t) { return lo(t) + t.numel() * t.element_size(); };
  return lo(a) < hi(b) && lo(b) < hi(a);
}

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << t.scalar_type() << t.sizes();
  return s.str();
}

void check_tag(const char* name, int tag) {
  TORCH_CHECK(tag >= 0 && tag < kMaxUserTag, "ProcessGroupNeuron::", name, ": tag ", tag,
              " out of range [0, ", kMaxUserTag,
              ") (larger tags carry the backend's own messages)");
}

void check_reduce_op(const char* name, const c10d::ReduceOp& op,
                     const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM && op != c10d::ReduceOp::UNUSED,
              "ProcessGroupNeuron::", name,
              ": ReduceOp.PREMUL_SUM is not supported "
              "(Gloo, the transport, has SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)");
  // Gloo averages by summing, then dividing in place, which an integer
  // tensor cannot hold: CPU Gloo raises there (after the data moved); here at
  // the call. Bool: NCCL's error and type.
  if (op == c10d::ReduceOp::AVG)
    for (const auto& t : tensors) {
      if (t.scalar_type() == at::kBool)
        C10_THROW_ERROR(TypeError, "Cannot use ReduceOp.AVG with boolean inputs");
      TORCH_CHECK(at::isFloatingType(t.scalar_type()), "ProcessGroupNeuron::", name,
                  ": ReduceOp.AVG on ", t.scalar_type(),
                  " tensors: result type Float can't be cast "
                  "to the desired output type ",
                  t.scalar_type(),
                  " (as on CPU Gloo; reduce with SUM "
                  "and divide, or use a floating-point tensor)");
    }
  const bool bitwise =
      op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
  for (const auto& t : tensors)
    TORCH_CHECK(
        !bitwise || (!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type())),
        "ProcessGroupNeuron::", name, ": bitwise reductions need integer or bool tensors, got ",
        t.scalar_type());
}

// ProcessGroupGloo's GENERATE_ALL_TYPES in PyTorch 2.13.
bool gloo_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

void check_root(const char* name, int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "ProcessGroupNeuron::", name, ": invalid root rank ",
                    root, " (group of ", size, ")");
}

void check_list(const char* name, const char* what, size_t got, size_t expected) {
  TORCH_CHECK(got == expected, "ProcessGroupNeuron::", name, ": ", what, " has ", got,
              " tensors, expected ", expected, " (the group's size)");
}

void check_like(const char* name, const char* what, size_t i, const at::Tensor& t,
                const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type() && t.sizes() == ref.sizes(),
              "ProcessGroupNeuron::", name, ": ", what, " ", i, " is ", describe(t), ", expected ",
              describe(ref));
}

}  // namespace torchneuron::distributed

// Sparse, quantized and MKL-DNN tensors are not supported on neuron (as in
// TorchNeuron, which registers no sparse or quantized kernels). Every way in
// raises one NotImplementedError (the type the dispatcher raises for a
// missing backend) that names the layout and what to do:
// - creating one on neuron (sparse_coo_tensor(device=...), .to("neuron"),
//   empty(layout=...), quantized dtypes): the Sparse/SparseCsr/Quantized
//   PrivateUse1 keys' fallbacks below;
// - a dense neuron op whose CPU fallback returns one (to_sparse,
//   quantize_per_tensor, to_mkldnn): check_supported_layout, from fallback.cpp;
// - nn.Embedding(sparse=True)'s backward: embedding_sparse_backward below.
#include "aten/unsupported_layouts.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cctype>

#include "aten/ivalue_tensors.h"

namespace torchneuron {
namespace {

std::string layout_words(c10::Layout layout) {
  switch (layout) {
    case c10::kSparse:
      return "sparse COO tensors (layout torch.sparse_coo)";
    case c10::kSparseCsr:
      return "sparse CSR tensors (layout torch.sparse_csr)";
    case c10::kSparseCsc:
      return "sparse CSC tensors (layout torch.sparse_csc)";
    case c10::kSparseBsr:
      return "sparse BSR tensors (layout torch.sparse_bsr)";
    case c10::kSparseBsc:
      return "sparse BSC tensors (layout torch.sparse_bsc)";
    case c10::kMkldnn:
      return "MKL-DNN tensors (layout torch._mkldnn)";
    default:
      return "tensors of layout " + c10::str(layout);
  }
}

std::string quantized_words(std::optional<c10::ScalarType> dtype) {
  if (!dtype) return "quantized tensors";
  std::string name = c10::toString(*dtype);  // QUInt8 -> torch.quint8, Python's name
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return "quantized tensors (dtype torch." + name + ")";
}

[[noreturn]] void raise_layout(const std::string& op, c10::Layout layout) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "neuron: ", layout_words(layout), " are not supported on neuron (", op,
      "). Densify with .to_dense() before moving a tensor to neuron, or keep the module that "
      "needs it on the CPU; nn.Embedding and nn.EmbeddingBag give dense gradients with "
      "sparse=False.");
}

[[noreturn]] void raise_quantized(const std::string& op, std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", quantized_words(dtype),
                              " are not supported on neuron (", op,
                              "). Dequantize with .dequantize() before moving a tensor to neuron, "
                              "or keep the quantized module on the CPU.");
}

std::string op_name(const c10::OperatorHandle& op) {
  const auto& s = op.schema();
  return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
}

c10::TypeKind arg_kind(const c10::Argument& a) {
  auto type = a.real_type();  // ScalarType, Layout (type() says int)
  if (type->kind() == c10::TypeKind::OptionalType) type = type->containedType(0);
  return type->kind();
}

// What the call is about: its first non-strided (or quantized) tensor, else its
// layout= / dtype= argument.
struct Culprit {
  std::optional<c10::Layout> layout;
  std::optional<c10::ScalarType> qdtype;
  bool quantized = false;
};

Culprit find_culprit(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack.size() - args.size();
  Culprit c;
  for (size_t i = 0; i < args.size(); ++i) {
    map_tensors(stack[base + i], [&](const at::Tensor& t) {
      if (!t.defined() || c.layout || c.quantized) return t;
      if (t.layout() != c10::kStrided) c.layout = t.layout();
      if (t.is_quantized()) c.quantized = true, c.qdtype = t.scalar_type();
      return t;
    });
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[base + i];
    if (!v.isInt()) continue;
    const c10::TypeKind kind = arg_kind(args[i]);
    if (kind == c10::TypeKind::LayoutType && !c.layout)
      c.layout = static_cast<c10::Layout>(v.toInt());
    if (kind == c10::TypeKind::ScalarTypeType && !c.qdtype &&
        c10::isQIntType(static_cast<c10::ScalarType>(v.toInt())))
      c.qdtype = static_cast<c10::ScalarType>(v.toInt());
  }
  return c;
}

void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Culprit c = find_culprit(op, *stack);
  raise_layout(op_name(op), c.layout && *c.layout != c10::kStrided ? *c.layout : c10::kSparse);
}

void sparse_compressed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Culprit c = find_culprit(op, *stack);
  raise_layout(op_name(op), c.layout && *c.layout != c10::kStrided ? *c.layout : c10::kSparseCsr);
}

void quantized_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  raise_quantized(op_name(op), find_culprit(op, *stack).qdtype);
}

// nn.Embedding(sparse=True): its gradient would be a sparse COO tensor.
void embedding_sparse_backward(const c10::OperatorHandle& op, torch::jit::Stack*) {
  raise_layout(op_name(op) + ", the backward of nn.Embedding(sparse=True)", c10::kSparse);
}

}  // namespace

void check_supported_layout(const std::string& op, const at::Tensor& t) {
  if (!t.defined()) return;
  if (t.is_quantized()) raise_quantized(op, t.scalar_type());
  if (t.layout() != c10::kStrided) raise_layout(op, t.layout());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_compressed_fallback>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&quantized_fallback>());
}

// Composite on every backend: reached above the backend keys, at autograd's.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("embedding_sparse_backward",
         torch::CppFunction::makeFromBoxedFunction<&embedding_sparse_backward>());
}

}  // namespace torchneuron

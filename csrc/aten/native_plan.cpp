// What the native kernel learns once per operator from its schema: which arguments are
// written or exempt from narrowing, its out= and functional overloads, and its native_ops.h
// lists (sync, host indices, compute aliases).
#include <mutex>
#include <unordered_map>

#include "aten/ivalue_tensors.h"
#include "aten/native_kernel.h"
#include "aten/native_ops.h"

namespace torchneuron::native {
namespace {

bool same_alias(const c10::AliasInfo* a, const c10::AliasInfo* b) {
  return a && b && a->beforeSets() == b->beforeSets();
}

// The overloads of an operator name (aten::add -> add.Tensor, add.out, ...).
std::vector<c10::OperatorHandle> overloads_of(const std::string& name) {
  auto& d = c10::Dispatcher::singleton();
  std::vector<c10::OperatorHandle> out;
  for (const auto& n : d.getAllOpNames())
    if (n.name == name)
      if (auto h = d.findOp(n)) out.push_back(*h);
  return out;
}

bool same_leading_arguments(const c10::FunctionSchema& a, const c10::FunctionSchema& b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a.arguments()[i].name() != b.arguments()[i].name() ||
        a.arguments()[i].type()->str() != b.arguments()[i].type()->str())
      return false;
  return true;
}

}  // namespace

// The out= overload of a functional op: same arguments, then one written
// keyword-only tensor per return. Searched by signature, since the names
// are irregular (add.Tensor -> add.out, sum.dim_IntList -> sum.IntList_out,
// max.dim -> max.dim_max); a functional op computed without its out= form
// pays a host allocation and a copy of every result on the device.
std::optional<c10::OperatorHandle> find_out_variant(const c10::FunctionSchema& s) {
  if (s.returns().empty()) return std::nullopt;
  const size_t n = s.arguments().size();
  for (const auto& h : overloads_of(s.name())) {
    const auto& o = h.schema();
    if (o.arguments().size() != n + s.returns().size() || !same_leading_arguments(o, s, n))
      continue;
    bool ok = true;
    for (size_t i = n; i < o.arguments().size() && ok; ++i)
      ok = o.arguments()[i].kwarg_only() && o.arguments()[i].alias_info() &&
           o.arguments()[i].alias_info()->isWrite();
    if (ok && h.hasKernelForDispatchKey(c10::DispatchKey::CPU)) return h;
  }
  return std::nullopt;
}

namespace {

// The functional overload of an out= overload: the same leading arguments,
// one return per out= argument.
std::optional<c10::OperatorHandle> find_functional_variant(const c10::FunctionSchema& s,
                                                           size_t num_out) {
  const size_t n = s.arguments().size() - num_out;
  for (const auto& h : overloads_of(s.name())) {
    const auto& f = h.schema();
    if (f.arguments().size() != n || f.returns().size() != num_out || f.is_mutable() ||
        !same_leading_arguments(f, s, n))
      continue;
    if (h.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        h.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
      return h;
  }
  return std::nullopt;
}

}  // namespace

const Plan& plan_for(const c10::OperatorHandle& op) {
  // Leaked: queued kernels refer to their plan until they have run.
  static std::mutex* mu = new std::mutex();
  static auto* plans = new std::unordered_map<const void*, std::unique_ptr<Plan>>();
  std::lock_guard<std::mutex> lock(*mu);
  auto& slot = (*plans)[&op.schema()];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  const auto& s = op.schema();
  p->name = s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
  p->num_args = s.arguments().size();
  for (const auto& a : s.arguments()) {
    bool idx = false;
    for (const char* n : kIndexArgNames) idx = idx || a.name() == n;
    p->is_index.push_back(idx);
    if (a.alias_info() && a.alias_info()->isWrite()) {
      p->writes_args = true;
      if (a.kwarg_only()) p->num_out += 1;
    }
  }
  for (const auto& r : s.returns()) {
    int alias = -1;
    for (size_t i = 0; i < s.arguments().size(); ++i)
      if (same_alias(r.alias_info(), s.arguments()[i].alias_info())) alias = int(i);
    p->ret_alias.push_back(alias);
    if (r.type()->kind() != c10::TypeKind::TensorType) p->returns_tensors_only = false;
  }
  // Fills and draws only write self: it is their result, not an input.
  for (const char* n : kWriteOnlySelfOps)
    if (p->name == std::string("aten::") + n) p->is_index[0] = true;
  std::string base = s.name().substr(6);  // strip "aten::"
  for (const char* n : kDataMovementOps)
    if (base == n) std::fill(p->is_index.begin(), p->is_index.end(), true);
  for (const auto& ca : kComputeAliases)
    if (base == ca.op)
      p->compute_op =
          c10::Dispatcher::singleton().findOp({std::string("aten::") + ca.computed_as, ""});
  for (const char* n : kSyncNativeOps)
    if (p->name == std::string("aten::") + n) p->sync = true;
  for (const char* n : kCheckedIndexOps)
    if (p->name == std::string("aten::") + n) p->sync = true;
  for (const char* n : kHostIndexOps)
    if (p->name == std::string("aten::") + n)
      for (size_t i = 0; i < s.arguments().size(); ++i)
        if (s.arguments()[i].name() == "indices" || s.arguments()[i].name() == "index")
          p->host_indices = int(i);
  if (!p->returns_tensors_only) p->sync = true;
  bool resizing_out = false;
  for (const char* n : kResizingOutOps) resizing_out = resizing_out || base == n;
  if (!p->writes_args && !p->compute_op && !resizing_out) p->out_op = find_out_variant(s);
  if (p->num_out > 0) p->functional_op = find_functional_variant(s, p->num_out);
  slot = std::move(p);
  return *slot;
}

}  // namespace torchneuron::native

#include "aten/kernel_signatures.h"

#include <mutex>
#include <unordered_set>

namespace torchneuron {
namespace {

struct Signatures {
  std::mutex mu;
  std::unordered_set<std::string> seen;
  std::map<std::string, int64_t> first_seen;
};

Signatures& signatures() {
  static Signatures* s = new Signatures();
  return *s;
}

template <class T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_value(std::string& k, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return k.push_back('N');
    if (t.device().is_cpu() && t.dim() == 0) return k.push_back('s');  // a runtime scalar
    k.push_back('T');
    put(k, t.scalar_type());
    put(k, int64_t(t.dim()));
    for (auto d : t.sizes()) put(k, d);
    return;
  }
  if (v.isInt()) return k.push_back('i'), put(k, v.toInt());
  if (v.isBool()) return k.push_back('b'), put(k, v.toBool());
  if (v.isString()) return k.push_back('S'), k.append(v.toStringRef()), k.push_back('\0');
  if (v.isList()) {
    k.push_back('[');
    for (const c10::IValue& e : v.toListRef()) put_value(k, e);
    return k.push_back(']');
  }
  k.push_back(v.isNone() ? 'n' : '?');  // floats, generators, devices: not shapes
}

}  // namespace

void note_kernel_signature(const std::string& op, const torch::jit::Stack& st, size_t base,
                           size_t n) {
  std::string k = op;
  k.push_back('\0');
  for (size_t i = 0; i < n; ++i) put_value(k, st[base + i]);
  auto& s = signatures();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.seen.insert(std::move(k)).second) s.first_seen[op] += 1;
}

std::map<std::string, int64_t> kernel_signature_stats() {
  auto& s = signatures();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.first_seen;
}

void reset_kernel_signature_stats() {
  auto& s = signatures();
  std::lock_guard<std::mutex> lock(s.mu);
  s.first_seen.clear();
}

}  // namespace torchneuron

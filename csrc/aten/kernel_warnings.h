// Warnings of CPU kernels run for neuron: a kernel's warnings about its
// arguments (random_(0, 2**25) of float32: "to - 1 is out of bounds") come
// from the geometry probe, on the caller's thread, once per signature; the
// kernel itself runs on a stream worker, whose warnings only reach stderr.
// The probe records them, each later call of the signature gives them again
// at the call (as the CPU warns at every call), and the worker drops those.
#pragma once

#include <c10/util/Exception.h>

#include <string>
#include <vector>

namespace torchneuron {

// Records the warnings given while alive, passing each on as before.
class RecordWarnings : public c10::WarningHandler {
 public:
  RecordWarnings() : prev_(c10::WarningUtils::get_warning_handler()), guard_(this) {}
  void process(const c10::Warning& w) override {
    seen_.push_back(w);
    prev_->process(w);
  }
  std::vector<c10::Warning> take() { return std::move(seen_); }

 private:
  c10::WarningHandler* prev_;
  c10::WarningUtils::WarningHandlerGuard guard_;
  std::vector<c10::Warning> seen_;
};

// While alive, drops warnings whose message is one of `known` (already given
// at the call); passes the others on.
class DropKnownWarnings : public c10::WarningHandler {
 public:
  explicit DropKnownWarnings(const std::vector<c10::Warning>& known)
      : known_(known), prev_(c10::WarningUtils::get_warning_handler()), guard_(this) {}
  void process(const c10::Warning& w) override {
    for (const auto& k : known_)
      if (k.msg() == w.msg()) return;
    prev_->process(w);
  }

 private:
  const std::vector<c10::Warning>& known_;
  c10::WarningHandler* prev_;
  c10::WarningUtils::WarningHandlerGuard guard_;
};

}  // namespace torchneuron

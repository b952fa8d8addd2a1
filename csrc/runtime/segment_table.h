// Which device owns an address: the address ranges of all mapped segments of
// one runtime. Read on every free, written only when segments come and go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

namespace torchneuron::runtime {

class SegmentTable {
 public:
  void insert(const void* base, size_t bytes, int device);
  void erase(const void* base);
  // Device whose segment contains `ptr`, or -1.
  int find(const void* ptr) const;

 private:
  struct Range {
    uintptr_t end;
    int device;
  };
  mutable std::shared_mutex mu_;
  std::map<uintptr_t, Range> ranges_;  // keyed by base address
};

}  // namespace torchneuron::runtime

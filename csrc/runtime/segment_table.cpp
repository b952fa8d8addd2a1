#include "segment_table.h"

#include <mutex>

namespace torchneuron::runtime {

void SegmentTable::insert(const void* base, size_t bytes, int device) {
  auto b = reinterpret_cast<uintptr_t>(base);
  std::unique_lock<std::shared_mutex> lock(mu_);
  ranges_[b] = Range{b + bytes, device};
}

void SegmentTable::erase(const void* base) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  ranges_.erase(reinterpret_cast<uintptr_t>(base));
}

int SegmentTable::find(const void* ptr) const {
  auto p = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = ranges_.upper_bound(p);  // first segment starting after p
  if (it == ranges_.begin()) return -1;
  --it;
  return p < it->second.end ? it->second.device : -1;
}

}  // namespace torchneuron::runtime

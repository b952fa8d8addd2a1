// Host pages that stand in for HBM: mmap'd segments, and the process-wide
// access counter that keeps protected segments PROT_NONE while no kernel or
// host copy runs, so a stray host access faults at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchneuron::runtime {

// Maps `bytes` of zeroed memory (a whole number of pages); nullptr if the host
// refuses. With `protect`, the segment joins the protected set and starts
// PROT_NONE unless some AccessScope is open.
void* map_segment(size_t bytes, bool protect);
// Unmaps a segment from map_segment with the same `bytes` and `protect`.
void unmap_segment(void* base, size_t bytes, bool protect);

// Opens device access for its lifetime. The first open scope in the process
// makes every protected segment PROT_READ|PROT_WRITE, the last one to close
// makes them PROT_NONE again. With protect=false it does nothing at all.
class AccessScope {
 public:
  explicit AccessScope(bool protect);
  ~AccessScope();
  AccessScope(const AccessScope&) = delete;
  AccessScope& operator=(const AccessScope&) = delete;

 private:
  bool active_;
};

// mprotect calls made so far (for tests: none when protection is off).
uint64_t mprotect_calls();

}  // namespace torchneuron::runtime

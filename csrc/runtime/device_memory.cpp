#include "device_memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime.h"

namespace torchneuron::runtime {
namespace {

struct Protection {
  std::mutex mu;  // guards everything below; held across mprotect/munmap
  int open_scopes = 0;
  std::unordered_map<void*, size_t> segments;  // protected, currently mapped
  std::atomic<uint64_t> calls{0};
};

// Leaked: worker threads of the leaked runtime may use it during exit.
Protection& protection() {
  static Protection* p = new Protection;
  return *p;
}

// Caller holds protection().mu.
bool set_prot(Protection& p, void* base, size_t bytes, int prot) {
  p.calls.fetch_add(1, std::memory_order_relaxed);
  return mprotect(base, bytes, prot) == 0;
}

}  // namespace

void* map_segment(size_t bytes, bool protect) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (protect) {
    Protection& pr = protection();
    std::lock_guard<std::mutex> lock(pr.mu);
    // Created accessible while a kernel runs: that kernel may use it at once.
    if (pr.open_scopes == 0 && !set_prot(pr, p, bytes, PROT_NONE)) {
      munmap(p, bytes);
      return nullptr;
    }
    pr.segments.emplace(p, bytes);
  }
  return p;
}

void unmap_segment(void* base, size_t bytes, bool protect) {
  if (!protect) {
    munmap(base, bytes);
    return;
  }
  // Unmap under the lock: a concurrent scope change must never mprotect an
  // address range that has just been unmapped (and maybe mapped again).
  Protection& pr = protection();
  std::lock_guard<std::mutex> lock(pr.mu);
  pr.segments.erase(base);
  munmap(base, bytes);
}

AccessScope::AccessScope(bool protect) : active_(protect) {
  if (!active_) return;
  Protection& pr = protection();
  std::lock_guard<std::mutex> lock(pr.mu);
  if (pr.open_scopes == 0) {
    for (auto& [base, bytes] : pr.segments) {
      if (!set_prot(pr, base, bytes, PROT_READ | PROT_WRITE)) {
        int err = errno;
        for (auto& [b, n] : pr.segments) set_prot(pr, b, n, PROT_NONE);
        active_ = false;
        throw Error(std::string("cannot open neuron device memory for access: mprotect failed: ") +
                    std::strerror(err));
      }
    }
  }
  ++pr.open_scopes;
}

AccessScope::~AccessScope() {
  if (!active_) return;
  Protection& pr = protection();
  std::lock_guard<std::mutex> lock(pr.mu);
  if (--pr.open_scopes > 0) return;
  for (auto& [base, bytes] : pr.segments) {
    // Failing to re-protect loses only the diagnostic, never data: warn.
    if (!set_prot(pr, base, bytes, PROT_NONE))
      std::fprintf(stderr, "torchneuron: warning: mprotect(PROT_NONE) failed: %s\n",
                   std::strerror(errno));
  }
}

uint64_t mprotect_calls() { return protection().calls.load(std::memory_order_relaxed); }

}  // namespace torchneuron::runtime

// Pinned (page-locked) host memory for `neuron`: the allocator behind
// tensor.pin_memory(), torch.empty(..., pin_memory=True) and
// DataLoader(pin_memory=True), reached through the PrivateUse1 hooks
// (getPinnedMemoryAllocator / isPinnedPtr, hooks.cpp).
//
// Blocks are whole pages from mmap, locked with mlock where RLIMIT_MEMLOCK
// allows (the emulator's DMA is a memcpy, so an unlocked page copies
// correctly; pinned_host_stats() tells how many bytes are locked). As CUDA's
// CachingHostAllocator, freed blocks are kept for reuse by size; a block is
// freed only when its last user, including a queued copy that captured its
// storage, has let go of it, so reuse never races a copy in flight.
//
// What pinning buys, as on CUDA: a non_blocking host-to-device copy from a
// pinned tensor is queued without staging the bytes (the host returns at
// once and the copy overlaps host work and other streams); the caller must
// not overwrite the buffer before the copy ran (synchronize or an event).
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "aten/pinned_memory.h"

namespace torchneuron {
namespace {

struct Block {
  size_t size = 0;  // bytes mapped (whole pages)
  bool locked = false;
};

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &release, c10::Device(c10::kCPU)};
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t size = (n + page - 1) / page * page;
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
    } else {
      p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "neuron: pinned host allocation of ", n,
                       " bytes failed (mmap: out of host memory)");
      const bool locked = mlock(p, size) == 0;
      blocks_[reinterpret_cast<uintptr_t>(p)] = Block{size, locked};
      if (locked) locked_bytes_ += size;
      mapped_bytes_ += size;
    }
    return {p, p, &release, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // True when `p` lies in a live or cached pinned block.
  bool contains(const void* p) {
    if (!p) return false;
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    return a < it->first + it->second.size;
  }

  PinnedHostStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t cached = 0;
    for (const auto& [size, p] : free_) cached += size;
    return {mapped_bytes_, locked_bytes_, cached};
  }

  // Unmaps the cached (unused) blocks.
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [size, p] : free_) {
      auto b = blocks_.find(reinterpret_cast<uintptr_t>(p));
      if (b->second.locked) locked_bytes_ -= size;
      mapped_bytes_ -= size;
      blocks_.erase(b);
      munmap(p, size);
    }
    free_.clear();
  }

 private:
  static void release(void* p);
  void give_back(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto b = blocks_.find(reinterpret_cast<uintptr_t>(p));
    TORCH_INTERNAL_ASSERT(b != blocks_.end(), "neuron: freeing unknown pinned block");
    free_.emplace(b->second.size, p);
  }

  std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;  // every mapped block, by base address
  std::multimap<size_t, void*> free_;  // cached blocks, by size
  size_t mapped_bytes_ = 0, locked_bytes_ = 0;
};

PinnedHostAllocator& instance() {
  // Leaked: pinned tensors may outlive static destruction.
  static auto* a = new PinnedHostAllocator();
  return *a;
}

void PinnedHostAllocator::release(void* p) {
  if (p) instance().give_back(p);
}

}  // namespace

c10::Allocator* pinned_host_allocator() { return &instance(); }
bool is_pinned_host_ptr(const void* p) { return instance().contains(p); }
PinnedHostStats pinned_host_stats() { return instance().stats(); }
void pinned_host_empty_cache() { instance().empty_cache(); }

}  // namespace torchneuron

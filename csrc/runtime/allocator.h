// The caching HBM allocator of one logical NeuronCore. Same concepts as
// PyTorch's CUDA caching allocator: segments are mapped from the device,
// carved into blocks, and freed blocks stay cached for reuse; statistics have
// the meanings of c10's DeviceStats.
//   small pool: requests <= 1 MiB, 512 B granularity, 2 MiB segments
//   large pool: larger requests, 512 B granularity, segments rounded to 2 MiB;
//               a cached block is split when more than 1 MiB would be left
// Reserved bytes never exceed the capacity: a segment that would is retried
// once after all unused cached segments are released, then OutOfMemoryError.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "adaptive_mutex.h"
#include "runtime.h"
#include "segment_table.h"

namespace torchneuron::runtime {

class CachingAllocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t(1) << 20;  // largest small-pool block
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kLargeSegmentRound = size_t(2) << 20;

  // Segments are registered in `table` (which must outlive the allocator)
  // under `device`; with `protect` they are PROT_NONE outside access scopes.
  CachingAllocator(int device, size_t capacity, bool protect, SegmentTable& table);
  ~CachingAllocator();  // unmaps every segment, in use or not
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nullptr for 0; OutOfMemoryError past capacity (counted in num_ooms, or in
  // num_alloc_retries when !last_try: the caller tries again)
  void* allocate(size_t bytes, bool last_try = true);
  void free(void* ptr);  // Error unless ptr is an allocated block's start
  MemoryStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  void empty_cache();  // unmaps segments whose memory is all free
  size_t capacity() const { return capacity_; }
  // This process's share of the capacity (torch.neuron.set_per_process_memory_fraction):
  // reserved bytes stay within fraction * capacity; past it, OutOfMemoryError.
  void set_fraction(double fraction);  // (0, 1]
  double fraction() const;
  size_t reserved() const;
  // Memory history (Runtime::record_memory_history / memory_snapshot).
  void record_history(const MemoryHistoryOptions& options);
  MemorySnapshot snapshot() const;

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool small;  // pool
    bool allocated = false;
    size_t requested = 0;   // bytes asked for, while allocated
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    MemoryContext context = nullptr;  // of the allocation, while allocated and history is on
    bool is_split() const { return prev || next; }
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using FreeBlocks = std::set<Block*, BySizeThenAddress>;
  using Allocated = std::unordered_map<void*, Block*>;

  // All private helpers run with mu_ held.
  FreeBlocks& pool(bool small) { return small ? small_free_ : large_free_; }
  Block* take_cached(bool small, size_t size);
  Block* map_new_segment(bool small, size_t segment_bytes, std::string* why);
  void* hand_out(Block* b, size_t size, size_t requested);
  void release_cached_segments();
  // Blocks and container nodes are recycled, so an allocation and a free
  // (made on different threads: the launching one and a stream worker) do not
  // go through malloc (docs/design/eager-per-op-cost.md).
  Block* new_block(char* ptr, size_t size, bool small);
  void drop_block(Block* b);
  void insert_free(Block* b);
  void erase_free(FreeBlocks::iterator it);
  // Of each kind: a host ahead of the device allocates up to a queue's worth
  // (Stream::kMaxPendingTasks) before the worker frees them in a burst.
  static constexpr size_t kSpares = 2048;
  void update(StatArray& stat, bool small, int64_t delta);
  [[noreturn]] void out_of_memory(size_t requested, const std::string& why, bool last_try);
  void trace(MemoryEvent::Action action, const void* addr, size_t size,
             const MemoryContext& context, uint64_t device_free = 0);
  MemoryContext gather_context(MemoryContextLevel needed) const;  // outside mu_

  const int device_;
  const size_t capacity_;
  size_t limit_;           // capacity_ * fraction_ (under mu_)
  double fraction_ = 1.0;  // (under mu_)
  const bool protect_;
  SegmentTable& table_;

  mutable AdaptiveMutex mu_;
  FreeBlocks small_free_, large_free_;
  Allocated allocated_;  // by block start
  std::vector<Block*> spare_blocks_;
  std::vector<FreeBlocks::node_type> spare_free_nodes_;
  std::vector<Allocated::node_type> spare_allocated_nodes_;
  std::unordered_map<char*, size_t> segments_;  // base -> bytes
  MemoryStats stats_;
  // History: a ring of the newest max_entries_ events (when recording).
  bool recording_ = false;
  size_t max_entries_ = 0;
  MemoryContextRecorder recorder_;
  MemoryContextLevel context_level_ = MemoryContextLevel::kNever;
  std::atomic<MemoryContextLevel> context_wanted_{MemoryContextLevel::kNever};  // read without mu_
  uint32_t skip_actions_ = 0;
  std::deque<MemoryEvent> events_;
};

// "512 bytes", "1.50 KiB", "2.00 MiB", "1.25 GiB": sizes in messages.
std::string format_bytes(size_t bytes);

}  // namespace torchneuron::runtime

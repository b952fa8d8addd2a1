#include "allocator.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "device_memory.h"

namespace torchneuron::runtime {
namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string hex(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

void increase(Stat& s, int64_t n) {
  s.current += n;
  if (s.current > s.peak) s.peak = s.current;
  s.allocated += n;
}

void decrease(Stat& s, int64_t n) {
  s.current -= n;
  s.freed += n;
}

template <typename F>
void for_each_stat(MemoryStats& m, F f) {
  for (StatArray* a :
       {&m.allocation, &m.segment, &m.active, &m.inactive_split, &m.allocated_bytes,
        &m.reserved_bytes, &m.active_bytes, &m.inactive_split_bytes, &m.requested_bytes})
    for (Stat& s : *a) f(s);
}

}  // namespace

std::string format_bytes(size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

CachingAllocator::CachingAllocator(int device, size_t capacity, bool protect, SegmentTable& table)
    : device_(device), capacity_(capacity), limit_(capacity), protect_(protect), table_(table) {}

void CachingAllocator::set_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw Error("memory fraction must be in (0, 1], got " + std::to_string(fraction));
  std::lock_guard<std::mutex> lock(mu_);
  fraction_ = fraction;
  limit_ = static_cast<size_t>(fraction * static_cast<double>(capacity_));
}

double CachingAllocator::fraction() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fraction_;
}

CachingAllocator::~CachingAllocator() {
  for (auto& [base, bytes] : segments_) {
    table_.erase(base);
    unmap_segment(base, bytes, protect_);
  }
  for (FreeBlocks* p : {&small_free_, &large_free_})
    for (Block* b : *p) delete b;
  for (auto& [ptr, b] : allocated_) delete b;
  for (Block* b : spare_blocks_) delete b;
}

CachingAllocator::Block* CachingAllocator::new_block(char* ptr, size_t size, bool small) {
  if (spare_blocks_.empty()) return new Block{ptr, size, small};
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  *b = Block{ptr, size, small};
  return b;
}

void CachingAllocator::drop_block(Block* b) {
  if (spare_blocks_.size() < kSpares) {
    b->context.reset();
    spare_blocks_.push_back(b);
  } else {
    delete b;
  }
}

void CachingAllocator::insert_free(Block* b) {
  FreeBlocks& free = pool(b->small);
  if (spare_free_nodes_.empty()) {
    free.insert(b);
    return;
  }
  FreeBlocks::node_type node = std::move(spare_free_nodes_.back());
  spare_free_nodes_.pop_back();
  node.value() = b;
  free.insert(std::move(node));
}

void CachingAllocator::erase_free(FreeBlocks::iterator it) {
  FreeBlocks& free = pool((*it)->small);
  if (spare_free_nodes_.size() < kSpares)
    spare_free_nodes_.push_back(free.extract(it));
  else
    free.erase(it);
}

// A stat of the aggregate and of the block's pool move together.
void CachingAllocator::update(StatArray& stat, bool small, int64_t delta) {
  for (int t : {int(kAggregate), small ? int(kSmallPool) : int(kLargePool)}) {
    if (delta >= 0)
      increase(stat[t], delta);
    else
      decrease(stat[t], -delta);
  }
}

void* CachingAllocator::allocate(size_t bytes, bool last_try) {
  if (bytes == 0) return nullptr;
  MemoryContext context = gather_context(MemoryContextLevel::kState);
  std::lock_guard<std::mutex> lock(mu_);
  // Requests past the capacity can never fit; checking first also keeps the
  // rounding below from overflowing.
  const bool fits_at_all = bytes <= limit_;
  const size_t size = fits_at_all ? round_up(bytes, kMinBlock) : 0;
  const bool small = fits_at_all && size <= kSmallRequest;

  if (fits_at_all)
    if (Block* b = take_cached(small, size)) {
      b->context = std::move(context);
      return hand_out(b, size, bytes);
    }

  std::string why;
  const size_t segment = small ? kSmallSegment : round_up(size, kLargeSegmentRound);
  Block* b = fits_at_all ? map_new_segment(small, segment, &why) : nullptr;
  if (!b) {
    // As cudaMalloc failing in PyTorch: give back the cache and retry once.
    release_cached_segments();
    ++stats_.num_alloc_retries;
    b = fits_at_all ? map_new_segment(small, segment, &why) : nullptr;
  }
  if (!b) {
    trace(MemoryEvent::kOom, nullptr, bytes, context,
          capacity_ - std::min(capacity_, size_t(stats_.reserved_bytes[kAggregate].current)));
    out_of_memory(bytes, why, last_try);
  }
  trace(MemoryEvent::kSegmentAlloc, b->ptr, b->size, context);
  b->context = std::move(context);
  return hand_out(b, size, bytes);
}

// Best fit: the smallest cached block of the pool that holds `size`.
CachingAllocator::Block* CachingAllocator::take_cached(bool small, size_t size) {
  FreeBlocks& free = pool(small);
  Block key{nullptr, size, small};
  auto it = free.lower_bound(&key);
  if (it == free.end()) return nullptr;
  Block* b = *it;
  erase_free(it);
  return b;
}

// A new segment as one free block (not in the pool), or nullptr with `why`
// set when the host refuses; nullptr with `why` empty when over capacity.
CachingAllocator::Block* CachingAllocator::map_new_segment(bool small, size_t segment_bytes,
                                                           std::string* why) {
  const size_t reserved = size_t(stats_.reserved_bytes[kAggregate].current);
  if (reserved >= limit_ || segment_bytes > limit_ - reserved) return nullptr;
  void* base = map_segment(segment_bytes, protect_);
  if (!base) {
    *why = std::string("host mmap failed: ") + std::strerror(errno);
    return nullptr;
  }
  segments_.emplace(static_cast<char*>(base), segment_bytes);
  table_.insert(base, segment_bytes, device_);
  ++stats_.num_device_alloc;
  update(stats_.segment, small, 1);
  update(stats_.reserved_bytes, small, int64_t(segment_bytes));
  return new_block(static_cast<char*>(base), segment_bytes, small);
}

// Marks `b` allocated for `requested` bytes (rounded: `size`), splitting off
// the tail as a cached block when it is worth keeping separately.
void* CachingAllocator::hand_out(Block* b, size_t size, size_t requested) {
  const bool small = b->small;
  const bool was_split = b->is_split();
  const size_t rest = b->size - size;
  const bool split = small ? rest >= kMinBlock : rest > kSmallRequest;
  if (split) {
    Block* tail = new_block(b->ptr + size, rest, small);
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    insert_free(tail);
    if (was_split) {
      // An inactive split block shrank by `size` and stays inactive.
      update(stats_.inactive_split_bytes, small, -int64_t(size));
    } else {
      update(stats_.inactive_split, small, 1);
      update(stats_.inactive_split_bytes, small, int64_t(rest));
    }
  } else if (was_split) {
    // An inactive split block becomes active whole.
    update(stats_.inactive_split, small, -1);
    update(stats_.inactive_split_bytes, small, -int64_t(b->size));
  }
  b->allocated = true;
  b->requested = requested;
  if (spare_allocated_nodes_.empty()) {
    allocated_.emplace(b->ptr, b);
  } else {
    Allocated::node_type node = std::move(spare_allocated_nodes_.back());
    spare_allocated_nodes_.pop_back();
    node.key() = b->ptr;
    node.mapped() = b;
    allocated_.insert(std::move(node));
  }
  trace(MemoryEvent::kAlloc, b->ptr, requested, b->context);
  update(stats_.allocation, small, 1);
  update(stats_.allocated_bytes, small, int64_t(b->size));
  update(stats_.active, small, 1);
  update(stats_.active_bytes, small, int64_t(b->size));
  update(stats_.requested_bytes, small, int64_t(requested));
  return b->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  MemoryContext context = gather_context(MemoryContextLevel::kAll);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end())
    throw Error("free of " + hex(ptr) + " on NeuronCore " + std::to_string(device_) +
                ": not the start of an allocated block (double free?)");
  Block* b = it->second;
  if (spare_allocated_nodes_.size() < kSpares)
    spare_allocated_nodes_.push_back(allocated_.extract(it));
  else
    allocated_.erase(it);
  const bool small = b->small;
  const size_t size = b->size, requested = b->requested;
  // The block is free once its last kernel has run: both moments at once.
  // Sizes and contexts as c10's: the bytes requested; the free's own stack
  // (context "all"), else the allocation's.
  const MemoryContext& why = context ? context : b->context;
  trace(MemoryEvent::kFreeRequested, b->ptr, requested, why);
  trace(MemoryEvent::kFreeCompleted, b->ptr, requested, why);
  b->context.reset();
  update(stats_.allocation, small, -1);
  update(stats_.allocated_bytes, small, -int64_t(size));
  update(stats_.active, small, -1);
  update(stats_.active_bytes, small, -int64_t(size));
  update(stats_.requested_bytes, small, -int64_t(requested));

  // Merge with free neighbours; each absorbed one was an inactive split block.
  FreeBlocks& free = pool(small);
  int64_t split_blocks = 0, split_bytes = 0;
  for (Block* n : {b->prev, b->next}) {
    if (!n || n->allocated) continue;
    auto it = free.find(n);  // a free neighbour is always cached; erase(key) did not insist
    if (it != free.end()) erase_free(it);
    if (n == b->prev) {
      b->ptr = n->ptr;
      b->prev = n->prev;
      if (b->prev) b->prev->next = b;
    } else {
      b->next = n->next;
      if (b->next) b->next->prev = b;
    }
    b->size += n->size;
    split_blocks -= 1;
    split_bytes -= int64_t(n->size);
    drop_block(n);
  }
  b->allocated = false;
  b->requested = 0;
  insert_free(b);
  if (b->is_split()) {
    split_blocks += 1;
    split_bytes += int64_t(b->size);
  }
  if (split_blocks) update(stats_.inactive_split, small, split_blocks);
  if (split_bytes) update(stats_.inactive_split_bytes, small, split_bytes);
}

// Unmaps every cached block that is a whole segment.
void CachingAllocator::release_cached_segments() {
  for (bool small : {true, false}) {
    FreeBlocks& free = pool(small);
    for (auto it = free.begin(); it != free.end();) {
      Block* b = *it;
      if (b->is_split()) {
        ++it;
        continue;
      }
      it = free.erase(it);  // the rare path: no recycling
      trace(MemoryEvent::kSegmentFree, b->ptr, b->size, nullptr);
      segments_.erase(b->ptr);
      table_.erase(b->ptr);
      unmap_segment(b->ptr, b->size, protect_);
      ++stats_.num_device_free;
      update(stats_.segment, small, -1);
      update(stats_.reserved_bytes, small, -int64_t(b->size));
      delete b;
    }
  }
}

void CachingAllocator::out_of_memory(size_t requested, const std::string& why, bool last_try) {
  ++(last_try ? stats_.num_ooms : stats_.num_alloc_retries);
  const size_t allocated = size_t(stats_.allocated_bytes[kAggregate].current);
  const size_t reserved = size_t(stats_.reserved_bytes[kAggregate].current);
  std::string msg = "NeuronCore " + std::to_string(device_) + " out of memory: tried to allocate " +
                    format_bytes(requested) + "; " + format_bytes(allocated) + " allocated, " +
                    format_bytes(reserved) + " reserved, capacity " + format_bytes(capacity_) +
                    " (TORCHNEURON_HBM_GIB / NEURON_LOGICAL_NC_CONFIG)";
  if (limit_ < capacity_)
    msg += "; this process is limited to " + format_bytes(limit_) + " (" +
           std::to_string(fraction_) + " of the capacity, set_per_process_memory_fraction)";
  if (!why.empty()) msg += " [" + why + "]";
  throw OutOfMemoryError(msg, device_, requested, allocated, reserved, capacity_);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_segments();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t CachingAllocator::reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_t(stats_.reserved_bytes[kAggregate].current);
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat(stats_, [](Stat& s) { s.peak = s.current; });
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  for_each_stat(stats_, [](Stat& s) { s.allocated = s.freed = 0; });
  stats_.num_alloc_retries = stats_.num_ooms = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

const char* memory_action_name(MemoryEvent::Action a) {
  switch (a) {
    case MemoryEvent::kAlloc:
      return "alloc";
    case MemoryEvent::kFreeRequested:
      return "free_requested";
    case MemoryEvent::kFreeCompleted:
      return "free_completed";
    case MemoryEvent::kSegmentAlloc:
      return "segment_alloc";
    case MemoryEvent::kSegmentFree:
      return "segment_free";
    case MemoryEvent::kOom:
      return "oom";
  }
  return "?";
}

void CachingAllocator::record_history(const MemoryHistoryOptions& o) {
  std::lock_guard<std::mutex> lock(mu_);
  recording_ = o.enabled;
  max_entries_ = o.max_entries;
  recorder_ = o.enabled ? o.recorder : nullptr;
  context_level_ = o.enabled && o.recorder ? o.context : MemoryContextLevel::kNever;
  context_wanted_.store(context_level_);
  skip_actions_ = o.skip_actions;
  if (!o.enabled || o.clear) events_.clear();
  if (!o.enabled)
    for (auto& [ptr, b] : allocated_) b->context.reset();
  while (events_.size() > max_entries_) events_.pop_front();
}

MemoryContext CachingAllocator::gather_context(MemoryContextLevel needed) const {
  // Most calls record nothing: no lock for them (allocate and free take mu_ anyway).
  if (context_wanted_.load(std::memory_order_relaxed) < needed) return nullptr;
  MemoryContextRecorder recorder;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!recording_ || !recorder_ || context_level_ < needed) return nullptr;
    recorder = recorder_;
  }
  return recorder();
}

void CachingAllocator::trace(MemoryEvent::Action action, const void* addr, size_t size,
                             const MemoryContext& context, uint64_t device_free) {
  if (!recording_ || max_entries_ == 0 || (skip_actions_ & (1u << action))) return;
  MemoryEvent e;
  e.action = action;
  e.addr = reinterpret_cast<uint64_t>(addr);
  e.size = size;
  e.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  e.device_free = device_free;
  if (context_level_ >= MemoryContextLevel::kAlloc) e.context = context;  // kState: blocks only
  if (events_.size() >= max_entries_) events_.pop_front();
  events_.push_back(std::move(e));
}

MemorySnapshot CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemorySnapshot snap;
  // A segment's first block is the one whose ptr is the segment base; walk next.
  std::unordered_map<char*, Block*> first;
  for (const FreeBlocks* p : {&small_free_, &large_free_})
    for (Block* b : *p)
      if (!b->prev) first.emplace(b->ptr, b);
  for (auto& [ptr, b] : allocated_)
    if (!b->prev) first.emplace(b->ptr, b);
  for (auto& [base, bytes] : segments_) {
    MemorySegment seg;
    seg.addr = reinterpret_cast<uint64_t>(base);
    seg.size = bytes;
    auto it = first.find(base);
    if (it == first.end())
      throw Error("memory_snapshot: segment without a first block (allocator bug)");
    seg.small = it->second->small;
    for (Block* b = it->second; b; b = b->next) {
      MemoryBlock mb;
      mb.addr = reinterpret_cast<uint64_t>(b->ptr);
      mb.size = b->size;
      mb.allocated = b->allocated;
      mb.requested = b->allocated ? b->requested : 0;
      if (b->allocated) mb.context = b->context;
      seg.allocated += b->allocated ? b->size : 0;
      seg.requested += mb.requested;
      seg.blocks.push_back(std::move(mb));
    }
    snap.segments.push_back(std::move(seg));
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const MemorySegment& a, const MemorySegment& b) { return a.addr < b.addr; });
  snap.trace.assign(events_.begin(), events_.end());
  return snap;
}

}  // namespace torchneuron::runtime

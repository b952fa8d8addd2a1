// Memory history: alloc/free/segment events, the ring limit, contexts, and a
// snapshot whose segments and blocks agree with memory_stats.
#include <gtest/gtest.h>

#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using testing::kMiB;
using testing::small_emulator;

TEST(MemoryHistory, EventsWithContexts) {
  auto rt = small_emulator(64 * kMiB, 1);
  int counter = 0;
  rt->record_memory_history(true, 100, [&counter] { return std::make_shared<int>(++counter); });
  void* a = rt->allocate(0, 1000);         // small pool: new 2 MiB segment
  void* b = rt->allocate(0, 3 * kMiB);     // large pool: new segment
  rt->free(a);
  auto snap = rt->memory_snapshot(0);
  std::vector<std::string> actions;
  for (auto& e : snap.trace) actions.push_back(memory_action_name(e.action));
  EXPECT_EQ(actions, (std::vector<std::string>{"segment_alloc", "alloc", "segment_alloc", "alloc",
                                               "free_requested", "free_completed"}));
  EXPECT_EQ(snap.trace[1].addr, reinterpret_cast<uint64_t>(a));
  EXPECT_EQ(snap.trace[1].size, 1024u);  // rounded to 512 B
  EXPECT_EQ(*std::static_pointer_cast<int>(snap.trace[1].context), 1);
  EXPECT_EQ(snap.trace[3].addr, reinterpret_cast<uint64_t>(b));
  EXPECT_EQ(*std::static_pointer_cast<int>(snap.trace[3].context), 2);
  EXPECT_EQ(*std::static_pointer_cast<int>(snap.trace[4].context), 3);  // the free's
  EXPECT_GT(snap.trace[0].time_us, 0);
  rt->free(b);
  rt->empty_cache(0);
  snap = rt->memory_snapshot(0);
  EXPECT_STREQ(memory_action_name(snap.trace.back().action), "segment_free");
  EXPECT_TRUE(snap.segments.empty());
  rt->record_memory_history(false, 0, nullptr);
  EXPECT_TRUE(rt->memory_snapshot(0).trace.empty());
}

TEST(MemoryHistory, KeepsTheNewestMaxEntries) {
  auto rt = small_emulator(64 * kMiB, 1);
  rt->record_memory_history(true, 4, nullptr);
  for (int i = 0; i < 10; ++i) rt->free(rt->allocate(0, 4096));
  auto snap = rt->memory_snapshot(0);
  ASSERT_EQ(snap.trace.size(), 4u);
  EXPECT_STREQ(memory_action_name(snap.trace.back().action), "free_completed");
  EXPECT_EQ(snap.trace.back().context, nullptr);
  rt->record_memory_history(false, 0, nullptr);
}

TEST(MemoryHistory, OomIsRecorded) {
  auto rt = small_emulator(8 * kMiB, 1);
  rt->record_memory_history(true, 10, nullptr);
  EXPECT_THROW(rt->allocate(0, 100 * kMiB), OutOfMemoryError);
  auto snap = rt->memory_snapshot(0);
  ASSERT_FALSE(snap.trace.empty());
  EXPECT_STREQ(memory_action_name(snap.trace.back().action), "oom");
  EXPECT_EQ(snap.trace.back().size, 100 * kMiB);
  EXPECT_EQ(snap.trace.back().device_free, 8 * kMiB);
  rt->record_memory_history(false, 0, nullptr);
}

TEST(MemoryHistory, SnapshotAgreesWithStats) {
  auto rt = small_emulator(64 * kMiB, 1);
  std::vector<void*> ptrs;
  for (size_t n : {size_t(100), size_t(5000), size_t(700000), 3 * kMiB, size_t(1), 5 * kMiB + 3})
    ptrs.push_back(rt->allocate(0, n));
  rt->free(ptrs[1]);
  rt->free(ptrs[3]);
  const MemorySnapshot snap = rt->memory_snapshot(0);
  const MemoryStats st = rt->memory_stats(0);
  uint64_t reserved = 0, allocated = 0, requested = 0;
  int64_t blocks_allocated = 0;
  for (const MemorySegment& s : snap.segments) {
    reserved += s.size;
    uint64_t covered = 0, next = s.addr;
    for (const MemoryBlock& b : s.blocks) {
      EXPECT_EQ(b.addr, next);  // contiguous, by address
      next += b.size;
      covered += b.size;
      if (b.allocated) {
        allocated += b.size;
        requested += b.requested;
        ++blocks_allocated;
      }
    }
    EXPECT_EQ(covered, s.size);
  }
  EXPECT_EQ(int64_t(reserved), st.reserved_bytes[kAggregate].current);
  EXPECT_EQ(int64_t(allocated), st.allocated_bytes[kAggregate].current);
  EXPECT_EQ(int64_t(requested), st.requested_bytes[kAggregate].current);
  EXPECT_EQ(blocks_allocated, st.allocation[kAggregate].current);
  EXPECT_EQ(int64_t(snap.segments.size()), st.segment[kAggregate].current);
  EXPECT_EQ(rt->mem_get_info(0).first, 64 * kMiB - reserved);
  for (void* p : ptrs)
    if (p != ptrs[1] && p != ptrs[3]) rt->free(p);
}

}  // namespace
}  // namespace torchneuron::runtime

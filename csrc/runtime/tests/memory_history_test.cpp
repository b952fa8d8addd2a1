// Memory history: alloc/free/segment events, the ring limit, contexts, and a
// snapshot whose segments and blocks agree with memory_stats.
#include <gtest/gtest.h>

#include <map>

#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using testing::kMiB;
using testing::small_emulator;

MemoryHistoryOptions recording(size_t max_entries, MemoryContextRecorder recorder = nullptr,
                               MemoryContextLevel level = MemoryContextLevel::kAll) {
  MemoryHistoryOptions o;
  o.enabled = true;
  o.max_entries = max_entries;
  o.recorder = std::move(recorder);
  o.context = level;
  return o;
}

int id_of(const MemoryContext& c) { return c ? *std::static_pointer_cast<int>(c) : 0; }

TEST(MemoryHistory, EventsWithContexts) {
  auto rt = small_emulator(64 * kMiB, 1);
  int counter = 0;
  rt->record_memory_history(
      recording(100, [&counter] { return std::make_shared<int>(++counter); }));
  void* a = rt->allocate(0, 1000);      // small pool: new 2 MiB segment
  void* b = rt->allocate(0, 3 * kMiB);  // large pool: new segment
  rt->free(a);
  auto snap = rt->memory_snapshot(0);
  std::vector<std::string> actions;
  for (auto& e : snap.trace) actions.push_back(memory_action_name(e.action));
  EXPECT_EQ(actions, (std::vector<std::string>{"segment_alloc", "alloc", "segment_alloc", "alloc",
                                               "free_requested", "free_completed"}));
  EXPECT_EQ(snap.trace[1].addr, reinterpret_cast<uint64_t>(a));
  EXPECT_EQ(snap.trace[1].size, 1000u);  // the bytes requested, as c10's trace (the block has 1024)
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
  rt->record_memory_history(MemoryHistoryOptions{});
  EXPECT_TRUE(rt->memory_snapshot(0).trace.empty());
}

TEST(MemoryHistory, KeepsTheNewestMaxEntries) {
  auto rt = small_emulator(64 * kMiB, 1);
  rt->record_memory_history(recording(4));
  for (int i = 0; i < 10; ++i) rt->free(rt->allocate(0, 4096));
  auto snap = rt->memory_snapshot(0);
  ASSERT_EQ(snap.trace.size(), 4u);
  EXPECT_STREQ(memory_action_name(snap.trace.back().action), "free_completed");
  EXPECT_EQ(snap.trace.back().context, nullptr);
  rt->record_memory_history(MemoryHistoryOptions{});
}

TEST(MemoryHistory, OomIsRecorded) {
  auto rt = small_emulator(8 * kMiB, 1);
  rt->record_memory_history(recording(10));
  EXPECT_THROW(rt->allocate(0, 100 * kMiB), OutOfMemoryError);
  auto snap = rt->memory_snapshot(0);
  ASSERT_FALSE(snap.trace.empty());
  EXPECT_STREQ(memory_action_name(snap.trace.back().action), "oom");
  EXPECT_EQ(snap.trace.back().size, 100 * kMiB);
  EXPECT_EQ(snap.trace.back().device_free, 8 * kMiB);
  rt->record_memory_history(MemoryHistoryOptions{});
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

// torch.cuda's `context`: "state" keeps stacks on live blocks only; "alloc"
// also on alloc events, a free carrying its allocation's; "all" gathers the
// free's own. Sizes of alloc/free events are the bytes requested.
TEST(MemoryHistory, ContextLevels) {
  auto rt = small_emulator(64 * kMiB, 1);
  for (MemoryContextLevel level :
       {MemoryContextLevel::kState, MemoryContextLevel::kAlloc, MemoryContextLevel::kAll}) {
    int counter = 0;
    rt->record_memory_history(
        recording(100, [&counter] { return std::make_shared<int>(++counter); }, level));
    void* a = rt->allocate(0, 3000);
    auto snap = rt->memory_snapshot(0);
    int block_ctx = 0;
    for (auto& s : snap.segments)
      for (auto& b : s.blocks)
        if (b.addr == reinterpret_cast<uint64_t>(a)) block_ctx = id_of(b.context);
    EXPECT_EQ(block_ctx, 1);
    rt->free(a);
    snap = rt->memory_snapshot(0);
    std::map<std::string, int> ctx;
    for (auto& e : snap.trace) {
      ctx[memory_action_name(e.action)] = id_of(e.context);
      if (e.action == MemoryEvent::kAlloc || e.action == MemoryEvent::kFreeRequested)
        EXPECT_EQ(e.size, 3000u);
    }
    if (level == MemoryContextLevel::kState) {
      EXPECT_EQ(ctx["alloc"], 0);
      EXPECT_EQ(ctx["free_requested"], 0);
      EXPECT_EQ(counter, 1);  // nothing gathered at the free
    } else if (level == MemoryContextLevel::kAlloc) {
      EXPECT_EQ(ctx["alloc"], 1);
      EXPECT_EQ(ctx["free_requested"], 1);  // the allocation's
      EXPECT_EQ(counter, 1);
    } else {
      EXPECT_EQ(ctx["alloc"], 1);
      EXPECT_EQ(ctx["free_completed"], 2);  // the free's own
    }
    rt->record_memory_history(MemoryHistoryOptions{});
  }
}

TEST(MemoryHistory, SkipActionsAndClear) {
  auto rt = small_emulator(64 * kMiB, 1);
  MemoryHistoryOptions o = recording(100);
  o.skip_actions = (1u << MemoryEvent::kFreeRequested) | (1u << MemoryEvent::kSegmentAlloc);
  rt->record_memory_history(o);
  rt->free(rt->allocate(0, 4096));
  std::vector<std::string> actions;
  for (auto& e : rt->memory_snapshot(0).trace) actions.push_back(memory_action_name(e.action));
  EXPECT_EQ(actions, (std::vector<std::string>{"alloc", "free_completed"}));
  rt->record_memory_history(recording(100));  // enabling again keeps the history
  EXPECT_EQ(rt->memory_snapshot(0).trace.size(), 2u);
  o = recording(100);
  o.clear = true;
  rt->record_memory_history(o);
  EXPECT_TRUE(rt->memory_snapshot(0).trace.empty());
  rt->record_memory_history(MemoryHistoryOptions{});
}

}  // namespace
}  // namespace torchneuron::runtime

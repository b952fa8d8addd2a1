// The caching allocator through the Runtime interface: exact statistics,
// reuse, capacity, cache release, thread safety.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <thread>

#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using testing::kKiB;
using testing::kMiB;
using testing::small_emulator;

void expect_stat(const Stat& s, int64_t current, int64_t peak, int64_t allocated, int64_t freed,
                 const char* what) {
  EXPECT_EQ(s.current, current) << what << ".current";
  EXPECT_EQ(s.peak, peak) << what << ".peak";
  EXPECT_EQ(s.allocated, allocated) << what << ".allocated";
  EXPECT_EQ(s.freed, freed) << what << ".freed";
}

char* bytes(void* p) { return static_cast<char*>(p); }

TEST(Allocator, ZeroBytesAndNull) {
  auto rt = small_emulator();
  EXPECT_EQ(rt->allocate(0, 0), nullptr);
  rt->free(nullptr);
  EXPECT_EQ(rt->memory_stats(0).allocation[kAggregate].allocated, 0);
}

TEST(Allocator, SmallAllocationStats) {
  auto rt = small_emulator();
  void* p = rt->allocate(0, 1000);
  ASSERT_NE(p, nullptr);
  MemoryStats s = rt->memory_stats(0);
  for (int t : {kAggregate, kSmallPool}) {
    expect_stat(s.allocation[t], 1, 1, 1, 0, "allocation");
    expect_stat(s.active[t], 1, 1, 1, 0, "active");
    expect_stat(s.segment[t], 1, 1, 1, 0, "segment");
    expect_stat(s.allocated_bytes[t], 1024, 1024, 1024, 0, "allocated_bytes");
    expect_stat(s.active_bytes[t], 1024, 1024, 1024, 0, "active_bytes");
    expect_stat(s.requested_bytes[t], 1000, 1000, 1000, 0, "requested_bytes");
    expect_stat(s.reserved_bytes[t], 2 * kMiB, 2 * kMiB, 2 * kMiB, 0, "reserved_bytes");
    expect_stat(s.inactive_split[t], 1, 1, 1, 0, "inactive_split");
    expect_stat(s.inactive_split_bytes[t], 2 * kMiB - 1024, 2 * kMiB - 1024, 2 * kMiB - 1024, 0,
                "inactive_split_bytes");
  }
  expect_stat(s.allocation[kLargePool], 0, 0, 0, 0, "large allocation");
  expect_stat(s.reserved_bytes[kLargePool], 0, 0, 0, 0, "large reserved_bytes");
  EXPECT_EQ(s.num_device_alloc, 1);
  EXPECT_EQ(s.num_device_free, 0);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.max_split_size, -1);

  rt->free(p);
  s = rt->memory_stats(0);
  expect_stat(s.allocation[kAggregate], 0, 1, 1, 1, "allocation");
  expect_stat(s.allocated_bytes[kAggregate], 0, 1024, 1024, 1024, "allocated_bytes");
  expect_stat(s.requested_bytes[kAggregate], 0, 1000, 1000, 1000, "requested_bytes");
  expect_stat(s.reserved_bytes[kAggregate], 2 * kMiB, 2 * kMiB, 2 * kMiB, 0,
              "reserved_bytes (cached)");
  expect_stat(s.inactive_split[kAggregate], 0, 1, 1, 1, "inactive_split (merged back)");
  expect_stat(s.inactive_split_bytes[kAggregate], 0, 2 * kMiB - 1024, 2 * kMiB - 1024,
              2 * kMiB - 1024, "inactive_split_bytes");

  // The cached segment serves the next request: same address, no new segment.
  void* q = rt->allocate(0, 600);
  EXPECT_EQ(q, p);
  s = rt->memory_stats(0);
  EXPECT_EQ(s.num_device_alloc, 1);
  EXPECT_EQ(s.allocated_bytes[kAggregate].current, 1024);
  EXPECT_EQ(s.requested_bytes[kAggregate].current, 600);
  rt->free(q);
}

TEST(Allocator, SmallBlocksShareASegmentAndMerge) {
  auto rt = small_emulator();
  void* a = rt->allocate(0, 1024);
  void* b = rt->allocate(0, 1024);
  void* c = rt->allocate(0, 1024);
  EXPECT_EQ(bytes(b), bytes(a) + 1024);
  EXPECT_EQ(bytes(c), bytes(b) + 1024);
  auto split = [&] {
    MemoryStats s = rt->memory_stats(0);
    return std::make_pair(s.inactive_split[kAggregate].current,
                          s.inactive_split_bytes[kAggregate].current);
  };
  EXPECT_EQ(rt->memory_stats(0).segment[kAggregate].current, 1);
  EXPECT_EQ(split(), std::make_pair(int64_t(1), int64_t(2 * kMiB - 3 * kKiB)));  // the tail
  rt->free(a);
  EXPECT_EQ(split(), std::make_pair(int64_t(2), int64_t(2 * kMiB - 2 * kKiB)));  // a, tail
  rt->free(c);
  EXPECT_EQ(split(), std::make_pair(int64_t(2), int64_t(2 * kMiB - 1 * kKiB)));  // a, c+tail
  rt->free(b);
  EXPECT_EQ(split(), std::make_pair(int64_t(0), int64_t(0)));  // one whole free segment
  // As c10, each free applies its net change: freeing c was net zero.
  expect_stat(rt->memory_stats(0).inactive_split[kAggregate], 0, 2, 2, 2, "inactive_split");
}

TEST(Allocator, BestFitReusesTheSmallestHole) {
  auto rt = small_emulator();
  void* a = rt->allocate(0, 1 * kKiB);
  void* hole = rt->allocate(0, 4 * kKiB);
  void* c = rt->allocate(0, 1 * kKiB);
  rt->free(hole);
  void* again = rt->allocate(0, 3 * kKiB);  // fits the 4 KiB hole better than the tail
  EXPECT_EQ(again, hole);
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.inactive_split[kAggregate].current, 2);  // the 1 KiB left of the hole, and the tail
  EXPECT_EQ(s.inactive_split_bytes[kAggregate].current, int64_t(1 * kKiB + 2 * kMiB - 6 * kKiB));
  for (void* p : {a, again, c}) rt->free(p);
}

TEST(Allocator, LargePool) {
  auto rt = small_emulator();
  void* a = rt->allocate(0, 3 * kMiB);  // 4 MiB segment; 1 MiB left is not split off
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.allocated_bytes[kLargePool].current, int64_t(4 * kMiB));
  EXPECT_EQ(s.requested_bytes[kLargePool].current, int64_t(3 * kMiB));
  EXPECT_EQ(s.reserved_bytes[kLargePool].current, int64_t(4 * kMiB));
  EXPECT_EQ(s.inactive_split[kLargePool].current, 0);
  EXPECT_EQ(s.allocation[kSmallPool].current, 0);

  void* b = rt->allocate(0, 8 * kMiB);
  rt->free(b);
  void* c = rt->allocate(0, 5 * kMiB);  // the cached 8 MiB block, split
  EXPECT_EQ(c, b);
  s = rt->memory_stats(0);
  EXPECT_EQ(s.num_device_alloc, 2);
  EXPECT_EQ(s.reserved_bytes[kAggregate].current, int64_t(12 * kMiB));
  EXPECT_EQ(s.allocated_bytes[kAggregate].current, int64_t(9 * kMiB));
  EXPECT_EQ(s.inactive_split[kLargePool].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[kLargePool].current, int64_t(3 * kMiB));
  rt->free(a);
  rt->free(c);
}

TEST(Allocator, PoolBoundary) {
  auto rt = small_emulator();
  void* small = rt->allocate(0, 1 * kMiB);
  void* large = rt->allocate(0, 1 * kMiB + 1);
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.allocated_bytes[kSmallPool].current, int64_t(1 * kMiB));
  EXPECT_EQ(s.allocated_bytes[kLargePool].current, int64_t(2 * kMiB));  // whole 2 MiB segment
  EXPECT_EQ(s.requested_bytes[kLargePool].current, int64_t(1 * kMiB + 1));
  rt->free(small);
  rt->free(large);
}

TEST(Allocator, OutOfMemoryThenContinues) {
  auto rt = small_emulator(64 * kMiB);
  void* a = rt->allocate(0, 40 * kMiB);
  try {
    rt->allocate(0, 30 * kMiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_STREQ(
        e.what(),
        "NeuronCore 0 out of memory: tried to allocate 30.00 MiB; 40.00 MiB allocated, 40.00 MiB "
        "reserved, capacity 64.00 MiB (TORCHNEURON_HBM_GIB / NEURON_LOGICAL_NC_CONFIG)");
    EXPECT_EQ(e.device, 0);
    EXPECT_EQ(e.requested, 30 * kMiB);
    EXPECT_EQ(e.allocated, 40 * kMiB);
    EXPECT_EQ(e.reserved, 40 * kMiB);
    EXPECT_EQ(e.capacity, 64 * kMiB);
  }
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_LE(s.reserved_bytes[kAggregate].peak, int64_t(64 * kMiB));

  // Still usable: small requests fit, and freed memory serves the big one.
  void* small = rt->allocate(0, 100);
  ASSERT_NE(small, nullptr);
  rt->free(a);
  EXPECT_EQ(rt->allocate(0, 30 * kMiB), a);

  EXPECT_THROW(rt->allocate(0, 100 * kMiB), OutOfMemoryError);
  EXPECT_THROW(rt->allocate(0, SIZE_MAX), OutOfMemoryError);
  EXPECT_EQ(rt->memory_stats(0).num_ooms, 3);
  // The other device is unaffected.
  EXPECT_EQ(rt->memory_stats(1).num_ooms, 0);
}

TEST(Allocator, PerProcessFractionLimitsReservedBytes) {
  auto rt = small_emulator(64 * kMiB);
  EXPECT_EQ(rt->memory_fraction(0), 1.0);
  rt->set_memory_fraction(0, 0.5);  // 32 MiB
  EXPECT_EQ(rt->memory_fraction(0), 0.5);
  void* a = rt->allocate(0, 20 * kMiB);
  EXPECT_THROW(rt->allocate(0, 20 * kMiB), OutOfMemoryError);  // 40 MiB > 32 MiB
  EXPECT_THROW(rt->allocate(0, 40 * kMiB), OutOfMemoryError);  // past the limit alone
  void* b = rt->allocate(1, 40 * kMiB);                        // the other core: unlimited
  EXPECT_EQ(rt->mem_get_info(0).second, 64 * kMiB);            // cudaMemGetInfo's total
  rt->set_memory_fraction(0, 1.0);
  void* c = rt->allocate(0, 20 * kMiB);
  ASSERT_NE(c, nullptr);
  EXPECT_THROW(rt->set_memory_fraction(0, 0.0), Error);
  EXPECT_THROW(rt->set_memory_fraction(0, 1.5), Error);
  EXPECT_EQ(rt->memory_fraction(0), 1.0);
  rt->free(a);
  rt->free(b);
  rt->free(c);
}

TEST(Allocator, RetryReleasesTheCache) {
  auto rt = small_emulator(64 * kMiB);
  rt->free(rt->allocate(0, 40 * kMiB));  // cached: 40 MiB reserved
  void* b = rt->allocate(0, 50 * kMiB);  // fits only once the cache is released
  ASSERT_NE(b, nullptr);
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_device_alloc, 2);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.segment[kAggregate].current, 1);
  EXPECT_EQ(s.reserved_bytes[kAggregate].current, int64_t(50 * kMiB));
  EXPECT_EQ(s.reserved_bytes[kAggregate].peak, int64_t(50 * kMiB));
  rt->free(b);
}

TEST(Allocator, EmptyCacheReleasesOnlyFreeSegments) {
  auto rt = small_emulator(64 * kMiB);
  void* a = rt->allocate(0, 1024);
  void* b = rt->allocate(0, 1024);
  void* c = rt->allocate(0, 4 * kMiB);
  rt->free(a);
  rt->free(c);
  EXPECT_EQ(rt->memory_stats(0).reserved_bytes[kAggregate].current, int64_t(6 * kMiB));
  EXPECT_EQ(rt->mem_get_info(0), std::make_pair(58 * kMiB, 64 * kMiB));
  rt->empty_cache(0);
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.reserved_bytes[kAggregate].current, int64_t(2 * kMiB));  // b keeps its segment
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(rt->device_of(c), -1);
  rt->free(b);
  rt->empty_cache(0);
  s = rt->memory_stats(0);
  EXPECT_EQ(s.reserved_bytes[kAggregate].current, 0);
  EXPECT_EQ(s.segment[kAggregate].current, 0);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(rt->mem_get_info(0), std::make_pair(64 * kMiB, 64 * kMiB));
}

TEST(Allocator, PeakAndAccumulatedReset) {
  auto rt = small_emulator(64 * kMiB);
  void* a = rt->allocate(0, 10 * kMiB);
  void* b = rt->allocate(0, 6 * kMiB);
  rt->free(a);
  rt->free(b);
  MemoryStats s = rt->memory_stats(0);
  expect_stat(s.allocated_bytes[kAggregate], 0, 16 * kMiB, 16 * kMiB, 16 * kMiB, "allocated_bytes");

  rt->reset_peak_stats(0);
  s = rt->memory_stats(0);
  expect_stat(s.allocated_bytes[kAggregate], 0, 0, 16 * kMiB, 16 * kMiB,
              "allocated_bytes after peak reset");
  expect_stat(s.reserved_bytes[kAggregate], 16 * kMiB, 16 * kMiB, 16 * kMiB, 0, "reserved_bytes");

  rt->reset_accumulated_stats(0);
  s = rt->memory_stats(0);
  expect_stat(s.allocated_bytes[kAggregate], 0, 0, 0, 0, "allocated_bytes after accumulated reset");
  expect_stat(s.reserved_bytes[kAggregate], 16 * kMiB, 16 * kMiB, 0, 0, "reserved_bytes");
  EXPECT_EQ(s.num_device_alloc, 0);

  void* c = rt->allocate(0, 2 * kMiB);
  s = rt->memory_stats(0);
  expect_stat(s.allocated_bytes[kAggregate], int64_t(2 * kMiB), int64_t(2 * kMiB),
              int64_t(2 * kMiB), 0, "allocated_bytes");
  rt->free(c);
}

TEST(Allocator, DeviceOfAndBadFrees) {
  auto rt = small_emulator();
  void* p = rt->allocate(1, 4096);
  int on_stack = 0;
  EXPECT_EQ(rt->device_of(p), 1);
  EXPECT_EQ(rt->device_of(bytes(p) + 100), 1);
  EXPECT_EQ(rt->device_of(&on_stack), -1);
  EXPECT_EQ(rt->device_of(nullptr), -1);
  EXPECT_THROW(rt->free(&on_stack), Error);
  EXPECT_THROW(rt->free(bytes(p) + 512), Error);
  rt->free(p);
  try {
    rt->free(p);
    FAIL() << "double free accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
}

TEST(Allocator, BlocksDoNotOverlap) {
  auto rt = small_emulator(256 * kMiB);
  std::vector<std::pair<unsigned char*, size_t>> blocks;
  const size_t sizes[] = {1,          511,  512,      513,      4000,
                          200 * kKiB, kMiB, kMiB + 1, 3 * kMiB, 7 * kMiB + 5};
  for (int round = 0; round < 3; ++round)
    for (size_t n : sizes) blocks.emplace_back(static_cast<unsigned char*>(rt->allocate(0, n)), n);
  for (size_t i = 0; i < blocks.size(); ++i) std::memset(blocks[i].first, int(i), blocks[i].second);
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t k = 0; k < blocks[i].second; k += 97)
      ASSERT_EQ(blocks[i].first[k], (unsigned char)i);
  for (auto& b : blocks) rt->free(b.first);
  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.allocated_bytes[kAggregate].current, 0);
  EXPECT_EQ(s.inactive_split[kAggregate].current, 0);
}

TEST(Allocator, ConcurrentAllocateAndFree) {
  auto rt = small_emulator(256 * kMiB);
  const size_t sizes[] = {100, 5000, 700 * kKiB, 1536 * kKiB, 3 * kMiB};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<void*> live;
      for (int i = 0; i < 2000; ++i) {
        size_t n = sizes[rng() % 5];
        char* p = static_cast<char*>(rt->allocate(0, n));
        p[0] = p[n - 1] = char(t);
        live.push_back(p);
        if (live.size() > 8) {
          size_t k = rng() % live.size();
          rt->free(live[k]);
          live.erase(live.begin() + long(k));
        }
      }
      for (void* p : live) rt->free(p);
    });
  }
  // Meanwhile: blocks allocated here, freed by other threads.
  std::vector<void*> handoff;
  for (int i = 0; i < 4000; ++i) handoff.push_back(rt->allocate(0, 64 + size_t(i % 7) * 512));
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = size_t(t); i < handoff.size(); i += 4) rt->free(handoff[i]);
    });
  for (auto& th : threads) th.join();

  MemoryStats s = rt->memory_stats(0);
  EXPECT_EQ(s.allocation[kAggregate].current, 0);
  EXPECT_EQ(s.allocation[kAggregate].allocated, 4 * 2000 + 4000);
  EXPECT_EQ(s.allocation[kAggregate].freed, 4 * 2000 + 4000);
  EXPECT_EQ(s.allocated_bytes[kAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kAggregate].current, 0);
  EXPECT_EQ(s.inactive_split[kAggregate].current, 0);
  EXPECT_EQ(s.inactive_split_bytes[kAggregate].current, 0);
  EXPECT_LE(s.reserved_bytes[kAggregate].peak, int64_t(256 * kMiB));
  // Blocks and nodes are recycled (allocator.h): after the churn every
  // segment is still one free block covering it, merged from its pieces.
  MemorySnapshot snap = rt->memory_snapshot(0);
  ASSERT_FALSE(snap.segments.empty());
  for (const MemorySegment& seg : snap.segments) {
    ASSERT_EQ(seg.blocks.size(), 1u) << "segment at " << seg.addr;
    EXPECT_EQ(seg.blocks[0].addr, seg.addr);
    EXPECT_EQ(seg.blocks[0].size, seg.size);
    EXPECT_FALSE(seg.blocks[0].allocated);
  }
  rt->empty_cache(0);
  EXPECT_EQ(rt->memory_stats(0).reserved_bytes[kAggregate].current, 0);
}

}  // namespace
}  // namespace torchneuron::runtime

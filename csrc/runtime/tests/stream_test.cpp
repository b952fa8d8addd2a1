// Streams: order, asynchrony, error reporting, blocking mode, the pool.
#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <stdexcept>
#include <thread>

#include "runtime/stream.h"
#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using namespace std::chrono_literals;
using testing::Gate;
using testing::small_emulator;

// The AsyncError's message from `f`, or "" if none was thrown.
std::string async_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const AsyncError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Stream, RunsInOrderOnAWorkerThread) {
  auto rt = small_emulator();
  std::vector<int> order;  // touched only by the worker until synchronize
  std::thread::id worker;
  for (int i = 0; i < 200; ++i)
    rt->launch(0, 0, "append", [&, i] {
      order.push_back(i);
      worker = std::this_thread::get_id();
    });
  rt->synchronize_stream(0, 0);
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_EQ(rt->counters(0).kernels_launched, 200);
  EXPECT_EQ(rt->counters(1).kernels_launched, 0);
}

TEST(Stream, LaunchReturnsBeforeTheKernelFinishes) {
  auto rt = small_emulator();
  Gate gate;
  std::atomic<bool> done{false};
  rt->launch(0, 0, "slow", [&] {
    gate.wait();
    done = true;
  });
  EXPECT_FALSE(done);
  EXPECT_FALSE(rt->query_stream(0, 0));
  gate.open();
  rt->synchronize_stream(0, 0);
  EXPECT_TRUE(done);
  EXPECT_TRUE(rt->query_stream(0, 0));
}

TEST(Stream, FullQueueMakesTheHostWait) {
  auto rt = small_emulator();
  Gate gate;
  rt->launch(0, 0, "blocked", [&] { gate.wait(); });
  std::atomic<int> queued{0};
  std::thread host([&] {
    for (uint64_t i = 0; i < Stream::kMaxPendingTasks + 8; ++i) {
      rt->launch(0, 0, "noop", [] {});
      queued.fetch_add(1);
    }
  });
  std::this_thread::sleep_for(100ms);
  // The blocked kernel holds one slot: the host stops at the bound.
  EXPECT_EQ(queued.load(), int(Stream::kMaxPendingTasks) - 1);
  gate.open();
  host.join();
  rt->synchronize_stream(0, 0);
  EXPECT_EQ(queued.load(), int(Stream::kMaxPendingTasks) + 8);
}

// A counter of permits each task takes one of before it finishes.
class Permits {
 public:
  void grant(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    n_ += n;
    cv_.notify_all();
  }
  void take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 20s, [&] { return n_ > 0; });
    --n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

TEST(Stream, FullQueueWaitsForHalfOfIt) {
  // A host that found the queue full goes on when half of it has run, not at
  // the first free slot: it sleeps and wakes once per half queue.
  auto rt = small_emulator();
  Permits permits;
  constexpr int kMax = int(Stream::kMaxPendingTasks);
  for (int i = 0; i < kMax; ++i) rt->launch(0, 0, "permit", [&] { permits.take(); });
  std::atomic<bool> past{false};
  std::thread host([&] {
    rt->launch(0, 0, "noop", [] {});
    past = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(past.load()) << "before any";
  permits.grant(kMax / 2 - 1);  // one task short of half
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(past.load());
  permits.grant(1);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(past.load());
  permits.grant(kMax);
  host.join();
  rt->synchronize_stream(0, 0);
}

TEST(Stream, WaitersForDifferentPointsAllWake) {
  // Threads sleeping for different points each wake when theirs is reached
  // (the worker wakes sleepers only at the smallest point one waits for).
  auto rt = small_emulator();
  Permits permits;
  std::atomic<int> ran{0};
  std::vector<EventId> events;
  for (int w = 0; w < 4; ++w) {
    for (int i = 0; i < 10; ++i)
      rt->launch(0, 0, "permit", [&] {
        permits.take();
        ++ran;
      });
    events.push_back(rt->create_event(0, false));
    rt->record_event(events.back(), 0, 0);
  }
  std::vector<int> seen(4, -1);
  std::vector<std::thread> waiters;
  for (int w = 3; w >= 0; --w)  // the latest point first
    waiters.emplace_back([&, w] {
      rt->synchronize_event(events[size_t(w)]);
      seen[size_t(w)] = ran.load();
    });
  std::this_thread::sleep_for(50ms);  // all asleep
  for (int i = 0; i < 40; ++i) {
    permits.grant(1);
    if (i % 7 == 0) std::this_thread::yield();
  }
  for (auto& t : waiters) t.join();
  for (int w = 0; w < 4; ++w) EXPECT_GE(seen[size_t(w)], 10 * (w + 1)) << "waiter " << w;
  rt->synchronize_stream(0, 0);
  for (EventId e : events) rt->destroy_event(e);
}

TEST(Stream, UnusedStreamsAreIdle) {
  auto rt = small_emulator();
  EXPECT_TRUE(rt->query_stream(0, 0));
  EXPECT_TRUE(rt->query_stream(1, kMaxStreamId));
  rt->synchronize_stream(0, 3);
  rt->synchronize_device(1);
  EXPECT_EQ(rt->counters(0).kernels_launched, 0);
}

TEST(Stream, AsyncErrorIsRethrownOnceAtSynchronize) {
  auto rt = small_emulator();
  std::atomic<bool> later_ran{false};
  rt->launch(0, 0, "fine", [] {});
  rt->launch(0, 0, "bad_kernel", [] { throw std::runtime_error("boom"); });
  rt->launch(0, 0, "later", [&] { later_ran = true; });
  rt->launch(0, 0, "also_bad", [] { throw std::runtime_error("second"); });

  std::string msg = async_error_of([&] { rt->synchronize_stream(0, 0); });
  EXPECT_TRUE(contains(msg, "bad_kernel")) << msg;
  EXPECT_TRUE(contains(msg, "boom")) << msg;
  EXPECT_FALSE(contains(msg, "second")) << msg;  // the first error only
  EXPECT_TRUE(later_ran);
  EXPECT_EQ(async_error_of([&] { rt->synchronize_stream(0, 0); }), "");  // cleared
  Counters c = rt->counters(0);
  EXPECT_EQ(c.kernels_launched, 4);
  EXPECT_EQ(c.kernels_failed, 2);

  // The device stays usable.
  std::atomic<int> x{0};
  rt->launch(0, 0, "after", [&] { x = 7; });
  rt->synchronize_stream(0, 0);
  EXPECT_EQ(x, 7);
}

TEST(Stream, SynchronizeDeviceReportsEveryStream) {
  auto rt = small_emulator();
  StreamId s = rt->create_stream(0, 0);
  rt->launch(0, s, "side_kernel", [] { throw std::logic_error("bad index"); });
  rt->synchronize_stream(0, 0);  // another stream's error is not reported here
  std::string msg = async_error_of([&] { rt->synchronize_device(0); });
  EXPECT_TRUE(contains(msg, "side_kernel")) << msg;
  EXPECT_TRUE(contains(msg, "bad index")) << msg;
  EXPECT_TRUE(contains(msg, "stream " + std::to_string(s))) << msg;
  EXPECT_EQ(async_error_of([&] { rt->synchronize_device(0); }), "");

  rt->launch(0, 0, "one", [] { throw std::runtime_error("1"); });
  rt->launch(0, s, "two", [] { throw std::runtime_error("2"); });
  msg = async_error_of([&] { rt->synchronize_device(0); });
  EXPECT_TRUE(contains(msg, "'one'")) << msg;
  EXPECT_TRUE(contains(msg, "and 1 more failed stream")) << msg;
  EXPECT_EQ(async_error_of([&] { rt->synchronize_stream(0, s); }), "");  // all cleared
}

TEST(Stream, NonStandardException) {
  auto rt = small_emulator();
  rt->launch(0, 0, "throws_int", [] { throw 42; });
  std::string msg = async_error_of([&] { rt->synchronize_stream(0, 0); });
  EXPECT_TRUE(contains(msg, "throws_int")) << msg;
  EXPECT_TRUE(contains(msg, "unknown exception")) << msg;
}

TEST(Stream, LaunchBlocking) {
  auto rt = small_emulator(testing::kMiB * 64, 1, /*blocking=*/true);
  bool done = false;
  rt->launch(0, 0, "sleepy", [&] {
    std::this_thread::sleep_for(30ms);
    done = true;
  });
  EXPECT_TRUE(done);
  EXPECT_TRUE(rt->query_stream(0, 0));

  std::string msg = async_error_of(
      [&] { rt->launch(0, 0, "bad_kernel", [] { throw std::runtime_error("boom"); }); });
  EXPECT_TRUE(contains(msg, "bad_kernel")) << msg;
  EXPECT_TRUE(contains(msg, "boom")) << msg;
  EXPECT_EQ(async_error_of([&] { rt->synchronize_device(0); }), "");  // already reported
  EXPECT_EQ(rt->counters(0).kernels_failed, 1);
}

TEST(Stream, PoolIdsRoundRobin) {
  auto rt = small_emulator();
  for (int round = 0; round < 2; ++round)
    for (StreamId want = 1; want <= kStreamsPerPool; ++want) {
      StreamId id = rt->create_stream(0, 0);
      EXPECT_EQ(id, want);
      EXPECT_EQ(stream_priority(id), 0);
    }
  for (StreamId want = kStreamsPerPool + 1; want <= kMaxStreamId; ++want) {
    StreamId id = rt->create_stream(0, -1);
    EXPECT_EQ(id, want);
    EXPECT_EQ(stream_priority(id), -1);
  }
  EXPECT_EQ(rt->create_stream(0, -1), kStreamsPerPool + 1);
  EXPECT_EQ(rt->create_stream(1, 0), 1);  // each device has its own pool
  EXPECT_EQ(stream_priority(kDefaultStream), 0);
}

TEST(Stream, StreamsRunConcurrently) {
  auto rt = small_emulator();
  StreamId a = rt->create_stream(0, 0), b = rt->create_stream(0, 0);
  ASSERT_NE(a, b);
  Gate gate;
  rt->launch(0, a, "blocked", [&] { gate.wait(); });
  std::atomic<bool> b_ran{false};
  rt->launch(0, b, "free", [&] { b_ran = true; });
  rt->synchronize_stream(0, b);  // returns while stream a is still blocked
  EXPECT_TRUE(b_ran);
  EXPECT_FALSE(rt->query_stream(0, a));
  gate.open();
  rt->synchronize_device(0);
  EXPECT_TRUE(rt->query_stream(0, a));
}

TEST(Stream, InvalidArguments) {
  auto rt = small_emulator();
  auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of([&] { rt->launch(7, 0, "k", [] {}); }),
            "invalid neuron device index 7 (2 visible NeuronCores)");
  EXPECT_EQ(error_of([&] { rt->synchronize_device(2); }),
            "invalid neuron device index 2 (2 visible NeuronCores)");
  EXPECT_EQ(error_of([&] { rt->launch(0, 17, "k", [] {}); }),
            "invalid neuron stream id 17 on device 0 (valid ids are 0-16)");
  EXPECT_TRUE(contains(error_of([&] { rt->query_stream(0, -1); }), "invalid neuron stream id -1"));
  EXPECT_TRUE(contains(error_of([&] { rt->launch(0, 0, "empty", nullptr); }),
                       "'empty' without a function"));
}

TEST(Stream, ClosuresAreDestroyedOnTheWorkerBeforeSynchronizeReturns) {
  auto rt = small_emulator();
  struct Probe {
    std::thread::id* destroyed_on;
    ~Probe() { *destroyed_on = std::this_thread::get_id(); }
  };
  std::thread::id ran_on, destroyed_on;
  // The closure holds the only reference to device memory, as kernels do.
  std::shared_ptr<void> memory(rt->allocate(0, 4096), [&](void* p) { rt->free(p); });
  std::shared_ptr<Probe> probe(new Probe{&destroyed_on});
  Gate gate;  // keeps the kernel from finishing before our references are gone
  rt->launch(0, 0, "holder", [&ran_on, &gate, probe, memory] {
    gate.wait();
    ran_on = std::this_thread::get_id();
  });
  probe.reset();
  memory.reset();
  EXPECT_EQ(rt->memory_stats(0).allocation[kAggregate].current, 1);
  gate.open();
  rt->synchronize_stream(0, 0);
  EXPECT_EQ(destroyed_on, ran_on);
  EXPECT_NE(destroyed_on, std::this_thread::get_id());
  EXPECT_EQ(rt->memory_stats(0).allocation[kAggregate].current, 0);
}

TEST(Stream, WaitingForItsOwnStreamFailsInsteadOfHanging) {
  auto rt = small_emulator();
  Runtime* r = rt.get();
  rt->launch(0, 0, "self_sync", [r] { r->synchronize_stream(0, 0); });
  std::string msg = async_error_of([&] { rt->synchronize_stream(0, 0); });
  EXPECT_TRUE(contains(msg, "self_sync")) << msg;
  EXPECT_TRUE(contains(msg, "waited for its own stream")) << msg;
}

TEST(Stream, DestructionRunsQueuedWork) {
  std::atomic<int> ran{0};
  {
    auto rt = small_emulator();
    for (int i = 0; i < 50; ++i)
      rt->launch(i % 2, 0, "count", [&] {
        std::this_thread::sleep_for(100us);
        ++ran;
      });
  }
  EXPECT_EQ(ran, 50);
}

// Kernel CPU time, while counted: a kernel that computes adds its CPU time; a
// kernel that sleeps (as a preempted one waits) adds almost none; nothing is
// counted while counting is off.
TEST(Stream, KernelCpuTimeCountsComputeNotWaiting) {
  auto rt = small_emulator();
  auto thread_cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  };
  auto spin = [&](std::atomic<int64_t>& spun) {
    return [&] {
      const int64_t start = thread_cpu_ns();
      while (thread_cpu_ns() - start < 5000000) {
      }
      spun += thread_cpu_ns() - start;
    };
  };
  std::atomic<int64_t> uncounted{0}, spun{0};
  for (int i = 0; i < 3; ++i) rt->launch(0, 0, "spin", spin(uncounted));
  rt->synchronize_device(0);
  EXPECT_EQ(rt->counters(0).kernel_cpu_ns, 0);  // off by default
  const bool before = rt->set_count_kernel_cpu(true);
  EXPECT_FALSE(before);
  for (int i = 0; i < 5; ++i) rt->launch(0, 0, "sleep", [] { std::this_thread::sleep_for(20ms); });
  rt->synchronize_device(0);
  const int64_t c1 = rt->counters(0).kernel_cpu_ns;
  EXPECT_LT(c1, 20000000);  // 100 ms asleep: well under 20 ms of CPU
  for (int i = 0; i < 5; ++i) rt->launch(0, 0, "spin", spin(spun));
  rt->synchronize_device(0);
  const int64_t c2 = rt->counters(0).kernel_cpu_ns;
  EXPECT_GE(c2 - c1, spun.load());
  EXPECT_LT(c2 - c1, spun.load() + 20000000);
  EXPECT_TRUE(rt->set_count_kernel_cpu(false));
  rt->launch(0, 0, "spin", spin(uncounted));
  rt->synchronize_device(0);
  EXPECT_EQ(rt->counters(0).kernel_cpu_ns, c2);
}

}  // namespace
}  // namespace torchneuron::runtime

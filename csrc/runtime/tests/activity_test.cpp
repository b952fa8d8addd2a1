// Activity tracing: per-stream start/end, kinds and bytes, correlation ids,
// order on a stream, the busy-time counter, nothing recorded while off.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/activity.h"
#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using namespace std::chrono_literals;
using testing::small_emulator;

std::vector<Activity> of_device(const std::vector<Activity>& all, int device) {
  std::vector<Activity> out;
  for (const Activity& a : all)
    if (a.device == device) out.push_back(a);
  return out;
}

TEST(Activity, NothingRecordedWhileOff) {
  auto rt = small_emulator();
  activity::enable(false);
  activity::drain();
  for (int i = 0; i < 10; ++i) rt->launch(0, 0, "k", [] {});
  rt->synchronize_device(0);
  EXPECT_TRUE(activity::drain().empty());
}

TEST(Activity, KernelsOnTheirStreamsInOrderWithTimes) {
  auto rt = small_emulator();
  const StreamId s1 = rt->create_stream(0, 0);
  activity::enable(true);
  const int64_t before = activity::now_ns();
  for (int i = 0; i < 5; ++i) {
    rt->launch(0, 0, "sleep_a", [] { std::this_thread::sleep_for(2ms); });
    rt->launch(0, s1, "sleep_b", [] { std::this_thread::sleep_for(1ms); });
  }
  rt->synchronize_device(0);
  const int64_t after = activity::now_ns();
  auto acts = of_device(activity::drain(), 0);
  activity::enable(false);
  ASSERT_EQ(acts.size(), 10u);
  int64_t last_end[2] = {0, 0};
  uint64_t last_seq[2] = {0, 0};
  for (const Activity& a : acts) {
    const int i = a.stream == 0 ? 0 : 1;
    EXPECT_EQ(a.stream, i == 0 ? 0 : s1);
    EXPECT_STREQ(a.name, i == 0 ? "sleep_a" : "sleep_b");
    EXPECT_EQ(a.kind, ActivityKind::kKernel);
    EXPECT_GE(a.start_ns, before);
    EXPECT_LE(a.end_ns, after);
    EXPECT_GE(a.end_ns - a.start_ns, (i == 0 ? 2 : 1) * 1000000);
    // In order on a stream, never overlapping.
    EXPECT_GE(a.start_ns, last_end[i]);
    EXPECT_GT(a.sequence, last_seq[i]);
    last_end[i] = a.end_ns;
    last_seq[i] = a.sequence;
  }
}

TEST(Activity, ScopeLabelsKindAndBytesAndCorrelation) {
  auto rt = small_emulator();
  activity::enable(true);
  activity::push_correlation_id(41);
  {
    ActivityScope copy(ActivityKind::kMemcpyHtoD, 4096);
    rt->launch(0, 0, "copy_h2d", [] {});
    {
      ActivityScope graph(ActivityKind::kGraph);
      rt->launch(0, 0, "graph", [] {});
    }
  }
  activity::pop_correlation_id();
  rt->launch(0, 0, "plain", [] {});
  const int64_t t = activity::now_ns();
  activity::push_correlation_id(7);
  activity::record_host(ActivityKind::kFallback, "aten::foo", 0, t, t + 10);
  activity::pop_correlation_id();
  rt->synchronize_device(0);
  auto acts = of_device(activity::drain(), 0);
  activity::enable(false);
  ASSERT_EQ(acts.size(), 4u);
  // The host activity may be recorded before the stream's: find them by kind.
  int kernels = 0, fallbacks = 0, copies = 0, graphs = 0;
  for (const Activity& a : acts) {
    if (a.kind == ActivityKind::kMemcpyHtoD) {
      ++copies;
      EXPECT_EQ(a.bytes, 4096u);
      EXPECT_EQ(a.correlation_id, 41u);
    }
    if (a.kind == ActivityKind::kGraph) {
      ++graphs;
      EXPECT_EQ(a.bytes, 0u);
      EXPECT_EQ(a.correlation_id, 41u);
    }
    if (a.kind == ActivityKind::kKernel) {
      ++kernels;
      EXPECT_EQ(a.correlation_id, 0u);
      EXPECT_STREQ(a.name, "plain");
    }
    if (a.kind == ActivityKind::kFallback) {
      ++fallbacks;
      EXPECT_EQ(a.stream, kHostStream);
      EXPECT_EQ(a.correlation_id, 7u);
      EXPECT_EQ(a.end_ns - a.start_ns, 10);
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(fallbacks, 1);
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(graphs, 1);
  EXPECT_EQ(ActivityScope::current_kind(), ActivityKind::kKernel);
}

TEST(Activity, BusyCounterMatchesRecordedDurations) {
  auto rt = small_emulator();
  const Counters c0 = rt->counters(1);
  activity::enable(true);
  for (int i = 0; i < 20; ++i) rt->launch(1, 0, "spin", [] { std::this_thread::sleep_for(200us); });
  rt->synchronize_device(1);
  auto acts = of_device(activity::drain(), 1);
  activity::enable(false);
  const Counters c1 = rt->counters(1);
  ASSERT_EQ(int64_t(acts.size()), c1.kernels_launched - c0.kernels_launched);
  int64_t traced = 0;
  for (const Activity& a : acts) traced += a.end_ns - a.start_ns;
  const int64_t busy = c1.busy_ns - c0.busy_ns;
  EXPECT_GE(busy, 20 * 200000);
  // Two clocks read around the same work: within 5% + 50 us.
  EXPECT_NEAR(double(traced), double(busy), 0.05 * double(busy) + 50000.0);
}

TEST(Activity, ResetDropsStaleCorrelationIds) {
  activity::push_correlation_id(5);
  activity::push_correlation_id(6);
  EXPECT_EQ(activity::current_correlation_id(), 6u);
  activity::reset_correlation_ids();
  EXPECT_EQ(activity::current_correlation_id(), 0u);
  activity::pop_correlation_id();  // the stale pop of an id pushed before: harmless
  activity::push_correlation_id(9);
  EXPECT_EQ(activity::current_correlation_id(), 9u);
  activity::pop_correlation_id();
  EXPECT_EQ(activity::current_correlation_id(), 0u);
}

TEST(Activity, FailedKernelIsMarked) {
  auto rt = small_emulator();
  activity::enable(true);
  rt->launch(0, 0, "boom", [] { throw std::runtime_error("x"); });
  EXPECT_THROW(rt->synchronize_stream(0, 0), AsyncError);
  auto acts = of_device(activity::drain(), 0);
  activity::enable(false);
  ASSERT_EQ(acts.size(), 1u);
  EXPECT_TRUE(acts[0].failed);
}

}  // namespace
}  // namespace torchneuron::runtime

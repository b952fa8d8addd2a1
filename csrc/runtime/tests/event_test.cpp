// Events: recording, querying, timing, cross-stream waits, misuse.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using namespace std::chrono_literals;
using testing::Gate;
using testing::small_emulator;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Event, NeverRecordedIsComplete) {
  auto rt = small_emulator();
  EventId e = rt->create_event(0, false);
  EXPECT_TRUE(rt->query_event(e));
  rt->synchronize_event(e);
  rt->stream_wait_event(0, 0, e);  // no-op
  EXPECT_TRUE(rt->query_stream(0, 0));
  rt->destroy_event(e);
}

TEST(Event, MarksThePointAfterQueuedWork) {
  auto rt = small_emulator();
  Gate gate;
  std::atomic<bool> done{false};
  rt->launch(0, 0, "blocked", [&] {
    gate.wait();
    done = true;
  });
  EventId e = rt->create_event(0, false);
  rt->record_event(e, 0, 0);
  EXPECT_FALSE(rt->query_event(e));
  gate.open();
  rt->synchronize_event(e);
  EXPECT_TRUE(done);
  EXPECT_TRUE(rt->query_event(e));

  // Work queued after the record does not hold the event back.
  Gate later;
  rt->launch(0, 0, "after", [&] { later.wait(); });
  EXPECT_TRUE(rt->query_event(e));
  later.open();
  rt->synchronize_device(0);
  rt->destroy_event(e);
}

TEST(Event, ElapsedTimeOfASleep) {
  auto rt = small_emulator();
  EventId start = rt->create_event(0, true), end = rt->create_event(0, true);
  rt->record_event(start, 0, 0);
  rt->launch(0, 0, "sleep", [] { std::this_thread::sleep_for(20ms); });
  rt->record_event(end, 0, 0);
  rt->synchronize_event(end);
  double ms = rt->elapsed_time_ms(start, end);
  EXPECT_GE(ms, 19.0);
  EXPECT_LT(ms, 2000.0);
  EXPECT_LT(rt->elapsed_time_ms(end, start), 0.0);
}

TEST(Event, ElapsedTimeMisuse) {
  auto rt = small_emulator();
  EventId plain = rt->create_event(0, false), a = rt->create_event(0, true),
          b = rt->create_event(0, true);
  EXPECT_TRUE(contains(error_of([&] { rt->elapsed_time_ms(a, b); }), "has not been recorded"));
  rt->record_event(plain, 0, 0);
  rt->record_event(a, 0, 0);
  EXPECT_TRUE(contains(error_of([&] { rt->elapsed_time_ms(plain, a); }), "without enable_timing"));

  Gate gate;
  rt->launch(0, 0, "blocked", [&] { gate.wait(); });
  rt->record_event(b, 0, 0);
  EXPECT_TRUE(contains(error_of([&] { rt->elapsed_time_ms(a, b); }), "has not completed"));
  gate.open();
  rt->synchronize_event(b);
  EXPECT_GE(rt->elapsed_time_ms(a, b), 0.0);
}

TEST(Event, StreamWaitEventOrdersTwoStreams) {
  auto rt = small_emulator();
  StreamId producer = rt->create_stream(0, 0), consumer = rt->create_stream(0, 0);
  Gate gate;
  std::atomic<int> value{0};
  rt->launch(0, producer, "produce", [&] {
    gate.wait();
    value = 42;
  });
  EventId ready = rt->create_event(0, false);
  rt->record_event(ready, 0, producer);
  rt->stream_wait_event(0, consumer, ready);
  int seen = -1;
  rt->launch(0, consumer, "consume", [&] { seen = value; });

  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(rt->query_stream(0, consumer));  // held back by the event
  gate.open();
  rt->synchronize_stream(0, consumer);
  EXPECT_EQ(seen, 42);
}

TEST(Event, WaitAcrossDevices) {
  auto rt = small_emulator();
  Gate gate;
  std::atomic<int> value{0};
  rt->launch(1, 0, "produce", [&] {
    gate.wait();
    value = 7;
  });
  EventId e = rt->create_event(1, false);
  rt->record_event(e, 1, 0);
  rt->stream_wait_event(0, 0, e);
  int seen = -1;
  rt->launch(0, 0, "consume", [&] { seen = value; });
  gate.open();
  rt->synchronize_device(0);
  EXPECT_EQ(seen, 7);
}

TEST(Event, ReRecordingMovesThePoint) {
  auto rt = small_emulator();
  EventId e = rt->create_event(0, true);
  rt->record_event(e, 0, 0);
  rt->synchronize_event(e);
  Gate gate;
  rt->launch(0, 0, "blocked", [&] { gate.wait(); });
  rt->record_event(e, 0, 0);
  EXPECT_FALSE(rt->query_event(e));
  gate.open();
  rt->synchronize_event(e);
  EXPECT_TRUE(rt->query_event(e));
}

TEST(Event, Misuse) {
  auto rt = small_emulator();
  EventId e = rt->create_event(0, false);
  EXPECT_EQ(error_of([&] { rt->record_event(e, 1, 0); }),
            "neuron event " + std::to_string(e) +
                " belongs to device 0 and cannot be recorded on a stream of device 1");
  EXPECT_TRUE(
      contains(error_of([&] { rt->create_event(5, false); }), "invalid neuron device index 5"));
  rt->destroy_event(e);
  EXPECT_EQ(error_of([&] { rt->query_event(e); }),
            "unknown neuron event " + std::to_string(e) + " (destroyed or never created)");
  EXPECT_TRUE(contains(error_of([&] { rt->destroy_event(e); }), "unknown neuron event"));
  EXPECT_TRUE(
      contains(error_of([&] { rt->synchronize_event(12345); }), "unknown neuron event 12345"));
}

TEST(Event, DestroyWhileRecordingIsPending) {
  auto rt = small_emulator();
  Gate gate;
  rt->launch(0, 0, "blocked", [&] { gate.wait(); });
  EventId e = rt->create_event(0, true);
  rt->record_event(e, 0, 0);
  rt->destroy_event(e);  // the queued time stamp keeps what it needs alive
  gate.open();
  rt->synchronize_stream(0, 0);
  EXPECT_TRUE(rt->query_stream(0, 0));
}

}  // namespace
}  // namespace torchneuron::runtime

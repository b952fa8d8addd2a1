// Device activity tracing: what ran on each stream and when, for profilers.
// Off by default; while off, a launch pays one relaxed atomic load. While on,
// every task a stream runs (kernels, copies, compiled graphs) and every
// host-side device activity (CPU fallbacks, core-to-core copies) is recorded
// with its start and end as the emulated core ran it. The buffer is
// process-wide, shared by all runtimes; a profiler drains it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime.h"

namespace torchneuron::runtime {

// What an activity was. Callers say it with an ActivityScope around the launch;
// a launch without one is a kernel.
enum class ActivityKind : uint8_t {
  kKernel = 0,      // an operator's kernel on a stream
  kMemcpyHtoD = 1,  // host to device copy (bytes set)
  kMemcpyDtoH = 2,  // device to host copy (bytes set)
  kMemcpyDtoD = 3,  // device to device copy, same core or core to core (bytes set)
  kGraph = 4,       // one execution of a compiled graph (executable) on a stream
  kFallback = 5,    // an operator run on the host CPU (CPU fallback); no stream
  kFused = 6,       // a fused segment of eager ops (adaptive eager execution) on a stream
};
const char* activity_kind_name(ActivityKind kind);  // "kernel", "memcpy_htod", ...

// Stream id of activities that ran on the host, not on a stream.
constexpr StreamId kHostStream = -1;

struct Activity {
  ActivityKind kind = ActivityKind::kKernel;
  const char* name = nullptr;  // the launch name (static lifetime)
  int device = 0;
  StreamId stream = 0;   // kHostStream for host-side activities
  int64_t start_ns = 0;  // nanoseconds since the Unix epoch (system clock)
  int64_t end_ns = 0;
  uint64_t correlation_id = 0;  // of the launching thread's top operator; 0 if none
  uint64_t bytes = 0;           // copies: bytes moved; else 0
  uint64_t sequence = 0;        // order of enqueue on its stream (1, 2, ...) ; 0 on host
  bool failed = false;          // the kernel threw
};

namespace activity {

// Nanoseconds since the Unix epoch: the clock of every Activity.
int64_t now_ns();

// Starts/stops recording. Starting clears what a previous session left.
void enable(bool on);
bool enabled();  // relaxed load: the hot-path test
// Moves out everything recorded so far, in completion order.
std::vector<Activity> drain();

// The correlation id stack of the calling thread (a profiler pushes the id of
// each operator as it begins). Launches take the top.
void push_correlation_id(uint64_t id);
void pop_correlation_id();
uint64_t current_correlation_id();  // 0 when empty
// Empties every thread's stack (lazily, at its next use): a profiler session
// that ended between a push and its pop leaves no stale id behind.
void reset_correlation_ids();

// Adds an activity that ran on the host (kHostStream), e.g. a CPU fallback.
// Ignored while recording is off.
void record_host(ActivityKind kind, const char* name, int device, int64_t start_ns, int64_t end_ns,
                 uint64_t bytes = 0);

// Adds an activity the host ran in place of a stream, in order with it (the
// caller drained the stream first and blocks meanwhile): synchronous kernels
// (results sized by the data) and scalar reads (.item()). Not in busy_ns.
// Ignored while recording is off.
void record_on_stream(ActivityKind kind, const char* name, int device, StreamId stream,
                      int64_t start_ns, int64_t end_ns, uint64_t bytes = 0);

// A copy of `name` with static lifetime (kept for the process), for names
// built at run time; the same pointer for equal names.
const char* intern(const std::string& name);

// Called by a stream worker (recording is on).
void record(const Activity& a);

}  // namespace activity

// Labels the launches the calling thread makes in its scope: their kind and
// bytes (copies). Scopes nest; the innermost wins. Cheap (thread-local).
class ActivityScope {
 public:
  ActivityScope(ActivityKind kind, uint64_t bytes = 0);
  ~ActivityScope();
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;
  // The calling thread's current label ({kKernel, 0} outside any scope).
  static ActivityKind current_kind();
  static uint64_t current_bytes();

 private:
  ActivityKind prev_kind_;
  uint64_t prev_bytes_;
};

}  // namespace torchneuron::runtime

// One stream: an in-order queue of tasks served by its own worker thread.
// Tasks are numbered 1, 2, ... in enqueue order; "point n is reached" means
// the first n tasks have run and their closures have been destroyed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "activity.h"
#include "adaptive_mutex.h"
#include "runtime.h"

namespace torchneuron::runtime {

// Per-device counters, shared by the device's streams.
struct DeviceCounters {
  std::atomic<int64_t> launched{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> busy_ns{0};        // time kernels ran (steady clock)
  std::atomic<int64_t> kernel_cpu_ns{0};  // CPU time inside kernels, while counted
};

// Process-wide switch of kernel CPU counting (Runtime::set_count_kernel_cpu);
// returns the previous setting.
bool set_count_kernel_cpu(bool on);

class Stream {
 public:
  // Launches beyond this many unfinished tasks wait for the worker (a
  // device's launch queue is finite too), until half of them have run.
  static constexpr uint64_t kMaxPendingTasks = 1024;

  enum class Kind : uint8_t {
    kKernel,  // user work: counted, runs with device access, errors recorded
    kMarker,  // runtime bookkeeping (event stamps, waits): none of that
  };

  Stream(int device, StreamId id, bool protect, DeviceCounters& counters);
  ~Stream();  // runs what is queued, then joins the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues `fn`; returns its point. A kernel's failure goes to *error_out
  // when given (blocking launches), else it becomes the stream's error.
  // `name` must outlive the task.
  uint64_t enqueue(const char* name, std::function<void()> fn, Kind kind,
                   std::string* error_out = nullptr);
  uint64_t enqueued() const;  // point of the last queued task
  bool reached(uint64_t point) const;
  // Blocks until `point` is reached. Error if called from this stream's own
  // worker (it would wait for itself).
  void wait(uint64_t point);
  // The first kernel error since the last call, if any; clears it.
  std::optional<std::string> take_error();

  int device() const { return device_; }
  StreamId id() const { return id_; }

 private:
  struct Task {
    std::function<void()> fn;
    const char* name;
    Kind kind;
    std::string* error_out;
    // Activity tracing, captured at enqueue when recording is on.
    bool traced;
    ActivityKind activity_kind;
    uint64_t correlation_id, bytes, sequence;
  };
  void work();
  std::string run(Task& t);  // the error message, empty on success
  void complete(Task& t, std::string error);

  const int device_;
  const StreamId id_;
  const bool protect_;
  DeviceCounters& counters_;

  mutable AdaptiveMutex mu_;
  std::condition_variable work_cv_;  // worker waits for tasks
  std::condition_variable done_cv_;  // waiters wait for points
  std::vector<Task> pending_;        // swapped whole into the worker's batch
  uint64_t enqueued_ = 0;            // under mu_
  // Written by the worker without mu_ (one lock per batch, not per task);
  // wake_at_, the smallest point a sleeping thread waits for (none: the
  // largest value), is read then: see Stream::complete.
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> wake_at_{UINT64_MAX};
  void sleep_until_reached(std::unique_lock<std::mutex>& lock, uint64_t point);
  bool worker_idle_ = false, stop_ = false;
  std::optional<std::string> error_;
  std::thread worker_;  // last: starts after the members it uses exist
};

}  // namespace torchneuron::runtime

// Events: a recorded event is a point on one stream (see stream.h). Timing
// events also queue a marker that stamps the time when the worker gets there.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime.h"
#include "stream.h"

namespace torchneuron::runtime {

class EventTable {
 public:
  EventId create(int device, bool enable_timing);
  void destroy(EventId event);
  // Error unless `stream` belongs to the event's device.
  void record(EventId event, Stream& stream);
  // Work queued on `waiting` from now on runs after the event's point.
  void block(Stream& waiting, EventId event);
  bool query(EventId event) const;  // true if never recorded
  void synchronize(EventId event) const;
  double elapsed_ms(EventId start, EventId end) const;

 private:
  // One recording: kept alive by the marker tasks that refer to it, so
  // re-recording or destroying the event never races with a worker.
  struct Mark {
    Stream* stream;
    uint64_t point = 0;
    std::chrono::steady_clock::time_point time;  // written before `point` is reached
  };
  struct Event {
    int device;
    bool timing;
    std::shared_ptr<Mark> mark;  // null until recorded
  };
  const Event& lookup(EventId event) const;  // under mu_
  std::shared_ptr<Mark> mark_of(EventId event) const;

  mutable std::mutex mu_;
  std::unordered_map<EventId, Event> events_;
  EventId next_id_ = 1;
};

}  // namespace torchneuron::runtime

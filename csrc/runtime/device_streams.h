// The streams of one device: the default stream 0 and the two pools of
// create_stream (ids in runtime.h). A Stream and its worker thread are created
// on first use; lookups afterwards take no lock.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "runtime.h"
#include "stream.h"

namespace torchneuron::runtime {

class DeviceStreams {
 public:
  DeviceStreams(int device, bool protect) : device_(device), protect_(protect) {}
  ~DeviceStreams();  // drains and joins every stream
  DeviceStreams(const DeviceStreams&) = delete;
  DeviceStreams& operator=(const DeviceStreams&) = delete;

  StreamId create(int priority);    // next id of the pool, round-robin
  Stream& get(StreamId id);         // creates it on first use; Error on a bad id
  Stream* find(StreamId id) const;  // nullptr if never used; Error on a bad id
  // Waits for all work queued so far on every stream; rethrows the first
  // kernel error (by stream id) as AsyncError and clears them all.
  void synchronize();
  void drain();  // waits for every stream, keeping errors
  Counters counters() const;

 private:
  void check(StreamId id) const;

  const int device_;
  const bool protect_;
  DeviceCounters counters_;
  std::atomic<uint32_t> next_normal_{0}, next_high_{0};
  std::mutex create_mu_;
  std::array<std::unique_ptr<Stream>, kMaxStreamId + 1> owned_;  // under create_mu_
  std::array<std::atomic<Stream*>, kMaxStreamId + 1> streams_{};
};

}  // namespace torchneuron::runtime

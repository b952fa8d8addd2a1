#include "device_streams.h"

#include <string>

namespace torchneuron::runtime {

DeviceStreams::~DeviceStreams() {
  // Drain all before destroying any: a queued wait on one stream may refer
  // to another stream of this device.
  drain();
  std::lock_guard<std::mutex> lock(create_mu_);
  for (auto& s : owned_) s.reset();
}

StreamId DeviceStreams::create(int priority) {
  if (priority < 0)
    return kStreamsPerPool + 1 + StreamId(next_high_.fetch_add(1) % kStreamsPerPool);
  return 1 + StreamId(next_normal_.fetch_add(1) % kStreamsPerPool);
}

void DeviceStreams::check(StreamId id) const {
  if (id < 0 || id > kMaxStreamId)
    throw Error("invalid neuron stream id " + std::to_string(id) + " on device " +
                std::to_string(device_) + " (valid ids are 0-" + std::to_string(kMaxStreamId) +
                ")");
}

Stream& DeviceStreams::get(StreamId id) {
  check(id);
  if (Stream* s = streams_[id].load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(create_mu_);
  if (!owned_[id]) {
    owned_[id] = std::make_unique<Stream>(device_, id, protect_, counters_);
    streams_[id].store(owned_[id].get(), std::memory_order_release);
  }
  return *owned_[id];
}

Stream* DeviceStreams::find(StreamId id) const {
  check(id);
  return streams_[id].load(std::memory_order_acquire);
}

void DeviceStreams::drain() {
  for (auto& slot : streams_)
    if (Stream* s = slot.load(std::memory_order_acquire)) s->wait(s->enqueued());
}

void DeviceStreams::synchronize() {
  drain();
  std::optional<std::string> first;
  int more = 0;
  for (auto& slot : streams_) {
    Stream* s = slot.load(std::memory_order_acquire);
    if (!s) continue;
    if (auto e = s->take_error()) {
      if (!first)
        first = std::move(e);
      else
        ++more;
    }
  }
  if (!first) return;
  if (more) *first += " (and " + std::to_string(more) + " more failed stream(s) on this device)";
  throw AsyncError(*first);
}

Counters DeviceStreams::counters() const {
  Counters c;
  c.kernels_launched = counters_.launched.load(std::memory_order_relaxed);
  c.kernels_failed = counters_.failed.load(std::memory_order_relaxed);
  c.busy_ns = counters_.busy_ns.load(std::memory_order_relaxed);
  c.kernel_cpu_ns = counters_.kernel_cpu_ns.load(std::memory_order_relaxed);
  return c;
}

}  // namespace torchneuron::runtime

#include "event.h"

#include <string>

namespace torchneuron::runtime {

EventId EventTable::create(int device, bool enable_timing) {
  std::lock_guard<std::mutex> lock(mu_);
  EventId id = next_id_++;
  events_.emplace(id, Event{device, enable_timing, nullptr});
  return id;
}

const EventTable::Event& EventTable::lookup(EventId event) const {
  auto it = events_.find(event);
  if (it == events_.end())
    throw Error("unknown neuron event " + std::to_string(event) + " (destroyed or never created)");
  return it->second;
}

void EventTable::destroy(EventId event) {
  std::lock_guard<std::mutex> lock(mu_);
  lookup(event);
  events_.erase(event);
}

std::shared_ptr<EventTable::Mark> EventTable::mark_of(EventId event) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lookup(event).mark;
}

void EventTable::record(EventId event, Stream& stream) {
  int device = 0;
  bool timing = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Event& e = lookup(event);
    device = e.device;
    timing = e.timing;
  }
  if (device != stream.device())
    throw Error("neuron event " + std::to_string(event) + " belongs to device " +
                std::to_string(device) + " and cannot be recorded on a stream of device " +
                std::to_string(stream.device()));
  // Queue the stamp outside mu_: the stream lock is never taken under it.
  auto mark = std::make_shared<Mark>();
  mark->stream = &stream;
  if (timing)
    mark->point = stream.enqueue(
        "record_event", [mark] { mark->time = std::chrono::steady_clock::now(); },
        Stream::Kind::kMarker);
  else
    mark->point = stream.enqueued();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(event);
  if (it != events_.end())
    it->second.mark = std::move(mark);  // destroyed meanwhile: nothing to update
}

void EventTable::block(Stream& waiting, EventId event) {
  std::shared_ptr<Mark> m = mark_of(event);
  // Never recorded, already reached, or ordered by the stream itself: no wait.
  if (!m || m->stream == &waiting || m->stream->reached(m->point)) return;
  waiting.enqueue("stream_wait_event", [m] { m->stream->wait(m->point); }, Stream::Kind::kMarker);
}

bool EventTable::query(EventId event) const {
  std::shared_ptr<Mark> m = mark_of(event);
  return !m || m->stream->reached(m->point);
}

void EventTable::synchronize(EventId event) const {
  if (std::shared_ptr<Mark> m = mark_of(event)) m->stream->wait(m->point);
}

double EventTable::elapsed_ms(EventId start, EventId end) const {
  Event s{}, e{};
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = lookup(start);
    e = lookup(end);
  }
  for (auto [id, ev] : {std::pair<EventId, const Event*>{start, &s}, {end, &e}}) {
    const std::string name = "elapsed_time_ms: neuron event " + std::to_string(id);
    if (!ev->timing) throw Error(name + " was created without enable_timing");
    if (!ev->mark) throw Error(name + " has not been recorded");
    if (!ev->mark->stream->reached(ev->mark->point))
      throw Error(name + " has not completed yet; synchronize it first");
  }
  return std::chrono::duration<double, std::milli>(e.mark->time - s.mark->time).count();
}

}  // namespace torchneuron::runtime

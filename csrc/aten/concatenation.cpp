// The per-stream kernel buffers of adaptive eager execution (concatenation.h).
#include "aten/concatenation.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aten/launch.h"
#include "aten/stream.h"
#include "runtime/activity.h"

namespace torchneuron {

namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    return std::stoll(v);
  } catch (...) {
    return fallback;
  }
}

// TorchNeuron's documented defaults for the two knobs.
const int64_t kQueueLow = env_int("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", 15);
const size_t kLimit =
    size_t(std::max<int64_t>(1, env_int("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", 1024)));

struct Held {
  const char* name;
  std::function<void()> kernel;
  // The profiler's facts as of the call: the launching op's correlation id (its
  // link) and the activity label (a flush inside a copy must not relabel it).
  uint64_t correlation;
  rt::ActivityKind kind;
  uint64_t bytes;
};

struct Buffer {
  std::mutex m;  // held while the buffer is enqueued: issue order on the stream holds
  std::vector<Held> kernels;
  std::atomic<int64_t> queued{0};  // enqueued, not finished
};

std::mutex g_registry_mutex;
// Never destroyed: a forked child exits with its parent's buffered kernels, whose
// storages cannot be freed there (the runtime is refused in the child).
auto& g_buffers = *new std::unordered_map<uint64_t, std::unique_ptr<Buffer>>();

std::atomic<int64_t> s_buffered{0}, s_direct{0}, s_launch{0}, s_wait{0}, s_event{0}, s_limit{0},
    s_low{0};

// Set by the first buffered kernel: until then a flush has nothing to do (and
// must not start the runtime, e.g. in a forked child's wait).
std::atomic<bool> g_used{false};
std::atomic<bool> g_stopped{false};

// A flush enqueues through enqueue_kernel's waits, which flush: not again.
thread_local bool tls_flushing = false;

constexpr uint64_t kStreamMask = (1ull << 48) - 1;

uint64_t key(c10::DeviceIndex device, rt::StreamId stream) {
  return (uint64_t(uint16_t(device)) << 48) | (uint64_t(stream) & kStreamMask);
}

Held held(const char* name, std::function<void()> kernel) {
  const bool on = rt::activity::enabled();
  return {name, std::move(kernel), on ? rt::activity::current_correlation_id() : 0,
          rt::ActivityScope::current_kind(), rt::ActivityScope::current_bytes()};
}

Buffer& buffer_of(c10::DeviceIndex device, rt::StreamId stream) {
  std::lock_guard<std::mutex> lk(g_registry_mutex);
  auto& b = g_buffers[key(device, stream)];
  if (!b) b = std::make_unique<Buffer>();
  return *b;
}

Buffer* find_buffer(c10::DeviceIndex device, rt::StreamId stream) {
  std::lock_guard<std::mutex> lk(g_registry_mutex);
  auto it = g_buffers.find(key(device, stream));
  return it == g_buffers.end() ? nullptr : it->second.get();
}

// Enqueues the buffer's kernels in order; the caller holds b.m.
void drain_locked(Buffer& b, c10::DeviceIndex device, rt::StreamId stream) {
  auto kernels = std::move(b.kernels);
  b.kernels.clear();
  const bool outer = !tls_flushing;
  tls_flushing = true;
  try {
    for (auto& h : kernels) {
      rt::ActivityScope label(h.kind, h.bytes);  // as if launched at its call
      rt::activity::push_correlation_id(h.correlation);
      struct Pop {
        ~Pop() { rt::activity::pop_correlation_id(); }
      } pop;
      enqueue_on(device, stream, h.name, std::move(h.kernel));
    }
  } catch (...) {
    if (outer) tls_flushing = false;
    throw;
  }
  if (outer) tls_flushing = false;
}

std::atomic<int64_t>& counter(FlushCause cause) {
  switch (cause) {
    case FlushCause::kLaunch:
      return s_launch;
    case FlushCause::kEvent:
      return s_event;
    default:
      return s_wait;
  }
}

}  // namespace

bool concatenation_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_NEURONX_ENABLE_CONCATENATION");
    return v && std::string(v) == "1" && !device_runtime().config().launch_blocking;
  }();
  return on;
}

void enqueue_counted(c10::DeviceIndex device, rt::StreamId stream, const char* name,
                     std::function<void()> kernel) {
  auto& queued = buffer_of(device, stream).queued;
  queued.fetch_add(1);
  struct Done {
    std::atomic<int64_t>* q;
    ~Done() { q->fetch_sub(1); }
  };
  try {
    translate_errors([&] {
      device_runtime().launch(device, stream, name, [k = std::move(kernel), q = &queued]() mutable {
        Done done{q};
        k();
      });
    });
  } catch (...) {
    queued.fetch_sub(1);
    throw;
  }
}

void buffer_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel) {
  const rt::StreamId stream = current_stream_id(device);
  if (g_stopped.load(std::memory_order_relaxed) || tls_flushing) {
    // after the exit drain; or a kernel launched while this thread enqueues a
    // buffer (its lock is held): in order after what it enqueued so far
    s_direct.fetch_add(1);
    enqueue_on(device, stream, name, std::move(kernel));
    return;
  }
  Buffer& b = buffer_of(device, stream);
  g_used.store(true, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lk(b.m);
  if (b.queued.load() >= kQueueLow) {  // the stream is busy: wait here
    b.kernels.push_back(held(name, std::move(kernel)));
    s_buffered.fetch_add(1);
    if (b.kernels.size() < kLimit) return;
    s_limit.fetch_add(1);
  } else if (b.kernels.empty()) {  // the stream runs low and nothing waits: go now
    s_direct.fetch_add(1);
    enqueue_on(device, stream, name, std::move(kernel));
    return;
  } else {  // the stream runs low: the buffer goes, this kernel last
    b.kernels.push_back(held(name, std::move(kernel)));
    s_buffered.fetch_add(1);
    s_low.fetch_add(1);
  }
  drain_locked(b, device, stream);
}

void flush_stream(c10::DeviceIndex device, rt::StreamId stream, FlushCause cause) {
  if (!g_used.load(std::memory_order_relaxed) || tls_flushing) return;
  Buffer* b = find_buffer(device, stream);
  if (!b) return;
  std::lock_guard<std::mutex> lk(b->m);
  if (b->kernels.empty()) return;
  counter(cause).fetch_add(1);
  drain_locked(*b, device, stream);
}

void flush_all() {
  if (!g_used.load(std::memory_order_relaxed) || tls_flushing) return;
  std::vector<std::pair<uint64_t, Buffer*>> all;
  {
    std::lock_guard<std::mutex> lk(g_registry_mutex);
    for (auto& [k, b] : g_buffers) all.emplace_back(k, b.get());
  }
  for (auto& [k, b] : all) {
    std::lock_guard<std::mutex> lk(b->m);
    if (b->kernels.empty()) continue;
    s_wait.fetch_add(1);
    drain_locked(*b, c10::DeviceIndex(int16_t(k >> 48)), rt::StreamId(k & kStreamMask));
  }
}

void stop_buffering() noexcept { g_stopped.store(true); }

ConcatenationStats concatenation_stats() {
  ConcatenationStats s;
  s.buffered = s_buffered.load();
  s.direct = s_direct.load();
  s.flush_launch = s_launch.load();
  s.flush_wait = s_wait.load();
  s.flush_event = s_event.load();
  s.flush_limit = s_limit.load();
  s.flush_queue_low = s_low.load();
  return s;
}

void reset_concatenation_stats() {
  for (auto* c : {&s_buffered, &s_direct, &s_launch, &s_wait, &s_event, &s_limit, &s_low})
    c->store(0);
}

}  // namespace torchneuron

// The per-stream kernel buffers of adaptive eager execution (concatenation.h).
#include "aten/concatenation.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aten/concatenation_fuse.h"
#include "aten/env.h"
#include "aten/fuse_record.h"
#include "aten/launch.h"
#include "aten/stream.h"
#include "runtime/activity.h"

namespace torchneuron {

namespace {

// TorchNeuron's documented defaults for the two knobs; read at the first use.
int64_t queue_low() {
  static const int64_t n = env_int("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", 15, 0);
  return n;
}
size_t buffer_limit() {
  static const size_t n = size_t(env_int("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", 1024, 1));
  return n;
}

struct Held {
  const char* name;
  std::function<void()> kernel;
  // The profiler's facts as of the call: the launching op's correlation id (its
  // link) and the activity label (a flush inside a copy must not relabel it).
  uint64_t correlation;
  rt::ActivityKind kind;
  uint64_t bytes;
  std::shared_ptr<FuseRecord> rec;  // null: never fused
};

struct Buffer {
  Buffer(c10::DeviceIndex d, rt::StreamId s) : device(d), stream(s) {}
  std::mutex m;  // held while the buffer is enqueued: issue order on the stream holds
  std::vector<Held> kernels;
  std::atomic<int64_t> queued{0};    // enqueued, not finished
  std::atomic<bool> holding{false};  // kernels is not empty (read without the lock)
  const c10::DeviceIndex device;
  const rt::StreamId stream;
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
// The flusher thread enqueues unfused (flusher_loop).
thread_local bool tls_no_fuse = false;

constexpr uint64_t kStreamMask = (1ull << 48) - 1;

uint64_t key(c10::DeviceIndex device, rt::StreamId stream) {
  return (uint64_t(uint16_t(device)) << 48) | (uint64_t(stream) & kStreamMask);
}

Held held(const char* name, std::function<void()> kernel, std::shared_ptr<FuseRecord> rec) {
  const bool on = rt::activity::enabled();
  return {name,
          std::move(kernel),
          on ? rt::activity::current_correlation_id() : 0,
          rt::ActivityScope::current_kind(),
          rt::ActivityScope::current_bytes(),
          std::move(rec)};
}

void enqueue_held(Held& h, c10::DeviceIndex device, rt::StreamId stream) {
  rt::ActivityScope label(h.kind, h.bytes);  // as if launched at its call
  rt::activity::push_correlation_id(h.correlation);
  struct Pop {
    ~Pop() { rt::activity::pop_correlation_id(); }
  } pop;
  enqueue_on(device, stream, h.name, std::move(h.kernel));
}

// The kernels in order; runs of joinable ones fused where their signature has
// (or now gets) an executable.
void enqueue_all(std::vector<Held>& kernels, c10::DeviceIndex device, rt::StreamId stream) {
  const bool fuse = !tls_no_fuse && fusion_enabled();
  size_t i = 0;
  while (i < kernels.size()) {
    size_t j = i;
    while (fuse && j < kernels.size() && kernels[j].rec && kernels[j].rec->joinable) ++j;
    if (j - i >= fusion_min_ops()) {
      std::vector<const FuseRecord*> run;
      for (size_t k = i; k < j; ++k) run.push_back(kernels[k].rec.get());
      bool fused = false;
      try {
        fused = launch_fused(device, stream, run, kernels[i].correlation);
      } catch (...) {
        // describing or launching failed before anything was enqueued: the
        // ops run one by one (a kernel's own error is reported as always)
      }
      if (fused) {
        i = j;
        continue;
      }
    }
    for (j = std::max(j, i + 1); i < j; ++i) enqueue_held(kernels[i], device, stream);
  }
}

// A buffer's lock, never waited for with the GIL held: its holder may need the
// GIL (a fused segment's runner, a wait's hook taking it back).
std::unique_lock<std::mutex> lock_buffer(Buffer& b) {
  std::unique_lock<std::mutex> lk(b.m, std::try_to_lock);
  if (!lk.owns_lock()) wait_releasing_gil([&] { lk.lock(); });
  return lk;
}

Buffer& buffer_of(c10::DeviceIndex device, rt::StreamId stream) {
  std::lock_guard<std::mutex> lk(g_registry_mutex);
  auto& b = g_buffers[key(device, stream)];
  if (!b) b = std::make_unique<Buffer>(device, stream);
  return *b;
}

Buffer* find_buffer(c10::DeviceIndex device, rt::StreamId stream) {
  std::lock_guard<std::mutex> lk(g_registry_mutex);
  auto it = g_buffers.find(key(device, stream));
  return it == g_buffers.end() ? nullptr : it->second.get();
}

// While this thread enqueues holding a buffer's lock, a wait inside the
// enqueue (a full queue, a queued compiled kernel: enqueue_on) flushes nothing:
// the flush would take that lock again (a deadlock on one thread).
struct Flushing {
  Flushing() : outer(!tls_flushing) { tls_flushing = true; }
  ~Flushing() {
    if (outer) tls_flushing = false;
  }
  bool outer;
};

// Enqueues the buffer's kernels in order; the caller holds b.m.
void drain_locked(Buffer& b, c10::DeviceIndex device, rt::StreamId stream) {
  auto kernels = std::move(b.kernels);
  b.kernels.clear();
  b.holding.store(false);
  Flushing flushing;
  enqueue_all(kernels, device, stream);
}

// The flusher: a stream's worker that finishes a kernel and leaves fewer than
// the threshold queued, with kernels buffered, has this thread enqueue them.
// Without it, buffered kernels waited for the host's next launch while the
// device sat idle (host work, a sleep). It never fuses: fusing runs Python,
// and this thread may not take the GIL once the interpreter finalizes.
// Never destroyed: the detached thread waits on them to the end (glibc's
// condition variable destructor waits for its waiters: the exit hung).
auto& g_flusher_mutex = *new std::mutex();
auto& g_flusher_cv = *new std::condition_variable();
auto& g_flusher_pending = *new std::vector<Buffer*>();
std::once_flag g_flusher_started;

void flush_low(Buffer& b);

void flusher_loop() {
  tls_no_fuse = true;
  for (;;) {
    std::vector<Buffer*> todo;
    {
      std::unique_lock<std::mutex> lk(g_flusher_mutex);
      g_flusher_cv.wait(lk, [] { return !g_flusher_pending.empty(); });
      todo.swap(g_flusher_pending);
    }
    for (Buffer* b : todo) {
      if (g_stopped.load()) continue;
      try {
        flush_low(*b);
      } catch (...) {
        // an enqueue that failed (the runtime is shutting down): the host's
        // next wait flushes again and reports it
      }
    }
  }
}

void request_flush(Buffer* b) {
  std::call_once(g_flusher_started, [] { std::thread(flusher_loop).detach(); });
  {
    std::lock_guard<std::mutex> lk(g_flusher_mutex);
    g_flusher_pending.push_back(b);
  }
  g_flusher_cv.notify_one();
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
    if (!env_flag("TORCH_NEURONX_ENABLE_CONCATENATION")) return false;
    queue_low(), buffer_limit();  // a bad knob is an error at once, not at the first buffering
    check_fusion_env();
    return !device_runtime().config().launch_blocking;
  }();
  return on;
}

void enqueue_counted(c10::DeviceIndex device, rt::StreamId stream, const char* name,
                     std::function<void()> kernel) {
  Buffer& b = buffer_of(device, stream);
  b.queued.fetch_add(1);
  struct Done {
    Buffer* b;
    ~Done() {
      const int64_t left = b->queued.fetch_sub(1) - 1;
      if (left < queue_low() && b->holding.load() && !g_stopped.load()) request_flush(b);
    }
  };
  try {
    translate_errors([&] {
      device_runtime().launch(device, stream, name, [k = std::move(kernel), b = &b]() mutable {
        Done done{b};
        k();
      });
    });
  } catch (...) {
    b.queued.fetch_sub(1);
    throw;
  }
}

void buffer_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel,
                   std::shared_ptr<FuseRecord> rec) {
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
  auto lk = lock_buffer(b);
  if (b.queued.load() >= queue_low()) {  // the stream is busy: wait here
    b.kernels.push_back(held(name, std::move(kernel), std::move(rec)));
    b.holding.store(true);
    s_buffered.fetch_add(1);
    if (b.kernels.size() < buffer_limit()) return;
    s_limit.fetch_add(1);
  } else if (b.kernels.empty()) {  // the stream runs low and nothing waits: go now
    s_direct.fetch_add(1);
    Flushing flushing;
    enqueue_on(device, stream, name, std::move(kernel));
    return;
  } else {  // the stream runs low: the buffer goes, this kernel last
    b.kernels.push_back(held(name, std::move(kernel), std::move(rec)));
    b.holding.store(true);
    s_buffered.fetch_add(1);
    s_low.fetch_add(1);
  }
  drain_locked(b, device, stream);
}

void flush_stream(c10::DeviceIndex device, rt::StreamId stream, FlushCause cause) {
  if (!g_used.load(std::memory_order_relaxed) || tls_flushing) return;
  Buffer* b = find_buffer(device, stream);
  if (!b) return;
  auto lk = lock_buffer(*b);
  if (b->kernels.empty()) return;
  counter(cause).fetch_add(1);
  drain_locked(*b, device, stream);
}

namespace {
void flush_low(Buffer& b) {
  auto lk = lock_buffer(b);
  if (b.kernels.empty() || b.queued.load() >= queue_low()) return;
  s_low.fetch_add(1);
  drain_locked(b, b.device, b.stream);
}
}  // namespace

void flush_all() {
  if (!g_used.load(std::memory_order_relaxed) || tls_flushing) return;
  std::vector<std::pair<uint64_t, Buffer*>> all;
  {
    std::lock_guard<std::mutex> lk(g_registry_mutex);
    for (auto& [k, b] : g_buffers) all.emplace_back(k, b.get());
  }
  for (auto& [k, b] : all) {
    auto lk = lock_buffer(*b);
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

#include "stream.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "device_memory.h"

namespace torchneuron::runtime {
namespace {
std::atomic<bool> g_count_kernel_cpu{false};

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

bool set_count_kernel_cpu(bool on) { return g_count_kernel_cpu.exchange(on); }

Stream::Stream(int device, StreamId id, bool protect, DeviceCounters& counters)
    : device_(device), id_(id), protect_(protect), counters_(counters), worker_([this] {
        work();
      }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

// The hot path: one lock, one push (no allocation once the queue has grown),
// and a notify only when the worker sleeps.
uint64_t Stream::enqueue(const char* name, std::function<void()> fn, Kind kind,
                         std::string* error_out) {
  std::unique_lock<std::mutex> lock(mu_);
  // A full queue makes the host wait, as a device's launch queue does; this
  // bounds the memory a host far ahead of the device can pin.
  // It waits until half the queue has run, so that it sleeps and is woken
  // once per half queue, not once per task.
  if (enqueued_ - completed_.load() >= kMaxPendingTasks &&
      std::this_thread::get_id() != worker_.get_id())
    sleep_until_reached(lock, enqueued_ - kMaxPendingTasks / 2);
  const uint64_t point = ++enqueued_;
  Task task{std::move(fn), name, kind, error_out, false, ActivityKind::kKernel, 0, 0, 0};
  if (kind == Kind::kKernel && activity::enabled()) {
    task.traced = true;
    task.activity_kind = ActivityScope::current_kind();
    task.bytes = ActivityScope::current_bytes();
    task.correlation_id = activity::current_correlation_id();
    task.sequence = point;
  }
  pending_.push_back(std::move(task));
  const bool wake = worker_idle_;
  lock.unlock();
  if (wake) work_cv_.notify_one();
  return point;
}

uint64_t Stream::enqueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

bool Stream::reached(uint64_t point) const { return completed_.load() >= point; }

void Stream::wait(uint64_t point) {
  if (completed_.load() >= point) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_.load() >= point) return;
  if (std::this_thread::get_id() == worker_.get_id())
    throw Error("a kernel on neuron stream " + std::to_string(id_) + " of device " +
                std::to_string(device_) + " waited for its own stream, which would never finish");
  sleep_until_reached(lock, point);
}

// With mu_ held. Each sleeper lowers wake_at_ to its point before it checks
// completed_ (both sequentially consistent; complete() does the two the
// other way round), so the worker either sees the point or this thread sees
// the progress; complete() resets wake_at_ when it wakes everyone, and a
// thread that wakes early sets its point again.
void Stream::sleep_until_reached(std::unique_lock<std::mutex>& lock, uint64_t point) {
  for (;;) {
    uint64_t at = wake_at_.load();
    while (point < at && !wake_at_.compare_exchange_weak(at, point)) {
    }
    if (completed_.load() >= point) return;
    done_cv_.wait(lock);
  }
}

std::optional<std::string> Stream::take_error() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<std::string> e;
  e.swap(error_);
  return e;
}

void Stream::work() {
  char thread_name[16];
  std::snprintf(thread_name, sizeof thread_name, "neuron%d:s%lld", device_,
                static_cast<long long>(id_));
  pthread_setname_np(pthread_self(), thread_name);

  // Swapping the whole queue keeps both vectors' capacity: no allocation per
  // task in steady state, and the lock is taken once per batch to dequeue.
  std::vector<Task> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    while (pending_.empty() && !stop_) {
      worker_idle_ = true;
      work_cv_.wait(lock);
    }
    worker_idle_ = false;
    if (pending_.empty()) return;  // stopping, and everything has run
    batch.swap(pending_);
    lock.unlock();
    for (Task& t : batch) complete(t, run(t));
    batch.clear();
    lock.lock();
  }
}

// Reaches the task's point. No lock unless there is an error to record or a
// sleeper whose point this is (sleep_until_reached); taking mu_ before
// notifying makes sure a sleeper that saw no progress is asleep.
void Stream::complete(Task& t, std::string error) {
  if (!error.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (t.error_out)
      *t.error_out = std::move(error);
    else if (!error_)
      error_ = std::move(error);
  }
  const uint64_t reached = completed_.fetch_add(1) + 1;
  if (reached >= wake_at_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_at_.store(UINT64_MAX);
    done_cv_.notify_all();
  }
}

// Runs one task and destroys its closure here, on the worker, before its
// point is reached: closures own references whose release frees device
// memory, and a synchronize must see that memory freed.
std::string Stream::run(Task& t) {
  const bool kernel = t.kind == Kind::kKernel;
  const bool count_cpu = kernel && g_count_kernel_cpu.load(std::memory_order_relaxed);
  if (kernel) counters_.launched.fetch_add(1, std::memory_order_relaxed);
  std::string what;
  bool failed = true;
  // The kernel's own time: inside the memory access scope (its mprotect calls
  // under TORCHNEURON_PROTECT_MEMORY are not the kernel's), before its
  // closure is destroyed.
  std::chrono::steady_clock::time_point t0, t1;
  int64_t start_ns = 0, end_ns = 0, cpu0 = 0, cpu1 = 0;
  auto stamp_end = [&] {
    if (end_ns || t1 != std::chrono::steady_clock::time_point{}) return;
    t1 = std::chrono::steady_clock::now();
    if (count_cpu) cpu1 = thread_cpu_ns();
    if (t.traced) end_ns = activity::now_ns();
  };
  try {
    AccessScope access(protect_ && kernel);
    if (count_cpu) cpu0 = thread_cpu_ns();
    t0 = std::chrono::steady_clock::now();
    if (t.traced) start_ns = activity::now_ns();
    t.fn();
    stamp_end();
    failed = false;
  } catch (const std::exception& e) {
    stamp_end();
    what = e.what();
  } catch (...) {
    stamp_end();
    what = "unknown exception";
  }
  t.fn = nullptr;
  if (kernel && t0 != std::chrono::steady_clock::time_point{})
    counters_.busy_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(),
        std::memory_order_relaxed);
  if (count_cpu && cpu0) counters_.kernel_cpu_ns.fetch_add(cpu1 - cpu0, std::memory_order_relaxed);
  if (t.traced && !start_ns) start_ns = end_ns = activity::now_ns();  // AccessScope itself threw
  if (t.traced) {
    Activity a;
    a.kind = t.activity_kind;
    a.name = t.name;
    a.device = device_;
    a.stream = id_;
    a.start_ns = start_ns;
    a.end_ns = end_ns;
    a.correlation_id = t.correlation_id;
    a.bytes = t.bytes;
    a.sequence = t.sequence;
    a.failed = failed;
    activity::record(a);
  }
  if (!failed) return {};
  if (kernel) counters_.failed.fetch_add(1, std::memory_order_relaxed);
  return std::string("neuron kernel '") + (t.name ? t.name : "?") + "' failed on device " +
         std::to_string(device_) + " stream " + std::to_string(id_) + ": " + what;
}

}  // namespace torchneuron::runtime

#include "activity.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>

namespace torchneuron::runtime {
namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mu;
std::vector<Activity>* g_buffer = new std::vector<Activity>();  // leaked: workers outlive statics

std::atomic<uint64_t> g_generation{0};
thread_local std::vector<uint64_t> t_correlation;
thread_local uint64_t t_generation = 0;

// The calling thread's stack, emptied if a reset happened since its last use.
std::vector<uint64_t>& correlation_stack() {
  const uint64_t g = g_generation.load(std::memory_order_relaxed);
  if (t_generation != g) {
    t_correlation.clear();
    t_generation = g;
  }
  return t_correlation;
}
thread_local ActivityKind t_kind = ActivityKind::kKernel;
thread_local uint64_t t_bytes = 0;

}  // namespace

const char* activity_kind_name(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpyHtoD:
      return "memcpy_htod";
    case ActivityKind::kMemcpyDtoH:
      return "memcpy_dtoh";
    case ActivityKind::kMemcpyDtoD:
      return "memcpy_dtod";
    case ActivityKind::kGraph:
      return "graph";
    case ActivityKind::kFallback:
      return "cpu_fallback";
    case ActivityKind::kFused:
      return "fused";
  }
  return "?";
}

namespace activity {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void enable(bool on) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (on) g_buffer->clear();
  g_enabled.store(on, std::memory_order_release);
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

std::vector<Activity> drain() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Activity> out;
  out.swap(*g_buffer);
  return out;
}

void push_correlation_id(uint64_t id) { correlation_stack().push_back(id); }
void pop_correlation_id() {
  auto& s = correlation_stack();
  if (!s.empty()) s.pop_back();
}
uint64_t current_correlation_id() {
  auto& s = correlation_stack();
  return s.empty() ? 0 : s.back();
}
void reset_correlation_ids() { g_generation.fetch_add(1, std::memory_order_relaxed); }

const char* intern(const std::string& name) {
  static std::mutex mu;
  static auto* names = new std::set<std::string>();  // leaked: pointers stay valid
  std::lock_guard<std::mutex> lock(mu);
  return names->insert(name).first->c_str();
}

void record(const Activity& a) {
  std::lock_guard<std::mutex> lock(g_mu);
  // A task that started before recording stopped may end after: dropped.
  if (g_enabled.load(std::memory_order_relaxed)) g_buffer->push_back(a);
}

void record_host(ActivityKind kind, const char* name, int device, int64_t start_ns, int64_t end_ns,
                 uint64_t bytes) {
  record_on_stream(kind, name, device, kHostStream, start_ns, end_ns, bytes);
}

void record_on_stream(ActivityKind kind, const char* name, int device, StreamId stream,
                      int64_t start_ns, int64_t end_ns, uint64_t bytes) {
  if (!enabled()) return;
  Activity a;
  a.kind = kind;
  a.name = name;
  a.device = device;
  a.stream = stream;
  a.start_ns = start_ns;
  a.end_ns = end_ns;
  a.correlation_id = current_correlation_id();
  a.bytes = bytes;
  record(a);
}

}  // namespace activity

ActivityScope::ActivityScope(ActivityKind kind, uint64_t bytes)
    : prev_kind_(t_kind), prev_bytes_(t_bytes) {
  t_kind = kind;
  t_bytes = bytes;
}
ActivityScope::~ActivityScope() {
  t_kind = prev_kind_;
  t_bytes = prev_bytes_;
}
ActivityKind ActivityScope::current_kind() { return t_kind; }
uint64_t ActivityScope::current_bytes() { return t_bytes; }

}  // namespace torchneuron::runtime

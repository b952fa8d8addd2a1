// The device runtime interface: logical NeuronCores, HBM, streams, events.
// No PyTorch headers here (DESIGN.md, layer "runtime"). The emulator in
// emulator.cpp is the default implementation; a hardware runtime would be a
// second implementation of the same interface.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron::runtime {

// Any misuse of the runtime: bad device index, unknown stream or event.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation past the HBM capacity of a logical core, after the cache was
// released and the allocation retried. The message names all figures (bytes).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& msg, int device, size_t requested, size_t allocated,
                   size_t reserved, size_t capacity)
      : Error(msg),
        device(device),
        requested(requested),
        allocated(allocated),
        reserved(reserved),
        capacity(capacity) {}
  int device;
  size_t requested, allocated, reserved, capacity;
};

// A kernel that threw on a stream worker; rethrown at the next sync point
// of that stream or device (as CUDA reports asynchronous errors).
class AsyncError : public Error {
 public:
  using Error::Error;
};

// Same meaning as c10::CachingAllocator::Stat.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
};
// Index into StatArray, as c10::CachingAllocator::StatType.
enum StatType : int { kAggregate = 0, kSmallPool = 1, kLargePool = 2 };
using StatArray = std::array<Stat, 3>;

// Same fields and meanings as c10::CachingDeviceAllocator::DeviceStats.
struct MemoryStats {
  StatArray allocation, segment, active, inactive_split;
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0;
  int64_t num_device_alloc = 0, num_device_free = 0;
  int64_t max_split_size = -1;
};

// One visible logical NeuronCore.
struct CoreInfo {
  int index = 0;              // device index as PyTorch sees it (0..count-1)
  int logical_id = 0;         // id among all logical cores of the instance
  int logical_nc_config = 2;  // NEURON_LOGICAL_NC_CONFIG: physical cores per logical core
  size_t hbm_bytes = 0;       // capacity of this core's HBM
  std::string name;           // e.g. "Trainium2 NeuronCore-v3 (emulated, LNC=2)"
};

// Environment-derived configuration; see config.cpp for the variables.
struct Config {
  int logical_nc_config = 2;
  int logical_cores_total = 4;  // per chip at this LNC
  std::vector<int> visible;     // logical ids visible, in order
  size_t hbm_bytes_per_core = 0;
  bool launch_blocking = false;  // NEURON_LAUNCH_BLOCKING=1
  bool protect_memory = false;   // TORCHNEURON_PROTECT_MEMORY=1
};

// Reads NEURON_LOGICAL_NC_CONFIG (1 or 2), NEURON_RT_VISIBLE_CORES ("0",
// "0-1", "0,2"), TORCHNEURON_HBM_GIB (float, GiB per core),
// NEURON_LAUNCH_BLOCKING, TORCHNEURON_PROTECT_MEMORY. Throws Error naming the
// variable and value on bad input.
Config config_from_env();

// ---- Memory history: the allocator's events and state, with the meanings of
// torch.cuda.memory._record_memory_history and memory_snapshot. ----
// What the layer above attaches to an allocation (a stack trace): opaque here.
using MemoryContext = std::shared_ptr<void>;
// Called on the allocating/freeing thread, outside the allocator's lock; may
// return nullptr (no context).
using MemoryContextRecorder = std::function<MemoryContext()>;

struct MemoryEvent {
  // As c10's TraceEntry::Action (free_requested and free_completed are one
  // moment here: a block is freed when its last kernel has run).
  enum Action : uint8_t {
    kAlloc,
    kFreeRequested,
    kFreeCompleted,
    kSegmentAlloc,
    kSegmentFree,
    kOom
  };
  Action action = kAlloc;
  uint64_t addr = 0;    // block or segment start; for kOom: 0
  uint64_t size = 0;    // alloc/free: bytes requested (as c10's trace); segments: their size; kOom:
                        // bytes requested
  int64_t time_us = 0;  // microseconds since the Unix epoch
  uint64_t device_free = 0;  // kOom: capacity minus reserved bytes
  MemoryContext context;
};
const char* memory_action_name(
    MemoryEvent::Action a);  // "alloc", "free_requested", ... as torch.cuda

// Which stacks are kept, as c10's RecordContext (torch.cuda's `context`):
// kState: of live allocations only (blocks); kAlloc: also on alloc events
// (free events carry the allocation's); kAll: frees gather their own.
enum class MemoryContextLevel : uint8_t { kNever, kState, kAlloc, kAll };

struct MemoryHistoryOptions {
  bool enabled = false;
  size_t max_entries = 0;  // events kept per device (the newest)
  MemoryContextLevel context = MemoryContextLevel::kNever;
  MemoryContextRecorder recorder;  // gives contexts (may be empty: none)
  uint32_t skip_actions = 0;       // bit (1u << MemoryEvent::Action) set: not recorded
  bool clear = false;              // drop the events recorded so far (stopping always does)
};

struct MemoryBlock {
  uint64_t addr = 0, size = 0, requested = 0;  // requested: bytes asked for (0 when free)
  bool allocated = false;
  MemoryContext context;  // of the allocation (nullptr when free or not recorded)
};

struct MemorySegment {
  uint64_t addr = 0, size = 0;
  bool small = false;                     // pool: "small" or "large"
  uint64_t allocated = 0, requested = 0;  // bytes of the allocated blocks
  std::vector<MemoryBlock> blocks;        // by address, covering the segment
};

struct MemorySnapshot {
  std::vector<MemorySegment> segments;  // by address
  std::vector<MemoryEvent> trace;       // oldest first, at most max_entries
};

using StreamId = int64_t;  // 0 is the default stream of a device
using EventId = int64_t;

// Stream ids of a device, as CUDA's stream pools: 0 is the default stream;
// create_stream hands out 1..8 (normal priority) or 9..16 (high priority)
// round-robin. Every id in 0..kMaxStreamId is valid on every device; a stream's
// worker thread starts on its first use.
constexpr StreamId kDefaultStream = 0;
constexpr int kStreamsPerPool = 8;
constexpr StreamId kMaxStreamId = 2 * kStreamsPerPool;
// Priority of a stream id as create_stream assigns them: 0 normal, -1 high.
inline int stream_priority(StreamId id) { return id > kStreamsPerPool ? -1 : 0; }

struct Counters {
  int64_t kernels_launched = 0;  // closures run on streams
  int64_t kernels_failed = 0;
  int64_t busy_ns = 0;  // nanoseconds the device's streams spent running kernels
  // CPU nanoseconds the stream workers spent inside kernels while kernel CPU
  // counting was on (their thread CPU clock around each kernel): the emulated
  // core's busy time, which time slices lost to other processes do not
  // inflate, without the queue's hand-offs (wake-ups, locks), whose cost
  // depends on scheduling rather than on the work.
  int64_t kernel_cpu_ns = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;     // "emulator"
  virtual std::string version() const = 0;  // runtime version string
  virtual const Config& config() const = 0;
  virtual int device_count() const = 0;
  virtual const CoreInfo& core(int device) const = 0;  // throws Error on bad index

  // ---- HBM (caching allocator per core) ----
  // Returns device memory of at least `bytes` (nullptr for 0). Throws
  // OutOfMemoryError past capacity (the cache is released and retried first).
  // last_try=false: the caller will try again (after waiting for queued work),
  // so a failure counts as an allocation retry, not an OOM.
  virtual void* allocate(int device, size_t bytes, bool last_try = true) = 0;
  virtual void free(void* ptr) = 0;                  // thread-safe; ptr from allocate
  virtual int device_of(const void* ptr) const = 0;  // -1 if not device memory
  virtual MemoryStats memory_stats(int device) const = 0;
  virtual void reset_peak_stats(int device) = 0;
  virtual void reset_accumulated_stats(int device) = 0;
  virtual void empty_cache(int device) = 0;  // releases unused cached segments
  // This process's share of the core's HBM, in (0, 1] (Error outside): allocations
  // that would reserve more raise OutOfMemoryError (cudaMemGetInfo is unchanged).
  virtual void set_memory_fraction(int device, double fraction) = 0;
  virtual double memory_fraction(int device) const = 0;
  // (free, total) bytes as cudaMemGetInfo: capacity minus reserved, capacity.
  virtual std::pair<size_t, size_t> mem_get_info(int device) const = 0;
  // Starts (enabled) or stops recording allocator events on every device,
  // keeping the newest `max_entries` per device; `recorder` gives contexts
  // at the moments `context` says. Stopping clears the events.
  virtual void record_memory_history(const MemoryHistoryOptions& options) = 0;
  // Segments, blocks and recorded events of `device`, consistent with each
  // other and with memory_stats at one instant.
  virtual MemorySnapshot memory_snapshot(int device) const = 0;

  // ---- Streams: in-order queues, each served by its own worker thread ----
  // A new stream from the device's pool (priority: 0 normal, <0 high).
  virtual StreamId create_stream(int device, int priority) = 0;
  // Enqueue `fn` on the stream; it runs on the worker thread with device
  // memory accessible (see protect_memory). `name` names it in errors and is
  // kept as a pointer, so it must outlive the kernel (a string literal). With
  // launch_blocking the call waits and rethrows the kernel's error.
  virtual void launch(int device, StreamId stream, const char* name, std::function<void()> fn) = 0;
  virtual bool query_stream(int device, StreamId stream) = 0;  // all work done?
  // Wait for all work queued so far; rethrows (once) a kernel error as AsyncError.
  virtual void synchronize_stream(int device, StreamId stream) = 0;
  virtual void synchronize_device(int device) = 0;  // every stream of the device
  // Waits as synchronize_* do, but a kernel error stays pending for the next
  // synchronize (waits that are not sync points: reseeding, a storage's growth).
  virtual void wait_stream(int device, StreamId stream) = 0;
  virtual void wait_device(int device) = 0;

  // ---- Events ----
  virtual EventId create_event(int device, bool enable_timing) = 0;
  virtual void destroy_event(EventId event) = 0;
  // Marks the point after all work queued so far on `stream`.
  virtual void record_event(EventId event, int device, StreamId stream) = 0;
  // Work queued on `stream` after this call waits for the event's point.
  virtual void stream_wait_event(int device, StreamId stream, EventId event) = 0;
  virtual bool query_event(EventId event) = 0;  // true if reached (or never recorded)
  virtual void synchronize_event(EventId event) = 0;
  // Milliseconds between two completed events recorded with enable_timing.
  virtual double elapsed_time_ms(EventId start, EventId end) = 0;

  // Runs `fn` on the calling thread with device memory accessible: for
  // host-side copies. Does not order with streams; callers synchronize.
  virtual void with_device_access(const std::function<void()>& fn) = 0;

  virtual Counters counters(int device) const = 0;
  // Turns counting of Counters::kernel_cpu_ns on or off for every device
  // (off at start: it reads a thread CPU clock twice per kernel, a system call
  // of about 1 us on a VM); returns the previous setting.
  virtual bool set_count_kernel_cpu(bool on) = 0;
};

// The process-wide runtime (the emulator), created on first use from
// config_from_env(). Never destroyed (worker threads outlive static teardown).
Runtime& get();

}  // namespace torchneuron::runtime

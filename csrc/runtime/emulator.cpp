// The emulator: one caching allocator and one set of streams per visible
// logical core, one event table, all behind the Runtime interface.
#include "emulator.h"

#include <sstream>
#include <vector>

#include "allocator.h"
#include "device_memory.h"
#include "device_streams.h"
#include "event.h"
#include "segment_table.h"
#include "trainium2.h"

namespace torchneuron::runtime {
namespace {

constexpr const char* kVersion = "0.1.0";

// Fills defaults and checks what config_from_env checks, for hand-made configs.
Config resolve(Config c) {
  if (c.logical_nc_config != 1 && c.logical_nc_config != 2)
    throw Error("logical_nc_config " + std::to_string(c.logical_nc_config) +
                " is not supported (1 or 2)");
  c.logical_cores_total = trainium2::logical_cores(c.logical_nc_config);
  if (c.visible.empty())
    for (int i = 0; i < c.logical_cores_total; ++i) c.visible.push_back(i);
  std::vector<bool> seen(c.logical_cores_total, false);
  for (int id : c.visible) {
    if (id < 0 || id >= c.logical_cores_total || seen[id])
      throw Error("visible logical core " + std::to_string(id) +
                  " is out of range or repeated (ids 0-" +
                  std::to_string(c.logical_cores_total - 1) + ")");
    seen[id] = true;
  }
  if (c.hbm_bytes_per_core == 0)
    c.hbm_bytes_per_core = trainium2::hbm_per_core(c.logical_nc_config);
  return c;
}

class Emulator final : public Runtime {
 public:
  explicit Emulator(const Config& config) : config_(resolve(config)) {
    for (size_t i = 0; i < config_.visible.size(); ++i) {
      CoreInfo info;
      info.index = int(i);
      info.logical_id = config_.visible[i];
      info.logical_nc_config = config_.logical_nc_config;
      info.hbm_bytes = config_.hbm_bytes_per_core;
      info.name = std::string(trainium2::kCoreName) +
                  " (emulated, LNC=" + std::to_string(config_.logical_nc_config) + ")";
      devices_.push_back(std::make_unique<Device>(std::move(info), config_, segments_));
    }
  }

  ~Emulator() override {
    // All queues first: a wait queued on one device may refer to another's stream.
    for (auto& d : devices_) d->streams.drain();
  }

  std::string name() const override { return "emulator"; }
  std::string version() const override { return kVersion; }
  const Config& config() const override { return config_; }
  int device_count() const override { return int(devices_.size()); }
  const CoreInfo& core(int device) const override { return dev(device).info; }

  void* allocate(int device, size_t bytes, bool last_try = true) override {
    return dev(device).allocator.allocate(bytes, last_try);
  }

  void free(void* ptr) override {
    if (!ptr) return;
    int d = segments_.find(ptr);
    if (d < 0) {
      std::ostringstream msg;
      msg << "free of " << ptr << ": not neuron device memory";
      throw Error(msg.str());
    }
    devices_[d]->allocator.free(ptr);
  }

  int device_of(const void* ptr) const override { return ptr ? segments_.find(ptr) : -1; }
  MemoryStats memory_stats(int device) const override { return dev(device).allocator.stats(); }
  void reset_peak_stats(int device) override { dev(device).allocator.reset_peak_stats(); }
  void reset_accumulated_stats(int device) override {
    dev(device).allocator.reset_accumulated_stats();
  }
  void empty_cache(int device) override { dev(device).allocator.empty_cache(); }
  void set_memory_fraction(int device, double fraction) override {
    dev(device).allocator.set_fraction(fraction);
  }
  double memory_fraction(int device) const override { return dev(device).allocator.fraction(); }

  std::pair<size_t, size_t> mem_get_info(int device) const override {
    const CachingAllocator& a = dev(device).allocator;
    return {a.capacity() - a.reserved(), a.capacity()};
  }

  void record_memory_history(const MemoryHistoryOptions& options) override {
    for (auto& d : devices_) d->allocator.record_history(options);
  }
  MemorySnapshot memory_snapshot(int device) const override {
    return dev(device).allocator.snapshot();
  }

  StreamId create_stream(int device, int priority) override {
    return dev(device).streams.create(priority);
  }

  void launch(int device, StreamId stream, const char* name, std::function<void()> fn) override {
    Stream& s = dev(device).streams.get(stream);
    if (!fn)
      throw Error(std::string("launch of neuron kernel '") + (name ? name : "?") +
                  "' without a function");
    if (!config_.launch_blocking) {
      s.enqueue(name, std::move(fn), Stream::Kind::kKernel);
      return;
    }
    std::string error;
    s.wait(s.enqueue(name, std::move(fn), Stream::Kind::kKernel, &error));
    if (!error.empty()) throw AsyncError(error);
  }

  bool query_stream(int device, StreamId stream) override {
    Stream* s = dev(device).streams.find(stream);
    return !s || s->reached(s->enqueued());
  }

  void synchronize_stream(int device, StreamId stream) override {
    Stream* s = dev(device).streams.find(stream);
    if (!s) return;
    s->wait(s->enqueued());
    if (auto error = s->take_error()) throw AsyncError(*error);
  }

  void synchronize_device(int device) override { dev(device).streams.synchronize(); }
  void wait_stream(int device, StreamId stream) override {
    if (Stream* s = dev(device).streams.find(stream)) s->wait(s->enqueued());
  }
  void wait_device(int device) override { dev(device).streams.drain(); }

  EventId create_event(int device, bool enable_timing) override {
    dev(device);
    return events_.create(device, enable_timing);
  }
  void destroy_event(EventId event) override { events_.destroy(event); }
  void record_event(EventId event, int device, StreamId stream) override {
    events_.record(event, dev(device).streams.get(stream));
  }
  void stream_wait_event(int device, StreamId stream, EventId event) override {
    events_.block(dev(device).streams.get(stream), event);
  }
  bool query_event(EventId event) override { return events_.query(event); }
  void synchronize_event(EventId event) override { events_.synchronize(event); }
  double elapsed_time_ms(EventId start, EventId end) override {
    return events_.elapsed_ms(start, end);
  }

  void with_device_access(const std::function<void()>& fn) override {
    AccessScope access(config_.protect_memory);
    fn();
  }

  Counters counters(int device) const override { return dev(device).streams.counters(); }
  bool set_count_kernel_cpu(bool on) override { return runtime::set_count_kernel_cpu(on); }

 private:
  struct Device {
    Device(CoreInfo core, const Config& c, SegmentTable& table)
        : info(std::move(core)),
          allocator(info.index, c.hbm_bytes_per_core, c.protect_memory, table),
          streams(info.index, c.protect_memory) {}
    CoreInfo info;
    CachingAllocator allocator;
    DeviceStreams streams;  // declared after the allocator: queued closures free into it
  };

  Device& dev(int device) const {
    if (device < 0 || device >= int(devices_.size())) {
      const size_t n = devices_.size();
      throw Error("invalid neuron device index " + std::to_string(device) + " (" +
                  std::to_string(n) + " visible NeuronCore" + (n == 1 ? "" : "s") + ")");
    }
    return *devices_[device];
  }

  const Config config_;
  SegmentTable segments_;  // before devices_: allocators unregister on destruction
  std::vector<std::unique_ptr<Device>> devices_;
  EventTable events_;
};

}  // namespace

std::unique_ptr<Runtime> make_emulator(const Config& config) {
  return std::make_unique<Emulator>(config);
}

// Leaked on purpose: stream workers may still run during static destruction.
Runtime& get() {
  static Runtime* runtime = make_emulator(config_from_env()).release();
  return *runtime;
}

}  // namespace torchneuron::runtime

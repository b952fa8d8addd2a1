// Device activity for torch.profiler: a Kineto child profiler (Kineto's
// IActivityProfiler plugin interface, libkineto::api().registerProfilerFactory)
// that turns the runtime's activity records into Kineto trace activities.
//
// Why this mechanism: torch 2.13's CPU wheel links Kineto into libtorch_cpu.so
// with its symbols exported and ships its headers (torch/include/kineto), and
// lists ProfilerActivity.PrivateUse1 as supported once the backend is renamed;
// a request for it then goes through Kineto, which asks its child profilers.
// The PrivateUse1 profiler stubs (registerPrivateUse1Methods) only serve the
// legacy KINETO_PRIVATEUSE1_FALLBACK mode, used when Kineto is absent.
//
// Rows: one Kineto "device" (trace pid) per NeuronCore, one resource (tid) per
// stream that ran work, plus a "host (CPU fallback)" row for device work the
// host did. Kernels are CONCURRENT_KERNEL, copies GPU_MEMCPY (PyTorch reports
// both as PrivateUse1 device events); each is linked to the CPU operator whose
// correlation id was on top of the launching thread's stack.
// Kineto's activity metadata is formatted with fmt, which libtorch does not
// export: compile the fmt functions this file uses into it.
#define FMT_HEADER_ONLY
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "profiler/kineto_plugin.h"
#include "runtime/activity.h"
#include "runtime/runtime.h"

namespace torchneuron::profiler {
namespace {

namespace rt = torchneuron::runtime;
using libkineto::ActivityType;

// Trace pid of a NeuronCore: its device index, which PyTorch reports as the
// event's device_index. Kineto also names pids 0-7 "GPU n" at trace start;
// our names carry a later timestamp, so viewers that apply metadata in time
// order show "NeuronCore n".
constexpr int64_t kPidBase = 0;
// tid of the host row of a core (stream ids are 0..16).
constexpr int64_t kHostTid = 1000;

const std::set<ActivityType>& device_types() {
  static const std::set<ActivityType> types{ActivityType::CONCURRENT_KERNEL,
                                            ActivityType::GPU_MEMCPY};
  return types;
}

// Kineto keeps a pointer to each activity's span for the trace's life.
const libkineto::TraceSpan& neuron_span() {
  static const auto* span = new libkineto::TraceSpan(0, 0, "neuron");
  return *span;
}

const char* direction(rt::ActivityKind k) {
  switch (k) {
    case rt::ActivityKind::kMemcpyHtoD:
      return "HtoD";
    case rt::ActivityKind::kMemcpyDtoH:
      return "DtoH";
    case rt::ActivityKind::kMemcpyDtoD:
      return "DtoD";
    default:
      return "";
  }
}

bool is_copy(rt::ActivityKind k) {
  return k == rt::ActivityKind::kMemcpyHtoD || k == rt::ActivityKind::kMemcpyDtoH ||
         k == rt::ActivityKind::kMemcpyDtoD;
}

// The name a row shows: copies as CUDA's "Memcpy HtoD (Device -> Device)" style.
std::string display_name(const rt::Activity& a) {
  if (is_copy(a.kind)) return std::string("Memcpy ") + direction(a.kind) + " (neuron)";
  if (a.kind == rt::ActivityKind::kFallback)
    return std::string("cpu_fallback: ") + (a.name ? a.name : "?");
  return a.name ? a.name : "?";
}

std::atomic<bool> g_session_active{false};

class NeuronSession final : public libkineto::IActivityProfilerSession {
 public:
  NeuronSession() { rt::activity::reset_correlation_ids(); }
  void start() override {
    rt::activity::enable(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    records_ = rt::activity::drain();
    rt::activity::enable(false);
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  ~NeuronSession() override {
    if (status_ == libkineto::TraceStatus::RECORDING) rt::activity::enable(false);
    g_session_active = false;
  }
  std::vector<std::string> errors() override { return {}; }

  void pushCorrelationId(uint64_t id) override { rt::activity::push_correlation_id(id); }
  void popCorrelationId() override { rt::activity::pop_correlation_id(); }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    // Rows first: a device per core, a resource per stream seen.
    std::map<int, std::set<int64_t>> rows;
    for (const rt::Activity& a : records_) rows[a.device].insert(a.stream);
    int64_t t_last = 0;
    for (const rt::Activity& a : records_) t_last = std::max(t_last, a.end_ns);
    for (auto& [device, streams] : rows) {
      const int64_t pid = kPidBase + device;
      logger.handleDeviceInfo(
          libkineto::DeviceInfo{pid, pid, "NeuronCore " + std::to_string(device),
                                "neuron:" + std::to_string(device)},
          t_last);
      for (int64_t s : streams) {
        const int64_t tid = s == rt::kHostStream ? kHostTid : s;
        std::string name = s == rt::kHostStream      ? std::string("host (CPU fallback)")
                           : s == rt::kDefaultStream ? std::string("stream 0 (default)")
                                                     : "stream " + std::to_string(s);
        logger.handleResourceInfo(libkineto::ResourceInfo{tid, tid, pid, name}, t_last);
      }
    }
    for (const rt::Activity& a : records_) {
      const ActivityType type =
          is_copy(a.kind) ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL;
      libkineto::GenericTraceActivity act(neuron_span(), type, display_name(a));
      act.startTime = a.start_ns;
      act.endTime = a.end_ns;
      act.device = int32_t(kPidBase + a.device);
      act.resource = int32_t(a.stream == rt::kHostStream ? kHostTid : a.stream);
      act.id = int32_t(a.correlation_id);
      if (a.correlation_id) act.linked = linked(int32_t(a.correlation_id));
      act.addMetadata("device", a.device);
      act.addMetadata("stream", a.stream);
      act.addMetadataQuoted("kind", rt::activity_kind_name(a.kind));
      if (a.correlation_id) act.addMetadata("correlation", a.correlation_id);
      if (is_copy(a.kind)) {
        act.addMetadata("bytes", a.bytes);
        const double us = double(a.end_ns - a.start_ns) / 1e3;
        if (us > 0) act.addMetadata("memory bandwidth (GB/s)", double(a.bytes) / us / 1e3);
      }
      if (a.kind == rt::ActivityKind::kFallback)
        act.addMetadataQuoted("cpu_fallback", a.name ? a.name : "?");
      if (a.kind == rt::ActivityKind::kGraph) act.addMetadataQuoted("graph", a.name ? a.name : "?");
      if (a.failed) act.addMetadata("failed", 1);
      logger.handleGenericActivity(act);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  std::vector<rt::Activity> records_;
};

class NeuronProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return device_types(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    // PyTorch asks for the PRIVATEUSE1_* runtime types with CPU activity too;
    // device rows are wanted only when device kernels or copies are.
    if (!types.count(ActivityType::CONCURRENT_KERNEL) && !types.count(ActivityType::GPU_MEMCPY))
      return nullptr;
    g_session_active = true;
    return std::make_unique<NeuronSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  const std::string name_ = "__neuron_profiler__";
};

}  // namespace

void register_kineto_plugin() {
  static std::once_flag once;
  std::call_once(once, [] {
    libkineto::api().registerProfilerFactory([] { return std::make_unique<NeuronProfiler>(); });
  });
}

bool session_active() { return g_session_active.load(std::memory_order_relaxed); }

}  // namespace torchneuron::profiler

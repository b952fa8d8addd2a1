// Streams: the current stream per thread and device, and the host's waits
// for device work (sync points rethrow kernel errors, plain waits do not).
#include <c10/util/Exception.h>

#include <vector>

#include "aten/concatenation.h"
#include "aten/device.h"
#include "aten/stream.h"

namespace torchneuron {

namespace {
// Current stream per device for this thread; empty means all default.
thread_local std::vector<rt::StreamId> tls_streams;
}  // namespace

rt::StreamId current_stream_id(c10::DeviceIndex device) {
  return size_t(device) < tls_streams.size() ? tls_streams[device] : 0;
}

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got ", stream);
  check_device_index(stream.device_index());
  if (tls_streams.size() < size_t(device_count())) tls_streams.resize(device_count(), 0);
  tls_streams[stream.device_index()] = stream.id();
}

c10::Stream make_stream(c10::DeviceIndex device, rt::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), id);
}

void sync_current_stream(c10::DeviceIndex device) {
  blocking_wait([&] {
    translate_errors(
        [&] { device_runtime().synchronize_stream(device, current_stream_id(device)); });
  });
}

void sync_device(c10::DeviceIndex device) {
  blocking_wait([&] { translate_errors([&] { device_runtime().synchronize_device(device); }); });
}

void wait_current_stream(c10::DeviceIndex device) {
  blocking_wait([&] {
    translate_errors([&] { device_runtime().wait_stream(device, current_stream_id(device)); });
  });
}

void wait_device(c10::DeviceIndex device) {
  blocking_wait([&] { translate_errors([&] { device_runtime().wait_device(device); }); });
}

namespace {
BlockingWaitHook g_wait_hook = nullptr;
}  // namespace

void blocking_wait(const std::function<void()>& wait) {
  flush_all();  // what the host waits for may be buffered (concatenation.h)
  if (g_wait_hook)
    g_wait_hook(wait);
  else
    wait();
}

void set_blocking_wait_hook(BlockingWaitHook hook) { g_wait_hook = hook; }

void wait_releasing_gil(const std::function<void()>& wait) {
  if (g_wait_hook)
    g_wait_hook(wait);
  else
    wait();
}

}  // namespace torchneuron

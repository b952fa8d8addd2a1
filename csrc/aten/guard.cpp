// Device guard (c10::impl::DeviceGuardImplInterface) for `neuron`: PyTorch's
// device and stream switches, streams and events over the runtime.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "aten/concatenation.h"
#include "aten/device.h"
#include "aten/stream.h"

namespace torchneuron {

namespace {

rt::EventId to_event(void* e) { return reinterpret_cast<intptr_t>(e) - 1; }
void* from_event(rt::EventId id) { return reinterpret_cast<void*>(intptr_t(id + 1)); }

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "expected a neuron device, got ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    unchecked_set_current_device(d.index());
  }

  c10::Stream getStream(c10::Device d) const override {
    auto idx = resolve_device(d.index());
    return make_stream(idx, current_stream_id(idx));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(resolve_device(d.index()), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    auto idx = resolve_device(d.index());
    rt::StreamId id = 0;
    translate_errors([&] { id = device_runtime().create_stream(idx, priority); });
    return make_stream(idx, id);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    set_current_stream(s);
    return old;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (!event) return;
    try {
      device_runtime().destroy_event(to_event(event));
    } catch (...) {
    }
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event device index ",
                int(device_index), " does not match the recording stream's device ",
                stream.device_index());
    translate_errors([&] {
      if (!*event) {
        bool timing = flag == c10::EventFlag::BACKEND_DEFAULT;
        *event = from_event(device_runtime().create_event(stream.device_index(), timing));
      }
      flush_stream(stream.device_index(), stream.id(), FlushCause::kEvent);
      device_runtime().record_event(to_event(*event), stream.device_index(), stream.id());
    });
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    flush_stream(stream.device_index(), stream.id(), FlushCause::kEvent);
    translate_errors([&] {
      device_runtime().stream_wait_event(stream.device_index(), stream.id(), to_event(event));
    });
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    bool r = false;
    translate_errors([&] { r = device_runtime().query_event(to_event(event)); });
    return r;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  bool queryStream(const c10::Stream& stream) const override {
    bool r = false;
    flush_stream(stream.device_index(), stream.id(), FlushCause::kEvent);
    translate_errors(
        [&] { r = device_runtime().query_stream(stream.device_index(), stream.id()); });
    return r;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    blocking_wait([&] {
      translate_errors(
          [&] { device_runtime().synchronize_stream(stream.device_index(), stream.id()); });
    });
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    blocking_wait(
        [&] { translate_errors([&] { device_runtime().synchronize_event(to_event(event)); }); });
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    sync_device(resolve_device(device_index));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "elapsed_time: both events must be recorded first");
    double ms = 0;
    translate_errors(
        [&] { ms = device_runtime().elapsed_time_ms(to_event(start), to_event(end)); });
    return ms;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torchneuron

// c10::DeviceAllocator for `neuron`: DataPtrs over the runtime's caching HBM
// allocator, with its statistics in PyTorch's DeviceStats form (so
// torch.accelerator.memory_* and torch.neuron.memory_* read the same figures).
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstring>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/launch.h"
#include "aten/stream.h"

namespace torchneuron {
namespace {

void delete_device_ptr(void* ptr) {
  if (ptr) device_runtime().free(ptr);
}

c10::CachingAllocator::Stat to_c10(const rt::Stat& s) {
  c10::CachingAllocator::Stat r;
  r.current = s.current;
  r.peak = s.peak;
  r.allocated = s.allocated;
  r.freed = s.freed;
  return r;
}

c10::CachingAllocator::StatArray to_c10(const rt::StatArray& a) {
  c10::CachingAllocator::StatArray r;
  for (size_t i = 0; i < a.size(); ++i) r[i] = to_c10(a[i]);
  return r;
}

struct NeuronAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }

  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
    void* ptr = nullptr;
    translate_errors([&] {
      try {
        ptr = device_runtime().allocate(device, nbytes, /*last_try=*/false);
      } catch (const rt::OutOfMemoryError&) {
        // Queued kernels keep the tensors they use until they have run, where
        // CUDA's allocator hands a freed block to the same stream's next
        // kernels at once: before failing, wait for the device's queued work
        // (its kernels then drop what they held) and try once more. From a
        // stream's own worker the wait fails, and so does the retry.
        try {
          wait_device(device);
        } catch (...) {
        }
        ptr = device_runtime().allocate(device, nbytes);
      }
    });
    return {ptr, ptr, &delete_device_ptr, c10::Device(kNeuron, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_device_ptr; }

  // Device-to-device copy of raw bytes, ordered on the current stream.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    auto device = current_device();
    launch(device, "copy_data", [=] { std::memcpy(dest, src, count); });
    wait_current_stream(device);  // a storage's growth is not a sync point
  }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      sync_device(d);
      translate_errors([&] { device_runtime().empty_cache(d); });
    }
  }
  // Kernels hold their tensors until they finish, so no extra bookkeeping.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    device = resolve_device(device);
    rt::MemoryStats s;
    translate_errors([&] { s = device_runtime().memory_stats(device); });
    c10::CachingDeviceAllocator::DeviceStats r;
    r.allocation = to_c10(s.allocation);
    r.segment = to_c10(s.segment);
    r.active = to_c10(s.active);
    r.inactive_split = to_c10(s.inactive_split);
    r.allocated_bytes = to_c10(s.allocated_bytes);
    r.reserved_bytes = to_c10(s.reserved_bytes);
    r.active_bytes = to_c10(s.active_bytes);
    r.inactive_split_bytes = to_c10(s.inactive_split_bytes);
    r.requested_bytes = to_c10(s.requested_bytes);
    r.num_alloc_retries = s.num_alloc_retries;
    r.num_ooms = s.num_ooms;
    r.num_device_alloc = s.num_device_alloc;
    r.num_device_free = s.num_device_free;
    r.max_split_size = s.max_split_size;
    return r;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    device = resolve_device(device);
    translate_errors([&] { device_runtime().reset_accumulated_stats(device); });
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    device = resolve_device(device);
    translate_errors([&] { device_runtime().reset_peak_stats(device); });
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    device = resolve_device(device);
    std::pair<size_t, size_t> r;
    translate_errors([&] { r = device_runtime().mem_get_info(device); });
    return r;
  }
};

NeuronAllocator g_allocator;

}  // namespace

c10::DeviceAllocator* neuron_allocator() { return &g_allocator; }

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  return g_allocator.allocate_on(device, nbytes);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torchneuron

// PrivateUse1 hooks for `neuron` (availability, device count, generators,
// current device) and the per-core random generator.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <cstring>

#include <deque>
#include <mutex>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/launch.h"
#include "aten/pinned_memory.h"
#include "aten/stream.h"

namespace torchneuron {
namespace {

// A neuron generator: Philox/MT state kept in a CPU generator, so that ATen's
// CPU random kernels produce the same streams as on the CPU for one seed.
struct NeuronGeneratorImpl final : public c10::GeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kNeuron, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}

  // Kernels draw when they run on the stream, not when launched: reading or
  // reseeding the state first waits for the draws already queued on this
  // core (else torch.manual_seed right after torch.randn reseeds under it).
  void set_current_seed(uint64_t seed) override {
    drain();
    cpu_.set_current_seed(seed);
  }
  void set_offset(uint64_t offset) override {
    drain();
    cpu_.set_offset(offset);
  }
  uint64_t get_offset() const override {
    drain();
    return cpu_.get_offset();
  }
  uint64_t current_seed() const override { return cpu_.current_seed(); }
  uint64_t seed() override {
    drain();
    return cpu_.seed();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    drain();
    cpu_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    drain();
    return cpu_.unsafeGetGeneratorImpl()->get_state();
  }
  void drain() const {
    // Not a sync point: an earlier kernel's error waits for one.
    if (!in_bad_fork()) wait_device(device_.index());
  }
  NeuronGeneratorImpl* clone_impl() const override {
    auto* g = new NeuronGeneratorImpl(device_.index());
    g->cpu_ = cpu_.clone();
    return g;
  }
  at::Generator cpu_;
};

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex index) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<NeuronGeneratorImpl>(resolve_device(index));
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int d = device_runtime().device_of(data);
    TORCH_CHECK(d >= 0, "pointer ", data, " is not neuron device memory");
    return c10::Device(kNeuron, d);
  }
  bool isPinnedPtr(const void* p) const override { return is_pinned_host_ptr(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  // Leaked: kernels still draining at exit may use them.
  static std::deque<at::Generator>* gens = [] {
    auto* g = new std::deque<at::Generator>();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d)
      g->push_back(at::make_generator<NeuronGeneratorImpl>(d));
    return g;
  }();
  device = resolve_device(device);
  return (*gens)[device];
}

at::Generator cpu_generator_of(const at::Generator& gen) {
  auto* impl = dynamic_cast<NeuronGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "expected a neuron generator, got one for ", gen.device());
  return impl->cpu_;
}

void NeuronHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  // As resize_bytes_cpu: a storage slice or a borrowed buffer keeps its bytes.
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  auto device = storage.device().index();
  auto old_size = storage.nbytes();
  c10::DataPtr fresh = allocate_on(device, newsize);
  const void* src = storage.data();
  void* dst = fresh.get();
  size_t n = std::min(old_size, newsize);
  if (n > 0) {
    // keep the old buffer alive until the copy ran
    auto old = storage.unsafeGetStorageImpl()->set_data_ptr(std::move(fresh));
    auto holder = std::make_shared<c10::DataPtr>(std::move(old));
    launch(device, "resize_storage", [holder, dst, src, n] { std::memcpy(dst, src, n); });
  } else {
    // Queued kernels hold the storage, not its old bytes: free those only
    // once the current stream has passed them (resize_(0) as FSDP2 frees
    // unsharded parameters). The allocator is not stream-ordered, so an
    // immediate free let another stream reuse bytes still to be read.
    auto old = storage.unsafeGetStorageImpl()->set_data_ptr(std::move(fresh));
    if (old.get()) {
      auto holder = std::make_shared<c10::DataPtr>(std::move(old));
      launch(device, "resize_storage_free", [holder] {});
    }
  }
  storage.unsafeGetStorageImpl()->set_nbytes(newsize);
}

static bool register_hooks = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace torchneuron

// Tensors over a neuron tensor's memory: cpu_alias (a kernel's CPU view of
// device bytes) and launch_view/launch_operand (what a queued kernel
// captures, built from a PinnedTensor record).
#include <ATen/EmptyTensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/TensorImpl.h>

#include <cstring>

#include "aten/alias.h"
#include "aten/device.h"
#include "aten/launch.h"

namespace torchneuron {

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined()) return t;
  at::Tensor a = at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [](void*) {}, t.options().device(c10::kCPU));
  // Lazy conjugate/negation views reach kernels that resolve them themselves
  // (copies, mm & co. are fallthrough for those keys); dropping the bits
  // would compute with the unconjugated values.
  if (t.is_conj()) a._set_conj(true);
  if (t.is_neg()) a._set_neg(true);
  return a;
}

PinnedTensor PinnedTensor::of(const at::Tensor& t, bool operand) {
  PinnedTensor p;
  if (!t.defined() || t.device().type() != kNeuron) {
    if (operand && t.defined() && t.device().is_cpu() && t.dim() == 0) {
      p.other = launch_operand(t);
    } else if (t.defined()) {
      auto* impl = t.unsafeGetTensorImpl();
      p.other = at::Tensor(impl->shallow_copy_and_detach(impl->version_counter(), true));
    }
    return p;
  }
  p.neuron = true;
  p.storage = t.storage();
  p.data = p.storage.mutable_data();
  p.nbytes = p.storage.nbytes();
  p.sizes.assign(t.sizes().begin(), t.sizes().end());
  p.strides.assign(t.strides().begin(), t.strides().end());
  p.offset = t.storage_offset();
  p.dtype = t.dtype();
  p.keys = t.key_set();
  p.device = t.device();
  return p;
}

at::Tensor PinnedTensor::view() const {
  if (!neuron) return other;
  // A new StorageImpl over the data pointer of the call, keeping the storage
  // by a reference count of its own (no heap block per view).
  c10::StorageImpl* keep = storage.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(keep);
  c10::DataPtr ptr(
      data, keep,
      [](void* k) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(k)); }, device);
  c10::Storage pinned(c10::Storage::use_byte_size_t(), nbytes, std::move(ptr),
                      /*allocator=*/nullptr, /*resizable=*/false);
  auto v = c10::make_intrusive<c10::TensorImpl>(std::move(pinned), keys, dtype);
  v->set_sizes_and_strides(sizes, strides, offset);
  return at::Tensor(std::move(v));
}

at::Tensor launch_view(const at::Tensor& t) { return PinnedTensor::of(t, false).view(); }

at::Tensor launch_operand(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.dim() != 0) return launch_view(t);
  // A CPU scalar operand is read at the call, as CUDA reads it: the caller
  // may change it before the queued kernel runs (y * s; s.add_(1)).
  const at::Tensor src = t.is_conj() || t.is_neg() ? t.resolve_conj().resolve_neg() : t;
  at::Tensor v = at::detail::empty_cpu({}, t.scalar_type());
  std::memcpy(v.mutable_data_ptr(), src.const_data_ptr(), t.element_size());
  v.unsafeGetTensorImpl()->set_wrapped_number(t.unsafeGetTensorImpl()->is_wrapped_number());
  return v;
}

}  // namespace torchneuron

// Native `neuron` kernels that are not computation: creation, copies between
// devices, resize/set_, .item(), and views (which only make new metadata over
// the same device storage, so ATen's own view implementations apply).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <typeinfo>

#include "aten/alias.h"
#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/empty_tensor.h"
#include "aten/launch.h"
#include "aten/pinned_memory.h"
#include "aten/stream.h"
#include "runtime/activity.h"

namespace torchneuron {

at::Tensor empty_strided_neuron(c10::IntArrayRef size, c10::IntArrayRef stride,
                                c10::ScalarType dtype, c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(kNeuron, resolve_device(device)));
  return at::detail::empty_strided_generic(
      size, stride, neuron_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

namespace {

c10::DeviceIndex device_of(std::optional<c10::Device> d) {
  if (!d) return current_device();
  TORCH_CHECK(d->type() == kNeuron, "expected a neuron device, got ", *d);
  return resolve_device(d->index());
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron tensors are strided only, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(kNeuron, device_of(device)));
  return at::detail::empty_generic(
      size, neuron_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(c10::get_default_dtype_as_scalartype()), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron tensors are strided only, got layout ",
              *layout);
  return empty_strided_neuron(size, stride, dtype.value_or(c10::get_default_dtype_as_scalartype()),
                              device_of(device));
}

void check_copy_shapes(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()), "copy_: the source of shape ",
              src.sizes(), " on ", src.device(),
              " cannot be broadcast to the destination of shape ", dst.sizes(), " on ",
              dst.device());
}

// Copy src into dst where at least one of them is a neuron tensor.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  check_copy_shapes(src, dst);
  if (dst.numel() == 0) return dst;
  const bool src_dev = src.device().type() == kNeuron;
  const bool dst_dev = dst.device().type() == kNeuron;
  TORCH_CHECK((src_dev || src.device().is_cpu()) && (dst_dev || dst.device().is_cpu()),
              "copy_: unsupported copy from ", src.device(), " to ", dst.device());
  if (src_dev && dst_dev && src.device() != dst.device()) {
    // Between cores: both sides settled, then a host-side copy.
    sync_device(src.device().index());
    sync_device(dst.device().index());
    const int64_t t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
    translate_errors([&] {
      device_runtime().with_device_access([&] { cpu_alias(dst).copy_(cpu_alias(src)); });
    });
    if (t0)  // a host-side copy: the profiler's host row of the destination core
      rt::activity::record_host(rt::ActivityKind::kMemcpyDtoD, "copy_core_to_core",
                                dst.device().index(), t0, rt::activity::now_ns(), dst.nbytes());
    return dst;
  }
  const auto device = (dst_dev ? dst : src).device().index();
  // The kernels capture launch views: geometry and addresses as of now. A host
  // destination is written, not read: no value snapshot of a 0-dim one.
  at::Tensor s = launch_view(src);
  at::Tensor d = dst_dev ? launch_view(dst) : dst.alias();
  // Labels the copy's launch for the profiler (runtime/activity.h).
  rt::ActivityScope label(src_dev && dst_dev ? rt::ActivityKind::kMemcpyDtoD
                          : dst_dev          ? rt::ActivityKind::kMemcpyHtoD
                                             : rt::ActivityKind::kMemcpyDtoH,
                          dst.nbytes());
  if (src_dev && dst_dev) {
    launch(device, "copy_", [s, d] { cpu_alias(d).copy_(cpu_alias(s)); });
    return dst;  // device-to-device copies stay asynchronous
  }
  const at::Tensor& host = dst_dev ? src : dst;
  const bool pinned = host.has_storage() && is_pinned_host_ptr(host.storage().data());
  if (dst_dev) {  // host to device
    // As CUDA: pageable memory is staged (the bytes are taken now, so the
    // caller may reuse its buffer as soon as a non_blocking copy returns);
    // pinned memory is read by the queued copy itself (no host work).
    at::Tensor staged = non_blocking && !pinned ? s.clone() : s;
    launch(device, "copy_h2d", [staged, d] { cpu_alias(d).copy_(staged); });
  } else {  // device to host
    launch(device, "copy_d2h", [s, d] { d.copy_(cpu_alias(s)); });
  }
  // As CUDA, a non_blocking copy into pageable host memory is synchronous
  // (only a pinned destination may be written after the call returns).
  if (!non_blocking || (!dst_dev && !pinned)) sync_current_stream(device);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  auto device = self.device().index();
  sync_current_stream(device);
  c10::Scalar r;
  const int64_t t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
  translate_errors(
      [&] { device_runtime().with_device_access([&] { r = cpu_alias(self).item(); }); });
  if (t0)  // the read of one element: a device-to-host copy in the stream's place, as CUDA's
           // .item()
    rt::activity::record_on_stream(rt::ActivityKind::kMemcpyDtoH, "copy_d2h", device,
                                   current_stream_id(device), t0, rt::activity::now_ns(),
                                   self.element_size());
  return r;
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size || memory_format) {
    impl->set_sizes_contiguous(size);
    if (memory_format && *memory_format != c10::MemoryFormat::Preserve)
      impl->empty_tensor_restride(*memory_format);
  }
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                   self.dtype().itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes()) at::native::resize_bytes_nocuda(self.storage(), needed);
  return self;
}

// As ATen's set_storage_cpu_: the storage grows only if the new geometry
// needs more bytes. (set_storage_meta__ requires a resizable storage for any
// non-empty result, which rejected storage slices: storage[:n].cpu() failed.)
at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset.expect_int());
  if (stride.data())
    impl->set_sizes_and_strides(C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
  else
    impl->set_sizes_contiguous(C10_AS_INTARRAYREF_SLOW(size));
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                   self.dtype().itemsize(), self.storage_offset());
  if (self.numel() > 0 && needed > self.storage().nbytes())
    at::native::resize_bytes_nocuda(self.storage(), needed);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = source.nbytes() / self.dtype().itemsize();
  return self.set_(std::move(source), 0, {n}, {});
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, neuron_allocator(), true);
  return self.set_(std::move(storage), 0, {0}, {});
}

}  // namespace

// Copies resolve lazy conjugation/negation themselves (cpu_alias keeps the
// bits). Without these fallthroughs the Conjugate/Negative fallback
// materialises the source with clone(), which copies through _copy_from
// again: endless recursion for any conj() view of a neuron tensor.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// `param.data = param.to("neuron")` (FSDP2's fully_shard, many libraries): ATen's
// check counts only its own dense backends (CPU, CUDA, ...) as shallow-copy compatible,
// not PrivateUse1. Plain strided TensorImpls on CPU or neuron are interchangeable;
// anything else (subclasses, functional wrappers, sparse) keeps ATen's rule.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto plain = [](const at::Tensor& t) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    return typeid(*impl) == typeid(c10::TensorImpl) && t.layout() == c10::kStrided &&
           !t.key_set().has(c10::DispatchKey::Python) &&
           (t.device().is_cpu() || t.device().type() == kNeuron);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (plain(self) && plain(from));
}

// Autograd's zero gradients (sgn's of real input): a ZeroTensor over no
// memory, as CUDA's. The CPU fallback made a CPU one and copied its bytes
// from a null pointer (a crash).
at::Tensor efficient_zero_tensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout>, std::optional<at::Device> device,
                                 std::optional<bool>) {
  at::Device d = device.value_or(at::Device(kNeuron));
  if (!d.has_index()) d = at::Device(kNeuron, current_device());
  at::native::ZeroTensorAllocator allocator(d);
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                    c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(
      size, &allocator, keys, dtype.value_or(c10::get_default_dtype_as_scalartype()), std::nullopt);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", at::native::set_tensor_);
  m.impl("set_", set_empty);
  m.impl("view", at::native::view);
  m.impl("view.dtype", at::native::view_dtype);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("alias", at::native::alias);
  // Kernels keep their tensors alive until they have run, so memory used on
  // another stream is never reused early: nothing to record (CUDA needs it).
  m.impl("record_stream", [](at::Tensor& self, c10::Stream stream) {
    TORCH_CHECK(stream.device_type() == kNeuron, "record_stream: expected a neuron stream, got ",
                stream);
  });
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

}  // namespace torchneuron

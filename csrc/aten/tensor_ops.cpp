// Native `neuron` kernels that are not computation: creation, copies between
// devices, resize/set_, .item(), and views (which only make new metadata over
// the same device storage, so ATen's own view implementations apply).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
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

#include <cstring>

#include "aten/context.h"

namespace torchneuron {

c10::DeviceAllocator* neuron_allocator();

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), [](void*) {},
                       t.options().device(c10::kCPU));
}

at::Tensor empty_strided_neuron(c10::IntArrayRef size, c10::IntArrayRef stride,
                                c10::ScalarType dtype, c10::DeviceIndex device) {
  c10::DeviceGuard guard(c10::Device(kNeuron, resolve_device(device)));
  return at::detail::empty_strided_generic(size, stride, neuron_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           dtype);
}

namespace {

c10::DeviceIndex device_of(std::optional<c10::Device> d) {
  if (!d) return current_device();
  TORCH_CHECK(d->type() == kNeuron, "expected a neuron device, got ", *d);
  return resolve_device(d->index());
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron tensors are strided only, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(kNeuron, device_of(device)));
  return at::detail::empty_generic(size, neuron_allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron tensors are strided only, got layout ",
              *layout);
  return empty_strided_neuron(size, stride,
                              dtype.value_or(c10::get_default_dtype_as_scalartype()),
                              device_of(device));
}

void check_copy_shapes(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()),
              "copy_: the source of shape ", src.sizes(), " on ", src.device(),
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
    translate_errors([&] {
      device_runtime().synchronize_device(src.device().index());
      device_runtime().synchronize_device(dst.device().index());
      device_runtime().with_device_access([&] { cpu_alias(dst).copy_(cpu_alias(src)); });
    });
    return dst;
  }
  const auto device = (dst_dev ? dst : src).device().index();
  if (src_dev && dst_dev) {
    launch(device, "copy_", [src, dst] { cpu_alias(dst).copy_(cpu_alias(src)); });
    return dst;  // device-to-device copies stay asynchronous
  }
  if (dst_dev) {  // host to device
    launch(device, "copy_h2d", [src, dst] { cpu_alias(dst).copy_(src); });
  } else {  // device to host
    launch(device, "copy_d2h", [src, dst] { dst.copy_(cpu_alias(src)); });
  }
  if (!non_blocking) sync_current_stream(device);
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
  translate_errors([&] { device_runtime().with_device_access([&] { r = cpu_alias(self).item(); }); });
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
                                                   self.dtype().itemsize(),
                                                   self.storage_offset());
  if (needed > self.storage().nbytes()) at::native::resize_bytes_nocuda(self.storage(), needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::set_storage_meta__symint(self, std::move(source), offset, size, stride);
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
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
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

}  // namespace torchneuron

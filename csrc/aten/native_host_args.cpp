// CPU arguments over device memory: host views of a call's device tensors (sharing one
// host storage per device storage, so ATen's overlap checks see what the device holds),
// 64-bit narrowing of inputs, the CPU generator in the device generator's place, and the
// CPU kernel run with out= results it may resize.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>

#include <sys/mman.h>

#include "aten/alias.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/ivalue_tensors.h"
#include "aten/native_kernel.h"

namespace torchneuron::native {

at::Tensor HostViews::view(const at::Tensor& t) {
  if (t.numel() == 0 || !t.has_storage() || !t.storage().data())
    return probe_ ? zero_host_like(t) : cpu_alias(t);
  const c10::Storage& src = t.storage();
  c10::Storage& host = slot(src.data());
  if (!host || host.nbytes() < src.nbytes()) host = make(src);
  auto r = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(host), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  r.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) r._set_conj(true);
  if (t.is_neg()) r._set_neg(true);
  return r;
}

c10::Storage& HostViews::slot(const void* data) {
  for (auto& [d, storage] : few_)
    if (d == data) return storage;
  if (few_.size() < kInline) return few_.emplace_back(data, c10::Storage()).second;
  return many_[data];
}

c10::Storage HostViews::make(const c10::Storage& src) const {
  const size_t n = src.nbytes();
  void* p = const_cast<void*>(src.data());
  if (!probe_)  // the device memory itself, not owned: a plain DataPtr, no deleter context
    return c10::Storage(c10::Storage::use_byte_size_t(), n,
                        c10::DataPtr(
                            p, p, [](void*) {}, c10::Device(c10::kCPU)),
                        /*allocator=*/nullptr, /*resizable=*/false);
  p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "neuron: no host memory for a ", n,
                   "-byte shape probe");
  return at::from_blob(
             p, {int64_t(n)}, [n](void* q) { munmap(q, n); }, at::TensorOptions().dtype(c10::kByte))
      .storage();
}

// Does host tensor `a` share bytes with any other tensor of `stack`?
bool overlaps_another(const Stack& stack, size_t i) {
  const at::Tensor& a = stack[i].toTensor();
  if (a.numel() == 0 || !a.has_storage()) return false;
  auto span = [](const at::Tensor& t) {
    int64_t last = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const int64_t k = t.dtype().itemsize();
    return std::make_pair(t.storage_offset() * k, (last + 1) * k);
  };
  const auto [lo, hi] = span(a);
  bool hit = false;
  for (size_t j = 0; j < stack.size() && !hit; ++j)
    if (j != i)
      map_tensors(stack[j], [&](const at::Tensor& t) {
        if (t.defined() && t.numel() > 0 && t.has_storage() &&
            t.storage().unsafeGetStorageImpl() == a.storage().unsafeGetStorageImpl()) {
          const auto [tlo, thi] = span(t);
          hit = hit || (tlo < hi && lo < thi);
        }
        return t;
      });
  return hit;
}

// A zero-filled host tensor of t's geometry (the geometry probe's input).
// An anonymous private mapping reads as the kernel's zero page: read-only
// inputs cost neither memory nor a memset; writes copy only touched pages.
at::Tensor zero_host_like(const at::Tensor& t) {
  const size_t n = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize());
  const auto options = t.options().device(c10::kCPU);
  if (n == 0) return at::empty_strided(t.sizes(), t.strides(), options);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "neuron: no host memory for a ", n,
                   "-byte shape probe");
  return at::from_blob(p, t.sizes(), t.strides(), [n](void* q) { munmap(q, n); }, options);
}

// probe: zero-filled host copies in place of device memory and a scratch
// generator (no device access, no draw from the device's generator).
CpuArgs cpu_args(const Plan& plan, const c10::FunctionSchema& s, const std::vector<IValue>& args,
                 bool narrow, c10::DeviceIndex device, bool probe) {
  CpuArgs out(probe);
  out.stack.reserve(args.size() + 4);
  bool narrows_long = false;
  for (size_t i = 0; i < args.size() && narrow; ++i)
    if (!plan.is_index[i])
      map_tensors(args[i], [&](const at::Tensor& t) {
        narrows_long = narrows_long || (t.defined() && t.scalar_type() == c10::kLong);
        return t;
      });
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = s.arguments()[i];
    if (arg.type()->kind() == c10::TypeKind::OptionalType &&
        arg.type()->containedType(0)->kind() == c10::TypeKind::GeneratorType) {
      if (probe) {
        out.stack.emplace_back(at::make_generator<at::CPUGeneratorImpl>(0));
        continue;
      }
      const auto& gen = args[i].isNone() ? default_generator(device) : args[i].toGenerator();
      out.stack.emplace_back(cpu_generator_of(gen));
      continue;
    }
    if (narrow && is_scalar_arg(arg)) {
      out.stack.push_back(narrowed_scalar(args[i], narrows_long));
      continue;
    }
    const auto* ai = arg.alias_info();
    bool is_out = ai && ai->isWrite() && arg.kwarg_only();
    bool writes = ai && ai->isWrite();
    bool narrow_this = narrow && !plan.is_index[i] && !is_out;
    out.stack.push_back(map_tensors(args[i], [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined() || t.device().type() != kNeuron) return t;
      at::Tensor a = out.views.view(t);
      if (narrow_this && is_narrowable(t.scalar_type())) {
        at::Tensor n = narrowed(a);
        if (writes) out.writeback.emplace_back(a, n);
        return n;
      }
      return a;
    }));
  }
  return out;
}

void redispatch_cpu(const c10::OperatorHandle& op, Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

std::vector<int64_t> dense_strides(c10::IntArrayRef sizes) {
  auto d = c10::contiguous_strides(sizes);
  return std::vector<int64_t>(d.begin(), d.end());
}

bool on_device_memory(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 && device_runtime().device_of(t.data_ptr()) >= 0;
}

bool is_generator_arg(const c10::Argument& arg) {
  return arg.type()->kind() == c10::TypeKind::OptionalType &&
         arg.type()->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

bool is_out_arg(const c10::FunctionSchema& s, size_t i) {
  const auto* ai = s.arguments()[i].alias_info();
  return ai && ai->isWrite() && s.arguments()[i].kwarg_only();
}

// Runs the CPU kernel of `compute` over device memory (host access granted):
// out= arguments are replaced by host tensors the kernel may resize as it
// does on the CPU; with narrowing, an out= op computes its functional form.
// Returns the CPU kernel's results.
std::vector<IValue> run_cpu_host_outs(const c10::OperatorHandle& compute, const Plan& plan,
                                      const std::vector<IValue>& args, bool narrow,
                                      c10::DeviceIndex device, bool probe) {
  if (narrow && plan.functional_op) {
    std::vector<IValue> in(args.begin(), args.end() - plan.num_out);
    CpuArgs ca = cpu_args(plan, plan.functional_op->schema(), in, narrow, device, probe);
    redispatch_cpu(*plan.functional_op, &ca.stack);
    return std::vector<IValue>(ca.stack.begin(), ca.stack.end());
  }
  const auto& s = compute.schema();
  CpuArgs ca = cpu_args(plan, s, args, narrow, device, probe);
  for (size_t i = 0; i < plan.num_args; ++i)
    if (is_out_arg(s, i) && ca.stack[i].isTensor() && ca.stack[i].toTensor().defined()) {
      const at::Tensor& a = ca.stack[i].toTensor();
      // An out= sharing memory with an input stays itself: the CPU kernel
      // raises its overlap error, or computes in place, as on the CPU.
      if (overlaps_another(ca.stack, i)) continue;
      ca.stack[i] = at::empty_strided(a.sizes(), a.strides(), a.options());
    }
  redispatch_cpu(compute, &ca.stack);
  for (auto& [alias, n] : ca.writeback) alias.copy_(n);
  return std::vector<IValue>(ca.stack.begin(), ca.stack.end());
}

}  // namespace torchneuron::native

// The generic native kernel: every operator in native_ops.h runs here.
// 1. check devices; 2. result geometry: the CPU kernel's, learned once per
// signature from zero-filled host copies (errors are raised at once, inputs
// stay intact); 3. allocate results on the device; 4. enqueue ATen's CPU
// kernel over the device memory on the current stream. 64-bit inputs are narrowed to 32 bits
// (TorchNeuron's policy) unless TORCHNEURON_NARROW_64BIT=0.
// Its parts: native_kernel.h.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <set>

#include "aten/alias.h"
#include "aten/block_pool.h"
#include "aten/concatenation.h"
#include "aten/concatenation_fuse.h"
#include "aten/device.h"
#include "aten/empty_tensor.h"
#include "aten/fuse_record.h"
#include "aten/ivalue_tensors.h"
#include "aten/kernel_signatures.h"
#include "aten/kernel_warnings.h"
#include "aten/launch.h"
#include "aten/native_kernel.h"
#include "aten/native_ops.h"

namespace torchneuron {
namespace native {
namespace {

std::string device_str(const at::Tensor& t) { return t.device().str(); }

// A launch's arguments and pinned tensors, inline in its one closure for the
// common small op (a binary op: 3 tensors).
using Slots = c10::SmallVector<IValue, 4>;
using Pins = c10::SmallVector<PinnedTensor, 3>;

void run_kernel(const c10::OperatorHandle& compute, const c10::OperatorHandle* out_op,
                const Plan& plan, c10::ArrayRef<IValue> slots, c10::ArrayRef<PinnedTensor> pins,
                bool narrow, c10::DeviceIndex device, const Geometry& geo);

// An unbuffered launch's closure, filled in place and moved once, into the
// std::function (its arguments and records are ~600 bytes inline: each move
// of them cost the launching thread about 0.05 us).
struct NativeLaunch {
  c10::OperatorHandle compute;
  const c10::OperatorHandle* out_op;
  const Plan* plan;
  bool narrow;
  c10::DeviceIndex device;
  std::shared_ptr<const Geometry> geo;
  int threads = launch_thread_count();
  Slots slots;
  Pins pins;
  // std::function holds it in a heap block made here and freed on the worker:
  // recycled (block_pool.h).
  static void* operator new(size_t n) { return pooled_new<NativeLaunch>(n); }
  static void operator delete(void* p, size_t n) { pooled_delete<NativeLaunch>(p, n); }
  void operator()() {
    auto body = [this] { run_kernel(compute, out_op, *plan, slots, pins, narrow, device, *geo); };
    run_wrapped(threads, body);
  }
};

// All tensors of one op on one neuron device; CPU 0-dim tensors allowed.
c10::DeviceIndex check_devices(const Plan& plan, const c10::FunctionSchema& s, Stack& args_view,
                               size_t base) {
  c10::DeviceIndex device = -1;
  std::string first;
  auto visit = [&](const at::Tensor& t, const std::string& arg, bool written) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      if (device == -1) {
        device = t.device().index();
        first = arg;
      } else {
        TORCH_CHECK(t.device().index() == device,
                    "Expected all tensors to be on the same device, but found at least two "
                    "devices, neuron:",
                    int(device), " and ", device_str(t), "! (when checking argument ", arg, " in ",
                    plan.name, ")");
      }
      return;
    }
    // A scalar operand, as CUDA allows; never a written one (out=, in place).
    if (t.device().is_cpu() && t.dim() == 0 && !written) return;
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at least two "
                "devices, neuron and ",
                device_str(t), "! (when checking argument ", arg, " in ", plan.name, ")");
  };
  for (size_t i = 0; i < plan.num_args; ++i) {
    const IValue& v = args_view[base + i];
    const auto& name = s.arguments()[i].name();
    const auto* ai = s.arguments()[i].alias_info();
    const bool written = ai && ai->isWrite();
    if (v.isTensor()) {
      visit(v.toTensor(), name, written);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t, name, written);
    } else if (v.isList()) {
      for (const IValue& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor(), name, written);
    }
  }
  return device == -1 ? current_device() : device;
}

// CPU index tensors of indexing ops (accepted on CUDA: x[cpu_index]) are
// copied to the device of `self` first.
void indices_to_device(const Plan& plan, Stack& stack, size_t base) {
  const IValue& self = stack[base];
  if (!self.isTensor() || self.toTensor().device().type() != kNeuron) return;
  const c10::Device device = self.toTensor().device();
  IValue& indices = stack[base + plan.host_indices];
  indices = map_tensors(indices, [&](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() ? t.to(device) : t;
  });
}

// The kernel of one native op call, on the stream's worker: the CPU kernel over
// the pinned tensors (operands, then results) in the places of `slots`.
void run_kernel(const c10::OperatorHandle& compute, const c10::OperatorHandle* out_op,
                const Plan& plan, c10::ArrayRef<IValue> slots, c10::ArrayRef<PinnedTensor> pins,
                bool narrow, c10::DeviceIndex device, const Geometry& geo) {
  size_t k = 0;
  std::vector<IValue> args;
  args.reserve(slots.size());
  for (const auto& a : slots)
    args.push_back(map_tensors(a, [&](const at::Tensor&) { return pins[k++].view(); }));
  std::vector<at::Tensor> results;
  results.reserve(pins.size() - k);
  for (; k < pins.size(); ++k) results.push_back(pins[k].view());
  std::optional<DropKnownWarnings> given;  // at the call, not again on stderr
  if (!geo.warnings.empty()) given.emplace(geo.warnings);
  if (narrow && plan.functional_op) {
    // out= with narrowed inputs: the out= kernel would insist on
    // 32-bit outs (_softmax.out: "expected out dtype float"), so the
    // functional op computes at 32 bits and its results are written
    // (widened back) into the out= tensors.
    std::vector<IValue> in(args.begin(), args.end() - plan.num_out);
    CpuArgs ca = cpu_args(plan, plan.functional_op->schema(), in, narrow, device);
    redispatch_cpu(*plan.functional_op, &ca.stack);
    for (size_t r = 0; r < results.size() && r < ca.stack.size(); ++r)
      cpu_alias(results[r]).copy_(ca.stack[r].toTensor());
    return;
  }
  CpuArgs ca = cpu_args(plan, compute.schema(), args, narrow, device);
  if (out_op) {
    for (const auto& r : results) ca.stack.emplace_back(cpu_alias(r));
    redispatch_cpu(*out_op, &ca.stack);
    return;
  }
  redispatch_cpu(compute, &ca.stack);
  for (auto& [alias, n] : ca.writeback) alias.copy_(n);
  // Written arguments were written through their aliases (or the
  // writeback); fresh results are copied in, also for ops that do
  // both (_native_batch_norm_legit updates running stats in place).
  for (size_t r = 0; r < results.size() && r < ca.stack.size(); ++r) {
    if (plan.ret_alias[r] >= 0) continue;
    if (!results[r].defined() || !ca.stack[r].isTensor()) continue;
    const at::Tensor& got = ca.stack[r].toTensor();
    at::Tensor dst = cpu_alias(results[r]);
    if (got.sizes() != dst.sizes()) {
      TORCH_CHECK(false, plan.name, ": the CPU kernel returned shape ", got.sizes(),
                  " where its geometry probe gave ", dst.sizes());
    }
    if (got.data_ptr() != dst.data_ptr()) dst.copy_(got);
  }
}

void native_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, Stack* stack) {
  const Plan& plan = plan_for(op);
  const auto& s = op.schema();
  const size_t base = stack->size() - plan.num_args;
  if (plan.host_indices >= 0) indices_to_device(plan, *stack, base);
  c10::DeviceIndex device = check_devices(plan, s, *stack, base);
  bool narrow = wants_narrowing(plan, s, *stack, base);

  if (plan.sync) {
    note_kernel_signature(plan.name, *stack, base, plan.num_args);
    if (narrow) note_narrowing(plan.name);
    return run_sync(op, plan, stack, device, narrow);
  }

  // Result geometry: from the cache, or from the CPU kernel on zero-filled
  // copies (probe_geometry; errors surface at the call, inputs intact).
  thread_local std::string key_buffer;  // a hit (the common call) allocates no key
  geometry_key_into(key_buffer, op, *stack, base, plan.num_args);
  std::shared_ptr<const Geometry> geo = find_geometry(key_buffer);
  if (!geo) {
    const std::string key = key_buffer;  // the probe below may run ops that build keys
    // A new signature implies a new geometry key (the key is finer): counted here only.
    note_kernel_signature(plan.name, *stack, base, plan.num_args);
    auto g = probe_geometry(op, plan, *stack, base, narrow, device);
    if (!g) {
      if (narrow) note_narrowing(plan.name);
      return run_sync(op, plan, stack, device, narrow, &key);
    }
    geo = insert_geometry(key, std::move(*g));
  } else {
    for (const auto& w : geo->warnings) c10::warn(w);  // the CPU warns at every call
  }
  if (geo->full_width) {
    narrow = false;
    note_full_width(plan.name);
  } else if (narrow) {
    note_narrowing(plan.name);
  }

  const c10::OperatorHandle compute = plan.compute_op ? *plan.compute_op : op;
  NativeLaunch launch{compute, nullptr, &plan, narrow, device, geo};
  Slots& args = launch.slots;
  args.assign(std::make_move_iterator(stack->begin() + base),
              std::make_move_iterator(stack->end()));
  torch::jit::drop(*stack, plan.num_args);

  // Results: written arguments come back as themselves (resized as the CPU
  // kernel resized them, for out= of the wrong size); others are new.
  c10::SmallVector<at::Tensor, 4> results;  // no heap block for the common 1-4
  for (size_t r = 0; r < geo->results.size(); ++r) {
    const auto& m = geo->results[r];
    int alias = r < plan.ret_alias.size() ? plan.ret_alias[r] : -1;
    if (alias >= 0) {
      at::Tensor t = args[alias].toTensor();
      if (t.sizes() != c10::IntArrayRef(m.sizes)) {
        t.resize_(m.sizes);
        if (t.strides() != c10::IntArrayRef(m.strides))  // the CPU's layout (dense)
          t.as_strided_(m.sizes, m.strides, t.storage_offset());
      }
      results.push_back(t);
    } else if (!m.defined) {
      results.emplace_back();
    } else {
      results.push_back(empty_strided_neuron(m.sizes, m.strides, m.dtype, device));
    }
  }

  // The out= kernel writes straight into the results, saving a copy; only for
  // contiguous inputs: some out= kernels of ATen's CPU disagree with their
  // functional form on strided inputs (native_batch_norm.out, PyTorch 2.13),
  // and the functional kernel is the truth.
  bool contiguous_inputs = true;
  for (size_t i = 0; i < args.size() && contiguous_inputs; ++i)
    map_tensors(args[i], [&](const at::Tensor& t) {
      if (t.defined() && !t.is_contiguous()) contiguous_inputs = false;
      return t;
    });
  const auto* out_op = plan.out_op && !narrow && contiguous_inputs ? &*plan.out_op : nullptr;
  launch.out_op = out_op;
  // The kernel sees the tensors as they are now (PinnedTensor: launch_view's
  // facts, its tensors built on the worker), not as the caller may change them
  // before it runs (rot90 = flip, then transpose_). Arguments keep their
  // shape with undefined tensors in the pinned ones' place.
  Pins& pins = launch.pins;
  for (auto& a : args)
    a = map_tensors(a, [&](const at::Tensor& t) {
      pins.push_back(PinnedTensor::of(t, /*operand=*/true));
      return at::Tensor();
    });
  for (const auto& r : results) pins.push_back(PinnedTensor::of(r, /*operand=*/false));
  if (concatenation_enabled()) {
    // Buffered, maybe fused: the kernel reads its record (fuse_record.h).
    auto rec = std::make_shared<FuseRecord>(op);
    rec->slots.assign(std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
    rec->pins.assign(std::make_move_iterator(pins.begin()), std::make_move_iterator(pins.end()));
    rec->n_operands = rec->pins.size() - results.size();
    rec->ret_alias.assign(plan.ret_alias.begin(), plan.ret_alias.end());
    rec->ret_alias.resize(results.size(), -1);
    rec->joinable = !narrow && !geo->full_width && geo->warnings.empty() && !plan.compute_op &&
                    plan.num_out == 0 && plan.returns_tensors_only && fusable_op(op.schema()) &&
                    fusable_tensors(*rec);
    launch_native(device, plan.name.c_str(), rec,
                  [compute, out_op, &plan, rec, narrow, device, geo]() mutable {
                    run_kernel(compute, out_op, plan, rec->slots, rec->pins, narrow, device, *geo);
                  });
  } else {
    buffer_or_enqueue(device, plan.name.c_str(), nullptr, std::function<void()>(std::move(launch)));
  }
  for (auto& t : results) stack->emplace_back(std::move(t));
}

}  // namespace
}  // namespace native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto& d = c10::Dispatcher::singleton();
  auto reg = [&](const char* name) {
    std::string full(name);
    auto dot = full.find('.');
    std::string base = "aten::" + full.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : full.substr(dot + 1);
    auto h = d.findOp({base, overload});
    if (!h) return;
    if (!h->hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
        !h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
      bool alias = false;
      for (const auto& ca : kComputeAliases) alias = alias || full == ca.op;
      if (!alias) return;
    }
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&native::native_kernel>());
  };
  std::set<std::string> listed;
  for (const char* n : kNativeOps) listed.insert(n);
  for (const char* n : kSyncNativeOps) listed.insert(n);
  for (const auto& n : listed) reg(n.c_str());
  // The out= overload of every native functional operator is native too (it
  // would otherwise take the CPU fallback): same kernel, found by signature.
  std::set<std::string> outs;
  for (const auto& n : listed) {
    auto dot = n.find('.');
    auto h =
        d.findOp({"aten::" + n.substr(0, dot), dot == std::string::npos ? "" : n.substr(dot + 1)});
    if (!h || h->schema().is_mutable()) continue;
    bool resizing_out = false;
    for (const char* r : kResizingOutOps) resizing_out = resizing_out || n == r;
    if (resizing_out) continue;
    if (auto o = native::find_out_variant(h->schema())) {
      std::string name = o->schema().name().substr(6) + "." + o->schema().overload_name();
      if (!listed.count(name)) outs.insert(name);
    }
  }
  for (const auto& n : outs) reg(n.c_str());
}

}  // namespace torchneuron

// The native kernel's synchronous path: ops whose result sizes depend on the data, and
// calls whose geometry probe failed (the CPU kernel's error is raised at the call).
#include "aten/alias.h"
#include "aten/device.h"
#include "aten/empty_tensor.h"
#include "aten/ivalue_tensors.h"
#include "aten/native_kernel.h"
#include "aten/stream.h"
#include "runtime/activity.h"

namespace torchneuron::native {

// Synchronous path: the result's size depends on the data, or the geometry
// probe failed (the real call raises the CPU's error here, at once).
void run_sync(const c10::OperatorHandle& op, const Plan& plan, Stack* stack,
              c10::DeviceIndex device, bool narrow, const std::string* cache_key) {
  const auto& s = op.schema();
  std::vector<IValue> args(stack->end() - plan.num_args, stack->end());
  torch::jit::drop(*stack, plan.num_args);
  sync_current_stream(device);
  // Which widths to restore on results.
  bool had_double = false, had_long = false;
  for (const auto& v : args)
    map_tensors(v, [&](const at::Tensor& t) {
      if (t.defined() && t.device().type() == kNeuron) {
        had_double = had_double || t.scalar_type() == c10::kDouble;
        had_long = had_long || t.scalar_type() == c10::kLong;
      }
      return t;
    });
  const c10::OperatorHandle compute = plan.compute_op ? *plan.compute_op : op;
  std::vector<IValue> got;
  bool full_width = false;
  // The host runs it in the current stream's place: a kernel on that stream's
  // profiler row (runtime/activity.h), so its time is device time.
  const int64_t trace_t0 = rt::activity::enabled() ? rt::activity::now_ns() : 0;
  translate_errors([&] {
    device_runtime().with_device_access([&] {
      try {
        got = run_cpu_host_outs(compute, plan, args, narrow, device);
      } catch (const c10::NotImplementedError&) {
        if (!narrow) throw;
        narrow = false;  // no 32-bit kernel: full width
        got = run_cpu_host_outs(compute, plan, args, false, device);
        note_full_width(plan.name);
        full_width = true;
      }
      for (auto& v : got)
        if (v.isTensor() && on_device_memory(v.toTensor())) v = v.toTensor().clone();
    });
  });
  if (trace_t0)
    rt::activity::record_on_stream(rt::ActivityKind::kKernel, rt::activity::intern(plan.name),
                                   device, current_stream_id(device), trace_t0,
                                   rt::activity::now_ns());
  std::vector<IValue> results;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  bool resized = false;
  for (size_t r = 0; r < got.size(); ++r) {
    const int alias = r < plan.ret_alias.size() ? plan.ret_alias[r] : -1;
    if (alias >= 0) {
      at::Tensor t = args[alias].toTensor();
      if (is_out_arg(s, alias) && got[r].isTensor() && got[r].toTensor().defined()) {
        const at::Tensor& h = got[r].toTensor();
        if (t.sizes() != h.sizes()) {
          t.resize_(h.sizes());  // as the CPU kernel resized its out= tensor
          if (t.strides() != h.strides() && h.is_non_overlapping_and_dense())
            t.as_strided_(h.sizes(), h.strides(), t.storage_offset());
          resized = true;
        }
        copies.emplace_back(t, h);
      }
      results.emplace_back(t);
    } else if (got[r].isTensor() && got[r].toTensor().defined()) {
      const at::Tensor& h = got[r].toTensor();
      auto dt = h.scalar_type();
      if (narrow && dt == c10::kFloat && had_double) dt = c10::kDouble;
      if (narrow && dt == c10::kInt && had_long) dt = c10::kLong;
      auto strides =
          h.is_non_overlapping_and_dense() ? h.strides().vec() : dense_strides(h.sizes());
      at::Tensor d = empty_strided_neuron(h.sizes(), strides, dt, device);
      copies.emplace_back(d, h);
      results.emplace_back(d);
    } else {
      results.push_back(got[r]);
    }
  }
  if (resized) sync_current_stream(device);
  translate_errors([&] {
    device_runtime().with_device_access([&] {
      for (auto& [d, h] : copies) cpu_alias(d).copy_(h);
    });
  });
  if (cache_key) {
    // The geometry probe failed on zeros (multinomial of zero weights) but
    // the data is valid: this call's results give the signature's geometry.
    Geometry g;
    g.full_width = full_width;
    for (const auto& v : results) {
      ResultGeometry rg;
      if (v.isTensor() && v.toTensor().defined()) rg = geometry_of(v.toTensor());
      g.results.push_back(std::move(rg));
    }
    insert_geometry(*cache_key, std::move(g));
  }
  for (auto& v : results) stack->push_back(std::move(v));
}

}  // namespace torchneuron::native

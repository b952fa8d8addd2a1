// The generic native kernel's parts, shared by its files (not a public header):
// native_plan.cpp (what an operator's schema says), native_narrowing.cpp (the 64-bit
// policy), native_host_args.cpp (CPU arguments over device memory), native_geometry.cpp
// (result geometry, learned once per signature), native_sync.cpp (the synchronous path) and
// native_kernel.cpp (the entry point and its registration).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torchneuron::native {

using c10::IValue;
using torch::jit::Stack;

// What we learn once per operator from its schema.
struct Plan {
  std::string name;  // "aten::add.Tensor"
  size_t num_args = 0;
  std::vector<bool> is_index;  // per argument: exempt from narrowing
  std::vector<int> ret_alias;  // per return: aliased (written) argument or -1
  bool returns_tensors_only = true;
  bool writes_args = false;                          // in-place or out=
  std::optional<c10::OperatorHandle> out_op;         // functional -> its out= overload
  std::optional<c10::OperatorHandle> functional_op;  // out= overload -> its functional one
  size_t num_out = 0;  // out= arguments (kwarg-only, written), last in the schema
  std::optional<c10::OperatorHandle> compute_op;  // kComputeAliases
  std::atomic<bool> sync{false};  // kSyncNativeOps / kCheckedIndexOps (set once, any thread)
  int host_indices = -1;          // kHostIndexOps: the `indices` argument
};

const Plan& plan_for(const c10::OperatorHandle& op);
// The out= overload of a functional op (its CPU kernel writes into the results).
std::optional<c10::OperatorHandle> find_out_variant(const c10::FunctionSchema& s);

// --- 64-bit narrowing (native_narrowing.cpp)
bool is_narrowable(c10::ScalarType st);
at::Tensor narrowed(const at::Tensor& t);
bool is_scalar_arg(const c10::Argument& a);
IValue narrowed_scalar(const IValue& v, bool wrap_ints);
bool wants_narrowing(const Plan& plan, const c10::FunctionSchema& s, const Stack& st, size_t base);
void note_narrowing(const std::string& name, int64_t calls = 1);
void note_full_width(const std::string& name, int64_t calls = 1);

// --- CPU arguments over device memory (native_host_args.cpp)
at::Tensor zero_host_like(const at::Tensor& t);

// Host views of one call's device tensors: tensors over the same device
// memory share one host storage, so that ATen's overlap checks (out= aliasing
// an input: take, gather, masked_select) see what the device holds. probe: a
// zero-filled private mapping stands in for the device memory.
class HostViews {
 public:
  explicit HostViews(bool probe) : probe_(probe) {}
  at::Tensor view(const at::Tensor& t);

 private:
  c10::Storage make(const c10::Storage& src) const;
  c10::Storage& slot(const void* data);
  bool probe_;
  // By device data pointer: a few per call, searched in order (no heap for
  // the common op); past kInline, the map.
  static constexpr size_t kInline = 8;
  c10::SmallVector<std::pair<const void*, c10::Storage>, 4> few_;
  std::unordered_map<const void*, c10::Storage> many_;
};

// Build the CPU argument list over device memory. Runs where memory is
// accessible (a stream worker, or with_device_access).
struct CpuArgs {
  explicit CpuArgs(bool probe) : views(probe) {}
  Stack stack;
  std::vector<std::pair<at::Tensor, at::Tensor>> writeback;  // (alias, narrowed copy)
  HostViews views;
};

// probe: zero-filled host copies in place of device memory and a scratch
// generator (no device access, no draw from the device's generator).
CpuArgs cpu_args(const Plan& plan, const c10::FunctionSchema& s, const std::vector<IValue>& args,
                 bool narrow, c10::DeviceIndex device, bool probe = false);
void redispatch_cpu(const c10::OperatorHandle& op, Stack* stack);
std::vector<IValue> run_cpu_host_outs(const c10::OperatorHandle& compute, const Plan& plan,
                                      const std::vector<IValue>& args, bool narrow,
                                      c10::DeviceIndex device, bool probe = false);
bool is_out_arg(const c10::FunctionSchema& s, size_t i);
// Does host tensor stack[i] share bytes with any other tensor of `stack`?
bool overlaps_another(const Stack& stack, size_t i);
bool on_device_memory(const at::Tensor& t);
std::vector<int64_t> dense_strides(c10::IntArrayRef sizes);

// --- result geometry (native_geometry.cpp)
// Geometry of an op's results, as the CPU kernel gives it.
struct ResultGeometry {
  bool defined = false;
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::kFloat;
};
struct Geometry {
  std::vector<ResultGeometry> results;
  // The narrowed dtype has no CPU kernel (int64 convolution as int32): this
  // signature computes at full width (counted in full_width_stats).
  bool full_width = false;
  // What the CPU kernel warned for this signature (kernel_warnings.h).
  std::vector<c10::Warning> warnings;
};

// The geometry cache's key of an op call, into `k` (cleared; its capacity kept: no
// allocation per call).
void geometry_key_into(std::string& k, const c10::OperatorHandle& op, const Stack& st, size_t base,
                       size_t n);
std::shared_ptr<const Geometry> find_geometry(const std::string& key);
// Probes run so far in this process (each one a first sight of a geometry key).
int64_t geometry_probes();
std::shared_ptr<const Geometry> insert_geometry(const std::string& key, Geometry g);
ResultGeometry geometry_of(const at::Tensor& t);
std::optional<Geometry> probe_geometry(const c10::OperatorHandle& op, const Plan& plan,
                                       const Stack& stack, size_t base, bool narrow,
                                       c10::DeviceIndex device);

// --- the synchronous path (native_sync.cpp)
void run_sync(const c10::OperatorHandle& op, const Plan& plan, Stack* stack,
              c10::DeviceIndex device, bool narrow, const std::string* cache_key = nullptr);

}  // namespace torchneuron::native

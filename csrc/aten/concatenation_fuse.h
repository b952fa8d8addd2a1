// Adaptive eager execution, its fusing half (docs/design/concatenation-engine.md):
// a run of buffered native ops becomes one compiled executable. The run's
// signature (ops, arguments, operand sources, geometry, outputs) keys a map: a
// first sight runs the ops one by one, a second compiles them (through the
// Python segment runner: torchneuron/compiler/fused.py), later ones replay the
// executable. A signature that fails to compile stays unfused.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aten/device.h"
#include "aten/fuse_record.h"

namespace torchneuron {

// May an op with this schema join a fused segment? Not with a Generator
// argument (random ops keep the unfused random stream) or an argument of a
// type a graph cannot take (Dimname, Storage, Stream).
bool fusable_op(const c10::FunctionSchema& s);
// Are the record's tensors ones a fused graph computes exactly as the CPU
// kernel? Neuron tensors of 8- to 32-bit dtypes (64-bit ones are narrowed by
// the compile path), no conjugate/negative bit; CPU operands only as wrapped
// Python numbers (their value becomes part of the signature).
bool fusable_tensors(const FuseRecord& r);

// One operand of a fused step.
struct SegmentOperand {
  enum Kind { kInput, kResult, kScalar, kScalarInput } kind = kInput;
  // kInput: input `index`; kResult: result `index` of `step`; kScalarInput:
  // the call's scalar `index` (a wrapped Python float, float_inputs_op)
  int step = -1, index = 0;
  bool view = false;  // read through other sizes/strides/offset (of a result, or of a flat input)
  std::vector<int64_t> sizes, strides;  // the view's
  int64_t offset = 0;
  std::vector<int64_t> base_sizes, base_strides;  // the result's, as the op made it
  int64_t base_offset = 0;
  c10::IValue scalar;  // kScalar: the wrapped number's value
};
struct SegmentStep {
  const FuseRecord* rec;
  std::vector<SegmentOperand> operands;  // the record's operand pins, in order
  // (slot, k): the float argument in that slot is the call's scalar k, an input
  // of the executable (float_inputs_op), not a constant of its signature
  std::vector<std::pair<int, int>> float_slots;
};
// A fused segment as handed to the runner: steps only when `compile`.
struct SegmentCall {
  std::string key;
  bool compile = false;
  std::vector<SegmentStep> steps;
  std::vector<std::pair<int, int>> outputs;  // (step, result) read after the segment
  std::vector<at::Tensor> inputs, dsts;      // dsts: the outputs' result tensors
  std::vector<double> scalars;               // the float arguments made inputs, in order
};
// Launches the segment's executable on the current stream (compiling it first
// when `compile`): true; false when nothing was enqueued (refused or absent).
using SegmentRunner = bool (*)(const SegmentCall& call);
void set_segment_runner(SegmentRunner runner);

// TORCH_NEURONX_ENABLE_CONCATENATION=1 and TORCHNEURON_CONCATENATION_FUSE=1
// and a runner installed.
bool fusion_enabled();
// Reads (and so checks) the fusing variables: a bad value is a ValueError at
// the first op, with the buffering's own (concatenation_enabled).
void check_fusion_env();
// Runs shorter than TORCHNEURON_CONCATENATION_MIN_OPS (default 8) stay unfused.
size_t fusion_min_ops();

// The run (joinable records, in issue order, all on `stream`) launched as one
// fused segment: true; false: the caller enqueues its kernels one by one.
// `correlation`: the profiler's id of the run's first op.
bool launch_fused(c10::DeviceIndex device, rt::StreamId stream,
                  const std::vector<const FuseRecord*>& run, uint64_t correlation);

struct FusionStats {
  int64_t segments = 0, ops_fused = 0, hits = 0, misses = 0, compiles = 0, unfusable = 0,
          ops_unfused = 0;
};
FusionStats fusion_stats();
void reset_fusion_stats();

}  // namespace torchneuron

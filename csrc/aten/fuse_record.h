// What adaptive eager execution keeps of a buffered native op besides its
// kernel, so that a run of such ops can be fused (concatenation_fuse.h): the
// op as called, its arguments, and the tensors it reads and writes as of the
// call. The kernel closure shares the record: one copy of the pins, so a
// storage's use count is exact (a buffered op's pins hold it once per pin).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "aten/launch.h"

namespace torchneuron {

struct FuseRecord {
  FuseRecord(const c10::OperatorHandle& o) : op(o) {}
  c10::OperatorHandle op;          // its schema gives the arguments' order
  std::vector<c10::IValue> slots;  // the arguments, undefined tensors in the pins' places
  std::vector<PinnedTensor> pins;  // operands (map_tensors' order over slots), then results
  size_t n_operands = 0;
  std::vector<int> ret_alias;  // per result: the argument it is (in place) or -1
  bool joinable = false;       // may be fused (fusable_op and its tensors' dtypes)
};

}  // namespace torchneuron

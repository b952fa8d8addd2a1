// Adaptive eager execution's fusing half, its Python side (concatenation_fuse.h):
// the segment runner that hands a run of buffered ops to
// torchneuron/compiler/fused.py, and its counters.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {

// Adds _set_segment_runner, _fusion_stats, _reset_fusion_stats.
void init_fusion_bindings(pybind11::module& m);

}  // namespace torchneuron

// Facts about the emulated chip, shared by the config reader and the emulator.
#pragma once

#include <cstddef>

namespace torchneuron::runtime::trainium2 {

constexpr int kPhysicalCores = 8;               // NeuronCore-v3 per chip
constexpr size_t kHbmBytes = size_t(96) << 30;  // HBM per chip
constexpr const char* kCoreName = "Trainium2 NeuronCore-v3";

// Logical cores per chip at a NEURON_LOGICAL_NC_CONFIG (1 or 2).
constexpr int logical_cores(int lnc) { return kPhysicalCores / lnc; }
// HBM per logical core at that config: 12 GiB (LNC=1) or 24 GiB (LNC=2).
constexpr size_t hbm_per_core(int lnc) { return kHbmBytes / size_t(logical_cores(lnc)); }

}  // namespace torchneuron::runtime::trainium2

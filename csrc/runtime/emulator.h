// The emulated Trainium2 chip behind the Runtime interface. get() builds one
// from the environment; tests and tools build their own from a Config.
#pragma once

#include <memory>

#include "runtime.h"

namespace torchneuron::runtime {

// An independent emulator. Config fields left at zero/empty take the chip's
// defaults for its logical_nc_config: every logical core visible, 24 GiB
// (LNC=2) or 12 GiB (LNC=1) per core; logical_cores_total is derived from it.
// Throws Error on an unsupported LNC or a visible id out of range.
// Destroying it runs all queued work, joins the workers and unmaps all memory.
std::unique_ptr<Runtime> make_emulator(const Config& config);

}  // namespace torchneuron::runtime

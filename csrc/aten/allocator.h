// Device memory (allocator.cpp): the c10::DeviceAllocator of `neuron` and
// raw allocations from it.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>

namespace torchneuron {

c10::DeviceAllocator* neuron_allocator();

// Device memory as a DataPtr on `device`; throws torch.OutOfMemoryError.
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);

}  // namespace torchneuron

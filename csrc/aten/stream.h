// Streams: the calling thread's current stream per device, and host waits
// for device work (sync points and plain waits), all through blocking_wait.
#pragma once

#include <c10/core/Stream.h>

#include <functional>

#include "aten/device.h"

namespace torchneuron {

// The calling thread's current stream on `device` (default stream 0).
rt::StreamId current_stream_id(c10::DeviceIndex device);
void set_current_stream(const c10::Stream& stream);
c10::Stream make_stream(c10::DeviceIndex device, rt::StreamId id);

// Wait for the current stream of `device`; rethrows asynchronous kernel errors.
void sync_current_stream(c10::DeviceIndex device);
// Wait for every stream of `device`; rethrows asynchronous kernel errors.
void sync_device(c10::DeviceIndex device);
// Waits that are not sync points (reseeding, a storage's growth): a kernel
// error stays pending for the next sync point.
void wait_current_stream(c10::DeviceIndex device);
void wait_device(c10::DeviceIndex device);

// Every host wait for device work runs through blocking_wait. A worker that
// finishes a kernel drops the kernel's references, and dropping the last C++
// reference of a tensor or storage that has a Python object takes the GIL:
// a wait holding the GIL would deadlock. The Python module installs a hook
// that releases the GIL around the wait (this layer stays free of Python).
void blocking_wait(const std::function<void()>& wait);
using BlockingWaitHook = void (*)(const std::function<void()>& wait);
// `wait` through the hook alone (no flush): taking a lock that a thread may
// hold while it waits for the GIL (concatenation.cpp's buffers).
void wait_releasing_gil(const std::function<void()>& wait);
void set_blocking_wait_hook(BlockingWaitHook hook);

}  // namespace torchneuron

// Adaptive eager execution, its buffering half (TORCH_NEURONX_ENABLE_CONCATENATION=1;
// docs/design/concatenation-engine.md): a native op's kernel waits in its
// stream's buffer while the stream is busy, and the buffer is enqueued, in
// order, before anything else touches that stream or the host waits. With
// TORCHNEURON_CONCATENATION_FUSE=1, runs of joinable ops in a flushed buffer
// become one compiled executable (concatenation_fuse.h); the rest run one by
// one, exactly as unbuffered.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "aten/device.h"

namespace torchneuron {

// TORCH_NEURONX_ENABLE_CONCATENATION=1, read once (NEURON_LAUNCH_BLOCKING=1 turns it off).
bool concatenation_enabled();

// A native op's kernel (already wrapped by launch_flat) for the current stream
// of `device`: buffered while the stream has at least
// TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD (15) kernels queued, else
// enqueued with the buffer before it; a buffer of
// TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT (1024) kernels is flushed.
// `rec` (or null): what fusing the op needs (fuse_record.h); runs of joinable
// records are fused at the flush (concatenation_fuse.h).
struct FuseRecord;
void buffer_kernel(c10::DeviceIndex device, const char* name, std::function<void()> kernel,
                   std::shared_ptr<FuseRecord> rec = nullptr);

// Why a buffer is enqueued: another launch on its stream, an event recorded or
// waited on it or a query of it, a host wait (every stream).
enum class FlushCause { kLaunch, kEvent, kWait };
void flush_stream(c10::DeviceIndex device, rt::StreamId stream, FlushCause cause);
void flush_all();  // FlushCause::kWait

// Enqueues `kernel` on `stream` without flushing, counting it as queued on the
// stream until it finishes (the queue depth the buffering decides on).
void enqueue_counted(c10::DeviceIndex device, rt::StreamId stream, const char* name,
                     std::function<void()> kernel);

// From now on native kernels are enqueued, not buffered (the interpreter's exit
// drain: a kernel buffered after it would never run, and its closure would
// outlive the runtime).
void stop_buffering() noexcept;

// Counters since start (or the last reset): kernels buffered and enqueued
// directly; flushes by cause ("launch", "wait", "event", "limit", "queue_low").
struct ConcatenationStats {
  int64_t buffered = 0, direct = 0;
  int64_t flush_launch = 0, flush_wait = 0, flush_event = 0, flush_limit = 0, flush_queue_low = 0;
};
ConcatenationStats concatenation_stats();
void reset_concatenation_stats();

}  // namespace torchneuron

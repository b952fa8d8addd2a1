// The intra-op thread count a device kernel runs with on its stream's worker.
#pragma once

namespace torchneuron {

// Sets the calling thread's (a stream worker's) OpenMP and MKL thread counts
// to `threads`, the count of the thread that launched the kernel. Per-thread
// only: ATen's process-wide count (at::set_num_threads also writes the value
// new threads start from and resizes the shared pthreadpool) is never changed.
void use_intraop_threads(int threads);

// The intra-op thread count of the calling (launching) thread, read without
// ATen's lazy per-thread initialization: at::get_num_threads() would fix this
// thread's count from the process-wide value at a device launch, where a CPU
// program fixes it at the thread's first parallel region.
int launching_thread_intraop_threads();

}  // namespace torchneuron

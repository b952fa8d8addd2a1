#include "aten/intraop_threads.h"

#include <ATen/Parallel.h>

// OpenMP's and MKL's per-thread setters, from the libgomp and MKL that torch's
// own library loads (declared here: torch ships no omp.h or mkl.h). MKL's C
// entry point is MKL_Set_Num_Threads_Local (mkl_service.h maps the lower-case
// name to it); the exported lower-case symbol is the Fortran one, which takes
// a pointer. Weak, so that a torch built without either still loads.
extern "C" {
void omp_set_num_threads(int) __attribute__((weak));
int omp_get_max_threads() __attribute__((weak));
int MKL_Set_Num_Threads_Local(int) __attribute__((weak));
}

namespace torchneuron {

void use_intraop_threads(int threads) {
  // The count this worker last set; 0 before its first kernel.
  thread_local int current = 0;
  if (threads == current || threads < 1) return;
  // ATen initializes a thread's count lazily, on its first parallel region,
  // from the process-wide value: done first, so that it cannot undo ours.
  if (current == 0) (void)at::get_num_threads();
  // omp_set_num_threads sets the calling task's nthreads-var ICV (OpenMP 5.2,
  // sec. 2.4): this thread only. MKL keeps a thread-local count of its own.
  if (omp_set_num_threads) omp_set_num_threads(threads);
  if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(threads);
  current = threads;
}

int launching_thread_intraop_threads() {
  // With OpenMP, at::get_num_threads() is this thread's nthreads-var ICV after
  // ATen's lazy init (ParallelOpenMP), which this reads without the init. A
  // thread that ATen has not initialized reads OpenMP's initial value: what a
  // CPU op of it would use too, unless another thread has changed ATen's
  // process-wide count meanwhile; then the kernel runs with the initial count
  // where a CPU op would take the process-wide one (its reductions may round
  // differently; that count is not readable without initializing this thread).
  if (omp_get_max_threads) return omp_get_max_threads();
  return at::get_num_threads();
}

}  // namespace torchneuron

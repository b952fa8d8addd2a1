// Kernel signatures as Trainium has them: there, every eager op with a new
// signature (op, argument shapes and dtypes, static attributes such as dims)
// compiles a kernel before it runs, and the kernel is cached for the process.
// Counted here per operator, so a loop whose shapes change every step shows
// its compiles (torch.neuron.kernel_signature_stats()).
#pragma once

#include <ATen/core/stack.h>

#include <cstdint>
#include <map>
#include <string>

namespace torchneuron {

// Records the signature of `op` called with st[base, base + n): counted once
// per process per distinct signature. Tensor arguments contribute dtype and
// sizes; ints, bools, strings and their lists contribute their values; floats
// and CPU scalar tensors do not (runtime operands, not kernel shapes).
void note_kernel_signature(const std::string& op, const torch::jit::Stack& st, size_t base,
                           size_t n);

// {op: signatures first seen since the last reset}. A reset keeps the set of
// signatures seen (the compiled kernels stay cached): counts after it are the
// compiles a warmed-up program would still pay.
std::map<std::string, int64_t> kernel_signature_stats();
void reset_kernel_signature_stats();

}  // namespace torchneuron

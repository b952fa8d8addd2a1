// Helpers shared by ProcessGroupNeuron's files: CPU aliases of device
// tensors, Gloo's works as CommOp waits, the Gloo tags of this backend and
// the checks of an operation's arguments made at the call.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string>
#include <vector>

#include "distributed/comm_queue.h"

namespace torchneuron::distributed {

// CPU aliases of neuron tensors (aten/alias.h's cpu_alias), one per tensor.
std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& ts);
std::vector<std::vector<at::Tensor>> aliases(const std::vector<std::vector<at::Tensor>>& ls);
// The lists' tensors in order, as one list.
std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& ls);
// `a` followed by `b`.
std::vector<at::Tensor> cat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b);
// A Gloo work as a CommOp wait; with its future's callback when it has one.
std::vector<CommOp::Wait> waits_of(c10::intrusive_ptr<c10d::Work> w);
// Whether two contiguous tensors share any byte (their aliases are separate
// storages over the same device memory, which ATen's overlap check misses).
bool bytes_overlap(const at::Tensor& a, const at::Tensor& b);
// "Float[2, 3]": dtype and sizes, for messages.
std::string describe(const at::Tensor& t);

// Gloo tags (non-negative int32). User tags are below 2^28, on CPU tensors as
// given. A neuron send/recv moves its data on the user tag plus bit 28: its
// data reaches Gloo only after the pair's check, so sharing a tag with CPU
// send/recv on the same group would let one overtake the other (the receiver
// would get the other's message). The pair's check uses bit 30 (and bit 29
// for the direction, lower rank to higher).
constexpr int kMaxUserTag = 1 << 28;
constexpr int kNeuronDataBit = 1 << 28;
constexpr int kCheckTagBit = 1 << 30;
constexpr int kCheckTagUp = 1 << 29;

// Collectives' cross-rank check: each rank sends its fingerprint to every
// other rank on this tag (above user tags, below the pair checks' bit 30).
// Posted at the call, in program order, so the k-th message a rank gets on
// it from a peer is that peer's k-th checked collective of this group.
constexpr int kFingerprintTag = kCheckTagUp;
// The send/recv pairs of a list all_to_all (above every user and data tag).
constexpr int kAllToAllTag = kCheckTagUp + 1;

// Throws unless `tag` is a user tag (below kMaxUserTag).
void check_tag(const char* name, int tag);

// Gloo's reductions (SUM PRODUCT MIN MAX AVG, bitwise on integers), checked
// at the call so that an unsupported one fails there, not on the stream.
void check_reduce_op(const char* name, const c10d::ReduceOp& op,
                     const std::vector<at::Tensor>& tensors);
// The element types of Gloo's typed collectives; send/recv move bytes of any type.
bool gloo_dtype(c10::ScalarType t);
// Gloo's checks of a collective's arguments, made at the call, before the
// fingerprint: on the poster they would fail this rank alone after its peers
// started waiting for its data (and Gloo aborts the process on some).
void check_root(const char* name, int64_t root, int size);
void check_list(const char* name, const char* what, size_t got, size_t expected);
void check_like(const char* name, const char* what, size_t i, const at::Tensor& t,
                const at::Tensor& ref);

}  // namespace torchneuron::distributed

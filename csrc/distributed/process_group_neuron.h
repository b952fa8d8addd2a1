// The c10d backend `neuron`: collectives over Gloo on device memory,
// ordered with the streams of the device.
#pragma once

#include <c10/util/FunctionRef.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/comm_queue.h"

namespace torchneuron::distributed {

// How a Work joins the streams (see process_group_neuron.cpp).
enum class Ordering {
  kStream,  // collective: the issuing stream waits for it (NCCL)
  kPeer,    // send/recv: only wait() orders the current stream (CPU Gloo)
  kHost,    // barrier: wait() blocks the host
};

// Backend for neuron tensors; CPU tensors go to the wrapped Gloo backend as is.
class ProcessGroupNeuron : public c10d::Backend {
 public:
  // `gloo`: a ProcessGroupGloo of the same store, rank and size.
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);
  ~ProcessGroupNeuron() override;

  const std::string getBackendName() const override { return "neuron"; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override { gloo_->setTimeout(timeout); }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Gloo's, on the host (as for a CPU group): names the ranks that did not arrive.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

 private:
  struct Pending;  // an open coalescing block
  // Elements this rank sends to and receives from each rank (all_to_all):
  // checked pairwise across ranks, since Gloo aborts the process when a
  // message's size differs from the receive posted for it.
  struct PeerCounts {
    std::vector<int64_t> send, recv;
  };
  // One neuron operation as issue() takes it: the first six fields always
  // (aggregate order), the others where the operation needs them.
  struct Call {
    const char* name;
    c10d::OpType type;
    Ordering ordering;
    std::vector<at::Tensor> tensors;  // every tensor it reads or writes
    std::vector<at::Tensor> outputs;  // what the Work's result() returns
    CommOp::Post post;                // posts its Gloo calls (on CPU aliases)
    // Tensors whose dtype and shape must agree across ranks (none: no
    // cross-rank check); `dtype_only`: dtypes only, with `peers`' counts
    // (all_to_all, whose parts may differ in size).
    std::optional<std::vector<at::Tensor>> check = std::nullopt;
    bool dtype_only = false;
    std::optional<PeerCounts> peers = std::nullopt;
    // send/recv: after `post` (the pair's exchange), the pair's check, then
    // the data's transfer.
    CommOp::Wait then_check = nullptr;
    CommOp::Post then_post = nullptr;
  };
  // The common path of every neuron operation.
  c10::intrusive_ptr<c10d::Work> issue(Call call);
  // A collective on the stream whose `check` tensors are checked across ranks
  // (the form of all but send/recv, barrier and all_to_all).
  static Call collective(const char* name, c10d::OpType type, std::vector<at::Tensor> tensors,
                         std::vector<at::Tensor> outputs, std::vector<at::Tensor> check,
                         CommOp::Post post);
  // send/recv: the pair exchanges (dtype, elements) on a tag of its own, then
  // each side checks them before the data moves (a mismatch fails both).
  c10::intrusive_ptr<c10d::Work> point_to_point(const char* name, std::vector<at::Tensor>& tensors,
                                                int peer, int tag, bool sending);
  // A send/recv with a neuron tensor that failed at the call (`error`): posts
  // a failed pair check to `peer`, whose matching call then raises naming this
  // rank and the reason. Nothing when the peer is unknown or invalid.
  void post_failed_pair(c10d::OpType type, int peer, int tag, bool sending,
                        const std::exception& error);
  // True if every tensor is on the CPU (served by Gloo as is); throws on a mix,
  // on another device type or core, or on a non-contiguous neuron tensor
  // (ValueError, as NCCL). `dense`: a dense non-overlapping one (channels_last)
  // is accepted: only where each rank's tensor is its own input and output
  // elementwise (all_reduce, broadcast, reduce); the fingerprint then checks
  // that the ranks' memory layouts agree.
  bool on_cpu(const char* name, const std::vector<at::Tensor>& tensors, bool typed = true,
              bool dense = false);
  // Gloo for CPU tensors and host-side calls, once this group's earlier
  // operations are posted: Gloo numbers collectives (and matches send/recv of
  // one tag) in posting order, which must be program order on every rank, or
  // a CPU collective pairs with a peer's neuron one (a silent wrong result).
  c10d::Backend& gloo_in_order();
  // Posts this rank's fingerprint of a collective (op, dtype, shapes) to every
  // other rank at the call; the returned check (run by the poster) waits for
  // theirs and throws if any differs.
  CommOp::Wait verify_across_ranks(const char* name, c10d::OpType type,
                                   const std::vector<at::Tensor>& tensors, bool dtype_only,
                                   const PeerCounts* peers = nullptr);
  struct Inbox {  // a posted receive of a peer's fingerprint, into `buf`
    at::Tensor buf;
    c10::intrusive_ptr<c10d::Work> work;
  };
  Inbox post_fingerprint_recv(int peer);
  struct Exchange;  // one collective's fingerprints: this rank's, sent; the peers', posted
  // Sends `mine` to every peer and takes each peer's next fingerprint slot.
  std::shared_ptr<Exchange> post_fingerprint(at::Tensor mine);
  // Runs a checked collective's call. If it fails before its fingerprint is
  // posted on a neuron call, posts a "failed" fingerprint in its slot (the
  // peers' same collective raises at once, naming this rank and the reason;
  // every rank still uses one slot per call) and rethrows; inside a
  // coalescing block the error is kept for endCoalescing instead.
  c10::intrusive_ptr<c10d::Work> guarded(const char* name, c10d::OpType type,
                                         c10::function_ref<c10::intrusive_ptr<c10d::Work>()> body);
  // Posts the failed fingerprint; returns a wait for the exchange (never throws).
  std::function<void()> post_failed(c10d::OpType type, const std::string& reason);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  c10::DeviceIndex device_ = -1;  // bound at the first neuron operation
  std::unique_ptr<Pending> pending_;
  std::unique_ptr<CommQueue> queue_;
  // Per rank, the receive of its fingerprint for this group's next checked
  // collective (empty until the first; null for this rank).
  std::vector<Inbox> inbox_;
  // The call in progress (guarded, send, recv): it has a neuron tensor / posted
  // its fingerprint or queued its operation.
  bool call_neuron_ = false, call_posted_ = false;
};

// Factory for Python: wraps a ProcessGroupGloo created over the same store.
c10::intrusive_ptr<c10d::Backend> create_process_group_neuron(
    c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);

}  // namespace torchneuron::distributed

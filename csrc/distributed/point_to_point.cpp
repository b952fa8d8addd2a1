// ProcessGroupNeuron's send/recv (the pair's check of dtype and element
// count before the data moves), barrier and monitoredBarrier.
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "distributed/arguments.h"

namespace torchneuron::distributed {

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  check_tag("send", tag);
  if (on_cpu("send", tensors, false)) return gloo_in_order().send(tensors, dst, tag);
  return point_to_point("send", tensors, dst, tag, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  check_tag("recv", tag);
  if (on_cpu("recv", tensors, false)) return gloo_in_order().recv(tensors, src, tag);
  return point_to_point("recv", tensors, src, tag, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::point_to_point(
    const char* name, std::vector<at::Tensor>& tensors, int peer, int tag, bool sending) {
  TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::", name, ": expects one tensor, got ",
              tensors.size());
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "ProcessGroupNeuron::", name,
              ": invalid peer rank ", peer, " (group of ", size_, ", this rank ", rank_, ")");
  const at::Tensor& t = tensors[0];
  // One tag for each direction of the pair: both ends of a transfer compute
  // the same one, whatever else the two ranks exchange.
  const int from = sending ? rank_ : peer, to = sending ? peer : rank_;
  const int meta_tag = kCheckTagBit | (from < to ? kCheckTagUp : 0) | tag;
  auto mine = std::make_shared<at::Tensor>(
      at::tensor(std::vector<int64_t>{int64_t(t.scalar_type()), t.numel()}, at::kLong));
  auto theirs = std::make_shared<at::Tensor>(at::empty({2}, at::kLong));
  auto a = aliases(tensors);
  auto g = gloo_;
  const int rank = rank_;
  CommOp::Post exchange = [g, mine, theirs, peer, meta_tag]() mutable {
    std::vector<at::Tensor> s{*mine}, r{*theirs};
    auto ws = waits_of(g->send(s, peer, meta_tag));
    auto wr = waits_of(g->recv(r, peer, meta_tag));
    ws.insert(ws.end(), wr.begin(), wr.end());
    return ws;
  };
  std::string op = name;
  CommOp::Wait verify = [mine, theirs, peer, rank, sending, op] {
    const int64_t* m = mine->data_ptr<int64_t>();
    const int64_t* o = theirs->data_ptr<int64_t>();
    if (m[0] == o[0] && m[1] == o[1]) return;
    auto spell = [](const int64_t* v) {
      std::ostringstream s;
      s << c10::ScalarType(v[0]) << " with " << v[1] << " elements";
      return s.str();
    };
    std::ostringstream s;
    s << op << (sending ? " to" : " from") << " rank " << peer
      << ": the pair's tensors differ (rank " << rank << (sending ? " sends " : " receives ")
      << spell(m) << "; rank " << peer << (sending ? " receives " : " sends ") << spell(o) << ")";
    throw std::runtime_error(s.str());
  };
  const int data_tag = kNeuronDataBit | tag;
  CommOp::Post data = [g, a, peer, data_tag, sending]() mutable {
    return waits_of(sending ? g->send(a, peer, data_tag) : g->recv(a, peer, data_tag));
  };
  return issue(name, sending ? c10d::OpType::SEND : c10d::OpType::RECV, tensors, tensors,
               Ordering::kPeer, nullptr, false, exchange, verify, data);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // Gloo's barrier also waits for this group's earlier operations (the queue
  // posts in order); the ready kernel makes it follow the current stream too.
  auto g = gloo_;
  c10d::BarrierOptions o = opts;
  o.device_ids.clear();
  return issue("barrier", c10d::OpType::BARRIER, {}, {}, Ordering::kHost, nullptr, false,
               [g, o]() mutable { return waits_of(g->barrier(o)); });
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  // A host-side check that every rank arrives (Gloo's send/recv on tags of
  // its own), as on a CPU group; it does not wait for queued device work.
  c10d::BarrierOptions o = opts;
  o.device_ids.clear();
  gloo_in_order().monitoredBarrier(o, waitAllRanks);
}

}  // namespace torchneuron::distributed

// ProcessGroupNeuron's send/recv (the pair's check of dtype and element
// count before the data moves), barrier and monitoredBarrier.
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <sstream>

#include "distributed/arguments.h"

namespace torchneuron::distributed {
namespace {

// The pair's check message, one per send/recv on each end: [dtype, elements,
// reason (kPairReasonLen int64: text)]. A call that failed at the call sends
// kPairFailed, its OpType and the reason: the peer's call raises at once,
// naming it, instead of waiting for the group's timeout.
constexpr int kPairReasonLen = 32;
constexpr int64_t kPairLen = 2 + kPairReasonLen;
constexpr int64_t kPairFailed = -2;

// One tag for each direction of the pair: both ends of a transfer compute
// the same one, whatever else the two ranks exchange.
int pair_tag(int from, int to, int tag) {
  return kCheckTagBit | (from < to ? kCheckTagUp : 0) | tag;
}

// Sends `mine` to `peer` and receives its message into `theirs`, on `tag`.
CommOp::Post pair_exchange(c10::intrusive_ptr<c10d::Backend> g, std::shared_ptr<at::Tensor> mine,
                           std::shared_ptr<at::Tensor> theirs, int peer, int tag) {
  return [g, mine, theirs, peer, tag]() mutable {
    std::vector<at::Tensor> s{*mine}, r{*theirs};
    auto ws = waits_of(g->send(s, peer, tag));
    auto wr = waits_of(g->recv(r, peer, tag));
    ws.insert(ws.end(), wr.begin(), wr.end());
    return ws;
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  check_tag("send", tag);
  call_neuron_ = call_posted_ = false;
  try {
    if (on_cpu("send", tensors, false)) return gloo_in_order().send(tensors, dst, tag);
    return point_to_point("send", tensors, dst, tag, true);
  } catch (const std::exception& e) {
    post_failed_pair(c10d::OpType::SEND, dst, tag, true, e);
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  check_tag("recv", tag);
  call_neuron_ = call_posted_ = false;
  try {
    if (on_cpu("recv", tensors, false)) return gloo_in_order().recv(tensors, src, tag);
    return point_to_point("recv", tensors, src, tag, false);
  } catch (const std::exception& e) {
    post_failed_pair(c10d::OpType::RECV, src, tag, false, e);
    throw;
  }
}

void ProcessGroupNeuron::post_failed_pair(c10d::OpType type, int peer, int tag, bool sending,
                                          const std::exception& error) {
  // Not when the peer is unknown (then no peer waits for this call), the call
  // had no neuron tensor (Gloo's own, no pair check), or its exchange is
  // already queued; inside a coalescing block the call raises out of it.
  if (!call_neuron_ || call_posted_ || pending_ || peer < 0 || peer >= size_ || peer == rank_)
    return;
  const auto* ce = dynamic_cast<const c10::Error*>(&error);
  const std::string reason = ce ? ce->what_without_backtrace() : error.what();
  auto mine = std::make_shared<at::Tensor>(at::zeros({kPairLen}, at::kLong));
  int64_t* m = mine->data_ptr<int64_t>();
  m[0] = kPairFailed;
  m[1] = int64_t(type);
  char* text = reinterpret_cast<char*>(m + 2);
  const size_t cap = kPairReasonLen * sizeof(int64_t);
  std::string r = reason.size() < cap ? reason : reason.substr(0, cap - 4) + "...";
  std::copy(r.begin(), r.end(), text);
  auto theirs = std::make_shared<at::Tensor>(at::empty({kPairLen}, at::kLong));
  const int from = sending ? rank_ : peer, to = sending ? peer : rank_;
  // Queued in program order (the pair's earlier exchanges on this tag are
  // posted first); the peer's message is received too, so that the pair's
  // next exchange on this tag reads the peer's next one. Nothing waits on it.
  std::vector<CommOp::Post> posts{
      pair_exchange(gloo_, mine, theirs, peer, pair_tag(from, to, tag))};
  auto op = std::make_shared<CommOp>(
      std::string("neuron c10d ") + c10d::opTypeToString(type) + " (failed at the call)",
      std::vector<CommOp::Post>{}, std::move(posts), false);
  op->signal_ready();  // it moves no device data
  queue_->push(std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::point_to_point(const char* name,
                                                                  std::vector<at::Tensor>& tensors,
                                                                  int peer, int tag, bool sending) {
  TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::", name, ": expects one tensor, got ",
              tensors.size());
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "ProcessGroupNeuron::", name,
              ": invalid peer rank ", peer, " (group of ", size_, ", this rank ", rank_, ")");
  const at::Tensor& t = tensors[0];
  const int from = sending ? rank_ : peer, to = sending ? peer : rank_;
  auto mine = std::make_shared<at::Tensor>(at::zeros({kPairLen}, at::kLong));
  mine->data_ptr<int64_t>()[0] = int64_t(t.scalar_type());
  mine->data_ptr<int64_t>()[1] = t.numel();
  auto theirs = std::make_shared<at::Tensor>(at::empty({kPairLen}, at::kLong));
  auto a = aliases(tensors);
  auto g = gloo_;
  const int rank = rank_;
  CommOp::Post exchange = pair_exchange(g, mine, theirs, peer, pair_tag(from, to, tag));
  std::string op = name;
  CommOp::Wait verify = [mine, theirs, peer, rank, sending, op] {
    const int64_t* m = mine->data_ptr<int64_t>();
    const int64_t* o = theirs->data_ptr<int64_t>();
    if (o[0] == kPairFailed) {  // the peer's call failed before any data moved
      const char* text = reinterpret_cast<const char*>(o + 2);
      throw std::runtime_error(op + (sending ? " to" : " from") + " rank " + std::to_string(peer) +
                               ": rank " + std::to_string(peer) + " failed this call (its " +
                               c10d::opTypeToString(c10d::OpType(o[1])) + "): " +
                               std::string(text, strnlen(text, kPairReasonLen * sizeof(int64_t))));
    }
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
  Call call{
      name,    sending ? c10d::OpType::SEND : c10d::OpType::RECV, Ordering::kPeer, tensors, tensors,
      exchange};
  call.then_check = verify;
  call.then_post = data;
  return issue(std::move(call));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // Gloo's barrier also waits for this group's earlier operations (the queue
  // posts in order); the ready kernel makes it follow the current stream too.
  auto g = gloo_;
  c10d::BarrierOptions o = opts;
  o.device_ids.clear();
  return issue({"barrier", c10d::OpType::BARRIER, Ordering::kHost, {}, {}, [g, o]() mutable {
                  return waits_of(g->barrier(o));
                }});
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  // A host-side check that every rank arrives (Gloo's send/recv on tags of
  // its own), as on a CPU group; it does not wait for queued device work.
  c10d::BarrierOptions o = opts;
  o.device_ids.clear();
  gloo_in_order().monitoredBarrier(o, waitAllRanks);
}

}  // namespace torchneuron::distributed

// The collectives' cross-rank check: each checked call sends this rank's
// fingerprint (op, dtype, shapes, elements per peer) to every other rank and
// the poster compares the peers' with it before any data moves; a call that
// failed at the call sends a failed one (op kFailedOp and the reason).
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "distributed/arguments.h"

namespace torchneuron::distributed {
namespace {

// What must agree across ranks, as int64 values: [op, count, dtype, dims,
// sizes (kMaxDims - 1), the first tensor's layout, hash of every tensor's].
constexpr int kMetaLen = 13;
constexpr int kMaxDims = kMetaLen - 5;
constexpr int kLayoutAt = kMetaLen - 2;

// Memory order of a dense tensor (ranks' elementwise data must agree on it).
enum Layout : int64_t { kContiguous = 0, kChannelsLast = 1, kChannelsLast3d = 2, kOtherDense = 3 };
Layout layout_of(const at::Tensor& t) {
  if (t.is_contiguous()) return kContiguous;
  if (t.is_contiguous(at::MemoryFormat::ChannelsLast)) return kChannelsLast;
  if (t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) return kChannelsLast3d;
  return kOtherDense;
}
// A fingerprint is [meta (kMetaLen) | elements sent to each rank | expected
// from each | reason (kReasonLen int64: text)]; the reason is set only in a
// failed one, whose op (meta[0]) is kFailedOp and meta[1] the OpType called.
constexpr int kReasonLen = 32;
constexpr int64_t kFailedOp = -2;
int64_t fingerprint_len(int size) { return kMetaLen + 2 * int64_t(size) + kReasonLen; }

void meta_of(c10d::OpType type, const std::vector<at::Tensor>& ts, bool dtype_only, int64_t* m) {
  std::fill(m, m + kMetaLen, -1);
  m[0] = int64_t(type);
  m[1] = int64_t(ts.size());
  if (ts.empty()) return;
  m[2] = int64_t(ts[0].scalar_type());
  if (dtype_only) return;
  // Every tensor's shape and dtype enter a hash; the first is spelled out
  // for the message.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) { h = (h ^ uint64_t(v)) * 1099511628211ull; };
  for (const auto& t : ts) {
    mix(int64_t(t.scalar_type()));
    mix(t.dim());
    for (auto s : t.sizes()) mix(s);
    // The memory order: strides of the dims that have more than one element
    // (equal for any two dense tensors of one shape and one order).
    for (int64_t d = 0; d < t.dim(); ++d)
      if (t.size(d) > 1) mix(t.stride(d));
  }
  m[kLayoutAt] = layout_of(ts[0]);
  m[3] = ts[0].dim();
  for (int i = 0; i < std::min<int64_t>(ts[0].dim(), kMaxDims - 1); ++i) m[4 + i] = ts[0].size(i);
  m[kMetaLen - 1] = int64_t(h & 0x7fffffffffffffffull);
}

std::string describe_meta(const int64_t* m) {
  if (m[1] == 0) return "no tensors";
  std::ostringstream s;
  s << (m[1] > 1 ? std::to_string(m[1]) + " tensors, the first " : "") << c10::ScalarType(m[2]);
  if (m[3] >= 0) {
    s << "[";
    for (int i = 0; i < m[3] && i < kMaxDims - 1; ++i) s << (i ? ", " : "") << m[4 + i];
    if (m[3] > kMaxDims - 1) s << ", ...";
    s << "]";
  }
  static const char* const kLayoutNames[] = {"", " channels_last", " channels_last_3d",
                                             " dense, not contiguous"};
  if (m[kLayoutAt] > 0 && m[kLayoutAt] <= kOtherDense) s << kLayoutNames[m[kLayoutAt]];
  return s.str();
}

}  // namespace

ProcessGroupNeuron::Inbox ProcessGroupNeuron::post_fingerprint_recv(int peer) {
  std::vector<at::Tensor> into{at::empty({fingerprint_len(size_)}, at::kLong)};
  auto work = gloo_->recv(into, peer, kFingerprintTag);
  return {into[0], std::move(work)};
}

struct ProcessGroupNeuron::Exchange {
  at::Tensor mine;
  std::vector<Inbox> recvs;  // [r]: rank r's (empty: this rank)
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  std::exception_ptr error;  // posting failed (a broken pair): the poster raises it

  // Waits until every fingerprint of the exchange is sent and received (all
  // of them, even after an error: Gloo's buffers must outlive the transfer).
  void wait() {
    std::exception_ptr first = error;
    auto wait_one = [&](const c10::intrusive_ptr<c10d::Work>& w) {
      try {
        w->wait();  // Gloo's timeout bounds it; a dead peer fails its pair at once
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    };
    for (auto& in : recvs)
      if (in.work) wait_one(in.work);
    for (auto& w : sends) wait_one(w);
    if (first) std::rethrow_exception(first);
  }
};

std::shared_ptr<ProcessGroupNeuron::Exchange> ProcessGroupNeuron::post_fingerprint(
    at::Tensor mine) {
  call_posted_ = true;  // this call's slot is taken, whatever happens below
  auto x = std::make_shared<Exchange>();
  x->mine = std::move(mine);
  x->recvs.resize(size_);
  // Posted now, from this thread (Gloo's send/recv need no work queue), so the
  // exchange overlaps the kernels queued before the collective. Each peer's
  // receive is posted one collective ahead: when a rank sends, its peer's
  // receive is already known to it, and Gloo writes at once (else the two
  // sides first trade ready notices). The sends go first: the peers wait for
  // them, and the next slot's ready notices would otherwise be written, and
  // read by the peers' Gloo threads, before them.
  // A failed send still takes the receives of its slot, so that the next
  // collective reads the peers' next fingerprints.
  auto guard = [&](const std::function<void()>& fn) {
    try {
      fn();
    } catch (...) {
      if (!x->error) x->error = std::current_exception();
    }
  };
  guard([&] {
    if (!inbox_.empty()) return;
    inbox_.resize(size_);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) inbox_[r] = post_fingerprint_recv(r);
  });
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    guard([&] {
      std::vector<at::Tensor> m{x->mine};
      x->sends.push_back(gloo_->send(m, r, kFingerprintTag));
    });
  }
  guard([&] {
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !inbox_.empty())
        x->recvs[r] = std::exchange(inbox_[r], post_fingerprint_recv(r));
  });
  return x;
}

std::function<void()> ProcessGroupNeuron::post_failed(c10d::OpType type,
                                                      const std::string& reason) {
  if (size_ == 1) return [] {};
  at::Tensor mine = at::full({fingerprint_len(size_)}, -1, at::kLong);
  int64_t* m = mine.data_ptr<int64_t>();
  m[0] = kFailedOp;
  m[1] = int64_t(type);
  char* text = reinterpret_cast<char*>(m + kMetaLen + 2 * size_);
  const size_t cap = kReasonLen * sizeof(int64_t);
  std::fill(text, text + cap, '\0');
  std::string r = reason.size() < cap ? reason : reason.substr(0, cap - 4) + "...";
  std::copy(r.begin(), r.end(), text);
  auto x = post_fingerprint(mine);
  return [x] {
    try {
      x->wait();
    } catch (const std::exception&) {  // the group is broken; the next collective says so
    }
  };
}

CommOp::Wait ProcessGroupNeuron::verify_across_ranks(const char* name, c10d::OpType type,
                                                     const std::vector<at::Tensor>& tensors,
                                                     bool dtype_only, const PeerCounts* peers) {
  const int size = size_, rank = rank_;
  if (size == 1) return [] {};
  // Every rank gets every rank's counts, so each one finds any pair that
  // disagrees, not only the two ranks of that pair.
  at::Tensor mine = at::full({fingerprint_len(size)}, -1, at::kLong);
  int64_t* m = mine.data_ptr<int64_t>();
  meta_of(type, tensors, dtype_only, m);
  if (peers) {
    std::copy(peers->send.begin(), peers->send.end(), m + kMetaLen);
    std::copy(peers->recv.begin(), peers->recv.end(), m + kMetaLen + size);
  }
  auto x = post_fingerprint(mine);
  std::string op = name;
  return [x, size, rank, op] {
    x->wait();
    // A peer whose call failed before any data moved (a bad argument there):
    // this rank's collective fails too, naming it, rather than waiting for
    // data that never comes.
    for (int r = 0; r < size; ++r) {
      if (r == rank || !x->recvs[r].work) continue;
      const int64_t* theirs = x->recvs[r].buf.data_ptr<int64_t>();
      if (theirs[0] != kFailedOp) continue;
      const char* text = reinterpret_cast<const char*>(theirs + kMetaLen + 2 * size);
      std::string reason(text, strnlen(text, kReasonLen * sizeof(int64_t)));
      throw std::runtime_error(op + ": rank " + std::to_string(r) + " failed this call (its " +
                               c10d::opTypeToString(c10d::OpType(theirs[1])) + "): " + reason);
    }
    std::vector<const int64_t*> fp(size);
    fp[rank] = x->mine.data_ptr<int64_t>();
    const int64_t* mine = fp[rank];
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      // (no receive: an earlier exchange with that rank failed; the group is broken)
      if (!x->recvs[r].work)
        throw std::runtime_error(op + ": no fingerprint from rank " + std::to_string(r) +
                                 " (an earlier exchange with it failed)");
      const int64_t* theirs = fp[r] = x->recvs[r].buf.data_ptr<int64_t>();
      if (std::equal(mine, mine + kMetaLen, theirs)) continue;
      std::ostringstream s;
      if (theirs[0] != mine[0]) {
        s << op << ": the ranks called different collectives (rank " << rank << ": "
          << c10d::opTypeToString(c10d::OpType(mine[0])) << " of " << describe_meta(mine)
          << "; rank " << r << ": " << c10d::opTypeToString(c10d::OpType(theirs[0])) << " of "
          << describe_meta(theirs) << ")";
      } else {
        s << op << ": the ranks' tensors differ (rank " << rank << ": " << describe_meta(mine)
          << "; rank " << r << ": " << describe_meta(theirs) << ")";
      }
      throw std::runtime_error(s.str());
    }
    // Counts per pair (all_to_all): what a sends to b is what b expects from a.
    for (int a = 0; a < size; ++a)
      for (int b = 0; b < size; ++b) {
        const int64_t sent = fp[a][kMetaLen + b], expected = fp[b][kMetaLen + size + a];
        if (a == b || sent == expected) continue;
        std::ostringstream s;
        s << op << ": the ranks' split sizes differ (rank " << a << " sends " << sent
          << " elements to rank " << b << ", which expects " << expected << ")";
        throw std::runtime_error(s.str());
      }
  };
}

}  // namespace torchneuron::distributed

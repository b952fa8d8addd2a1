// ProcessGroupNeuron: every neuron operation becomes a CommOp, posted to Gloo
// in program order by the group's CommQueue, over CPU aliases of the tensors'
// device memory (no copies), once the issuing stream has reached it:
//   - a kernel on the current stream signals "ready" (the kernels queued
//     before it are done) and, for collectives, then waits until the transfer
//     is done, so later kernels of that stream wait for it (as NCCL's stream);
//   - Work::wait() queues the same wait on the caller's current stream (host
//     does not block), except barrier, whose wait() blocks the host;
//   - send/recv block no stream before wait(): isend then irecv on both ranks
//     completes, as on CPU Gloo.
// Gloo's own errors and timeouts fail the CommOp; the kernel that waits for it
// raises the error at the stream's next sync point (or in wait()).
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

namespace torchneuron::distributed {
namespace {

std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(cpu_alias(t));
  return out;
}

std::vector<std::vector<at::Tensor>> aliases(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(ls.size());
  for (const auto& l : ls) out.push_back(aliases(l));
  return out;
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& ls) {
  std::vector<at::Tensor> out;
  for (const auto& l : ls) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::vector<at::Tensor> cat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<CommOp::Wait> waits_of(c10::intrusive_ptr<c10d::Work> w) {
  CommOp::Wait x([w] { w->wait(); });
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  try {
    fut = w->getFuture();  // Gloo's collectives have one; its send/recv do not
  } catch (const std::exception&) {
  }
  if (fut) {
    x.on_done = [w, fut](CommOp::Done done) {
      fut->addCallback([done](c10::ivalue::Future& f) {
        done(f.hasError() ? f.exception_ptr() : nullptr);
      });
    };
  }
  return {x};
}

// Whether two contiguous tensors share any byte (their aliases are separate
// storages over the same device memory, which ATen's overlap check misses).
bool bytes_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!a.numel() || !b.numel()) return false;
  auto lo = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); };
  auto hi = [&](const at::Tensor& t) { return lo(t) + t.numel() * t.element_size(); };
  return lo(a) < hi(b) && lo(b) < hi(a);
}

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << t.scalar_type() << t.sizes();
  return s.str();
}

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

void check_tag(const char* name, int tag) {
  TORCH_CHECK(tag >= 0 && tag < kMaxUserTag, "ProcessGroupNeuron::", name, ": tag ", tag,
              " out of range [0, ", kMaxUserTag, ") (larger tags carry the backend's own messages)");
}

// What must agree across ranks, as int64 values: [op, count, dtype, dims, sizes...].
constexpr int kMetaLen = 12;
constexpr int kMaxDims = kMetaLen - 4;
// A fingerprint is [meta (kMetaLen) | elements sent to each rank | expected
// from each | reason (kReasonLen int64: text)]; the reason is set only in a
// failed one, whose op (meta[0]) is kFailedOp and meta[1] the OpType called.
constexpr int kReasonLen = 32;
constexpr int64_t kFailedOp = -2;
int64_t fingerprint_len(int size) { return kMetaLen + 2 * int64_t(size) + kReasonLen; }

void meta_of(c10d::OpType type, const std::vector<at::Tensor>& ts, bool dtype_only,
             int64_t* m) {
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
  }
  m[3] = ts[0].dim();
  for (int i = 0; i < std::min<int64_t>(ts[0].dim(), kMaxDims - 1); ++i) m[4 + i] = ts[0].size(i);
  m[kMetaLen - 1] = int64_t(h & 0x7fffffffffffffffull);
}

std::string describe_meta(const int64_t* m) {
  if (m[1] == 0) return "no tensors";
  std::ostringstream s;
  s << (m[1] > 1 ? std::to_string(m[1]) + " tensors, the first " : "")
    << c10::ScalarType(m[2]);
  if (m[3] >= 0) {
    s << "[";
    for (int i = 0; i < m[3] && i < kMaxDims - 1; ++i) s << (i ? ", " : "") << m[4 + i];
    if (m[3] > kMaxDims - 1) s << ", ...";
    s << "]";
  }
  return s.str();
}

// Gloo's reductions (SUM PRODUCT MIN MAX AVG, bitwise on integers), checked
// here so that an unsupported one fails at the call, not on the stream.
void check_reduce_op(const char* name, const c10d::ReduceOp& op,
                     const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM && op != c10d::ReduceOp::UNUSED,
              "ProcessGroupNeuron::", name, ": ReduceOp.PREMUL_SUM is not supported "
              "(Gloo, the transport, has SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR)");
  // Gloo averages by summing, then dividing in place, which an integer
  // tensor cannot hold: CPU Gloo raises there (after the data moved); here at
  // the call. Bool: NCCL's error and type.
  if (op == c10d::ReduceOp::AVG)
    for (const auto& t : tensors) {
      if (t.scalar_type() == at::kBool)
        C10_THROW_ERROR(TypeError, "Cannot use ReduceOp.AVG with boolean inputs");
      TORCH_CHECK(at::isFloatingType(t.scalar_type()), "ProcessGroupNeuron::", name,
                  ": ReduceOp.AVG on ", t.scalar_type(), " tensors: result type Float can't be cast "
                  "to the desired output type ", t.scalar_type(), " (as on CPU Gloo; reduce with SUM "
                  "and divide, or use a floating-point tensor)");
    }
  const bool bitwise = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR ||
                       op == c10d::ReduceOp::BXOR;
  for (const auto& t : tensors)
    TORCH_CHECK(!bitwise || (!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type())),
                "ProcessGroupNeuron::", name, ": bitwise reductions need integer or bool tensors, got ",
                t.scalar_type());
}

// The element types of Gloo's typed collectives (ProcessGroupGloo's
// GENERATE_ALL_TYPES in PyTorch 2.13); send/recv move bytes of any type.
bool gloo_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kChar:
    case at::kByte: case at::kInt: case at::kLong: case at::kBool:
      return true;
    default:
      return false;
  }
}

// Gloo's checks of a collective's arguments, made at the call, before the
// fingerprint: on the poster they would fail this rank alone after its peers
// started waiting for its data (and Gloo aborts the process on some).
void check_root(const char* name, int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "ProcessGroupNeuron::", name, ": invalid root rank ",
                    root, " (group of ", size, ")");
}

void check_list(const char* name, const char* what, size_t got, size_t expected) {
  TORCH_CHECK(got == expected, "ProcessGroupNeuron::", name, ": ", what, " has ", got,
              " tensors, expected ", expected, " (the group's size)");
}

void check_like(const char* name, const char* what, size_t i, const at::Tensor& t,
                const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type() && t.sizes() == ref.sizes(), "ProcessGroupNeuron::",
              name, ": ", what, " ", i, " is ", describe(t), ", expected ", describe(ref));
}

}  // namespace

// A Work of this backend: the CommOp (filled when a coalescing block ends),
// how it joins the streams, and its outputs.
class NeuronWork : public c10d::Work {
 public:
  using Slot = std::shared_ptr<std::shared_ptr<CommOp>>;
  NeuronWork(int rank, c10d::OpType type, Slot slot, Ordering ordering,
             c10::DeviceIndex device, std::vector<at::Tensor> outputs,
             c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(rank, type), slot_(std::move(slot)), ordering_(ordering),
        device_(device), outputs_(std::move(outputs)), future_(std::move(future)) {}

  bool isCompleted() override { return *slot_ && (*slot_)->done(); }
  bool isSuccess() const override { return *slot_ && (*slot_)->done() && (*slot_)->error().empty(); }
  std::vector<at::Tensor> result() override { return outputs_; }

  // As NCCL's: the caller's current stream waits for the operation; its
  // error is raised at that stream's next sync point (a collective's also on
  // the issuing stream's). Barrier blocks the host and raises here.
  bool wait(std::chrono::milliseconds /*timeout: Gloo's own, the group's*/) override {
    std::shared_ptr<CommOp> op = *slot_;
    TORCH_CHECK(op, "neuron c10d: wait() on an operation issued inside a coalescing block; "
                    "wait on the work that ends the block (_coalescing_manager's cm.wait())");
    if (ordering_ == Ordering::kHost) {
      std::string err;
      blocking_wait([&] {
        try {
          op->wait_done();
        } catch (const std::exception& e) {
          err = e.what();
        }
      });
      TORCH_CHECK(err.empty(), err);
      return true;
    }
    const bool reported = ordering_ == Ordering::kStream;  // by the issuing kernel
    if (!op->done() || (!reported && !op->error().empty()))
      launch(device_, "c10d::wait", [op] { op->wait_done(); });
    return true;
  }

  void synchronize() override { wait(kNoTimeout); }
  const Slot& slot() const { return slot_; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    TORCH_CHECK(future_, "neuron c10d: getFuture() is available for collectives, "
                         "not for send, recv and barrier (as with Gloo)");
    return future_;
  }

 private:
  Slot slot_;
  Ordering ordering_;
  c10::DeviceIndex device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

struct ProcessGroupNeuron::Pending {
  NeuronWork::Slot slot = std::make_shared<std::shared_ptr<CommOp>>();
  std::vector<CommOp::Post> checks, posts, then_posts;
  std::vector<CommOp::Wait> then_checks;
  std::vector<at::Tensor> tensors, outputs;
  bool collective = false;
  std::exception_ptr failed;  // a call's local error, raised by endCoalescing
};

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, int rank,
                                       int size)
    : c10d::Backend(rank, size), gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_, "ProcessGroupNeuron needs a Gloo backend");
  ScopeFn scope;  // none needed when device memory is never protected
  if (device_runtime().config().protect_memory)
    scope = [](const std::function<void()>& fn) { device_runtime().with_device_access(fn); };
  queue_ = std::make_unique<CommQueue>(std::move(scope));
}

ProcessGroupNeuron::~ProcessGroupNeuron() {
  // Joining the queue's threads may wait for operations that release tensors.
  blocking_wait([&] { queue_.reset(); });
  // (the queue's kept buffers go with it, on this thread)
}

c10d::Backend& ProcessGroupNeuron::gloo_in_order() {
  blocking_wait([&] { queue_->wait_posted(); });
  return *gloo_;
}

bool ProcessGroupNeuron::on_cpu(const char* name, const std::vector<at::Tensor>& tensors,
                                bool typed) {
  // A call with any neuron tensor is a neuron collective for its peers (they
  // wait for its fingerprint), even if it fails below.
  call_neuron_ = std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) {
    return t.defined() && t.device().type() == kNeuron;
  });
  size_t cpu = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    TORCH_CHECK(t.defined(), "ProcessGroupNeuron::", name, ": tensor ", i, " is undefined");
    if (t.device().is_cpu()) {
      ++cpu;
      continue;
    }
    TORCH_CHECK(t.device().type() == kNeuron, "ProcessGroupNeuron::", name, ": tensor ", i,
                " is on ", t.device(), "; this backend serves neuron and cpu tensors");
  }
  if (cpu == tensors.size()) return true;
  TORCH_CHECK(cpu == 0, "ProcessGroupNeuron::", name,
              ": tensors of one operation must all be on neuron or all on cpu, got a mix");
  if (device_ < 0) device_ = resolve_device(-1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    TORCH_CHECK(t.device().index() == device_, "ProcessGroupNeuron::", name, ": tensor ", i,
                " is on ", t.device(), " but rank ", rank_, " of this process group uses neuron:",
                int(device_), " (the current device at its first operation; call "
                "torch.neuron.set_device(local_rank) before communicating)");
    TORCH_CHECK(t.is_contiguous(), "ProcessGroupNeuron::", name, ": tensor ", i,
                " must be contiguous (", describe(t), ", strides ", t.strides(), ")");
    TORCH_CHECK(!t.is_conj() && !t.is_neg(), "ProcessGroupNeuron::", name, ": tensor ", i,
                " is a lazy conjugate/negative view; call resolve_conj()/resolve_neg() first");
    // Checked here so that it fails at the call, as on a CPU group, not on the stream.
    TORCH_CHECK(!typed || gloo_dtype(t.scalar_type()), "ProcessGroupNeuron::", name, ": tensor ", i,
                " has dtype ", t.scalar_type(), ", which Gloo (the transport) does not reduce or "
                "copy in collectives (it has float32, float64, float16, bfloat16, int8, uint8, "
                "int32, int64, bool)");
  }
  return false;
}

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

std::shared_ptr<ProcessGroupNeuron::Exchange> ProcessGroupNeuron::post_fingerprint(at::Tensor mine) {
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
      if (r != rank_ && !inbox_.empty()) x->recvs[r] = std::exchange(inbox_[r], post_fingerprint_recv(r));
  });
  return x;
}

std::function<void()> ProcessGroupNeuron::post_failed(c10d::OpType type, const std::string& reason) {
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
          << c10d::opTypeToString(c10d::OpType(mine[0])) << " of " << describe_meta(mine) << "; rank " << r
          << ": " << c10d::opTypeToString(c10d::OpType(theirs[0])) << " of " << describe_meta(theirs) << ")";
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

template <class F>
c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::guarded(const char* name, c10d::OpType type,
                                                          F&& body) {
  call_neuron_ = call_posted_ = false;
  try {
    return body();
  } catch (const std::exception& e) {
    // A CPU call is Gloo's own (no fingerprint); one that posted its
    // fingerprint has its slot (a later failure is reported on the stream).
    if (!call_neuron_ || call_posted_) throw;
    const auto* ce = dynamic_cast<const c10::Error*>(&e);
    std::string reason = ce ? ce->what_without_backtrace() : e.what();
    auto drain = post_failed(type, reason);
    if (pending_) {
      // Inside a coalescing block the call returns; endCoalescing raises, so
      // that the block still ends (torch's _coalescing_manager ends it only
      // when its body returns) and the block's other calls post their slots.
      auto& p = *pending_;
      if (!p.failed) p.failed = std::current_exception();
      p.checks.push_back([drain] {
        drain();
        return std::vector<CommOp::Wait>{};
      });
      return c10::make_intrusive<NeuronWork>(rank_, type, p.slot, Ordering::kStream, device_,
                                             std::vector<at::Tensor>{}, nullptr);
    }
    // Queued (in order with the group's other exchanges) only to receive the
    // peers' fingerprints of this slot; it fails without posting anything.
    std::string label = std::string("neuron c10d ") + name + " (failed at the call)";
    std::vector<CommOp::Post> checks{[drain, reason]() -> std::vector<CommOp::Wait> {
      drain();
      throw std::runtime_error(reason);
    }};
    queue_->push(std::make_shared<CommOp>(label, std::move(checks), std::vector<CommOp::Post>{},
                                          true));
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::issue(
    const char* name, c10d::OpType type, const std::vector<at::Tensor>& tensors,
    std::vector<at::Tensor> outputs, Ordering ordering, const std::vector<at::Tensor>* check,
    bool dtype_only, CommOp::Post post, CommOp::Wait then_check, CommOp::Post then_post,
    const PeerCounts* peers) {
  std::vector<CommOp::Post> checks, posts, then;
  // Posts the cross-rank exchange: only once this call can no longer fail
  // before queueing (an orphan message would pair with the next collective).
  auto post_check = [&] {
    if (!check) return;
    auto verify = verify_across_ranks(name, type, *check, dtype_only, peers);
    checks.push_back([verify] {
      verify();
      return std::vector<CommOp::Wait>{};
    });
  };
  // Gloo's checks raise c10::Error, whose what() carries a C++ backtrace:
  // noise in the message the stream raises later.
  posts.push_back([post = std::move(post)]() {
    try {
      return post();
    } catch (const c10::Error& e) {
      throw std::runtime_error(e.what_without_backtrace());
    }
  });
  if (pending_) {
    post_check();  // inside a coalescing block: one CommOp at the block's end
    auto& p = *pending_;
    p.checks.insert(p.checks.end(), checks.begin(), checks.end());
    p.posts.insert(p.posts.end(), posts.begin(), posts.end());
    if (then_check) p.then_checks.push_back(std::move(then_check));
    if (then_post) p.then_posts.push_back(std::move(then_post));
    p.tensors.insert(p.tensors.end(), tensors.begin(), tensors.end());
    p.outputs.insert(p.outputs.end(), outputs.begin(), outputs.end());
    p.collective |= ordering == Ordering::kStream;
    return c10::make_intrusive<NeuronWork>(rank_, type, p.slot, ordering, device_,
                                           std::move(outputs), nullptr);
  }
  const bool collective = ordering != Ordering::kPeer;
  if (then_check || then_post) {
    then.push_back([then_check, then_post] {
      if (then_check) then_check();
      return then_post ? then_post() : std::vector<CommOp::Wait>{};
    });
  }
  const auto device = device_ >= 0 ? device_ : resolve_device(-1);
  // An idle stream has nothing the transfer must wait for: start it now
  // (the kernel below still orders later kernels after it).
  bool idle = false;
  translate_errors([&] { idle = device_runtime().query_stream(device, current_stream_id(device)); });
  post_check();  // first: the peers wait for it
  std::string label = std::string("neuron c10d ") + name + " (rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + ")";
  auto op = std::make_shared<CommOp>(std::move(label), std::move(checks), std::move(posts), collective,
                                     std::move(then));
  if (ordering != Ordering::kStream)
    op->keep({std::make_shared<std::vector<at::Tensor>>(tensors)});
  if (idle) op->signal_ready();
  queue_->push(op);
  queue_->sweep();
  if (ordering == Ordering::kStream) {
    // The kernel owns the tensors: released on the stream, as any kernel's.
    launch(device, name, [op, tensors] {
      op->signal_ready();
      op->wait_done();
    });
  } else {
    launch(device, name, [op] { op->signal_ready(); });
  }
  c10::intrusive_ptr<c10::ivalue::Future> future;
  if (ordering == Ordering::kStream) {
    // Completed now, as NCCL's: its events follow the kernel above, so
    // waiting on it orders the waiter's stream after the collective.
    future = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()),
        std::vector<c10::Device>{c10::Device(kNeuron, device)});
    future->markCompleted(c10::IValue(outputs));
  }
  auto slot = std::make_shared<std::shared_ptr<CommOp>>(op);
  return c10::make_intrusive<NeuronWork>(rank_, type, slot, ordering, device,
                                         std::move(outputs), future);
}

void ProcessGroupNeuron::startCoalescing() {
  TORCH_CHECK(!pending_, "ProcessGroupNeuron::startCoalescing: a coalescing block is already open");
  pending_ = std::make_unique<Pending>();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::endCoalescing() {
  TORCH_CHECK(pending_, "ProcessGroupNeuron::endCoalescing: no coalescing block is open");
  auto p = std::move(pending_);
  pending_.reset();
  const Ordering ordering = p->collective ? Ordering::kStream : Ordering::kPeer;
  if (p->failed) {
    // A call of the block failed at the call on this rank (its peers fail the
    // block when they see its fingerprint): no data moves; the block's
    // fingerprint exchanges are still received, in order, then it raises.
    auto checks = std::move(p->checks);
    std::vector<CommOp::Post> drain{[checks]() -> std::vector<CommOp::Wait> {
      for (const auto& c : checks) {
        try {
          c();
        } catch (const std::exception&) {
        }
      }
      throw std::runtime_error("a call of this coalescing block failed at the call");
    }};
    *p->slot = std::make_shared<CommOp>("neuron c10d coalesced (failed at a call)", std::move(drain),
                                        std::vector<CommOp::Post>{}, true);
    queue_->push(*p->slot);
    std::rethrow_exception(p->failed);
  }
  if (p->posts.empty()) {
    *p->slot = CommOp::completed("neuron c10d coalesced");
    return c10::make_intrusive<NeuronWork>(rank_, c10d::OpType::COALESCED, p->slot, ordering,
                                           device_, std::vector<at::Tensor>{}, nullptr);
  }
  auto checks = std::move(p->checks);
  auto posts = std::move(p->posts);
  auto run_all = [](const std::vector<CommOp::Post>& ps) {
    std::vector<CommOp::Wait> waits;
    for (const auto& post : ps) {
      auto w = post();
      waits.insert(waits.end(), w.begin(), w.end());
    }
    return waits;
  };
  CommOp::Wait then_check;
  CommOp::Post then_post;
  if (!p->then_checks.empty() || !p->then_posts.empty()) {
    auto tc = std::move(p->then_checks);
    auto tp = std::move(p->then_posts);
    then_check = [tc] {
      for (const auto& c : tc) c();  // every pair checked before any data moves
    };
    then_post = [tp, run_all] { return run_all(tp); };
  }
  auto work = issue("coalesced", c10d::OpType::COALESCED, p->tensors, p->outputs, ordering,
                    nullptr, false, [checks, posts, run_all] {
                      // All before any transfer; each one even after another
                      // failed: it waits for its fingerprint exchange, whose
                      // Gloo buffers must outlive it (a send dropped unfinished
                      // never reaches the peer, which then waits for it).
                      std::exception_ptr first;
                      for (const auto& check : checks) {
                        try {
                          check();
                        } catch (...) {
                          if (!first) first = std::current_exception();
                        }
                      }
                      if (first) std::rethrow_exception(first);
                      return run_all(posts);
                    }, then_check, then_post);
  // The block's works wait on the block's CommOp.
  *p->slot = *static_cast<NeuronWork*>(work.get())->slot();
  return work;
}

// ---- collectives -----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return guarded("broadcast", c10d::OpType::BROADCAST, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("broadcast", tensors)) return gloo_in_order().broadcast(tensors, opts);
    check_root("broadcast", opts.rootRank, size_);
    TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::broadcast: expects one tensor, got ",
                tensors.size());
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue("broadcast", c10d::OpType::BROADCAST, tensors, tensors, Ordering::kStream,
                 &tensors, false, [g, a, opts]() mutable { return waits_of(g->broadcast(a, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return guarded("allreduce", c10d::OpType::ALLREDUCE, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("allreduce", tensors)) return gloo_in_order().allreduce(tensors, opts);
    check_reduce_op("allreduce", opts.reduceOp, tensors);
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue("allreduce", c10d::OpType::ALLREDUCE, tensors, tensors, Ordering::kStream,
                 &tensors, false, [g, a, opts]() mutable { return waits_of(g->allreduce(a, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return guarded("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("allreduce_coalesced", tensors)) return gloo_in_order().allreduce_coalesced(tensors, opts);
    check_reduce_op("allreduce_coalesced", opts.reduceOp, tensors);
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors,
                 Ordering::kStream, &tensors, false,
                 [g, a, opts]() mutable { return waits_of(g->allreduce_coalesced(a, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  return guarded("reduce", c10d::OpType::REDUCE, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("reduce", tensors)) return gloo_in_order().reduce(tensors, opts);
    check_root("reduce", opts.rootRank, size_);
    TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::reduce: expects one tensor, got ", tensors.size());
    check_reduce_op("reduce", opts.reduceOp, tensors);
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue("reduce", c10d::OpType::REDUCE, tensors, tensors, Ordering::kStream, &tensors,
                 false, [g, a, opts]() mutable { return waits_of(g->reduce(a, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded("allgather", c10d::OpType::ALLGATHER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto outs = flat(outputs);
    if (on_cpu("allgather", cat(outs, inputs))) return gloo_in_order().allgather(outputs, inputs, opts);
    TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "ProcessGroupNeuron::all_gather: ",
                outputs.size(), " output lists for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_list("all_gather", "the output list", outputs[i].size(), size_);
      for (size_t j = 0; j < outputs[i].size(); ++j)
        check_like("all_gather", "output", j, outputs[i][j], inputs[i]);
    }
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("allgather", c10d::OpType::ALLGATHER, cat(outs, inputs), outs, Ordering::kStream,
                 &inputs, false,
                 [g, ao, ai, opts]() mutable { return waits_of(g->allgather(ao, ai, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return guarded("_allgather_base", c10d::OpType::_ALLGATHER_BASE,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    std::vector<at::Tensor> ts{output, input};
    if (on_cpu("_allgather_base", ts)) return gloo_in_order()._allgather_base(output, input, opts);
    TORCH_CHECK(output.numel() == input.numel() * size_, "ProcessGroupNeuron::all_gather_into_tensor: "
                "output has ", output.numel(), " elements, expected world size ", size_, " x input's ",
                input.numel());
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "ProcessGroupNeuron::all_gather_into_tensor: "
                "output dtype ", output.scalar_type(), " differs from input dtype ", input.scalar_type());
    at::Tensor ao = cpu_alias(output), ai = cpu_alias(input);
    auto g = gloo_;
    std::vector<at::Tensor> in{input};
    return issue("_allgather_base", c10d::OpType::_ALLGATHER_BASE, ts, {output}, Ordering::kStream,
                 &in, false,
                 [g, ao, ai, opts]() mutable { return waits_of(g->_allgather_base(ao, ai, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto outs = flat(outputs);
    if (on_cpu("allgather_coalesced", cat(outs, inputs)))
      return gloo_in_order().allgather_coalesced(outputs, inputs, opts);
    check_list("all_gather_coalesced", "output_tensor_lists", outputs.size(), size_);
    for (const auto& l : outputs) {
      TORCH_CHECK(l.size() == inputs.size(), "ProcessGroupNeuron::all_gather_coalesced: an output list has ",
                  l.size(), " tensors for ", inputs.size(), " inputs");
      for (size_t j = 0; j < l.size(); ++j) check_like("all_gather_coalesced", "output", j, l[j], inputs[j]);
    }
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, cat(outs, inputs), outs,
                 Ordering::kStream, &inputs, false, [g, ao, ai, opts]() mutable {
                   return waits_of(g->allgather_coalesced(ao, ai, opts));
                 });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded("allgather_into_tensor_coalesced", c10d::OpType::COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("allgather_into_tensor_coalesced", cat(outputs, inputs)))
      return gloo_in_order().allgather_into_tensor_coalesced(outputs, inputs, opts);
    TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupNeuron::allgather_into_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_ &&
                      outputs[i].scalar_type() == inputs[i].scalar_type(),
                  "ProcessGroupNeuron::allgather_into_tensor_coalesced: output ", i, " (",
                  describe(outputs[i]), ") must hold world size ", size_, " x input ", i, " (",
                  describe(inputs[i]), ")");
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("allgather_into_tensor_coalesced", c10d::OpType::COALESCED, cat(outputs, inputs),
                 outputs, Ordering::kStream, &inputs, false, [g, ao, ai, opts]() mutable {
                   // One Gloo all_gather per pair (Gloo's own coalesced form wants CPU tensors of
                   // one dtype; this keeps dtypes free), posted together, waited together.
                   std::vector<CommOp::Wait> waits;
                   for (size_t i = 0; i < ai.size(); ++i) {
                     auto w = waits_of(g->_allgather_base(ao[i], ai[i], opts));
                     waits.insert(waits.end(), w.begin(), w.end());
                   }
                   return waits;
                 });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  return guarded("gather", c10d::OpType::GATHER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto outs = flat(outputs);
    if (on_cpu("gather", cat(outs, inputs))) return gloo_in_order().gather(outputs, inputs, opts);
    check_root("gather", opts.rootRank, size_);
    TORCH_CHECK(inputs.size() == 1, "ProcessGroupNeuron::gather: expects one input, got ", inputs.size());
    if (opts.rootRank == rank_) {
      TORCH_CHECK(outputs.size() == 1, "ProcessGroupNeuron::gather: the root expects one gather_list");
      check_list("gather", "gather_list", outputs[0].size(), size_);
      for (size_t j = 0; j < outputs[0].size(); ++j)
        check_like("gather", "gather_list tensor", j, outputs[0][j], inputs[0]);
    } else {
      TORCH_CHECK(outputs.empty(), "ProcessGroupNeuron::gather: gather_list is for the root rank only");
    }
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("gather", c10d::OpType::GATHER, cat(outs, inputs), outs, Ordering::kStream,
                 &inputs, false,
                 [g, ao, ai, opts]() mutable { return waits_of(g->gather(ao, ai, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return guarded("scatter", c10d::OpType::SCATTER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto ins = flat(inputs);
    if (on_cpu("scatter", cat(outputs, ins))) return gloo_in_order().scatter(outputs, inputs, opts);
    check_root("scatter", opts.rootRank, size_);
    TORCH_CHECK(outputs.size() == 1, "ProcessGroupNeuron::scatter: expects one output, got ", outputs.size());
    if (opts.rootRank == rank_) {
      TORCH_CHECK(inputs.size() == 1, "ProcessGroupNeuron::scatter: the root expects one scatter_list");
      check_list("scatter", "scatter_list", inputs[0].size(), size_);
      for (size_t j = 0; j < inputs[0].size(); ++j)
        check_like("scatter", "scatter_list tensor", j, inputs[0][j], outputs[0]);
    } else {
      TORCH_CHECK(inputs.empty(), "ProcessGroupNeuron::scatter: scatter_list is for the root rank only");
    }
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("scatter", c10d::OpType::SCATTER, cat(outputs, ins), outputs, Ordering::kStream,
                 &outputs, false,
                 [g, ao, ai, opts]() mutable { return waits_of(g->scatter(ao, ai, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return guarded("reduce_scatter", c10d::OpType::REDUCE_SCATTER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto ins = flat(inputs);
    if (on_cpu("reduce_scatter", cat(outputs, ins)))
      return gloo_in_order().reduce_scatter(outputs, inputs, opts);
    check_reduce_op("reduce_scatter", opts.reduceOp, outputs);
    TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(), "ProcessGroupNeuron::reduce_scatter: ",
                inputs.size(), " input lists for ", outputs.size(), " outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
      check_list("reduce_scatter", "input_list", inputs[i].size(), size_);
      for (size_t j = 0; j < inputs[i].size(); ++j)
        check_like("reduce_scatter", "input", j, inputs[i][j], outputs[i]);
    }
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("reduce_scatter", c10d::OpType::REDUCE_SCATTER, cat(outputs, ins), outputs,
                 Ordering::kStream, &outputs, false,
                 [g, ao, ai, opts]() mutable { return waits_of(g->reduce_scatter(ao, ai, opts)); });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return guarded("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    std::vector<at::Tensor> ts{output, input};
    if (on_cpu("_reduce_scatter_base", ts)) return gloo_in_order()._reduce_scatter_base(output, input, opts);
    check_reduce_op("reduce_scatter_tensor", opts.reduceOp, ts);
    TORCH_CHECK(input.numel() == output.numel() * size_ && input.scalar_type() == output.scalar_type(),
                "ProcessGroupNeuron::reduce_scatter_tensor: input (", describe(input),
                ") must hold world size ", size_, " x output (", describe(output), ")");
    at::Tensor ao = cpu_alias(output), ai = cpu_alias(input);
    auto g = gloo_;
    std::vector<at::Tensor> out{output};
    return issue("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, ts, {output},
                 Ordering::kStream, &out, false, [g, ao, ai, opts]() mutable {
                   return waits_of(g->_reduce_scatter_base(ao, ai, opts));
                 });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return guarded("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("reduce_scatter_tensor_coalesced", cat(outputs, inputs)))
      return gloo_in_order().reduce_scatter_tensor_coalesced(outputs, inputs, opts);
    check_reduce_op("reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
    TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupNeuron::reduce_scatter_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_ &&
                      inputs[i].scalar_type() == outputs[i].scalar_type(),
                  "ProcessGroupNeuron::reduce_scatter_tensor_coalesced: input ", i, " (",
                  describe(inputs[i]), ") must hold world size ", size_, " x output ", i, " (",
                  describe(outputs[i]), ")");
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    return issue("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, cat(outputs, inputs),
                 outputs, Ordering::kStream, &outputs, false, [g, ao, ai, opts]() mutable {
                   std::vector<CommOp::Wait> waits;
                   for (size_t i = 0; i < ai.size(); ++i) {
                     auto w = waits_of(g->_reduce_scatter_base(ao[i], ai[i], opts));
                     waits.insert(waits.end(), w.begin(), w.end());
                   }
                   return waits;
                 });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  return guarded("alltoall_base", c10d::OpType::ALLTOALL_BASE, [&]() -> c10::intrusive_ptr<c10d::Work> {
    std::vector<at::Tensor> ts{output, input};
    if (on_cpu("alltoall_base", ts))
      return gloo_in_order().alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "ProcessGroupNeuron::all_to_all_single: output is ", output.scalar_type(),
                ", input is ", input.scalar_type());
    // Checked at the call, as Gloo does on CPU tensors; the counts per peer are
    // then checked across ranks before any data moves.
    auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& split, const char* what) {
      const int64_t rows = t.dim() ? t.size(0) : 1;
      if (split.empty()) {
        TORCH_CHECK(rows % size_ == 0, "ProcessGroupNeuron::all_to_all_single: the ", what,
                    "'s dim 0 (", rows, ") does not divide equally across the group's ", size_, " ranks");
      } else {
        TORCH_CHECK(int64_t(split.size()) == size_, "ProcessGroupNeuron::all_to_all_single: ", what,
                    " split sizes has ", split.size(), " entries for a group of ", size_);
        int64_t sum = 0;
        for (auto s : split) {
          TORCH_CHECK(s >= 0, "ProcessGroupNeuron::all_to_all_single: negative ", what, " split size ", s);
          sum += s;
        }
        TORCH_CHECK(sum == rows, "ProcessGroupNeuron::all_to_all_single: ", what, " split sizes sum to ",
                    sum, ", the ", what, "'s dim 0 is ", rows);
      }
      const int64_t row = rows ? t.numel() / rows : 0;
      std::vector<int64_t> c(size_);
      for (int r = 0; r < size_; ++r) c[r] = (split.empty() ? rows / size_ : split[r]) * row;
      return c;
    };
    PeerCounts peers{counts(input, input_split_sizes, "input"), counts(output, output_split_sizes, "output")};
    TORCH_CHECK(peers.send[rank_] == peers.recv[rank_], "ProcessGroupNeuron::all_to_all_single: rank ",
                rank_, " sends itself ", peers.send[rank_], " elements but expects ", peers.recv[rank_]);
    at::Tensor ao = cpu_alias(output), ai = cpu_alias(input);
    auto g = gloo_;
    auto os = output_split_sizes, is = input_split_sizes;
    std::vector<at::Tensor> in{input};
    return issue("alltoall_base", c10d::OpType::ALLTOALL_BASE, ts, {output}, Ordering::kStream, &in,
                 true, [g, ao, ai, os, is, opts]() mutable {
                   // In place (the output is the input): staged first, as the list
                   // form's aliased inputs are (CPU Gloo gives wrong parts there).
                   if (bytes_overlap(ai, ao)) ai = ai.clone();
                   return waits_of(g->alltoall_base(ao, ai, os, is, opts));
                 }, nullptr, nullptr, &peers);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  return guarded("alltoall", c10d::OpType::ALLTOALL, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("alltoall", cat(outputs, inputs))) return gloo_in_order().alltoall(outputs, inputs, opts);
    TORCH_CHECK(int(outputs.size()) == size_ && int(inputs.size()) == size_,
                "ProcessGroupNeuron::all_to_all: needs world size ", size_, " inputs and outputs, got ",
                inputs.size(), " and ", outputs.size());
    for (int j = 0; j < size_; ++j)
      TORCH_CHECK(outputs[j].scalar_type() == inputs[j].scalar_type(),
                  "ProcessGroupNeuron::all_to_all: output ", j, " is ", outputs[j].scalar_type(),
                  ", input ", j, " is ", inputs[j].scalar_type());
    TORCH_CHECK(outputs[rank_].numel() == inputs[rank_].numel(), "ProcessGroupNeuron::all_to_all: output ",
                rank_, " has ", outputs[rank_].numel(), " elements, input ", rank_, " has ",
                inputs[rank_].numel());
    PeerCounts peers;
    for (int j = 0; j < size_; ++j) {
      peers.send.push_back(inputs[j].numel());
      peers.recv.push_back(outputs[j].numel());
    }
    // Gloo's list all_to_all wants equal sizes; pairs of send/recv take any
    // (each rank's own part is copied on the device memory directly).
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    const int rank = rank_, size = size_;
    return issue("alltoall", c10d::OpType::ALLTOALL, cat(outputs, inputs), outputs,
                 Ordering::kStream, &inputs, true, [g, ao, ai, rank, size]() mutable {
                   // An input sharing memory with an output is copied first, as CPU
                   // Gloo stages its inputs: a receive could overwrite it before it
                   // is sent (all_to_all(l, l) gave a rank its own part back).
                   for (auto& in : ai)
                     for (const auto& out : ao)
                       if (bytes_overlap(in, out)) {
                         in = in.clone();
                         break;
                       }
                   std::vector<CommOp::Wait> waits;
                   for (int k = 1; k < size; ++k) {
                     const int to = (rank + k) % size, from = (rank - k + size) % size;
                     std::vector<at::Tensor> s{ai[to]}, r{ao[from]};
                     auto ws = waits_of(g->send(s, to, kAllToAllTag));
                     auto wr = waits_of(g->recv(r, from, kAllToAllTag));
                     waits.insert(waits.end(), ws.begin(), ws.end());
                     waits.insert(waits.end(), wr.begin(), wr.end());
                   }
                   ao[rank].copy_(ai[rank]);
                   return waits;
                 }, nullptr, nullptr, &peers);
  });
}

// ---- point to point and barrier ---------------------------------------------

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

c10::intrusive_ptr<c10d::Backend> create_process_group_neuron(
    c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size) {
  return c10::make_intrusive<ProcessGroupNeuron>(std::move(gloo), rank, size);
}

}  // namespace torchneuron::distributed

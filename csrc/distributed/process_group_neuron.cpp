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
// This file: the Work, the common path of every operation (issue, guarded),
// coalescing. The collectives, send/recv and barrier, the cross-rank
// fingerprint and the argument checks have files of their own.
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "aten/concatenation.h"
#include "aten/device.h"
#include "aten/launch.h"
#include "aten/stream.h"
#include "distributed/arguments.h"

namespace torchneuron::distributed {

// A Work of this backend: the CommOp (filled when a coalescing block ends),
// how it joins the streams, and its outputs.
class NeuronWork : public c10d::Work {
 public:
  using Slot = std::shared_ptr<std::shared_ptr<CommOp>>;
  NeuronWork(int rank, c10d::OpType type, Slot slot, Ordering ordering, c10::DeviceIndex device,
             std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(rank, type),
        slot_(std::move(slot)),
        ordering_(ordering),
        device_(device),
        outputs_(std::move(outputs)),
        future_(std::move(future)) {}

  bool isCompleted() override { return *slot_ && (*slot_)->done(); }
  bool isSuccess() const override {
    return *slot_ && (*slot_)->done() && (*slot_)->error().empty();
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // As NCCL's: the caller's current stream waits for the operation; its
  // error is raised at that stream's next sync point (a collective's also on
  // the issuing stream's). Barrier blocks the host and raises here.
  bool wait(std::chrono::milliseconds /*timeout: Gloo's own, the group's*/) override {
    std::shared_ptr<CommOp> op = *slot_;
    TORCH_CHECK(op,
                "neuron c10d: wait() on an operation issued inside a coalescing block; "
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
    TORCH_CHECK(future_,
                "neuron c10d: getFuture() is available for collectives, "
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

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size)
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
                                bool typed, bool dense) {
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
                " is on ", t.device(), " but rank ", rank_,
                " of this process group uses neuron:", int(device_),
                " (the current device at its first operation; call "
                "torch.neuron.set_device(local_rank) before communicating)");
    // Gloo reads the tensor's memory as one block of numel elements.
    TORCH_CHECK_VALUE(t.is_contiguous() || (dense && t.is_non_overlapping_and_dense()),
                      "ProcessGroupNeuron::", name, ": tensor ", i, " must be contiguous",
                      dense ? " or dense (channels_last)" : "", " (", describe(t), ", strides ",
                      t.strides(), ")");
    TORCH_CHECK(!t.is_conj() && !t.is_neg(), "ProcessGroupNeuron::", name, ": tensor ", i,
                " is a lazy conjugate/negative view; call resolve_conj()/resolve_neg() first");
    // Checked here so that it fails at the call, as on a CPU group, not on the stream.
    TORCH_CHECK(!typed || gloo_dtype(t.scalar_type()), "ProcessGroupNeuron::", name, ": tensor ", i,
                " has dtype ", t.scalar_type(),
                ", which Gloo (the transport) does not reduce or "
                "copy in collectives (it has float32, float64, float16, bfloat16, int8, uint8, "
                "int32, int64, bool)");
  }
  return false;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::guarded(
    const char* name, c10d::OpType type, c10::function_ref<c10::intrusive_ptr<c10d::Work>()> body) {
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
    queue_->push(
        std::make_shared<CommOp>(label, std::move(checks), std::vector<CommOp::Post>{}, true));
    throw;
  }
}

ProcessGroupNeuron::Call ProcessGroupNeuron::collective(const char* name, c10d::OpType type,
                                                        std::vector<at::Tensor> tensors,
                                                        std::vector<at::Tensor> outputs,
                                                        std::vector<at::Tensor> check,
                                                        CommOp::Post post) {
  Call call{name, type, Ordering::kStream, std::move(tensors), std::move(outputs), std::move(post)};
  call.check = std::move(check);
  return call;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::issue(Call call) {
  const char* name = call.name;
  const c10d::OpType type = call.type;
  const Ordering ordering = call.ordering;
  const auto& tensors = call.tensors;
  auto& outputs = call.outputs;
  std::vector<CommOp::Post> checks, posts, then;
  // Posts the cross-rank exchange: only once this call can no longer fail
  // before queueing (an orphan message would pair with the next collective).
  auto post_check = [&] {
    if (!call.check) return;
    auto verify = verify_across_ranks(name, type, *call.check, call.dtype_only,
                                      call.peers ? &*call.peers : nullptr);
    checks.push_back([verify] {
      verify();
      return std::vector<CommOp::Wait>{};
    });
  };
  // Gloo's checks raise c10::Error, whose what() carries a C++ backtrace:
  // noise in the message the stream raises later.
  posts.push_back([post = std::move(call.post)]() {
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
    if (call.then_check) p.then_checks.push_back(std::move(call.then_check));
    if (call.then_post) p.then_posts.push_back(std::move(call.then_post));
    p.tensors.insert(p.tensors.end(), tensors.begin(), tensors.end());
    p.outputs.insert(p.outputs.end(), outputs.begin(), outputs.end());
    p.collective |= ordering == Ordering::kStream;
    return c10::make_intrusive<NeuronWork>(rank_, type, p.slot, ordering, device_,
                                           std::move(outputs), nullptr);
  }
  const bool collective = ordering != Ordering::kPeer;
  if (call.then_check || call.then_post) {
    then.push_back([check = call.then_check, post = call.then_post] {
      if (check) check();
      return post ? post() : std::vector<CommOp::Wait>{};
    });
  }
  const auto device = device_ >= 0 ? device_ : resolve_device(-1);
  // An idle stream has nothing the transfer must wait for: start it now
  // (the kernel below still orders later kernels after it).
  bool idle = false;
  flush_stream(device, current_stream_id(device), FlushCause::kEvent);
  translate_errors(
      [&] { idle = device_runtime().query_stream(device, current_stream_id(device)); });
  post_check();  // first: the peers wait for it
  std::string label = std::string("neuron c10d ") + name + " (rank " + std::to_string(rank_) +
                      " of " + std::to_string(size_) + ")";
  auto op = std::make_shared<CommOp>(std::move(label), std::move(checks), std::move(posts),
                                     collective, std::move(then));
  if (ordering != Ordering::kStream) op->keep({std::make_shared<std::vector<at::Tensor>>(tensors)});
  if (idle) op->signal_ready();
  queue_->push(op);
  call_posted_ = true;  // its exchanges are queued: a later failure is the op's
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
  return c10::make_intrusive<NeuronWork>(rank_, type, slot, ordering, device, std::move(outputs),
                                         future);
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
    *p->slot = std::make_shared<CommOp>("neuron c10d coalesced (failed at a call)",
                                        std::move(drain), std::vector<CommOp::Post>{}, true);
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
  Call call{"coalesced",
            c10d::OpType::COALESCED,
            ordering,
            p->tensors,
            p->outputs,
            [checks, posts, run_all] {
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
            }};
  call.then_check = then_check;
  call.then_post = then_post;
  auto work = issue(std::move(call));
  // The block's works wait on the block's CommOp.
  *p->slot = *static_cast<NeuronWork*>(work.get())->slot();
  return work;
}

c10::intrusive_ptr<c10d::Backend> create_process_group_neuron(
    c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size) {
  return c10::make_intrusive<ProcessGroupNeuron>(std::move(gloo), rank, size);
}

}  // namespace torchneuron::distributed

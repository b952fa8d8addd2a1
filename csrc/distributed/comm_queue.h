// The ordered queue of collectives of one process group (no PyTorch).
//
// Every operation is issued to the transport in program order by one thread
// (the poster), after the issuing stream has reached it (its `ready` signal,
// sent by a kernel on that stream). A collective finishes from the transport's
// completion callback when it has one (else the poster waits for it there);
// a send or recv is handed to a second thread (the completer) so that posting
// never waits for a peer: isend then irecv on both ranks works, as on CPU Gloo.
// A send or recv has two stages: the poster posts the first (the pair's
// exchange of what each side transfers); the completer waits for it, then
// runs the second (the pair's check, then the data transfer, posted without
// waiting); a third thread (the finisher) waits for the data. No thread ever
// waits for something only a peer's completer or finisher would post.
// While a transfer may touch device memory an AccessLease keeps it readable.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace torchneuron::distributed {

// Runs `fn` with device memory accessible (Runtime::with_device_access).
using ScopeFn = std::function<void(const std::function<void()>&)>;

// Keeps device memory accessible between acquire() and the matching
// release(), on any threads: a thread of its own sits inside the scope while
// the count is above zero (a scope is a call, a transfer outlives calls).
class AccessLease {
 public:
  explicit AccessLease(ScopeFn scope);
  ~AccessLease();
  void acquire();  // returns once memory is accessible
  void release();

 private:
  void loop();
  ScopeFn scope_;
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
  bool inside_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// One collective, point-to-point op or coalesced batch.
class CommOp {
 public:
  // `post` starts the transfer and returns functions that wait for it.
  // Waits for one transfer. `on_done`, when set, instead calls back once the
  // transfer is done (on the transport's thread, with its error or null): a
  // collective then finishes from there, one thread hand-off fewer than
  // waking the poster to finish it.
  using Done = std::function<void(std::exception_ptr)>;
  struct Wait {
    std::function<void()> wait;
    std::function<void(Done)> on_done;
    Wait() = default;
    Wait(std::nullptr_t) {}
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Wait> &&
                                                std::is_invocable_v<F&>>>
    Wait(F f) : wait(std::move(f)) {}
    void operator()() const { wait(); }
    explicit operator bool() const { return bool(wait); }
  };
  using Post = std::function<std::vector<Wait>()>;

  // `checks` need no device data (the cross-rank check): they run before the
  // issuing stream is ready, overlapping the kernels still queued. `collective`:
  // every rank of the group takes part, so the poster may wait for it before
  // posting the next operation.
  // `then`: posted once the transfers of `posts` are done (may be empty).
  CommOp(std::string name, std::vector<Post> checks, std::vector<Post> posts, bool collective,
         std::vector<Post> then = {})
      : name_(std::move(name)),
        checks_(std::move(checks)),
        posts_(std::move(posts)),
        then_(std::move(then)),
        collective_(collective) {}

  const std::string& name() const { return name_; }
  // An operation that is already done (an empty coalescing block).
  static std::shared_ptr<CommOp> completed(std::string name);
  // Buffers the transfer uses, kept alive until it is done, then handed to
  // the queue's sweep().
  void keep(std::vector<std::shared_ptr<void>> owners) { keep_ = std::move(owners); }
  std::vector<std::shared_ptr<void>> take_keep();

  // The kernels queued before it on the issuing stream are done.
  void signal_ready();
  // Blocks until the transfer finished or failed; rethrows its error.
  void wait_done();
  bool done() const;
  // The error message if it failed, "" otherwise (valid once done()).
  std::string error() const;

 private:
  friend class CommQueue;
  void wait_ready();
  void finish(std::exception_ptr error);

  std::string name_;
  std::vector<Post> checks_;
  std::vector<Post> posts_;
  std::vector<Post> then_;
  bool collective_;
  std::vector<std::shared_ptr<void>> keep_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  bool done_ = false;
  std::exception_ptr error_;
  std::string what_;
};

class CommQueue {
 public:
  // `scope`: the device-access scope, or empty when memory is always accessible.
  explicit CommQueue(ScopeFn scope);
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  void push(std::shared_ptr<CommOp> op);
  // Blocks until every operation pushed so far has made its transport calls
  // (or failed before them), so that a caller using the transport directly
  // keeps program order.
  void wait_posted();
  // Releases the kept buffers of finished operations (call from the thread
  // that issues operations).
  void sweep();

 private:
  void post_loop();
  void complete_loop();
  void finish_loop();
  void finish(const std::shared_ptr<CommOp>& op, std::exception_ptr error);
  void mark_posted();

  void finish_by_callbacks(std::shared_ptr<CommOp> op, std::vector<CommOp::Wait> waits);

  std::unique_ptr<AccessLease> lease_;  // null: memory always accessible
  int callbacks_pending_ = 0;           // collectives that finish from the transport's thread
  std::mutex mu_;
  // One per waiter, so that an event wakes only the thread it concerns.
  std::condition_variable post_cv_, complete_cv_, finish_cv_, posted_cv_;
  bool stop_ = false;
  bool posted_all_ = false;
  bool completed_all_ = false;
  std::deque<std::shared_ptr<CommOp>> to_post_;
  uint64_t pushed_ = 0, posted_ = 0;  // operations pushed; transport calls made
  using Item = std::pair<std::shared_ptr<CommOp>, std::vector<CommOp::Wait>>;
  std::deque<Item> to_complete_, to_finish_;
  std::vector<std::shared_ptr<void>> released_;
  std::thread poster_, completer_, finisher_;
};

}  // namespace torchneuron::distributed

// The ordered queue of collectives of one process group (no PyTorch).
//
// Every operation is issued to the transport in program order by one thread,
// after the issuing stream has reached it (its `ready` signal, sent by a
// kernel on that stream); a second thread waits for the transport's
// completion, so posting never waits for a peer (isend then irecv on both
// ranks works, as on CPU Gloo).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace torchneuron::distributed {

// One collective, point-to-point op or coalesced batch.
class CommOp {
 public:
  // `post` starts the transfer and returns a function that waits for it.
  using Wait = std::function<void()>;
  using Post = std::function<std::vector<Wait>()>;

  CommOp(std::string name, std::vector<Post> posts)
      : name_(std::move(name)), posts_(std::move(posts)) {}

  const std::string& name() const { return name_; }
  // An operation that is already done (an empty coalescing block).
  static std::shared_ptr<CommOp> completed(std::string name);
  // Buffers the transfer uses, kept alive until it is done, then handed to
  // the queue's sweep().
  void keep(std::vector<std::shared_ptr<void>> owners) { keep_ = std::move(owners); }
  std::vector<std::shared_ptr<void>> take_keep();

  // Called by a kernel on the issuing stream: the kernels before it are done.
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
  std::vector<Post> posts_;
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
  // `scope` runs each post and wait (the device-access scope of the runtime).
  explicit CommQueue(std::function<void(const std::function<void()>&)> scope);
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  void push(std::shared_ptr<CommOp> op);
  // Releases the kept buffers of finished operations (call from the thread
  // that issues operations).
  void sweep();

 private:
  void post_loop();
  void complete_loop();

  std::function<void(const std::function<void()>&)> scope_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool posted_all_ = false;
  std::deque<std::shared_ptr<CommOp>> to_post_;
  std::deque<std::pair<std::shared_ptr<CommOp>, std::vector<CommOp::Wait>>> to_complete_;
  std::vector<std::shared_ptr<void>> released_;
  std::thread poster_, completer_;
};

}  // namespace torchneuron::distributed

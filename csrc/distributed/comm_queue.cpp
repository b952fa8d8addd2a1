#include "distributed/comm_queue.h"

#include <algorithm>
#include <stdexcept>

namespace torchneuron::distributed {

// ---- AccessLease ------------------------------------------------------------

AccessLease::AccessLease(ScopeFn scope) : scope_(std::move(scope)) {
  thread_ = std::thread([this] { loop(); });
}

AccessLease::~AccessLease() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void AccessLease::acquire() {
  std::unique_lock<std::mutex> l(mu_);
  ++count_;
  cv_.notify_all();
  cv_.wait(l, [&] { return inside_; });
}

void AccessLease::release() {
  std::lock_guard<std::mutex> g(mu_);
  if (--count_ == 0) cv_.notify_all();
}

void AccessLease::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || count_ > 0; });
    if (stop_ && count_ == 0) return;
    l.unlock();
    scope_([&] {
      std::unique_lock<std::mutex> in(mu_);
      inside_ = true;
      cv_.notify_all();
      cv_.wait(in, [&] { return count_ == 0; });
      inside_ = false;
    });
    l.lock();
  }
}

// ---- CommOp -----------------------------------------------------------------

void CommOp::signal_ready() {
  std::lock_guard<std::mutex> g(mu_);
  ready_ = true;
  cv_.notify_all();
}

void CommOp::wait_ready() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return ready_; });
}

void CommOp::finish(std::exception_ptr error) {
  std::string what;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = name_ + " failed: " + e.what();
    } catch (...) {
      what = name_ + " failed: unknown error";
    }
  }
  std::vector<Post> posts, checks, then;
  {
    std::lock_guard<std::mutex> g(mu_);
    error_ = error;
    what_ = what;
    done_ = true;
    posts.swap(posts_);
    checks.swap(checks_);
    then.swap(then_);
    cv_.notify_all();
  }
}

std::vector<std::shared_ptr<void>> CommOp::take_keep() {
  std::lock_guard<std::mutex> g(mu_);
  return std::move(keep_);
}

void CommOp::wait_done() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return done_; });
  if (error_) throw std::runtime_error(what_);
}

std::shared_ptr<CommOp> CommOp::completed(std::string name) {
  auto op =
      std::make_shared<CommOp>(std::move(name), std::vector<Post>{}, std::vector<Post>{}, false);
  op->ready_ = true;
  op->finish(nullptr);
  return op;
}

bool CommOp::done() const {
  std::lock_guard<std::mutex> g(mu_);
  return done_;
}

std::string CommOp::error() const {
  std::lock_guard<std::mutex> g(mu_);
  return what_;
}

// ---- CommQueue --------------------------------------------------------------

CommQueue::CommQueue(ScopeFn scope) {
  if (scope) lease_ = std::make_unique<AccessLease>(std::move(scope));
  poster_ = std::thread([this] { post_loop(); });
  completer_ = std::thread([this] { complete_loop(); });
  finisher_ = std::thread([this] { finish_loop(); });
}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    post_cv_.notify_all();
  }
  poster_.join();  // posts what was queued, then the completer drains
  {
    std::unique_lock<std::mutex> l(mu_);
    posted_cv_.wait(l, [&] { return callbacks_pending_ == 0; });  // they call finish()
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    posted_all_ = true;
    complete_cv_.notify_all();
  }
  completer_.join();
  {
    std::lock_guard<std::mutex> g(mu_);
    completed_all_ = true;
    finish_cv_.notify_all();
  }
  finisher_.join();
  lease_.reset();
}

void CommQueue::push(std::shared_ptr<CommOp> op) {
  std::lock_guard<std::mutex> g(mu_);
  ++pushed_;
  to_post_.push_back(std::move(op));
  post_cv_.notify_one();
}

void CommQueue::wait_posted() {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = pushed_;
  posted_cv_.wait(l, [&] { return posted_ >= target; });
}

void CommQueue::mark_posted() {
  std::lock_guard<std::mutex> g(mu_);
  ++posted_;
  posted_cv_.notify_all();
}

void CommQueue::finish(const std::shared_ptr<CommOp>& op, std::exception_ptr error) {
  if (lease_) lease_->release();
  op->finish(error);
  // Released by the issuing thread (sweep), never here: releasing a tensor
  // may take Python's GIL, which a finalizing interpreter never gives back.
  auto keep = op->take_keep();
  if (keep.empty()) return;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& k : keep) released_.push_back(std::move(k));
}

void CommQueue::post_loop() {
  for (;;) {
    std::shared_ptr<CommOp> op;
    {
      std::unique_lock<std::mutex> l(mu_);
      post_cv_.wait(l, [&] { return stop_ || !to_post_.empty(); });
      if (to_post_.empty()) return;  // stopping, nothing left
      op = std::move(to_post_.front());
      to_post_.pop_front();
    }
    std::exception_ptr failed;
    try {
      for (auto& check : op->checks_) check();
    } catch (...) {
      failed = std::current_exception();
    }
    if (failed) {  // nothing was posted; the stream's kernel reports it
      mark_posted();
      op->finish(failed);
      continue;
    }
    op->wait_ready();
    if (lease_) lease_->acquire();
    std::vector<CommOp::Wait> waits;
    std::exception_ptr error;
    try {
      for (auto& post : op->posts_) {
        auto w = post();
        waits.insert(waits.end(), w.begin(), w.end());
      }
      if (op->collective_ && op->then_.empty() && !waits.empty() &&
          std::all_of(waits.begin(), waits.end(),
                      [](const CommOp::Wait& w) { return bool(w.on_done); })) {
        mark_posted();
        finish_by_callbacks(std::move(op), std::move(waits));
        continue;
      }
      if (op->collective_) {
        for (auto& w : waits) w();
        waits.clear();
        for (auto& post : op->then_) {
          auto w = post();
          waits.insert(waits.end(), w.begin(), w.end());
        }
        for (auto& w : waits) w();
        waits.clear();
      }
    } catch (...) {
      error = std::current_exception();
    }
    // A collective's calls (both stages) are made by now; a point-to-point
    // operation's first stage is (its tag, not Gloo's sequence, pairs the rest).
    mark_posted();
    if (error || op->collective_) {
      waits.clear();
      finish(op, error);
      continue;
    }
    std::lock_guard<std::mutex> g(mu_);
    to_complete_.emplace_back(std::move(op), std::move(waits));
    complete_cv_.notify_one();
  }
}

void CommQueue::finish_by_callbacks(std::shared_ptr<CommOp> op, std::vector<CommOp::Wait> waits) {
  struct Left {
    std::mutex mu;
    size_t count;
    std::exception_ptr error;
  };
  auto left = std::make_shared<Left>();
  left->count = waits.size();
  {
    std::lock_guard<std::mutex> g(mu_);
    ++callbacks_pending_;
  }
  for (auto& w : waits) {
    w.on_done([this, op, left](std::exception_ptr e) {
      {
        std::lock_guard<std::mutex> g(left->mu);
        if (e && !left->error) left->error = e;
        if (--left->count > 0) return;
      }
      finish(op, left->error);
      std::lock_guard<std::mutex> g(mu_);
      --callbacks_pending_;
      posted_cv_.notify_all();
    });
  }
}

void CommQueue::complete_loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> l(mu_);
      complete_cv_.wait(l, [&] { return !to_complete_.empty() || posted_all_; });
      if (to_complete_.empty()) return;
      item = std::move(to_complete_.front());
      to_complete_.pop_front();
    }
    std::exception_ptr error;
    std::vector<CommOp::Wait> then_waits;
    try {
      for (auto& w : item.second) w();
      item.second.clear();
      for (auto& post : item.first->then_) {
        auto w = post();
        then_waits.insert(then_waits.end(), w.begin(), w.end());
      }
    } catch (...) {
      error = std::current_exception();
    }
    item.second.clear();
    if (error || then_waits.empty()) {
      then_waits.clear();
      finish(item.first, error);
      continue;
    }
    std::lock_guard<std::mutex> g(mu_);
    to_finish_.emplace_back(std::move(item.first), std::move(then_waits));
    finish_cv_.notify_one();
  }
}

void CommQueue::finish_loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> l(mu_);
      finish_cv_.wait(l, [&] { return !to_finish_.empty() || completed_all_; });
      if (to_finish_.empty()) return;
      item = std::move(to_finish_.front());
      to_finish_.pop_front();
    }
    std::exception_ptr error;
    try {
      for (auto& w : item.second) w();
    } catch (...) {
      error = std::current_exception();
    }
    item.second.clear();
    finish(item.first, error);
  }
}

void CommQueue::sweep() {
  std::vector<std::shared_ptr<void>> dead;
  {
    std::lock_guard<std::mutex> g(mu_);
    dead.swap(released_);
  }
}

}  // namespace torchneuron::distributed

// Heap blocks of one type recycled across threads. A queued kernel's closure
// is made on the launching thread and destroyed on the stream's worker; glibc
// serves such a pair through the launching thread's arena lock, which both
// threads then take once per op (docs/design/eager-per-op-cost.md). Here each
// thread keeps up to kCache blocks of its own and trades the surplus or the
// shortfall with a shared list kBatch blocks at a time, under one lock.
//
// Use: in a type T, `static void* operator new(size_t n) { return
// pooled_new<T>(n); }` and `static void operator delete(void* p, size_t n) {
// pooled_delete<T>(p, n); }`: `new T` (std::function's too) then takes a block
// from the pool.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace torchneuron {

template <class T>
class BlockPool {
 public:
  static constexpr int kCache = 64;
  static constexpr int kBatch = 32;
  // Blocks kept in the shared list at most (about a stream's queue of closures).
  static constexpr size_t kMaxShared = 1024;

  static void* allocate() {
    Cache& c = tl_cache_;
    if (c.n == 0) instance().refill(c);
    if (c.n == 0) return ::operator new(sizeof(T));
    return c.blocks[--c.n];
  }

  static void deallocate(void* p) {
    Cache& c = tl_cache_;
    if (c.n == kCache) instance().spill(c);
    c.blocks[c.n++] = p;
  }

 private:
  // Trivially destructible, so that it is valid while the thread's pthread
  // key destructors run (after C++ thread_local destructors): drain() gives
  // its blocks to the shared list there.
  struct Cache {
    void* blocks[kCache];
    int n;
    bool registered;
  };
  static thread_local Cache tl_cache_;

  BlockPool() {
    shared_.reserve(kMaxShared);
    pthread_key_create(&key_, &BlockPool::drain);
  }

  static BlockPool& instance() {
    static BlockPool* pool = new BlockPool();  // never destroyed: threads exit after statics
    return *pool;
  }

  void enroll(Cache& c) {
    if (c.registered) return;
    c.registered = true;
    pthread_setspecific(key_, &c);  // drain() at this thread's exit
  }

  void refill(Cache& c) {
    enroll(c);
    std::lock_guard<std::mutex> lock(mu_);
    while (c.n < kBatch && !shared_.empty()) {
      c.blocks[c.n++] = shared_.back();
      shared_.pop_back();
    }
  }

  void spill(Cache& c) {
    enroll(c);
    void* out[kBatch];
    for (int i = 0; i < kBatch; ++i) out[i] = c.blocks[--c.n];
    int kept = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (; kept < kBatch && shared_.size() < kMaxShared; ++kept) shared_.push_back(out[kept]);
    }
    for (int i = kept; i < kBatch; ++i) ::operator delete(out[i]);
  }

  static void drain(void* cache) {
    Cache& c = *static_cast<Cache*>(cache);
    BlockPool& pool = instance();
    std::lock_guard<std::mutex> lock(pool.mu_);
    while (c.n > 0) {
      void* p = c.blocks[--c.n];
      if (pool.shared_.size() < kMaxShared)
        pool.shared_.push_back(p);
      else
        ::operator delete(p);
    }
  }

  pthread_key_t key_;
  std::mutex mu_;
  std::vector<void*> shared_;
};

template <class T>
thread_local typename BlockPool<T>::Cache BlockPool<T>::tl_cache_{};

template <class T>
void* pooled_new(size_t n) {
  return n == sizeof(T) ? BlockPool<T>::allocate() : ::operator new(n);
}

template <class T>
void pooled_delete(void* p, size_t n) {
  if (n == sizeof(T))
    BlockPool<T>::deallocate(p);
  else
    ::operator delete(p);
}

}  // namespace torchneuron

// A std::mutex that spins briefly before it sleeps (glibc's adaptive kind).
// The hot locks of the runtime (a stream's queue, a device's allocator) are
// held for well under a microsecond by the launching thread and a stream
// worker on another core; a plain mutex puts the loser to sleep, and the
// futex wait and wake-up cost both threads microseconds per eager op.
#pragma once

#include <pthread.h>

#include <mutex>

namespace torchneuron::runtime {

class AdaptiveMutex : public std::mutex {
 public:
  AdaptiveMutex() {
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    // Re-made before any use: a std::mutex is a pthread mutex with default attributes.
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_destroy(native_handle());
    pthread_mutex_init(native_handle(), &attr);
    pthread_mutexattr_destroy(&attr);
#endif
  }
};

}  // namespace torchneuron::runtime

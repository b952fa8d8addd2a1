// Helpers shared by the runtime tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/emulator.h"
#include "runtime/runtime.h"

namespace torchneuron::runtime::testing {

constexpr size_t kKiB = size_t(1) << 10;
constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kGiB = size_t(1) << 30;

// Sets (or with nullopt, unsets) environment variables for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> vars) {
    for (auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) set(it->first, it->second);
  }

 private:
  static void set(const char* name, const std::optional<std::string>& value) {
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// A one-shot gate: kernels wait on it so a test controls when they finish.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // False if the gate stayed closed for `timeout` (a test bug, not a hang).
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// An emulator with `cores` visible cores of `hbm` bytes each.
inline std::unique_ptr<Runtime> small_emulator(size_t hbm = 64 * kMiB, int cores = 2,
                                               bool blocking = false, bool protect = false) {
  Config c;
  for (int i = 0; i < cores; ++i) c.visible.push_back(i);
  c.hbm_bytes_per_core = hbm;
  c.launch_blocking = blocking;
  c.protect_memory = protect;
  return make_emulator(c);
}

}  // namespace torchneuron::runtime::testing

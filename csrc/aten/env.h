// The aten layer's environment variables: a bad value is an error naming the
// variable and what it accepts (ValueError at the first use), never a silent
// default.
#pragma once

#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace torchneuron {

// An integer >= `min`, or `fallback` when unset or empty.
inline int64_t env_int(const char* name, int64_t fallback, int64_t min) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  TORCH_CHECK_VALUE(end != v && *end == '\0' && errno == 0 && x >= min, name, "='", v,
                    "': expected an integer >= ", min);
  return int64_t(x);
}

// 1 or 0 (unset or empty: 0), as NEURON_LAUNCH_BLOCKING.
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  const std::string s(v);
  TORCH_CHECK_VALUE(s == "0" || s == "1", name, "='", v, "': expected 0 or 1");
  return s == "1";
}

}  // namespace torchneuron

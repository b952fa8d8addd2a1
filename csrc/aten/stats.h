// Counters of the PyTorch integration: CPU fallbacks (calls, seconds) and
// 64-bit narrowing events, per operator name. Thread-safe. Also the two
// policy switches they count under: the fallback mode and 64-bit narrowing.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torchneuron {

struct FallbackStat {
  int64_t calls = 0;
  double seconds = 0;  // wall time of the fallback incl. both copies
};

void record_fallback(const std::string& op, double seconds);
std::map<std::string, FallbackStat> fallback_stats();
void reset_fallback_stats();

void record_narrowing(const std::string& op, int64_t calls = 1);
std::map<std::string, int64_t> narrowing_stats();
void reset_narrowing_stats();

// A compiled graph's launch (torchneuron/compiler/passes/policy/narrow_64bit.py): `calls`
// narrowed (or full-width) uses of `op`, counted and warned once per op as eager's
// calls are (native_narrowing.cpp).
void note_compiled_narrowing(const std::string& op, int64_t calls, bool full_width);

// Calls whose narrowed dtype has no CPU kernel, computed at full width
// (native_narrowing.cpp).
std::map<std::string, int64_t> full_width_stats();
void reset_full_width_stats();

// The narrowing and fallback warnings (op_warnings.cpp): once per process each,
// or once per operator with TORCHNEURON_WARN_PER_OP=1.
void warn_narrowing(const std::string& op);
void warn_fallback(const std::string& op);

// "warn" (default: CPU fallback, warned once per op) or "error"
// (TORCHNEURON_FALLBACK=error: NotImplementedError naming the op).
std::string fallback_mode();
void set_fallback_mode(const std::string& mode);

// The 64-bit policy (native_narrowing.cpp): whether int64/float64 compute narrowed
// (TORCHNEURON_NARROW_64BIT, default on).
bool narrow_64bit_enabled();
void set_narrow_64bit(bool on);

}  // namespace torchneuron

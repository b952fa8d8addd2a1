// Pinned host memory (pinned_memory.cpp): the allocator of pin_memory(),
// whether a host pointer lies in one of its blocks, its byte counts.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>

namespace torchneuron {

struct PinnedHostStats {
  size_t mapped_bytes = 0;  // blocks held, in use or cached
  size_t locked_bytes = 0;  // of those, page-locked (mlock succeeded)
  size_t cached_bytes = 0;  // freed blocks kept for reuse
};
c10::Allocator* pinned_host_allocator();
bool is_pinned_host_ptr(const void* p);
PinnedHostStats pinned_host_stats();
void pinned_host_empty_cache();

}  // namespace torchneuron

// Internal: a process-wide cache of the pinned host buffers the GPU streaming stages chunks in
// (mfilter/dispatch_cuda.cpp, staged_copy.cpp). Page-locking costs about a second per GiB, so
// allocating up to two slots x (upload + download) staging on every call cost more than the copies
// it speeds up for calls of a few seconds; buffers now return here when a call ends and the next
// call reuses them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::cuda {

/// At most this many idle pinned bytes stay cached (the smallest idle buffers are released
/// first when a returned buffer would exceed it): four staging buffers of the 256 MiB cap.
inline constexpr std::int64_t kMaxCachedPinnedBytes = std::int64_t{1} << 30;

namespace detail {

struct PinnedCache {
  std::mutex mutex;
  std::vector<std::shared_ptr<Buffer>> idle;
};

// Never destroyed: the cached buffers are released by the process's exit, not by a static
// destructor that could run after the CUDA runtime has shut down.
inline PinnedCache& pinned_cache() {
  static auto* cache = new PinnedCache;
  return *cache;
}

inline void return_pinned(std::shared_ptr<Buffer> buffer) {
  PinnedCache& c = pinned_cache();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.idle.push_back(std::move(buffer));
  std::sort(c.idle.begin(), c.idle.end(),
            [](const auto& a, const auto& b) { return a->size() > b->size(); });
  std::int64_t total = 0;
  std::size_t keep = 0;
  while (keep < c.idle.size() && total + c.idle[keep]->size() <= kMaxCachedPinnedBytes)
    total += c.idle[keep++]->size();
  c.idle.resize(keep);  // the smallest beyond the budget are freed here
}

}  // namespace detail

/// A pinned host buffer of at least `bytes`: the smallest cached idle one that is large enough,
/// else a new one. It goes back to the cache when the last reference is dropped. Thread-safe:
/// concurrent calls never share a buffer.
inline std::shared_ptr<Buffer> acquire_pinned(std::int64_t bytes) {
  std::shared_ptr<Buffer> b;
  {
    detail::PinnedCache& c = detail::pinned_cache();
    const std::lock_guard<std::mutex> lock(c.mutex);
    auto best = c.idle.end();
    for (auto it = c.idle.begin(); it != c.idle.end(); ++it)
      if ((*it)->size() >= bytes && (best == c.idle.end() || (*it)->size() < (*best)->size()))
        best = it;
    if (best != c.idle.end()) {
      b = std::move(*best);
      c.idle.erase(best);
    }
  }
  if (!b) b = Buffer::allocate(bytes, Memory::pinned);
  Buffer* raw = b.get();
  return std::shared_ptr<Buffer>(
      raw, [owner = std::move(b)](Buffer*) mutable { detail::return_pinned(std::move(owner)); });
}

}  // namespace halfscope::cuda

// Transparent huge pages for large host buffers (internal header).
//
// A GPU rank of the E-ELT reconstructor copies 20 GB of covariance tiles into newly allocated host
// memory: with 4 KiB pages the copy ran at 7 GB/s, bound by page faults (docs/scaling.md). Where
// the kernel offers transparent huge pages on request (/sys/kernel/mm/transparent_hugepage/enabled
// = madvise, as on the GPU machines), asking for them on a buffer before its first touch makes
// each fault map 2 MiB. Advice only: nothing changes where huge pages are off or unavailable;
// HALFSCOPE_HUGE_PAGES=0 turns it off (where the kernel's compaction on fault costs more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace halfscope::detail {

/// Buffers from this size on get the advice (smaller ones gain little).
inline constexpr std::size_t kHugePageAdviceBytes = std::size_t{64} << 20;

/// Asks for huge pages on the 2 MiB-aligned interior of [p, p + bytes), before it is touched.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  static const bool enabled = [] {
    const char* v = std::getenv("HALFSCOPE_HUGE_PAGES");
    return v == nullptr || std::string_view(v) != "0";
  }();
  if (!enabled || p == nullptr || bytes < kHugePageAdviceBytes) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHuge - 1) / kHuge * kHuge;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / kHuge * kHuge;
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace halfscope::detail

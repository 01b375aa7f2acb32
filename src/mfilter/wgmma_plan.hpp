// What the wgmma network kernel (kernels/network_wgmma.cuh) needs to know of a call before it
// runs, shared by the kernel's host side (network_sm90a.cu) and the split of a call over devices
// (devices.cpp), so the two cannot disagree on which calls run it or on its template rows.
#pragma once

#include <cstdint>

#include "halfscope/core/precision.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/emulation.hpp"  // HS_MF_HOST_DEVICE

namespace halfscope::mfilter {

/// Templates per block of the wgmma kernel (wgmma M): its moveout spans, shifts and data scales
/// are per group of this many templates.
inline constexpr std::int64_t kWgmmaGroupTemplates = 64;

/// Whether a call may run the wgmma kernel (then on a device of compute capability 9.0, within
/// its shared memory): the network stack at step 1 in mixed or bf16.
inline bool wgmma_network_call(const Dims& d, Precision precision) {
  return d.network_sum && d.step == 1 &&
         (precision == Precision::Mixed || precision == Precision::BF16);
}

/// Template group g's span on channel c: `base` = the smallest moveout among its templates of
/// nonzero weight (0 when none), and the returned K' / 16 = ceil((K + spread) / 16), 0 when no
/// template contributes. Spreads beyond 2^20 count as 2^20: K' is then too long for any block and
/// the call falls back to the other kernel.
HS_MF_HOST_DEVICE inline std::int64_t wgmma_group_ksteps(const std::int64_t* moveouts,
                                                         const float* weights, std::int64_t T,
                                                         std::int64_t C, std::int64_t K,
                                                         std::int64_t g, std::int64_t c,
                                                         std::int64_t& base) {
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (std::int64_t t = g * kWgmmaGroupTemplates; t < T && t < (g + 1) * kWgmmaGroupTemplates;
       ++t) {
    if (weights[t * C + c] == 0.0f) continue;
    const std::int64_t m = moveouts[t * C + c];
    lo = any && lo < m ? lo : m;
    hi = any && hi > m ? hi : m;
    any = true;
  }
  base = lo;
  return any ? (K + (hi - lo < (1 << 20) ? hi - lo : (1 << 20)) + 15) / 16 : 0;
}

}  // namespace halfscope::mfilter

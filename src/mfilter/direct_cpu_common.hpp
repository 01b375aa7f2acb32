// The loop every CPU precision shares: window rule, normalization, clamping, network sum and the
// output layout of backends.hpp, parallel over templates x blocks of correlation times. Each
// precision supplies only the numerator of one (template channel, window) pair.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/window_stats.hpp"

namespace halfscope::mfilter::cpu {

/// FP64 inverse norms of every window of every channel (C x (L - K + 1)) and of every template
/// channel (T x C), from the arrays as the backend receives them (float or double).
struct Norms {
  std::vector<double> window;  // [c * windows + s]
  std::vector<double> templ;   // [t * C + c]
  std::int64_t windows = 0;    // L - K + 1 (0 when K > L: every window is outside)
};

template <class T>
Norms compute_norms(const Dims& d, const T* templates, const T* data,
                    const double* channel_offsets) {
  Norms n;
  n.windows = std::max<std::int64_t>(0, d.samples - d.length + 1);
  n.window.assign(static_cast<std::size_t>(d.channels * n.windows), 0.0);
  n.templ.assign(static_cast<std::size_t>(d.templates * d.channels), 0.0);
  if (n.windows > 0) {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < d.channels; ++c)
      window_inv_norms(data + c * d.samples, d.samples, d.length, d.normalize,
                       n.window.data() + c * n.windows,
                       channel_offsets != nullptr ? channel_offsets[c] : 0.0);
  }
  for (std::int64_t j = 0; j < d.templates * d.channels; ++j)
    n.templ[static_cast<std::size_t>(j)] = template_inv_norm(templates + j * d.length, d.length);
  return n;
}

/// Correlation times per parallel work item: long enough to amortize the scheduling, short
/// enough that T * blocks keeps every thread busy.
inline constexpr std::int64_t kTimeBlock = 512;

/// Runs `numerator(t, c, s)` (a double: sum_k T[t,c,k] S[c,s+k] in the precision's arithmetic)
/// for every used (template, channel, time) and writes `problem.out`.
template <class Numerator>
void correlate(const HostProblem& p, const Norms& norms, const Numerator& numerator) {
  const Dims& d = p.dims;
  const std::int64_t blocks = (d.n_corr + kTimeBlock - 1) / kTimeBlock;
  std::atomic<bool> nonfinite{false};
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (std::int64_t t = 0; t < d.templates; ++t)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t i_end = std::min(d.n_corr, (b + 1) * kTimeBlock);
      for (std::int64_t i = b * kTimeBlock; i < i_end; ++i) {
        double stack = 0;
        for (std::int64_t c = 0; c < d.channels; ++c) {
          const std::int64_t tc = t * d.channels + c;
          const std::int64_t s = i * d.step + p.moveouts[tc];
          const float w = p.weights[tc];
          double cc = 0;
          // Outside the data, flat, a zero template, or (network) a zero weight: 0, not computed.
          const bool inside = s >= 0 && s + d.length <= d.samples;
          if (inside && !(d.network_sum && w == 0.0f)) {
            const double inv = norms.templ[static_cast<std::size_t>(tc)] *
                               norms.window[static_cast<std::size_t>(c * norms.windows + s)];
            const double v = inv != 0 ? numerator(t, c, s) * inv : 0.0;
            // isfinite before the clamp: std::clamp passes NaN through and turns inf into +-1.
            if (std::isfinite(v))
              cc = std::clamp(v, -1.0, 1.0);
            else
              nonfinite.store(true, std::memory_order_relaxed);
          }
          if (d.network_sum)
            stack += static_cast<double>(w) * cc;
          else
            p.out[tc * d.n_corr + i] = static_cast<float>(cc);
        }
        if (d.network_sum) p.out[t * d.n_corr + i] = static_cast<float>(stack);
      }
    }
  // Exceptions cannot leave an OpenMP region: the loop records the failure, this reports it.
  // Dispatch scales templates to unit energy and data to max |S| < 1, so only a numerator
  // beyond the accumulator's range (a backend defect or a caller bypassing dispatch) gets here.
  if (nonfinite.load())
    throw NumericalError(
        "matched filtering (CPU): a correlation numerator was inf or NaN; expected finite "
        "values (dispatch scales the operands so that FP32 cannot overflow)");
}

/// The low-precision emulations of emulation.hpp (direct_lowp_cpu.cpp): Half, Mixed, BF16, Split.
void direct_lowp_cpu(const HostProblem& problem, Precision precision);

}  // namespace halfscope::mfilter::cpu

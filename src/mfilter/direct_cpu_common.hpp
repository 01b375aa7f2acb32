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

/// Correlation times per parallel work item: long enough to amortize the scheduling, short
/// enough that T * blocks keeps every thread busy.
inline constexpr std::int64_t kTimeBlock = 512;

/// Correlation times whose windows' FP64 inverse norms are held at once (C x about this many
/// doubles, instead of C x L for the whole call: 1 GB for a day of 30 channels at 100 Hz).
inline constexpr std::int64_t kNormSpan = 64 * kTimeBlock;

/// The correlation times of one span of correlate(): kNormSpan, or more where the moveout spread
/// would make the spans' windows overlap by more than one span (each span recomputes its
/// windows from a restart of the running sums, window_stats.hpp), or what a test forces.
std::int64_t norm_span(const Dims& d, std::int64_t moveout_spread);

/// Forces the span of correlate() (0: norm_span's own), so tests reach many spans on small
/// inputs.
void set_norm_span_for_testing(std::int64_t corr);

/// Runs `numerator(t, c, s)` (a double: sum_k T[t,c,k] S[c,s+k] in the precision's arithmetic)
/// for every used (template, channel, time) and writes `problem.out`. The FP64 inverse norms come
/// from `templates` and `data`, the arrays as the backend receives them (float or double): the
/// template channels' once, the windows' span by span of correlation times (every value equal to
/// the whole channel's computation, window_stats.hpp).
/// `on_span(first, count)` runs before each span's numerators (serially): they then read only
/// samples [first, first + count) of every channel, so a backend can hold tables of those
/// samples alone (the emulations' rounded data and shifts).
template <class T, class OnSpan, class Numerator>
void correlate(const HostProblem& p, const T* templates, const T* data, const OnSpan& on_span,
               const Numerator& numerator) {
  const Dims& d = p.dims;
  const std::int64_t C = d.channels, K = d.length, L = d.samples;
  std::vector<double> templ(static_cast<std::size_t>(d.templates * C));
  for (std::int64_t j = 0; j < d.templates * C; ++j)
    templ[static_cast<std::size_t>(j)] = template_inv_norm(templates + j * K, K);
  const std::int64_t windows = std::max<std::int64_t>(0, L - K + 1);
  const auto [mo_lo, mo_hi] = std::minmax_element(p.moveouts, p.moveouts + d.templates * C);
  const std::int64_t span = norm_span(d, *mo_hi - *mo_lo);
  std::vector<double> window;  // [c * width + s - first]
  std::atomic<bool> nonfinite{false};
  for (std::int64_t i0 = 0; i0 < d.n_corr; i0 += span) {
    const std::int64_t i1 = std::min(d.n_corr, i0 + span);
    // The windows inside the data that the span's correlation times read, from a restart.
    const std::int64_t lo = std::clamp(i0 * d.step + *mo_lo, std::int64_t{0}, windows);
    const std::int64_t hi = std::clamp((i1 - 1) * d.step + *mo_hi + 1, lo, windows);
    const std::int64_t first = lo / kRecomputeEvery * kRecomputeEvery, width = hi - first;
    window.resize(static_cast<std::size_t>(C * width));
    if (hi > lo) {
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < C; ++c)
        window_inv_norms(data + c * L, L, K, d.normalize,
                         p.channel_offsets != nullptr ? p.channel_offsets[c] : 0.0, first, width,
                         window.data() + c * width);
      on_span(first, width + K - 1);
    }
    const std::int64_t blocks = (i1 - i0 + kTimeBlock - 1) / kTimeBlock;
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (std::int64_t t = 0; t < d.templates; ++t)
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t i_end = std::min(i1, i0 + (b + 1) * kTimeBlock);
        for (std::int64_t i = i0 + b * kTimeBlock; i < i_end; ++i) {
          double stack = 0;
          for (std::int64_t c = 0; c < C; ++c) {
            const std::int64_t tc = t * C + c;
            const std::int64_t s = i * d.step + p.moveouts[tc];
            const float w = p.weights[tc];
            double cc = 0;
            // Outside the data, flat, a zero template, or (network) a zero weight: 0, not
            // computed.
            const bool inside = s >= 0 && s + K <= L;
            if (inside && !(d.network_sum && w == 0.0f)) {
              const double inv = templ[static_cast<std::size_t>(tc)] *
                                 window[static_cast<std::size_t>(c * width + s - first)];
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
  }
  // Exceptions cannot leave an OpenMP region: the loop records the failure, this reports it.
  // Dispatch scales templates to unit energy and data to max |S| < 1, so only a numerator
  // beyond the accumulator's range (a backend defect or a caller bypassing dispatch) gets here.
  if (nonfinite.load())
    throw NumericalError(
        "matched filtering (CPU): a correlation numerator was inf or NaN; expected finite "
        "values (dispatch scales the operands so that FP32 cannot overflow)");
}

/// correlate() for numerators that read the backend's arrays as they are (no span tables).
template <class T, class Numerator>
void correlate(const HostProblem& p, const T* templates, const T* data,
               const Numerator& numerator) {
  correlate(
      p, templates, data, [](std::int64_t, std::int64_t) {}, numerator);
}

/// The low-precision emulations of emulation.hpp (direct_lowp_cpu.cpp): Half, Mixed, BF16, Split.
void direct_lowp_cpu(const HostProblem& problem, Precision precision);

}  // namespace halfscope::mfilter::cpu

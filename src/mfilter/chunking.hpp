// Index arithmetic of matched filtering, apart from any backend so it can be tested on shapes far
// beyond what CI can allocate: checked 64-bit products, and the time chunks that stream host data
// through the GPU (each chunk a self-contained Problem whose window rule gives exactly the
// windows of the whole problem).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"

namespace halfscope::mfilter {

/// a * b for non-negative sizes; InvalidInput naming `what` when it overflows int64.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw InvalidInput(std::string("matched filtering: ") + what + " (" + std::to_string(a) +
                       " x " + std::to_string(b) + ") overflows 64-bit indexing");
  return r;
}

/// Elements of the output: T * n_corr (network) or T * C * n_corr (per channel), checked.
inline std::int64_t output_elements(std::int64_t T, std::int64_t C, std::int64_t n_corr,
                                    bool network_sum) {
  const std::int64_t rows = network_sum ? T : checked_mul(T, C, "templates x channels");
  return checked_mul(rows, n_corr, "output size");
}

/// One time chunk: correlation times [corr_begin, corr_end) and the data samples
/// [sample_begin, sample_end) they can touch. Chunk-local window starts are
/// s_local = (i - corr_begin) * step + moveout + shift with shift = corr_begin * step -
/// sample_begin (chunk_moveout), and a window lies inside the chunk's data exactly when it lies
/// inside the whole data: the range covers every window inside the data (from max(0, first
/// window start) to min(L, last window end)) and lies within [0, L), so no inside window is cut
/// and no outside window comes in. It holds at least (n_corr - 1) * step + K samples, so
/// n_corr <= (samples - K) / step + 1 as for a whole problem.
/// A chunk planned with a halo (detection) also computes `halo_before` correlation times before
/// its own range and `halo_after` after it ([corr_begin, corr_end) includes them), so a peak
/// search can judge its own edge values against their true neighbours.
struct TimeChunk {
  std::int64_t corr_begin = 0, corr_end = 0;
  std::int64_t sample_begin = 0, sample_end = 0;
  std::int64_t halo_before = 0, halo_after = 0;
  [[nodiscard]] std::int64_t n_corr() const { return corr_end - corr_begin; }
  [[nodiscard]] std::int64_t samples() const { return sample_end - sample_begin; }
  /// The correlation times the chunk owns (without its halo).
  [[nodiscard]] std::int64_t own_begin() const { return corr_begin + halo_before; }
  [[nodiscard]] std::int64_t own_n_corr() const { return n_corr() - halo_before - halo_after; }
};

/// Chunks covering [0, n_corr), each owning at most `max_corr` correlation times, for data of L
/// samples, templates of K, `step`, and moveouts in [moveout_min, moveout_max]. The chunks are
/// of equal size (ceil(n_corr / count) with count = ceil(n_corr / max_corr); the last one at
/// most count - 1 smaller), never a large one followed by a handful of leftovers: a per-chunk
/// statistic such as detection's MAD threshold then rests on as many values in every chunk.
/// `halo` extends each chunk by that many correlation times on either side where a neighbour
/// exists (TimeChunk), so a chunk computes at most max_corr + 2 halo. Consecutive chunks overlap
/// by K - 1 + (moveout_max - moveout_min) samples, plus 2 halo step (more only where the range
/// had to be widened to (n_corr - 1) * step + K samples).
inline std::vector<TimeChunk> plan_time_chunks(std::int64_t L, std::int64_t K, std::int64_t step,
                                               std::int64_t n_corr, std::int64_t moveout_min,
                                               std::int64_t moveout_max, std::int64_t max_corr,
                                               std::int64_t halo = 0) {
  if (max_corr < 1) throw InvalidInput("matched filtering: a time chunk needs >= 1 correlation");
  if (halo < 0) throw InvalidInput("matched filtering: a chunk halo must be >= 0");
  const std::int64_t count = n_corr / max_corr + (n_corr % max_corr != 0);
  const std::int64_t size = count > 0 ? n_corr / count + (n_corr % count != 0) : max_corr;
  std::vector<TimeChunk> chunks;
  for (std::int64_t i0 = 0; i0 < n_corr; i0 += std::min(size, n_corr - i0)) {
    TimeChunk ch;
    const std::int64_t own_end = i0 + std::min(size, n_corr - i0);
    ch.corr_begin = std::max<std::int64_t>(0, i0 - halo);
    ch.corr_end = std::min(n_corr, own_end + halo);
    ch.halo_before = i0 - ch.corr_begin;
    ch.halo_after = ch.corr_end - own_end;
    // i * step + moveout stays within int64: validation bounds |moveout| by L and n_corr * step
    // by L + step.
    ch.sample_begin = std::clamp<std::int64_t>(ch.corr_begin * step + moveout_min, 0, L);
    ch.sample_end = std::clamp<std::int64_t>((ch.corr_end - 1) * step + moveout_max + K, 0, L);
    ch.sample_end = std::max(ch.sample_end, ch.sample_begin);
    // Backends size their window statistics from the samples: every correlation time of the
    // chunk must have a window start in [0, samples - K] even where moveouts push the windows
    // out. Widening the range inside [0, L) keeps the window rule (the whole data hold them).
    const std::int64_t need = (ch.n_corr() - 1) * step + K;
    if (ch.samples() < need) ch.sample_end = std::min(L, ch.sample_begin + need);
    if (ch.samples() < need) ch.sample_begin = std::max<std::int64_t>(0, ch.sample_end - need);
    chunks.push_back(ch);
  }
  return chunks;
}

/// A moveout as seen inside `chunk` (see TimeChunk).
inline std::int64_t chunk_moveout(std::int64_t moveout, const TimeChunk& chunk, std::int64_t step) {
  return moveout + chunk.corr_begin * step - chunk.sample_begin;
}

}  // namespace halfscope::mfilter

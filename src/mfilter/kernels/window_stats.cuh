// Device code of window_stats_cuda: FP64 window statistics of the data (one translation unit
// includes it: its kernels are not templates). Template statistics: template_stats.cuh.
// window_stats_tile_kernel (K <= kTileMaxK) is the fast path; window_stats_kernel reads global
// memory directly and serves longer templates.
//
// Flat rule: exactly the CPU reference's (window_stats.hpp/.cpp, backends.hpp). Short
// normalization: every sample zero. Full normalization: every sample equal, or the demeaned
// energy <= kFlatRelative * sum (x + offset)^2, with `offset` what dispatch subtracted from the
// channel (Dims::channel_offsets). Full normalization shifts each block's sums by its first
// sample, as the CPU shifts each restart span, so a large DC level does not cancel.
//
// The running sums are plain FP64 updates after one compensated direct sum; their error is
// bounded by the accumulated u64 * (|running sum| + |terms|) of the updates (tracked as
// `drift`). A quiet window after a loud burst in the same run can have an energy at or below
// that bound (amplitude ratio ~5e6 with 16-window runs), so the running value cannot decide it.
// Whenever the running energy is within 2^27 x its bound (so its relative error could exceed
// ~2^-27, visible after FP32 rounding) or within a factor 2 of the flat threshold, the window is
// recomputed with direct compensated K-sums (exact_window, the rare path) and the flat rule is
// applied to those, as the CPU does. Stationary data never takes it (drift ~1e-14 of the energy).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mfilter/backends.hpp"
#include "mfilter/kernels/stats_common.cuh"

namespace halfscope::mfilter::kernels {

/// Neumaier step: adds v to (s, comp); also catches what is lost when v is larger than s.
__device__ inline void neumaier(double& s, double& comp, double v) {
  const double t = s + v;
  comp += fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s;
  s = t;
}

/// Energy (0 when flat) and mean of one window.
struct WindowValue {
  double energy;
  double mean;
};

/// The rare path: one window's statistics from direct compensated sums over its k samples `w`
/// (shifted by w[0] in full normalization), with window_stats.cpp's flat rule: short, every
/// sample zero; full, every sample equal or energy <= kFlatRelative * sum (w + offset)^2.
__device__ inline WindowValue exact_window(const float* w, std::int64_t k, bool full,
                                           double offset) {
  const double shift = full ? static_cast<double>(w[0]) : 0.0;
  double s1 = 0, c1 = 0, s2 = 0, c2 = 0, raw = 0, craw = 0;
  bool equal = true, zero = true;
  for (std::int64_t j = 0; j < k; ++j) {
    const double v = w[j], y = v - shift, a = v + offset;
    neumaier(s1, c1, y);
    neumaier(s2, c2, y * y);
    neumaier(raw, craw, a * a);
    equal = equal && w[j] == w[0];
    zero = zero && w[j] == 0.0f;
  }
  const double kd = static_cast<double>(k), m1 = s1 + c1;
  if (!full) return {zero ? 0.0 : fmax(0.0, s2 + c2), 0.0};
  const double energy = fmax(0.0, (s2 + c2) - m1 * m1 / kd);
  const bool flat = equal || energy <= kFlatRelative * fmax(0.0, raw + craw);
  return {flat ? 0.0 : energy, shift + m1 / kd};
}

/// Energy from the running sums of y = x - shift (`sum`, `sq`), or -1 when it is too close to
/// its rounding bound or to the flat threshold to be trusted (then exact_window decides).
/// `level` = shift + offset: sum (x + offset)^2 = sq + 2 level sum + k level^2.
__device__ inline double running_energy(double sum, double sq, std::int64_t k, bool full,
                                        double drift_sq, double drift_sum, double level) {
  const double kd = static_cast<double>(k);
  double energy = sq;
  double bound = 4.0 * drift_sq;
  double threshold = 0;
  if (full) {
    energy = sq - sum * sum / kd;
    // Error of sum^2 / K from the error of sum, plus its own rounding and the subtraction's.
    bound += 4.0 * (2.0 * fabs(sum) * drift_sum + drift_sum * drift_sum) / kd + 4.0 * kU64 * sq;
    // Upper bound of the raw sum of squares (triangle inequality), so a window the CPU would
    // judge flat always lands on the exact path; the factor 2 covers this sum's own rounding.
    threshold = 2.0 * kFlatRelative * (sq + 2.0 * fabs(level) * fabs(sum) + kd * level * level);
  }
  // 2^27: a running energy trusted here errs by < 2^-25 relative, 1/4 of FP32's u after the
  // square root halves it.
  if (energy <= 0x1p27 * bound + threshold) return -1.0;
  return energy;
}

/// One thread per run of kWindowRun consecutive window starts of one channel: a compensated
/// (Neumaier) direct sum for the first window, then FP64 add-one / drop-one updates; in full
/// normalization every sum is of x - x[first] (the run's shift). `offsets`: (channels) or null.
__global__ void window_stats_kernel(const float* __restrict__ data, std::int64_t channels,
                                    std::int64_t length, std::int64_t k, std::int64_t run,
                                    bool full, const double* __restrict__ offsets,
                                    float* __restrict__ inv_norm, float* __restrict__ mean) {
  const std::int64_t windows = length - k + 1;
  const std::int64_t runs = (windows + run - 1) / run;
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < channels * runs;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t c = g / runs;
    const std::int64_t first = (g % runs) * run;
    const std::int64_t last = first + run < windows ? first + run : windows;
    const float* x = data + c * length;
    const double offset = full && offsets != nullptr ? offsets[c] : 0.0;
    const double shift = full ? static_cast<double>(x[first]) : 0.0;
    double sum = 0, sum_c = 0, sq = 0, sq_c = 0, abs_sum = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const double y = static_cast<double>(x[first + j]) - shift;
      abs_sum += fabs(y);
      neumaier(sum, sum_c, y);
      neumaier(sq, sq_c, y * y);
    }
    sum += sum_c;
    sq += sq_c;
    // Compensated sums are correct to ~2 u64 of the sum of |terms| (plus u64 of it for the
    // rounding of y and y^2, which the factor 4 of running_energy's bound covers).
    double drift_sq = 2.0 * kU64 * sq, drift_sum = 2.0 * kU64 * abs_sum;
    for (std::int64_t s = first; s < last; ++s) {
      if (s > first) {
        const double in = static_cast<double>(x[s + k - 1]) - shift;
        const double out = static_cast<double>(x[s - 1]) - shift;
        sum += in - out;
        sq += in * in - out * out;
        drift_sum += 2.0 * kU64 * (fabs(sum) + fabs(in) + fabs(out));
        drift_sq += 2.0 * kU64 * (fabs(sq) + in * in + out * out);
      }
      WindowValue v{running_energy(sum, sq, k, full, drift_sq, drift_sum, shift + offset),
                    shift + sum / static_cast<double>(k)};
      if (v.energy < 0) v = exact_window(x + s, k, full, offset);  // rare path
      const std::int64_t o = c * windows + s;
      inv_norm[o] = v.energy > 0 ? static_cast<float>(rsqrt(v.energy)) : 0.0f;  // as the tiles
      if (mean) mean[o] = static_cast<float>(v.mean);
    }
  }
}

/// Window starts per thread and per block of the tiled kernel (window_stats_tile_kernel):
/// 16 updates per run keep the drift small; 128 threads x 16 gives a 4.32e6-window channel 2110
/// blocks (several per SM slot, so no half-empty last wave).
inline constexpr int kTileRun = 16;
inline constexpr int kTileThreads = 128;
inline constexpr int kTileWindows = kTileRun * kTileThreads;
/// Longest template the tiled kernel stages (its shared memory stays under the default 48 KB);
/// longer ones use window_stats_kernel.
inline constexpr std::int64_t kTileMaxK = 2048;
/// Samples per segment: the first window of every run is a sum of K / 16 segment sums, so runs
/// must start on segment boundaries.
inline constexpr int kSegment = 16;
static_assert(kTileRun == kSegment, "every run starts on a segment boundary");

/// Dynamic shared memory of window_stats_tile_kernel for templates of k samples.
inline std::int64_t tile_shared_bytes(std::int64_t k, bool full) {
  const std::int64_t samples = (kTileWindows + k - 1 + kSegment - 1) / kSegment * kSegment;
  return samples / kSegment * 5 * 8 + samples * 4 + (full ? 2 : 1) * kTileWindows * 4;
}

/// Tiled window statistics: a block owns kTileWindows consecutive window starts of one channel,
/// stages their samples in shared memory (coalesced), computes compensated sums of 16-sample
/// segments once, builds each run's first window from K / 16 segment sums (compensated again,
/// so the error stays ~2 u64 of the sum of |terms|, as for a direct compensated sum) plus the
/// remaining K % 16 samples, then does kTileRun - 1 add-one / drop-one FP64 updates with the
/// same drift tracking as window_stats_kernel. Outputs go through shared memory so every global
/// store is coalesced. Full normalization shifts every sum by the tile's first sample; near-flat
/// windows take exact_window from shared memory. `offsets`: (channels) or null. k <= kTileMaxK.
__global__ void __launch_bounds__(kTileThreads)
    window_stats_tile_kernel(const float* __restrict__ data, std::int64_t channels,
                             std::int64_t length, std::int64_t k, bool full,
                             const double* __restrict__ offsets, float* __restrict__ inv_norm,
                             float* __restrict__ mean) {
  extern __shared__ double tile_smem[];
  const std::int64_t windows = length - k + 1;
  const std::int64_t tiles = (windows + kTileWindows - 1) / kTileWindows;
  const int kk = static_cast<int>(k);
  const int samples = (kTileWindows + kk - 1 + kSegment - 1) / kSegment * kSegment;
  const int segments = samples / kSegment;
  double* seg_sum = tile_smem;
  double* seg_sum_c = seg_sum + segments;
  double* seg_sq = seg_sum_c + segments;
  double* seg_sq_c = seg_sq + segments;
  double* seg_abs = seg_sq_c + segments;
  float* xs = reinterpret_cast<float*>(seg_abs + segments);
  float* out_inv = xs + samples;
  float* out_mean = out_inv + kTileWindows;
  const int tid = static_cast<int>(threadIdx.x);
  for (std::int64_t tile = blockIdx.x; tile < channels * tiles; tile += gridDim.x) {
    const std::int64_t c = tile / tiles, w0 = (tile % tiles) * kTileWindows;
    const int nw = static_cast<int>(windows - w0 < kTileWindows ? windows - w0 : kTileWindows);
    const float* x = data + c * length + w0;
    const int avail = static_cast<int>(length - w0 < samples ? length - w0 : samples);
    // Samples past the data are zero; only segments inside some first window are ever read.
    for (int j = tid; j < samples; j += kTileThreads) xs[j] = j < avail ? x[j] : 0.0f;
    __syncthreads();
    // Full normalization: every sum of the tile is of x - x[w0] (the CPU's per-span shift).
    const double shift = full ? static_cast<double>(xs[0]) : 0.0;
    const double offset = full && offsets != nullptr ? offsets[c] : 0.0;
    for (int sg = tid; sg < segments; sg += kTileThreads) {
      double sum = 0, sum_c = 0, sq = 0, sq_c = 0, abs_sum = 0;
#pragma unroll
      for (int j = 0; j < kSegment; ++j) {
        const double v = static_cast<double>(xs[sg * kSegment + j]) - shift;
        abs_sum += fabs(v);
        neumaier(sum, sum_c, v);
        neumaier(sq, sq_c, v * v);
      }
      seg_sum[sg] = sum, seg_sum_c[sg] = sum_c, seg_sq[sg] = sq, seg_sq_c[sg] = sq_c;
      seg_abs[sg] = abs_sum;
    }
    __syncthreads();
    const int first = tid * kTileRun;
    if (first < nw) {
      double sum = 0, sum_c = 0, sq = 0, sq_c = 0, abs_sum = 0;
      const int whole = kk / kSegment;
      // Runs start on segment boundaries (kTileRun == kSegment).
      for (int j = 0; j < whole; ++j) {
        const int sg = first / kSegment + j;
        neumaier(sum, sum_c, seg_sum[sg]);
        sum_c += seg_sum_c[sg];
        neumaier(sq, sq_c, seg_sq[sg]);
        sq_c += seg_sq_c[sg];
        abs_sum += seg_abs[sg];
      }
      for (int j = whole * kSegment; j < kk; ++j) {
        const double v = static_cast<double>(xs[first + j]) - shift;
        abs_sum += fabs(v);
        neumaier(sum, sum_c, v);
        neumaier(sq, sq_c, v * v);
      }
      sum += sum_c;
      sq += sq_c;
      // As window_stats_kernel: the compensated sums are correct to ~2 u64 of the sum of
      // |terms|; the drift terms are accumulated unscaled and multiplied by 2 u64 at use.
      double acc_sq = sq, acc_sum = abs_sum;
      const int last = first + kTileRun < nw ? first + kTileRun : nw;
      for (int s = first; s < last; ++s) {
        if (s > first) {
          const double in = static_cast<double>(xs[s + kk - 1]) - shift;
          const double out = static_cast<double>(xs[s - 1]) - shift;
          sum += in - out;
          sq += in * in - out * out;
          acc_sum += fabs(sum) + fabs(in) + fabs(out);
          acc_sq += fabs(sq) + in * in + out * out;
        }
        WindowValue v{running_energy(sum, sq, k, full, 2.0 * kU64 * acc_sq, 2.0 * kU64 * acc_sum,
                                     shift + offset),
                      shift + sum / static_cast<double>(k)};
        if (v.energy < 0) v = exact_window(xs + s, k, full, offset);  // rare path, from smem
        // rsqrt: within an FP64 ulp or so of 1 / sqrt (CUDA math API), far below the FP32
        // rounding that follows, at a fraction of a square root and a division.
        out_inv[s] = v.energy > 0 ? static_cast<float>(rsqrt(v.energy)) : 0.0f;
        if (full) out_mean[s] = static_cast<float>(v.mean);
      }
    }
    __syncthreads();
    float* dst_inv = inv_norm + c * windows + w0;
    for (int j = tid; j < nw; j += kTileThreads) dst_inv[j] = out_inv[j];
    if (full) {
      float* dst_mean = mean + c * windows + w0;
      for (int j = tid; j < nw; j += kTileThreads) dst_mean[j] = out_mean[j];
    }
    __syncthreads();  // xs, the segments and the outputs are reused by the next tile
  }
}

}  // namespace halfscope::mfilter::kernels

// Device code of detection on the network stack (detect_cuda.cu).
//
// Exact medians of |x| per row: radix selection on the IEEE bits of |x| (for x >= 0 the bit
// pattern orders like the value), 11, 10 and 10 bits per pass from the top. Each pass histograms
// the row's elements whose already-decided high bits equal the target's prefix, and a scan picks
// the bin holding the target rank. Two targets per row (ranks (n-1)/2 and n/2) give the median of
// an even count as the mean of the two middle values, as numpy.median does.
//
// Candidates: x[t, i] with |x| above the row's threshold and no |x[t, j]| larger for
// |j - i| <= min_separation (ties kept: the host's strongest-first declustering settles them),
// appended through an atomic counter.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace halfscope::mfilter::kernels {

inline constexpr int kLoads = 4;  // loads in flight per thread in the row kernels

/// The digits of the selection, from the top: bits 30..20 (the exponent and three mantissa
/// bits, so the first pass already spreads the values over many bins), 19..10 and 9..0. Bit 31
/// (the sign of |x|) is 0 and known from the start.
struct RadixDigit {
  int shift, width;
};
inline constexpr RadixDigit kRadixDigits[] = {{20, 11}, {10, 10}, {0, 10}};
inline constexpr int kRadixMaxBins = 1 << 11;

/// Selection state of one target: the decided high bits and the rank left within them.
struct RadixTarget {
  unsigned int prefix;
  long long rank;
};

/// Both targets of each row: ranks (n - 1) / 2 and n / 2, nothing decided yet.
__global__ void radix_init_kernel(std::int64_t rows, std::int64_t n,
                                  RadixTarget* __restrict__ targets) {
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < rows;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    targets[2 * t] = {0u, static_cast<long long>((n - 1) / 2)};
    targets[2 * t + 1] = {0u, static_cast<long long>(n / 2)};
  }
}

/// medians[t] = the mean of the two selected values (numpy.median of |x|) and, when
/// `thresholds` is given, thresholds[t] = factor * medians[t], rounded as the host rounds it.
__global__ void radix_finish_kernel(std::int64_t rows, const RadixTarget* __restrict__ targets,
                                    double factor, double* __restrict__ medians,
                                    double* __restrict__ thresholds) {
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < rows;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    const double lo = __uint_as_float(targets[2 * t].prefix);
    const double hi = __uint_as_float(targets[2 * t + 1].prefix);
    const double m = __dmul_rn(0.5, __dadd_rn(lo, hi));
    medians[t] = m;
    if (thresholds) thresholds[t] = __dmul_rn(factor, m);
  }
}

/// Histograms of one digit: hist[(t * 2 + q) * kRadixMaxBins + bin] counts the elements of row t
/// whose bits above the digit equal target q's prefix. Grid: x over a row, y over rows. The two
/// targets of a row share their prefix until their ranks fall in different bins (nearly always
/// to the end): then only q = 0 is counted, and the scan reads it for both.
__global__ void radix_histogram_kernel(const float* __restrict__ stack, std::int64_t rows,
                                       std::int64_t n, const RadixTarget* __restrict__ targets,
                                       RadixDigit digit, unsigned long long* __restrict__ hist) {
  __shared__ unsigned int local[2 * kRadixMaxBins];
  const int bins = 1 << digit.width;
  const unsigned int known = ~0u << (digit.shift + digit.width);  // always holds bit 31
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const unsigned int p0 = targets[2 * t].prefix, p1 = targets[2 * t + 1].prefix;
    const bool apart = p0 != p1;
    const int used = apart ? 2 * bins : bins;
    for (int b = threadIdx.x; b < used; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const float* row = stack + t * n;
    // kLoads loads in flight per thread before any is counted, so the memory system stays busy.
    const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
    for (std::int64_t e0 = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e0 < n;
         e0 += kLoads * stride) {
      unsigned int bits[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {  // past the row: sign bit set, so it matches no prefix
        const std::int64_t e = e0 + u * stride;
        bits[u] = e < n ? __float_as_uint(fabsf(row[e])) : ~0u;
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const unsigned int bin = (bits[u] >> digit.shift) & (bins - 1);
        if ((bits[u] & known) == p0) atomicAdd(&local[bin], 1u);
        if (apart && (bits[u] & known) == p1) atomicAdd(&local[bins + bin], 1u);
      }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < used; b += blockDim.x)
      if (local[b])
        atomicAdd(&hist[(2 * t + b / bins) * kRadixMaxBins + (b & (bins - 1))], local[b]);
    __syncthreads();
  }
}

/// One warp per row: the bin holding each target's rank becomes its prefix's next digit (from
/// the row's shared histogram while both prefixes are equal). Each lane sums a contiguous slice
/// of the bins; a warp scan of the slices finds the lane whose slice holds the rank.
__global__ void radix_scan_kernel(std::int64_t rows, RadixDigit digit,
                                  const unsigned long long* __restrict__ hist,
                                  RadixTarget* __restrict__ targets) {
  const int lane = threadIdx.x % 32, per = (1 << digit.width) / 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / 32);
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x / 32} + threadIdx.x / 32; t < rows;
       t += warps) {
    const bool apart = targets[2 * t].prefix != targets[2 * t + 1].prefix;
    __syncwarp();  // both prefixes read before lane 0 updates either
    for (int q = 0; q < 2; ++q) {
      const unsigned long long* h = hist + (2 * t + (apart ? q : 0)) * kRadixMaxBins;
      const long long rank = targets[2 * t + q].rank;
      long long slice = 0;
      for (int k = 0; k < per; ++k) slice += static_cast<long long>(h[lane * per + k]);
      long long upto = slice;  // inclusive scan over the lanes
      for (int d = 1; d < 32; d *= 2) {
        const long long v = __shfl_up_sync(0xffffffffu, upto, d);
        if (lane >= d) upto += v;
      }
      // The first lane whose inclusive sum exceeds the rank (the last lane if rounding of the
      // invariant ever failed, so the result stays a valid bin).
      const unsigned int over = __ballot_sync(0xffffffffu, upto > rank);
      const int owner = over ? __ffs(over) - 1 : 31;
      if (lane == owner) {
        long long below = upto - slice;
        int bin = lane * per;
        while (bin < lane * per + per - 1 && below + static_cast<long long>(h[bin]) <= rank)
          below += static_cast<long long>(h[bin++]);
        RadixTarget& g = targets[2 * t + q];
        g.prefix |= static_cast<unsigned int>(bin) << digit.shift;
        g.rank = rank - below;
      }
    }
  }
}

/// One candidate peak.
struct Candidate {
  long long t, i;
  float value;
};

/// Grid: x over a row, y over rows (no division per element).
__global__ void candidates_kernel(const float* __restrict__ stack, std::int64_t rows,
                                  std::int64_t n, const double* __restrict__ thresholds,
                                  std::int64_t sep, Candidate* __restrict__ out,
                                  std::int64_t capacity, unsigned long long* __restrict__ count) {
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    const float* row = stack + t * n;
    const double threshold = thresholds[t];
    const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
    for (std::int64_t i0 = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i0 < n;
         i0 += kLoads * stride) {
      float xs[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) xs[u] = i0 + u * stride < n ? row[i0 + u * stride] : 0.0f;
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const std::int64_t i = i0 + u * stride;
        const float x = xs[u], v = fabsf(x);
        if (i >= n || !(static_cast<double>(v) > threshold)) continue;
        const std::int64_t lo = i - sep > 0 ? i - sep : 0, hi = i + sep < n - 1 ? i + sep : n - 1;
        bool peak = true;
        for (std::int64_t j = lo; j <= hi && peak; ++j) peak = !(fabsf(row[j]) > v);
        if (!peak) continue;
        const unsigned long long slot = atomicAdd(count, 1ull);
        if (static_cast<std::int64_t>(slot) < capacity) out[slot] = {t, i, x};
      }
    }
  }
}

/// out[w * length + k] = data[starts[w] + k]: the windows channels_used inspects, gathered so
/// that only they cross the bus.
__global__ void gather_windows_kernel(const float* __restrict__ data,
                                      const long long* __restrict__ starts, std::int64_t windows,
                                      std::int64_t length, float* __restrict__ out) {
  for (std::int64_t w = blockIdx.y; w < windows; w += gridDim.y)
    for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < length;
         k += std::int64_t{gridDim.x} * blockDim.x)
      out[w * length + k] = data[starts[w] + k];
}

}  // namespace halfscope::mfilter::kernels

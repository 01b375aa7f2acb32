// Device code of detection on the network stack (detect_cuda.cu).
//
// Exact medians of |x| per row: radix selection on the IEEE bits of |x| (for x >= 0 the bit
// pattern orders like the value), 8 bits per pass from the top, four passes. Each pass histograms
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

inline constexpr int kRadixBins = 256;

/// Selection state of one target: the decided high bits and the rank left within them.
struct RadixTarget {
  unsigned int prefix;
  long long rank;
};

/// Histograms of one pass: hist[(t * 2 + q) * 256 + bin]. Grid: x over a row, y over rows.
__global__ void radix_histogram_kernel(const float* __restrict__ stack, std::int64_t rows,
                                       std::int64_t n, const RadixTarget* __restrict__ targets,
                                       unsigned int known_mask, int shift,
                                       unsigned long long* __restrict__ hist) {
  __shared__ unsigned int local[2 * kRadixBins];
  for (std::int64_t t = blockIdx.y; t < rows; t += gridDim.y) {
    for (int b = threadIdx.x; b < 2 * kRadixBins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const unsigned int p0 = targets[2 * t].prefix, p1 = targets[2 * t + 1].prefix;
    const float* row = stack + t * n;
    for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
         e += std::int64_t{gridDim.x} * blockDim.x) {
      const unsigned int bits = __float_as_uint(fabsf(row[e]));
      const unsigned int bin = (bits >> shift) & (kRadixBins - 1);
      if ((bits & known_mask) == p0) atomicAdd(&local[bin], 1u);
      if ((bits & known_mask) == p1) atomicAdd(&local[kRadixBins + bin], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 2 * kRadixBins; b += blockDim.x)
      if (local[b]) atomicAdd(&hist[t * 2 * kRadixBins + b], local[b]);
    __syncthreads();
  }
}

/// One thread per target: the bin holding its rank becomes the next 8 bits of its prefix.
__global__ void radix_scan_kernel(std::int64_t targets_count, int shift,
                                  const unsigned long long* __restrict__ hist,
                                  RadixTarget* __restrict__ targets) {
  for (std::int64_t g = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; g < targets_count;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const unsigned long long* h = hist + g * kRadixBins;  // (t * 2 + q) == g
    long long rank = targets[g].rank, below = 0;
    int bin = 0;
    while (bin < kRadixBins - 1 && below + static_cast<long long>(h[bin]) <= rank)
      below += static_cast<long long>(h[bin++]);
    targets[g].prefix |= static_cast<unsigned int>(bin) << shift;
    targets[g].rank = rank - below;
  }
}

/// One candidate peak.
struct Candidate {
  long long t, i;
  float value;
};

__global__ void candidates_kernel(const float* __restrict__ stack, std::int64_t rows,
                                  std::int64_t n, const double* __restrict__ thresholds,
                                  std::int64_t sep, Candidate* __restrict__ out,
                                  std::int64_t capacity, unsigned long long* __restrict__ count) {
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < rows * n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = e / n, i = e - t * n;
    const float x = stack[e], v = fabsf(x);
    if (!(static_cast<double>(v) > thresholds[t])) continue;
    const float* row = stack + t * n;
    const std::int64_t lo = i - sep > 0 ? i - sep : 0, hi = i + sep < n - 1 ? i + sep : n - 1;
    bool peak = true;
    for (std::int64_t j = lo; j <= hi && peak; ++j) peak = !(fabsf(row[j]) > v);
    if (!peak) continue;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (static_cast<std::int64_t>(slot) < capacity) out[slot] = {t, i, x};
  }
}

}  // namespace halfscope::mfilter::kernels

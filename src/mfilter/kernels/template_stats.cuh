// Device code of baseline_common_cuda.cu (its only includer: the kernels are not templates): FP64
// statistics and the operand copy of the template rows, and the global max |x| reduction of the
// FP16 cuBLAS variants. The flat rule is backends.hpp's, as in window_stats.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mfilter/backends.hpp"
#include "mfilter/kernels/stats_common.cuh"

namespace halfscope::mfilter::kernels {

/// Block-wide sum of a double (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ inline double block_sum(double v, double* shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += shared32[w];
  return total;
}

/// Max of non-negative floats through their bit patterns (monotone for x >= 0).
__device__ inline void atomic_max_nonneg(float* target, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(target), __float_as_uint(v));
}

/// One block per template row (t, c) of K samples: FP64 mean (full normalization), energy of the
/// (demeaned) row by a second pass, the flat rule, 1 / sqrt(energy) or 0, the row's FP64 mean,
/// and the global max |row - mean| (for the FP16 variants' normalization).
__global__ void template_stats_kernel(const float* __restrict__ templates, std::int64_t rows,
                                      std::int64_t k, bool full, float* __restrict__ inv_norm,
                                      double* __restrict__ row_mean, float* __restrict__ absmax) {
  __shared__ double shared32[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = templates + r * k;
    double sum = 0, raw = 0;
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      sum += x[j];
      raw += static_cast<double>(x[j]) * x[j];
    }
    sum = block_sum(sum, shared32);
    raw = block_sum(raw, shared32);
    const double mu = full ? sum / static_cast<double>(k) : 0.0;
    double energy = 0;
    float amax = 0;
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const double d = static_cast<double>(x[j]) - mu;
      energy += d * d;
      amax = fmaxf(amax, fabsf(static_cast<float>(d)));
    }
    energy = block_sum(energy, shared32);
    atomic_max_nonneg(absmax, amax);
    if (threadIdx.x == 0) {
      // The two-pass energy is accurate to ~K u64 of raw; the flat rule's bound covers that.
      const bool flat = energy <= kFlatRelative * raw || energy <= 4.0 * kU64 * k * raw;
      inv_norm[r] = flat ? 0.0f : static_cast<float>(1.0 / sqrt(energy));
      row_mean[r] = mu;
    }
  }
}

/// The GEMM / FFT operand of each template row: float(x - mean) * scale in Op (float or __half;
/// scale = 1 / global max for the FP16 variants, else 1), and row_sum = the FP64 sum of the
/// operand values actually used, unscaled (the full-normalization correction mean_S * row_sum).
template <class Op>
__global__ void template_operand_kernel(const float* __restrict__ templates, std::int64_t rows,
                                        std::int64_t k, const double* __restrict__ row_mean,
                                        const float* __restrict__ absmax, Op* __restrict__ op,
                                        double* __restrict__ row_sum) {
  __shared__ double shared32[32];
  const float amax = absmax ? *absmax : 0.0f;
  const float scale = amax > 0 ? 1.0f / amax : 1.0f;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double s = 0;
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const float d = static_cast<float>(static_cast<double>(templates[r * k + j]) - row_mean[r]);
      const Op v = static_cast<Op>(d * scale);
      op[r * k + j] = v;
      s += static_cast<double>(static_cast<float>(v));
    }
    s = block_sum(s, shared32);
    if (threadIdx.x == 0) row_sum[r] = s / static_cast<double>(scale);
  }
}

/// Global max |x| of n floats into *absmax (which starts at 0).
__global__ void absmax_kernel(const float* __restrict__ x, std::int64_t n, float* absmax) {
  float m = 0;
  for (std::int64_t j = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; j < n;
       j += std::int64_t{gridDim.x} * blockDim.x)
    m = fmaxf(m, fabsf(x[j]));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomic_max_nonneg(absmax, m);
}

}  // namespace halfscope::mfilter::kernels

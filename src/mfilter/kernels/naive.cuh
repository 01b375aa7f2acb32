// Device code of the naive FP32 matched filter (naive_cuda.cu), Fast Matched Filter's design:
// one thread per (template, correlation time), the channel loop inside the thread so the network
// sum (moveouts, weights) stays in registers. A block holds kNaiveThreads consecutive correlation
// times of one template; per channel and per pass of kNaivePass template samples it stages the
// template slice (a broadcast to every thread) and the data tile the block's windows span
// ((threads - 1) * step + pass samples, starting at the block's first window) in shared memory.
// When that tile would exceed kNaiveTileCap (large steps: windows share no samples) the data is
// read from global memory instead.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mfilter/kernels/baseline_tuning.hpp"

namespace halfscope::mfilter::kernels {

/// What the naive kernel reads and writes; pointers are device memory.
struct NaiveArgs {
  std::int64_t templates = 0, channels = 0, k = 0, samples = 0, n_corr = 0, step = 1;
  const float* tmpl = nullptr;  // (T, C, K) demeaned operand
  const float* data = nullptr;  // (C, L)
  const std::int64_t* moveouts = nullptr;
  const float* weights = nullptr;
  const float* inv_wnorm = nullptr;  // (C, L - K + 1)
  const float* wmean = nullptr;      // full normalization only
  const float* inv_tnorm = nullptr;  // (T, C)
  const double* tsum = nullptr;      // (T, C)
  bool network = true;
  bool tiled = true;
  float* out = nullptr;
  int* nonfinite = nullptr;  // set to 1 when a CC is inf or NaN (NonfiniteFlag)
};

/// grid.x: blocks of correlation times, grid.y strides over templates. Dynamic shared memory:
/// kNaivePass + (tiled ? tile : 0) floats.
__global__ void __launch_bounds__(tuning::kNaiveThreads) naive_kernel(NaiveArgs a) {
  extern __shared__ float smem[];
  float* tslice = smem;
  float* tile = smem + tuning::kNaivePass;
  const std::int64_t windows = a.samples - a.k + 1;
  const std::int64_t i0 = blockIdx.x * std::int64_t{blockDim.x};
  const std::int64_t i = i0 + threadIdx.x;
  for (std::int64_t t = blockIdx.y; t < a.templates; t += gridDim.y) {
    float stack = 0.0f;
    for (std::int64_t c = 0; c < a.channels; ++c) {
      const std::int64_t tc = t * a.channels + c;
      const float w = a.weights[tc];
      if (a.network && w == 0.0f) continue;  // uniform over the block
      const std::int64_t mv = a.moveouts[tc];
      const std::int64_t s = i * a.step + mv;
      const bool valid = i < a.n_corr && s >= 0 && s < windows;
      const std::int64_t base = i0 * a.step + mv;  // the block's first window start
      const float* x = a.data + c * a.samples;
      const float* tp = a.tmpl + tc * a.k;
      float acc = 0.0f;
      for (std::int64_t k0 = 0; k0 < a.k; k0 += tuning::kNaivePass) {
        const std::int64_t kc = a.k - k0 < tuning::kNaivePass ? a.k - k0 : tuning::kNaivePass;
        const std::int64_t span = (blockDim.x - 1) * a.step + kc;
        __syncthreads();  // the previous pass is done with the shared slices
        for (std::int64_t j = threadIdx.x; j < kc; j += blockDim.x) tslice[j] = tp[k0 + j];
        if (a.tiled) {
          for (std::int64_t j = threadIdx.x; j < span; j += blockDim.x) {
            const std::int64_t g = base + k0 + j;  // outside the data: never read by valid windows
            tile[j] = g >= 0 && g < a.samples ? x[g] : 0.0f;
          }
        }
        __syncthreads();
        if (valid) {
          if (a.tiled) {
            const float* row = tile + threadIdx.x * a.step;
            for (std::int64_t j = 0; j < kc; ++j) acc = fmaf(tslice[j], row[j], acc);
          } else {
            const float* row = x + s + k0;
            for (std::int64_t j = 0; j < kc; ++j) acc = fmaf(tslice[j], __ldg(row + j), acc);
          }
        }
      }
      if (!valid) continue;
      const std::int64_t ws = c * windows + s;
      const float inv_w = a.inv_wnorm[ws], inv_t = a.inv_tnorm[tc];
      float num = acc;
      if (a.wmean) num -= a.wmean[ws] * static_cast<float>(a.tsum[tc]);
      float cc = num * inv_w * inv_t;
      if (inv_w == 0.0f || inv_t == 0.0f) {
        cc = 0.0f;  // flat: 0, never NaN
      } else if (!isfinite(cc)) {
        // Tested before the clamp: fminf/fmaxf would turn inf into +-1 and NaN into -1.
        atomicExch(a.nonfinite, 1);
        cc = 0.0f;
      } else {
        cc = fminf(1.0f, fmaxf(-1.0f, cc));
      }
      if (a.network)
        stack = fmaf(w, cc, stack);
      else
        a.out[tc * a.n_corr + i] = cc;
    }
    if (a.network && i < a.n_corr) a.out[t * a.n_corr + i] = stack;
  }
}

}  // namespace halfscope::mfilter::kernels

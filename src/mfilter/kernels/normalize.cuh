// Device code: from raw dot products sum_k T'[t,c,k] S[c,s+k] of one channel and one chunk of
// window starts [s0, s0 + rows) to normalized CC, then the network sum or the per-channel output.
// Shared by the cuBLAS and FFT baselines, which differ only in where their dot products live (the
// `Dot` accessor). Per correlation time i the window start is s = i * step + moveout[t, c], so each
// (t, c, i) falls in exactly one chunk: accumulating the network sum with `+=` over chunks and
// channels launched in order on one stream is race-free and deterministic.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace halfscope::mfilter::kernels {

/// What the normalization of one (channel, chunk) needs; pointers are device memory.
struct NormalizeArgs {
  std::int64_t templates = 0, channels = 0, k = 0, windows = 0, n_corr = 0, step = 1;
  std::int64_t channel = 0, s0 = 0, rows = 0;
  const std::int64_t* moveouts = nullptr;  // (T, C)
  const float* weights = nullptr;          // (T, C)
  const float* inv_wnorm = nullptr;        // (C, windows)
  const float* wmean = nullptr;            // (C, windows), full normalization only
  const float* inv_tnorm = nullptr;        // (T, C)
  const double* tsum = nullptr;            // (T, C): sum of the template operand, unscaled
  const float* data_absmax = nullptr;      // FP16 variants: the global scales, else null
  const float* tmpl_absmax = nullptr;
  float dot_scale = 1.0f;  // extra factor on every dot (FFT: 1 / N)
  bool network = true;
  float* out = nullptr;
  int* nonfinite = nullptr;  // set to 1 when a dot product or a CC is inf or NaN
};

/// Dot products in a (T, ld) matrix, element type D (float or __half): dot(t, r) = m[t*ld + r].
template <class D>
struct MatrixDot {
  const D* m;
  std::int64_t ld;
  __device__ float operator()(std::int64_t t, std::int64_t r) const {
    return static_cast<float>(m[t * ld + r]);
  }
};

/// grid.y strides over templates, grid.x over the correlation times whose window falls in the
/// chunk.
template <class Dot>
__global__ void normalize_kernel(NormalizeArgs a, Dot dot) {
  float unscale = a.dot_scale;
  if (a.data_absmax && a.tmpl_absmax) {
    // The operands were divided by their global max (when not 0) before rounding to FP16.
    const float ds = *a.data_absmax, ts = *a.tmpl_absmax;
    unscale *= (ds > 0 ? ds : 1.0f) * (ts > 0 ? ts : 1.0f);
  }
  for (std::int64_t t = blockIdx.y; t < a.templates; t += gridDim.y) {
    const std::int64_t tc = t * a.channels + a.channel;
    const float w = a.weights[tc];
    if (a.network && w == 0.0f) continue;  // a weight of 0 skips the channel
    const float inv_t = a.inv_tnorm[tc];
    const std::int64_t mv = a.moveouts[tc];
    // i such that s0 <= i * step + mv < s0 + rows, with 0 <= s < windows and 0 <= i < n_corr.
    const std::int64_t lo_s = a.s0 > 0 ? a.s0 : 0;
    const std::int64_t hi_s = (a.s0 + a.rows < a.windows ? a.s0 + a.rows : a.windows) - 1;
    std::int64_t i_lo = lo_s - mv <= 0 ? 0 : (lo_s - mv + a.step - 1) / a.step;
    std::int64_t i_hi = hi_s - mv < 0 ? -1 : (hi_s - mv) / a.step;
    if (i_hi >= a.n_corr) i_hi = a.n_corr - 1;
    for (std::int64_t i = i_lo + blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i <= i_hi;
         i += std::int64_t{gridDim.x} * blockDim.x) {
      const std::int64_t s = i * a.step + mv;
      const std::int64_t ws = a.channel * a.windows + s;
      const float d = dot(t, s - a.s0);
      if (!isfinite(d)) atomicExch(a.nonfinite, 1);
      float num = d * unscale;
      if (a.wmean) num -= a.wmean[ws] * static_cast<float>(a.tsum[tc]);
      float cc = num * a.inv_wnorm[ws] * inv_t;
      if (a.inv_wnorm[ws] == 0.0f || inv_t == 0.0f) {
        cc = 0.0f;  // flat: 0, never NaN
      } else if (!isfinite(cc)) {
        // Tested before the clamp: fminf/fmaxf would turn inf into +-1 and NaN into -1.
        atomicExch(a.nonfinite, 1);
        cc = 0.0f;
      } else {
        cc = fminf(1.0f, fmaxf(-1.0f, cc));
      }
      if (a.network)
        a.out[t * a.n_corr + i] += w * cc;
      else
        a.out[tc * a.n_corr + i] = cc;
    }
  }
}

}  // namespace halfscope::mfilter::kernels

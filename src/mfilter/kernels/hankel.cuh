// Device code: the explicit observation (Hankel) matrix of study 001's cuBLAS baselines. Row r of
// a chunk is the window starting at s0 + r of one channel: H[r, k] = S[s0 + r + k] (times the
// global scale 1 / max |S| for the FP16 variants), row-major with leading dimension K. Writing it
// is the point of the baseline: it costs K times the data's bytes (the study's finding).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace halfscope::mfilter::kernels {

/// Grid-stride over rows x K elements of one chunk; `absmax` null: no scaling (FP32).
template <class Op>
__global__ void hankel_kernel(const float* __restrict__ x, std::int64_t s0, std::int64_t rows,
                              std::int64_t k, const float* __restrict__ absmax,
                              Op* __restrict__ h) {
  float scale = 1.0f;
  if (absmax) scale = *absmax > 0 ? 1.0f / *absmax : 1.0f;
  const std::int64_t n = rows * k;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / k, j = e - r * k;
    h[e] = static_cast<Op>(x[s0 + r + j] * scale);
  }
}

}  // namespace halfscope::mfilter::kernels

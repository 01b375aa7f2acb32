// Device code of the FFT overlap-save baseline (fft_cuda.cu). Block b of a batch covers window
// starts s = (first + b) * V + j, j < V = N - K + 1: its data segment is S[(first + b) * V + m],
// m < N (zero past the data). With F the R2C transform, IFFT(F(seg) * conj(F(T zero-padded)))
// [j] = N * sum_k T[k] seg[j + k] for j < V (no wrap-around), so every block yields V dot products.
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdint>

namespace halfscope::mfilter::kernels {

/// Zero-padded template rows of channel c: out[t, m] = op[(t*C + c)*K + m] for m < K, else 0.
__global__ void pad_templates_kernel(const float* __restrict__ op, std::int64_t templates,
                                     std::int64_t channels, std::int64_t c, std::int64_t k,
                                     std::int64_t n, float* __restrict__ out) {
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < templates * n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t t = e / n, m = e - t * n;
    out[e] = m < k ? op[(t * channels + c) * k + m] : 0.0f;
  }
}

/// Data segments of `blocks` consecutive blocks from block `first` (zero past the data).
__global__ void segments_kernel(const float* __restrict__ x, std::int64_t samples,
                                std::int64_t first, std::int64_t blocks, std::int64_t v,
                                std::int64_t n, float* __restrict__ seg) {
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < blocks * n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t b = e / n, m = e - b * n;
    const std::int64_t g = (first + b) * v + m;
    seg[e] = g < samples ? x[g] : 0.0f;
  }
}

/// prod[t, b, f] = X[b, f] * conj(TF[t, f]) for `bins` = N/2 + 1 frequencies.
__global__ void spectra_product_kernel(const cufftComplex* __restrict__ x,
                                       const cufftComplex* __restrict__ tf, std::int64_t templates,
                                       std::int64_t blocks, std::int64_t bins,
                                       cufftComplex* __restrict__ prod) {
  const std::int64_t n = templates * blocks * bins;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t f = e % bins, tb = e / bins;
    const std::int64_t b = tb % blocks, t = tb / blocks;
    const cufftComplex a = x[b * bins + f], w = tf[t * bins + f];
    prod[e] = make_cuFloatComplex(a.x * w.x + a.y * w.y, a.y * w.x - a.x * w.y);
  }
}

/// Dot products of a batch after the inverse transform: dot(t, r) with r = b * V + j.
struct OverlapSaveDot {
  const float* y;  // (T, blocks, N)
  std::int64_t blocks, n, v;
  __device__ float operator()(std::int64_t t, std::int64_t r) const {
    const std::int64_t b = r / v;
    return y[(t * blocks + b) * n + (r - b * v)];
  }
};

}  // namespace halfscope::mfilter::kernels

// Device code of the cuDNN convolution method (src/conv/cudnn_cuda.cu): the explicit extension of
// the image for what cuDNN's symmetric zero padding cannot express (circular boundary, SciPy's
// `same` centring of even kernels, windows reaching past the full result), and the count of
// non-finite outputs that turns an FP16 overflow into a NumericalError.
//
// Floors: both kernels are copies (one read, at most one write per element), so they run at copy
// bandwidth; the extension adds one pass over the input to a call that cuDNN's own padding would
// have done for free, which is why dispatch takes it only where padding cannot express the window.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "conv/kernels/storage_types.cuh"

namespace halfscope::conv::kernels::cudnn {

/// ext(y, x) = in(y + oy, x + ox) for 0 <= y < erows, 0 <= x < ecols, with in() the image inside
/// and, outside, 0 (zero boundary) or the periodic extension (circular). Grid-stride, 64-bit.
template <class T>
__global__ void extend_image(const T* __restrict__ in, std::int64_t rows, std::int64_t cols,
                             T* __restrict__ ext, std::int64_t erows, std::int64_t ecols,
                             std::int64_t oy, std::int64_t ox, int circular) {
  const std::int64_t n = erows * ecols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride) {
    std::int64_t y = e / ecols + oy, x = e % ecols + ox;
    T v = T(0.0f);
    if (circular) {
      y %= rows;
      x %= cols;
      y += y < 0 ? rows : 0;
      x += x < 0 ? cols : 0;
      v = in[y * cols + x];
    } else if (y >= 0 && y < rows && x >= 0 && x < cols) {
      v = in[y * cols + x];
    }
    ext[e] = v;
  }
}

/// Adds to *total the number of non-finite values among data[0, n). Grid-stride, one atomic per
/// warp that saw any (storage::commit_nonfinite).
template <class T>
__global__ void count_nonfinite(const T* __restrict__ data, std::int64_t n,
                                unsigned long long* total) {
  unsigned int bad = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride)
    bad += storage::is_finite(data[e]) ? 0u : 1u;
  storage::commit_nonfinite(bad, total);
}

}  // namespace halfscope::conv::kernels::cudnn

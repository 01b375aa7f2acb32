// Device code of the GPU GEMM convolution (host side: src/conv/gemm_cuda.cu): im2col, which writes
// the explicit patch matrix of a chunk of output pixels, and the count of non-finite outputs.
//
// Patch row p (output pixel i, j) holds, at column t = u * kcols + v, the input pixel that kernel
// tap (u, v) multiplies: in(i + row0 - u, j + col0 - v), 0 or wrapped outside the image
// (geometry.hpp). The kernel, row-major, is then exactly the vector the GEMM multiplies by.
#pragma once

#include <cstdint>

#include "conv/kernels/storage_types.cuh"

namespace halfscope::conv::kernels::gemmk {

using namespace storage;

/// One chunk: `pixels` consecutive output pixels (row-major order) starting at output
/// (first_row, first_col), `taps` = krows * kcols columns, rows `ld` elements apart. The host
/// keeps pixels * ld below 2^31 and out_cols below 2^31, so the per-element index math is 32-bit.
struct Im2colArgs {
  std::int64_t rows, cols, kcols, out_cols, row0, col0;
  std::int64_t first_row, first_col;
  unsigned int pixels, taps, ld;
  bool circular;
};

/// Floors: writes pixels * taps * sizeof(T) bytes (the whole point of im2col: taps-fold
/// duplication of the input, which L1/L2 serve, so DRAM traffic is the writes). One thread per
/// patch element, consecutive threads on consecutive taps: coalesced stores. At 3.35 TB/s a full
/// 1 GiB chunk takes ~0.32 ms; the GEMM then reads it back once (another ~0.32 ms): this method
/// is a study rung bound by twice the patch bytes, i.e. ~2 * taps times the direct method's
/// traffic.
template <class T>
__global__ void im2col_kernel(const T* __restrict__ image, T* __restrict__ patches, Im2colArgs a) {
  const std::uint64_t total = static_cast<std::uint64_t>(a.pixels) * a.taps;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const auto kcols = static_cast<unsigned int>(a.kcols);
  const auto out_cols = static_cast<unsigned int>(a.out_cols);
  for (std::uint64_t e = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       e < total; e += stride) {
    const auto e32 = static_cast<unsigned int>(e);  // total < 2^31
    const unsigned int p = e32 / a.taps;
    const unsigned int t = e32 - p * a.taps;
    const unsigned int u = t / kcols;
    const unsigned int v = t - u * kcols;
    const unsigned int rel = static_cast<unsigned int>(a.first_col) + p;  // < 2^32
    const unsigned int di = rel / out_cols;
    const std::int64_t i = a.first_row + di;
    const std::int64_t j = rel - di * out_cols;
    std::int64_t y = i + a.row0 - u;
    std::int64_t x = j + a.col0 - v;
    T value{};
    if (a.circular) {
      y %= a.rows;
      x %= a.cols;
      value = image[(y < 0 ? y + a.rows : y) * a.cols + (x < 0 ? x + a.cols : x)];
    } else if (y >= 0 && y < a.rows && x >= 0 && x < a.cols) {
      value = image[y * a.cols + x];
    }
    patches[static_cast<std::uint64_t>(p) * a.ld + t] = value;
  }
}

/// Adds the number of non-finite values among x[0, n) to *bad. Floors: n * sizeof(T) read.
template <class T>
__global__ void count_nonfinite_kernel(const T* __restrict__ x, std::int64_t n,
                                       unsigned long long* bad) {
  unsigned int count = 0;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    count += is_finite(x[e]) ? 0u : 1u;
  commit_nonfinite(count, bad);
}

}  // namespace halfscope::conv::kernels::gemmk

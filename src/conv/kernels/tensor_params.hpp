// Types and index helpers of the tensor-core convolution shared by the device code
// (tensor_block.hpp, tensor.cuh), the host launcher (tensor_cuda.cu) and the CPU tests: the
// precisions, the A-fragment table's layout (toeplitz_column, table_index), the split's
// power-of-two scaling (split_exponent), the kernel-column plan and the kernel parameters.
#pragma once

#include <bit>
#include <cstdint>

#include "conv/geometry.hpp"
#include "tensor_tuning.hpp"

#if defined(__CUDACC__)
#define HS_TC_HD __host__ __device__ __forceinline__
#define HS_TC_DEV __device__ __forceinline__
#define HS_TC_UNROLL _Pragma("unroll")
#else
#define HS_TC_HD inline
#define HS_TC_DEV inline
#define HS_TC_UNROLL
#endif

namespace halfscope::conv::kernels {

enum class TensorPrecision { Mixed, BF16, Split };

/// One lane's A fragment of an m16n8k16 MMA: 8 FP16/BF16 values in 4 registers.
struct alignas(16) TensorFrag {
  std::uint32_t r[4];
};

/// Everything a block needs; passed by value to the kernel.
struct TensorParams {
  const void* image = nullptr;           // rows x cols, C-contiguous (Half, BFloat16 or float bits)
  void* out = nullptr;                   // out_rows x out_cols, same type
  const TensorFrag* table_hi = nullptr;  // [chunk][u][q][lane]
  const TensorFrag* table_lo = nullptr;  // split only: lo parts scaled by 2^11
  const float* kernel_inv_scale =
      nullptr;  // split only: the kernel's 2^-e (one value per kernel row)
  // Mixed / BF16: outputs that overflowed the storage type although the block's inputs and the
  // kernel (kernel_nonfinite == 0) are finite, counted for a NumericalError; null for split.
  unsigned int* overflow = nullptr;
  const unsigned int* kernel_nonfinite = nullptr;
  std::int64_t rows = 0, cols = 0, out_rows = 0, out_cols = 0, row0 = 0, col0 = 0, tiles_x = 0;
  int krows = 0, kcols = 0, nchunks = 0, chunk_width = 0;
  bool circular = false;
};

HS_TC_HD int tc_min(int a, int b) {
  return a < b ? a : b;
}

/// Kernel column that element j (0..7, register j / 2, half j % 2) of `lane`'s A fragment holds
/// for band chunk q of the kernel-column chunk [v0, v0 + cw), or -1 where the band is zero. The
/// element is A(m, kk) with m = g + 8 (reg & 1), kk = 2 t + (j & 1) + 8 (reg >> 1): the PTX
/// m16n8k16 A layout (g = lane / 4, t = lane % 4).
HS_TC_HD int toeplitz_column(int lane, int j, int q, int nq, int v0, int cw, int kcols) {
  const int g = lane >> 2, t = lane & 3, reg = j >> 1;
  const int m = g + 8 * (reg & 1);
  const int kk = 2 * t + (j & 1) + 8 * (reg >> 1);
  const int v = v0 + (16 * nq - 15) - 1 + m - kk - 16 * q;
  return (v >= v0 && v < tc_min(v0 + cw, kcols)) ? v : -1;
}

/// Position of the fragment (chunk, u, q, lane) in the table.
HS_TC_HD std::int64_t table_index(int chunk, int u, int q, int lane, int krows, int nq) {
  return ((static_cast<std::int64_t>(chunk) * krows + u) * nq + q) * 32 + lane;
}

/// Power-of-two exponent e that brings max|x| (given as the bits of |x|) into [2^14, 2^15), so the
/// hi part of a scaled value cannot overflow FP16 and its lo part stays normal for values down to
/// ~2^-28 of the maximum. Clamped so 2^e and 2^-e are normal floats.
HS_TC_HD int split_exponent(std::uint32_t abs_max_bits) {
  const int e = 141 - static_cast<int>(abs_max_bits >> 23);  // 14 - floor(log2 max)
  return e < -126 ? -126 : (e > 126 ? 126 : e);
}
/// |x| as bits for the scale's maximum; inf and NaN count as 0, so they do not shrink the scale
/// of the finite values around them (they still reach the outputs near them, as inf or NaN).
HS_TC_HD std::uint32_t finite_abs_bits(std::uint32_t bits) {
  const std::uint32_t a = bits & 0x7fffffffu;
  return a < 0x7f800000u ? a : 0u;
}
HS_TC_HD float pow2(int e) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(e + 127) << 23);
}

/// How the kernel columns are cut: `nchunks` chunks of `chunk_width` columns (the last may be
/// narrower), each a band of `nq` MMAs of K = 16 per 16 output columns. Equal chunks share one Q,
/// hence one kernel instantiation; the MMA work is 16 nq nchunks per output and kernel row.
struct TensorPlan {
  int nchunks = 1, chunk_width = 1, nq = kMinBandChunks;
};
inline constexpr TensorPlan plan_tensor_columns(int kcols) {
  const int nchunks = (kcols + kMaxChunkWidth - 1) / kMaxChunkWidth;
  const int cw = (kcols + nchunks - 1) / nchunks;
  const int nq = (cw + 15 + 15) / 16;  // the smallest Q with cw <= 16 Q - 15
  return {nchunks, cw, nq < kMinBandChunks ? kMinBandChunks : nq};
}

/// Kernel parameters of geometry g (the caller fills the image, output and table pointers) and
/// the number of blocks (output tiles) to launch.
inline TensorParams tensor_params(const Geometry& g, bool split, const TensorPlan& plan,
                                  std::int64_t& blocks) {
  TensorParams p;
  p.rows = g.rows;
  p.cols = g.cols;
  p.out_rows = g.out_rows;
  p.out_cols = g.out_cols;
  p.row0 = g.row0;
  p.col0 = g.col0;
  p.krows = static_cast<int>(g.krows);
  p.kcols = static_cast<int>(g.kcols);
  p.nchunks = plan.nchunks;
  p.chunk_width = plan.chunk_width;
  p.circular = g.boundary == Boundary::Circular;
  const std::int64_t block_rows = tensor_block_rows(split);
  p.tiles_x = (g.out_cols + kBlockCols - 1) / kBlockCols;
  blocks = p.tiles_x * ((g.out_rows + block_rows - 1) / block_rows);
  return p;
}

}  // namespace halfscope::conv::kernels

// Recursive panel solve (src/linalg/panel_trsm_cuda.hpp).
//
// cuBLAS's strsm of a whole tall panel (97k x 1024 at the E-ELT size) spent 5.3 ms in its own
// triangular kernels and 2.8 ms in SIMT GEMMs per early step on an H100 (profile in
// docs/cholesky.md). Halving the columns keeps the triangular work on narrow blocks (rows x 128,
// an eighth of the triangle's flops) and gives the rest to plain FP32 GEMMs. The leaves were
// strsm calls at 4-16 TFLOP/s on an H200 (158 ms of the E-ELT factorization, while the trailing
// update's persistent GEMMs leave no room to overlap them); each is now a GEMM by the leaf's
// inverse (diag_inverse_cuda.cu). The GEMMs run batched over the panel's tiles where they lie,
// so the panel is no longer gathered into one tall matrix and scattered back (32 ms of copies).
// A 3xTF32 version of the GEMMs between halves (tried) made the factorization slower; under a
// policy below FP32 they run as split16 FP16 GEMMs (one K = 3 h1 product per run of blocks,
// PanelSplit), the leaves stay strict FP32.
#include "linalg/panel_trsm_cuda.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/diag_inverse_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr std::int64_t kLeaf = kInverseLeaf;

struct Solver {
  cublasHandle_t blas;
  cudaStream_t stream;
  std::int64_t ldl;
  PanelBlocks p;
  const float* inverses;  // -L_bb^-1 of leaf b at b kLeaf^2, ld kLeaf
  float* copy;            // a leaf's T: the blocks' columns packed, block t at t rows w
  const PanelSplit* split;

  // The full-height blocks, then the short last one: (first block, count, rows, ld) runs.
  template <class F>
  void runs(F&& f) const {
    const bool short_last = p.last_rows != p.rows;
    const std::int64_t full = p.count - (short_last ? 1 : 0);
    if (full > 0) f(std::int64_t{0}, full, p.rows, p.ld > 0 ? p.ld : p.rows);
    if (short_last) f(full, std::int64_t{1}, p.last_rows, p.ld > 0 ? p.ld : p.last_rows);
  }

  // X = T L^-T = -T (-L^-1)^T for columns [c0, c0 + w), T copied aside (a GEMM cannot write its
  // own operand).
  void leaf(std::int64_t c0, std::int64_t w) const {
    const float* inv = inverses + c0 / kLeaf * kLeaf * kLeaf;
    runs([&](std::int64_t t0, std::int64_t count, std::int64_t rows, std::int64_t ld) {
      float* x = p.x + t0 * p.stride + c0 * ld;
      float* t = copy + t0 * p.rows * w;
      if (ld == rows) {  // each block's columns contiguous: one copy for the run
        copy_2d(t, rows * w, x, p.stride, rows * w, count, stream);
      } else {
        for (std::int64_t b = 0; b < count; ++b)
          copy_2d(t + b * rows * w, rows, x + b * p.stride, ld, rows, w, stream);
      }
      const float minus_one = -1.0f, zero = 0.0f;
      const PedanticMath strict(blas);
      HS_CUBLAS_CHECK(cublasSgemmStridedBatched(
          blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(rows), static_cast<int>(w),
          static_cast<int>(w), &minus_one, t, static_cast<int>(rows), rows * w, inv,
          static_cast<int>(kLeaf), 0, &zero, x, static_cast<int>(ld), p.stride,
          static_cast<int>(count)));
    });
  }

  // Columns [c0, c0 + w) of X, with l at its row and column c0.
  void solve(const float* l, std::int64_t c0, std::int64_t w) const {
    if (w <= kLeaf) return leaf(c0, w);
    const std::int64_t h1 = std::max(kLeaf, w / 2 / kLeaf * kLeaf), h2 = w - h1;
    solve(l, c0, h1);
    // X2 -= X1 L21^T with L21 = rows h1 .. w - 1, columns 0 .. h1 - 1 of l.
    const bool split16 = split != nullptr && split->host_exponents[0] != kNoSplitExponent;
    if (split16) split_parts(l + h1, ldl, h2, h1, 1, 0, 0, l21_parts());
    runs([&](std::int64_t t0, std::int64_t count, std::int64_t rows, std::int64_t ld) {
      // Runs of one exponent (split16; the strict FP32 blocks, all of them without split16, batch
      // the same way).
      const auto exponent = [&](std::int64_t t) {
        return split16 && rows == p.rows ? split->host_exponents[1 + t] : kNoSplitExponent;
      };
      for (std::int64_t t = t0; t < t0 + count;) {
        const int e = exponent(t);
        std::int64_t end = t + 1;
        while (end < t0 + count && exponent(end) == e) ++end;
        GemmBatch g;
        g.op_a = CUBLAS_OP_N, g.op_b = CUBLAS_OP_T, g.m = rows, g.n = h2, g.k = h1;
        g.a = p.x + t * p.stride + c0 * ld, g.lda = ld, g.stride_a = p.stride;
        g.b = l + h1, g.ldb = ldl, g.stride_b = 0;
        g.c = p.x + t * p.stride + (c0 + h1) * ld, g.ldc = ld, g.stride_c = p.stride;
        g.batch = end - t;
        if (e == kNoSplitExponent) {
          gemm_batched(blas, GemmVariant::SP, g);
        } else {  // [lo hi hi]_X1 [hi hi lo]_L21^T
          auto* x1 = static_cast<__half*>(split->parts);
          split_parts(p.x + t * p.stride + c0 * ld, ld, rows, h1, end - t, p.stride, 1 + t, x1);
          g.k = 3 * h1, g.a = x1, g.lda = rows, g.stride_a = 4 * rows * h1;
          g.b = l21_parts() + h2 * h1, g.ldb = h2;
          g.scale = std::ldexp(1.0f, e + split->host_exponents[0]);
          gemm_batched(blas, GemmVariant::HP1, g);
        }
        t = end;
      }
    });
    solve(l + h1 + h1 * ldl, c0 + h1, h2);
  }

  // L21's parts, after the largest X1's (rows x h1 per block, four parts each).
  [[nodiscard]] __half* l21_parts() const {
    return static_cast<__half*>(split->parts) + l21_offset;
  }

  // The fp16_split parts of `count` blocks (rows x cols at src + t * stride, ld) into `dst`
  // (block t at 4 rows cols, [lo, hi, hi, lo] rows cols apart), block t at exponents[e0 + t].
  void split_parts(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                   std::int64_t count, std::int64_t stride, std::int64_t e0, __half* dst) const {
    BlockSet set;
    set.base = src, set.count = count, set.stride = stride, set.rows = rows, set.last_rows = rows;
    set.cols = cols, set.src_ld = ld, set.dst_stride = 4 * rows * cols;
    set.exponents = split->exponents + e0, set.part_stride = rows * cols;
    set.tag_base = kNoFailure;  // never flags (PanelSplit)
    convert_blocks(set, Rounding::fp16_split, dst, split->flag, stream);
  }
  std::int64_t l21_offset = 0;  // FP16 values before L21's parts in split->parts
};

}  // namespace

std::int64_t panel_trsm_scratch(std::int64_t rows, std::int64_t w) noexcept {
  const std::int64_t leaves = (w + kLeaf - 1) / kLeaf;
  return leaves * kLeaf * kLeaf + std::max<std::int64_t>(rows, 0) * std::min(w, kLeaf);
}

namespace {
// The widest X1 of a w-column solve (its first halving's h1), which also bounds L21's sizes.
std::int64_t widest_half(std::int64_t w) {
  return w <= kLeaf ? 0 : std::max(kLeaf, w / 2 / kLeaf * kLeaf);
}
}  // namespace

std::int64_t panel_trsm_split_scratch(std::int64_t rows, std::int64_t w) noexcept {
  const std::int64_t h1 = widest_half(w);
  return 4 * (std::max<std::int64_t>(rows, 0) * h1 + h1 * (w - h1));
}

void panel_trsm(cublasHandle_t blas, const float* l, std::int64_t ldl, const PanelBlocks& p,
                std::int64_t w, float* scratch, const PanelSplit* split) {
  if (p.count <= 0 || p.rows <= 0 || w <= 0) return;
  cudaStream_t stream = nullptr;
  HS_CUBLAS_CHECK(cublasGetStream(blas, &stream));
  TriangularBlocks tile;
  tile.base = l, tile.ld = ldl, tile.w = w;
  leaf_inverses(tile, scratch, kLeaf, kLeaf * kLeaf, 0, stream);
  const std::int64_t leaves = (w + kLeaf - 1) / kLeaf;
  Solver s{blas, stream, ldl, p, scratch, scratch + leaves * kLeaf * kLeaf, split};
  const std::int64_t all_rows = (p.count - 1) * p.rows + p.last_rows;
  s.l21_offset = 4 * all_rows * widest_half(w);
  s.solve(l, 0, w);
}

}  // namespace halfscope::linalg::detail

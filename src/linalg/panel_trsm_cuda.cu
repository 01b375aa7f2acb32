// Recursive panel solve (src/linalg/panel_trsm_cuda.hpp).
//
// cuBLAS's strsm of a whole tall panel (97k x 1024 at the E-ELT size) spent 5.3 ms in its own
// triangular kernels and 2.8 ms in SIMT GEMMs per early step on an H100 (profile in
// docs/cholesky.md). Halving the columns keeps the strsm kernels on narrow blocks (rows x 128,
// an eighth of the triangle's flops) and gives the rest to plain FP32 GEMMs. Those stay on the
// FP32 pipes on purpose: they run beside the trailing update's FP16 tensor-core GEMMs, where a
// 3xTF32 version (tried) competed with them for the tensor cores and made the factorization
// slower.
#include "linalg/panel_trsm_cuda.hpp"

#include <algorithm>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr std::int64_t kLeaf = 128;

void solve(cublasHandle_t blas, const float* l, std::int64_t ldl, float* x, std::int64_t ldx,
           std::int64_t rows, std::int64_t w) {
  if (w <= kLeaf) {
    const float one = 1.0f;
    const PedanticMath strict(blas);
    HS_CUBLAS_CHECK(cublasStrsm(blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                CUBLAS_DIAG_NON_UNIT, static_cast<int>(rows), static_cast<int>(w),
                                &one, l, static_cast<int>(ldl), x, static_cast<int>(ldx)));
    return;
  }
  const std::int64_t h1 = std::max<std::int64_t>(kLeaf, w / 2 / kLeaf * kLeaf), h2 = w - h1;
  solve(blas, l, ldl, x, ldx, rows, h1);
  // X2 -= X1 L21^T with L21 = rows h1 .. w - 1, columns 0 .. h1 - 1 of l.
  GemmBatch g;
  g.op_a = CUBLAS_OP_N, g.op_b = CUBLAS_OP_T, g.m = rows, g.n = h2, g.k = h1;
  g.a = x, g.lda = ldx, g.b = l + h1, g.ldb = ldl, g.c = x + h1 * ldx, g.ldc = ldx;
  gemm_batched(blas, GemmVariant::SP, g);
  solve(blas, l + h1 + h1 * ldl, ldl, x + h1 * ldx, ldx, rows, h2);
}

}  // namespace

void panel_trsm(cublasHandle_t blas, const float* l, std::int64_t ldl, float* x, std::int64_t ldx,
                std::int64_t rows, std::int64_t w) {
  if (rows > 0 && w > 0) solve(blas, l, ldl, x, ldx, rows, w);
}

}  // namespace halfscope::linalg::detail

// The off-diagonal GEMM update of the tile Cholesky and of its triangular solves, C -= op(A) op(B)
// on FP32 tiles, computed the way each GemmVariant computes it on the GPU, emulated exactly on the
// CPU (internal header).
#pragma once

#include <cstdint>

#include "halfscope/linalg/policy.hpp"

namespace halfscope::linalg::detail {

/// Where an update lands, for error messages: "GEMM <V> <subject> (ti, tj): ...". The Cholesky
/// names the tile it updates; the triangular solves name the tile of L they read. `recoverable`
/// adds the hint "or --recover" (only the factorization can promote and retry).
struct TileLabel {
  std::int64_t ti = 0;
  std::int64_t tj = 0;
  const char* subject = "updating tile";
  bool recoverable = true;
};

/// Whether a GEMM operand is used as stored or transposed.
enum class Op : std::uint8_t { N, T };

/// Rounds a float to TF32 (10-bit stored mantissa), round to nearest even, kept in a float.
float round_to_tf32(float x) noexcept;

/// C (m x n, column-major, leading dimension ldc) -= A (m x k, lda) * B^T (B is n x k, ldb), all
/// FP32 in memory, computed as `variant` computes it:
///   DP    FP64 products and sums, the result rounded once to FP32;
///   SP    FP32 (cblas_sgemm where BLAS is present);
///   TF32  A, B rounded to TF32, FP32 products and sums;
///   HP1   A, B rounded to FP16, FP32 products and sums, C stays FP32;
///   HP2   A, B and C rounded to FP16, FP32 products and sums, the result rounded to FP16;
///   HP3   A, B, C in FP16 and every product and every sum rounded to FP16.
///   BF16  A, B rounded to bfloat16, FP32 products and sums.
/// Values that the lower formats hold exactly are held in floats, so the FP32-accumulating
/// variants reuse the FP32 GEMM on rounded copies: exact emulation up to the summation order,
/// which the hardware does not fix either. Throws NumericalError naming `where` and the operand
/// when an FP16 (or TF32) rounding or an FP16 sum overflows; never leaves an inf in C.
void gemm_nt_update(GemmVariant variant, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc, TileLabel where);

/// The same update with either operand transposed or not: C (m x n) -= op_a(A) op_b(B), op(A)
/// m x k (A stored m x k for Op::N, k x m for Op::T, column-major, leading dimension lda), op(B)
/// k x n (B stored k x n or n x k). The triangular solves use (N, N) in the forward substitution
/// L Z = B and (T, N) in the backward one L^T X = Z; gemm_nt_update is (N, T).
void gemm_update(GemmVariant variant, Op op_a, Op op_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float* c, std::int64_t ldc, TileLabel where);

}  // namespace halfscope::linalg::detail

// CPU task-graph factorization behind cholesky_tiles (internal header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// "(i, j)", the tile coordinates of every factorization and solve message.
std::string tile_text(std::int64_t ti, std::int64_t tj);

/// The error of a non-positive pivot: LAPACK / cuSOLVER `info` > 0 in diagonal tile (k, k) of
/// tile size nb, naming the tile, the leading minor and the global pivot index under `policy`
/// (every factorization path, CPU, GPU and MPI ranks, reports it in these words).
NotPositiveDefinite pivot_failure(const std::string& policy, std::int64_t k, std::int64_t nb,
                                  std::int64_t info);

/// What failed in a GEMM update (for --recover's promotion): an FP16 operand tile of L, a C
/// entry rounded to FP16 (HP2 / HP3), or anything else (a result, a pivot).
enum class FailedPart : std::uint8_t { other, operand, c_entry };

/// The tile whose task failed: (k, k) for a non-positive pivot, (i, j) for an overflow in a GEMM
/// updating (i, j); for an operand overflow also the operand tile L(oi, ok).
struct FailedTile {
  std::int64_t i = -1;
  std::int64_t j = -1;
  FailedPart part = FailedPart::other;
  std::int64_t oi = -1;
  std::int64_t ok = -1;
};

/// The FP32 tile kernels of the factorization (LAPACKE / CBLAS where present, loops otherwise),
/// shared with the MPI Cholesky so that both compute the same bits. Column-major tiles.
/// Lower Cholesky of an n x n tile; LAPACK's info (0, or the order of the first leading minor
/// that is not positive definite).
std::int64_t potrf_lower(std::int64_t n, float* a, std::int64_t lda);
/// B (m x n) := B L^-T with L the n x n lower factor of a diagonal tile.
void trsm_right_lower_trans(std::int64_t m, std::int64_t n, const float* l, std::int64_t ldl,
                            float* b, std::int64_t ldb);
/// Lower triangle of C (n x n) -= A A^T, A n x k.
void syrk_lower(std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, float* c,
                std::int64_t ldc);
/// Whether a contiguous rows x cols tile holds an entry FP16 cannot hold (rounds to +-Inf).
bool exceeds_half(const float* t, std::int64_t rows, std::int64_t cols);

/// The retry rule of CholeskyOptions::recover (cholesky.cpp): promotes in `variants` (indexed
/// i * NT + j) the tiles the failure `f` says cannot work at their precision and describes the
/// change in `change`; false when nothing could be promoted. Shared with the MPI Cholesky.
bool promote_failure(std::vector<GemmVariant>& variants, std::int64_t nt, const FailedTile& f,
                     std::string& change);

/// Factors the lower float32 host tile matrix in place, the GEMMs updating tile (i, j) in
/// variants[i * NT + j]. Throws NotPositiveDefinite (naming the tile, the global pivot and
/// `policy_name`) or the GEMM's NumericalError, after storing the failing tile in `*failed`;
/// after a throw `a` holds partial results.
void cholesky_cpu(TileMatrix& a, const std::vector<GemmVariant>& variants,
                  const std::string& policy_name, FailedTile* failed);

}  // namespace halfscope::linalg::detail

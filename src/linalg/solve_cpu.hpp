// CPU triangular solves behind solve_right for host tile factors, and the host-side helpers of the
// solves and the refinement (internal header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// X A = B in place, A = L L^T: `l` lower float32 host tiles holding L (the upper half of its
/// diagonal tiles is ignored), `b` the r x n row-major right-hand sides, i.e. the column-major
/// n x r matrix B^T (ld n): the forward substitution L Z = B^T, then the backward one L^T X^T = Z.
/// Diagonal tiles by FP32 TRSM; the update of block i by tile (i, k) of L (i > k) in
/// variants[i * NT + k], emulated exactly (gemm_variants.hpp). OpenMP threads take disjoint
/// blocks of right-hand sides (columns of B^T), each running both substitutions: no
/// synchronisation between them. Throws the GEMM's NumericalError naming the tile of L.
void solve_right_cpu(const TileMatrix& l, float* b, std::int64_t r,
                     const std::vector<GemmVariant>& variants);

/// B (m x cols, column-major, ldb) := op(L)^-1 B, L the m x m lower triangle of a diagonal tile
/// (FP32, ld ldl): cblas_strsm, or a loop without BLAS. Shared by the MPI solve (src/mpi/solve.cpp)
/// so that its diagonal solves match these bit for bit.
void trsm_left_lower(bool transpose, std::int64_t m, std::int64_t cols, const float* l,
                     std::int64_t ldl, float* b, std::int64_t ldb);

/// Frobenius norms of the factor's tiles as the solve policy sees them, indexed i * NT + j: the
/// whole tile for i > j, the lower triangle (with the diagonal) for i == j; the last entry
/// (index NT * NT) is ||L||_F. Host tiles.
std::vector<double> factor_norms_cpu(const TileMatrix& l);

/// The index of the first non-finite entry of `count` floats, or -1.
std::int64_t first_non_finite(const float* x, std::int64_t count);

/// The policy's variants for the off-diagonal tiles of L (i > j) from factor norms laid out as
/// factor_norms_cpu returns them; SP elsewhere.
std::vector<GemmVariant> solve_variants(std::int64_t nt, const std::vector<double>& norms,
                                        const Policy& policy);

}  // namespace halfscope::linalg::detail

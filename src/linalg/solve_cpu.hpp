// CPU triangular solves behind solve_right for host tile factors, and the host-side helpers of the
// solves and the refinement (internal header).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
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

/// Width of the OpenMP slices of right-hand sides for r of them: at least 16 (narrower slices
/// spend more on rounding copies of L's tiles, once per GEMM and slice, than on the products),
/// else r over the threads. A right-hand side's result does not depend on its slice.
std::int64_t rhs_slice_width(std::int64_t r);

/// Runs step(b + c0 * n, cols) over the slices [c0, c0 + cols) of `width` right-hand sides of the
/// r x n rows `b`, OpenMP over slices; the first exception is kept in `error` and the slices not
/// yet started are then skipped (nothing leaves the parallel region).
template <class Step>
void for_rhs_slices(float* b, std::int64_t r, std::int64_t n, std::int64_t width,
                    std::exception_ptr& error, const Step& step) {
  const std::int64_t slices = (r + width - 1) / width;
  std::mutex mutex;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) if (slices > 1)
  for (std::int64_t s = 0; s < slices; ++s) {
    if (failed.load()) continue;
    try {
      const std::int64_t c0 = s * width, cols = std::min(width, r - c0);
      step(b + c0 * n, cols);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
      failed.store(true);
    }
  }
}

/// Frobenius norms of the factor's tiles as the solve policy sees them, indexed i * NT + j: the
/// whole tile for i > j, the lower triangle (with the diagonal) for i == j; the last entry
/// (index NT * NT) is ||L||_F. Host tiles.
std::vector<double> factor_norms_cpu(const TileMatrix& l);

/// ||L(i, j)||_F of one factor tile `t` (ld its height) as factor_norms_cpu takes it: the lower
/// triangle with the diagonal for i == j.
double factor_tile_norm(const TileLayout& layout, std::int64_t i, std::int64_t j, const float* t);

/// norms.back() = ||L||_F from the tile norms at i * NT + j (j <= i), summed in one fixed order.
void set_factor_norm(std::vector<double>& norms, std::int64_t nt);

/// The index of the first non-finite entry of `count` floats, or -1.
std::int64_t first_non_finite(const float* x, std::int64_t count);

/// The policy's variants for the off-diagonal tiles of L (i > j) from factor norms laid out as
/// factor_norms_cpu returns them; SP elsewhere.
std::vector<GemmVariant> solve_variants(std::int64_t nt, const std::vector<double>& norms,
                                        const Policy& policy);

}  // namespace halfscope::linalg::detail

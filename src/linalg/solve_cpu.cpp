// CPU triangular solves with a tile Cholesky factor (src/linalg/solve_cpu.hpp), study 002
// Algorithm 2 and its forward counterpart.
//
// The r x n row-major right-hand sides are the column-major n x r matrix B^T, so the block of
// rows [k nb, k nb + h_k) of every right-hand side is the operand that meets tile row k of L: a
// BLAS operand with leading dimension n. Right-looking over tile columns: once block k is solved
// by the diagonal tile, it updates every later block (forward) or every earlier one (backward).
// Each OpenMP thread owns a slice of right-hand sides and runs both substitutions on it alone,
// so threads never wait for one another; r = 1 runs on one thread (a memory-bound GEMV chain).
#include "linalg/solve_cpu.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/gemm_variants.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif

namespace halfscope::linalg::detail {

void trsm_left_lower(bool transpose, std::int64_t m, std::int64_t cols, const float* l,
                     std::int64_t ldl, float* b, std::int64_t ldb) {
#if HALFSCOPE_HAS_BLAS
  cblas_strsm(CblasColMajor, CblasLeft, CblasLower, transpose ? CblasTrans : CblasNoTrans,
              CblasNonUnit, static_cast<int>(m), static_cast<int>(cols), 1.0f, l,
              static_cast<int>(ldl), b, static_cast<int>(ldb));
#else
  for (std::int64_t c = 0; c < cols; ++c) {
    float* x = b + c * ldb;
    if (!transpose) {
      for (std::int64_t i = 0; i < m; ++i) {
        float s = x[i];
        for (std::int64_t p = 0; p < i; ++p) s -= l[i + p * ldl] * x[p];
        x[i] = s / l[i + i * ldl];
      }
    } else {
      for (std::int64_t i = m - 1; i >= 0; --i) {
        float s = x[i];
        for (std::int64_t p = i + 1; p < m; ++p) s -= l[p + i * ldl] * x[p];
        x[i] = s / l[i + i * ldl];
      }
    }
  }
#endif
}

namespace {

// Both substitutions on the right-hand sides [c0, c0 + cols) (columns of B^T).
void substitute(const TileMatrix& l, float* b, std::int64_t cols,
                const std::vector<GemmVariant>& variants) {
  const TileLayout& layout = l.layout;
  const std::int64_t nt = layout.tile_rows(), n = layout.rows(), nb = layout.tile_size();
  const float* base = l.storage.data_as<float>();
  auto tile = [&](std::int64_t i, std::int64_t j) { return base + layout.tile_offset(i, j); };
  auto h = [&](std::int64_t i) { return layout.tile_height(i); };
  auto block = [&](std::int64_t i) { return b + i * nb; };
  auto variant = [&](std::int64_t i, std::int64_t j) {
    return variants[static_cast<std::size_t>(i * nt + j)];
  };
  // Forward: L Z = B^T. Block i -= L_ik Z_k for i > k.
  for (std::int64_t k = 0; k < nt; ++k) {
    trsm_left_lower(false, h(k), cols, tile(k, k), h(k), block(k), n);
    for (std::int64_t i = k + 1; i < nt; ++i)
      gemm_update(variant(i, k), Op::N, Op::N, h(i), cols, h(k), tile(i, k), h(i), block(k), n,
                  block(i), n, {i, k, "of the forward substitution with tile of L", false});
  }
  // Backward: L^T X^T = Z. Block i -= (L_ki)^T X_k for i < k.
  for (std::int64_t k = nt - 1; k >= 0; --k) {
    trsm_left_lower(true, h(k), cols, tile(k, k), h(k), block(k), n);
    for (std::int64_t i = 0; i < k; ++i)
      gemm_update(variant(k, i), Op::T, Op::N, h(i), cols, h(k), tile(k, i), h(k), block(k), n,
                  block(i), n, {k, i, "of the backward substitution with tile of L", false});
  }
}

}  // namespace

std::int64_t rhs_slice_width(std::int64_t r) {
  const std::int64_t threads = std::max(1, omp_get_max_threads());
  return std::max<std::int64_t>(16, (r + threads - 1) / threads);
}

void solve_right_cpu(const TileMatrix& l, float* b, std::int64_t r,
                     const std::vector<GemmVariant>& variants) {
  const std::int64_t n = l.layout.rows();
  std::exception_ptr error;
  for_rhs_slices(b, r, n, rhs_slice_width(r), error,
                 [&](float* x, std::int64_t cols) { substitute(l, x, cols, variants); });
  if (error) std::rethrow_exception(error);
}

double factor_tile_norm(const TileLayout& layout, std::int64_t i, std::int64_t j, const float* t) {
  const std::int64_t rows = layout.tile_height(i), cols = layout.tile_width(j);
  double sum = 0.0;
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t x = (i == j ? c : 0); x < rows; ++x)
      sum += static_cast<double>(t[x + c * rows]) * t[x + c * rows];
  return std::sqrt(sum);
}

void set_factor_norm(std::vector<double>& norms, std::int64_t nt) {
  double total = 0.0;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i) {
      const double v = norms[static_cast<std::size_t>(i * nt + j)];
      total += v * v;
    }
  norms.back() = std::sqrt(total);
}

std::vector<double> factor_norms_cpu(const TileMatrix& l) {
  const TileLayout& layout = l.layout;
  const std::int64_t nt = layout.tile_rows();
  std::vector<double> norms(static_cast<std::size_t>(nt * nt + 1), 0.0);
  const float* base = l.storage.data_as<float>();
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i)
      norms[static_cast<std::size_t>(i * nt + j)] =
          factor_tile_norm(layout, i, j, base + layout.tile_offset(i, j));
  set_factor_norm(norms, nt);
  return norms;
}

std::int64_t first_non_finite(const float* x, std::int64_t count) {
  std::int64_t first = count;
#pragma omp parallel for reduction(min : first) schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(x[i])) first = std::min(first, i);
  return first == count ? -1 : first;
}

std::vector<GemmVariant> solve_variants(std::int64_t nt, const std::vector<double>& norms,
                                        const Policy& policy) {
  std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), GemmVariant::SP);
  const double total = norms.at(static_cast<std::size_t>(nt * nt));
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      variants[static_cast<std::size_t>(i * nt + j)] =
          policy(TileQuery{i, j, norms[static_cast<std::size_t>(i * nt + j)], total, nt});
  return variants;
}

}  // namespace halfscope::linalg::detail

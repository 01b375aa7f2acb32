// Mixed-precision solve with iterative refinement (include/halfscope/linalg/solve.hpp,
// solve_right_refined): factor a copy of A in low precision, solve, then correct with the residual
// of the original A, the classic scheme of Higham ("Accuracy and Stability", ch. 12) that Carson &
// Higham and Haidar et al. use to reach working accuracy from an FP16 factor. It converges while
// kappa(A) u_f < 1 (u_f the factor's effective unit roundoff), with a rate of about kappa u_f per
// step; past that a correction can raise the residual, and the loop stops and undoes it.
//
// Residual R = B - X A: on the CPU in FP64 (products of FP32 values are exact in FP64, so the only
// error is the FP64 summation and the final rounding to FP32); on the GPU by cuBLAS SGEMMs in FP32
// (refine_cuda.cu). Either way the residual is accurate to about FP32's unit roundoff times
// |B| + |X| |A|, the limit of an FP32 working precision.
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/solve.hpp"
#include "linalg/solve_internal.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif
#if HALFSCOPE_WITH_CUDA
#include "linalg/solve_support_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace {

// R (r x n rows = column-major n x r) = B - X A in FP64 on the host. Output block j of rows is
// B_j - sum_i A(j, i) X_i: tile (j, i) for j >= i, the transpose of stored tile (i, j) otherwise,
// so every off-diagonal tile is read twice and the blocks j are independent (one thread each).
void residual_cpu(const TileMatrix& a, const float* x, const float* b, float* r, std::int64_t rhs) {
  const TileLayout& layout = a.layout;
  const std::int64_t n = layout.rows(), nt = layout.tile_rows(), nb = layout.tile_size();
  const auto total = static_cast<std::size_t>(n * rhs);
  std::vector<double> xd(total), rd(total);
  for (std::size_t e = 0; e < total; ++e) {
    xd[e] = x[e];
    rd[e] = b[e];
  }
  const float* base = a.storage.data_as<float>();
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t j = 0; j < nt; ++j) {
    std::vector<double> tile(static_cast<std::size_t>(nb * nb));
    const std::int64_t hj = layout.tile_height(j);
    for (std::int64_t i = 0; i < nt; ++i) {
      const std::int64_t hi = layout.tile_height(i);
      const bool stored = j >= i;  // A(j, i) as stored (hj x hi), else stored (i, j) transposed
      const float* t = base + (stored ? layout.tile_offset(j, i) : layout.tile_offset(i, j));
      const std::int64_t ld = stored ? hj : hi;
      for (std::int64_t e = 0; e < hi * hj; ++e) tile[static_cast<std::size_t>(e)] = t[e];
#if HALFSCOPE_HAS_BLAS
      cblas_dgemm(CblasColMajor, stored ? CblasNoTrans : CblasTrans, CblasNoTrans,
                  static_cast<int>(hj), static_cast<int>(rhs), static_cast<int>(hi), -1.0,
                  tile.data(), static_cast<int>(ld), xd.data() + i * nb, static_cast<int>(n), 1.0,
                  rd.data() + j * nb, static_cast<int>(n));
#else
      for (std::int64_t c = 0; c < rhs; ++c)
        for (std::int64_t q = 0; q < hi; ++q) {
          const double xv = xd[static_cast<std::size_t>(c * n + i * nb + q)];
          for (std::int64_t p = 0; p < hj; ++p) {
            const double av = stored ? tile[static_cast<std::size_t>(p + q * ld)]
                                     : tile[static_cast<std::size_t>(q + p * ld)];
            rd[static_cast<std::size_t>(c * n + j * nb + p)] -= av * xv;
          }
        }
#endif
    }
  }
  for (std::size_t e = 0; e < total; ++e) r[e] = static_cast<float>(rd[e]);
}

void residual(const TileMatrix& a, const Array& x, const Array& b, Array& r) {
  const std::int64_t rhs = x.dim(0);
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) {
    detail::residual_cuda(a, x.data_as<float>(), b.data_as<float>(), r.data_as<float>(), rhs);
    return;
  }
#endif
  if (a.layout.rows() > INT_MAX || rhs > INT_MAX)
    throw Unsupported("solve_right_refined: sizes beyond the CPU BLAS's 32-bit range");
  residual_cpu(a, x.data_as<float>(), b.data_as<float>(), r.data_as<float>(), rhs);
}

double norm(const Array& x) {
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) return detail::norm_cuda(x.data_as<float>(), x.size());
#endif
  const float* p = x.data_as<float>();
  double sum = 0.0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t e = 0; e < x.size(); ++e) sum += static_cast<double>(p[e]) * p[e];
  return std::sqrt(sum);
}

void add(Array& x, const Array& d) {
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) {
    detail::add_cuda(x.data_as<float>(), d.data_as<float>(), x.size());
    return;
  }
#endif
  float* p = x.data_as<float>();
  const float* q = d.data_as<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < x.size(); ++e) p[e] += q[e];
}

std::string scientific(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3e", v);
  return text;
}

// Device copies of Arrays run on the legacy default stream and may still be in flight when
// cudaMemcpy returns; the factorization and the solves run on their own streams, so wait first.
void wait_for_copies([[maybe_unused]] const Array& x) {
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) detail::wait_for_legacy_stream();
#endif
}

void copy_into(Array& dst, const Array& src) {
  copy_bytes(dst.data(), dst.memory(), src.data(), src.memory(), src.nbytes());
}

}  // namespace

RefinementReport solve_right_refined(const TileMatrix& a, Array& b,
                                     const RefinementOptions& options) {
  constexpr const char* kWhere = "solve_right_refined";
  detail::check_factor(a, kWhere, "a");
  detail::check_rhs(a, b, kWhere, "b", false);
  if (options.max_iterations < 0)
    throw InvalidInput(std::string(kWhere) + ": max_iterations: expected >= 0, found " +
                       std::to_string(options.max_iterations));
  if (!(options.tolerance >= 0.0) || !std::isfinite(options.tolerance))
    throw InvalidInput(std::string(kWhere) + ": tolerance: expected a finite value >= 0 " +
                       "(0 for the default), found " + std::to_string(options.tolerance));
  if (detail::first_non_finite(b) >= 0)
    throw InvalidInput(std::string(kWhere) + ": b: every entry must be finite");
  const std::int64_t n = a.layout.rows();
  const double tolerance = options.tolerance > 0.0
                               ? options.tolerance
                               : 8.0 * std::ldexp(1.0, -24) * std::sqrt(static_cast<double>(n));

  RefinementReport report;
  report.tolerance = tolerance;
  TileMatrix factor;
  factor.layout = a.layout;
  factor.storage = a.storage.clone();
  wait_for_copies(factor.storage);
  report.factor = cholesky_tiles(factor, options.factor);
  const std::vector<GemmVariant> variants = detail::factor_variants(factor, options.solve.policy);

  const Array rhs = b.clone();  // B; b becomes X
  wait_for_copies(rhs);         // before the solve overwrites b
  const double b_norm = norm(rhs);
  Array r(DType::f32, rhs.shape(), rhs.memory());
  Array previous(DType::f32, rhs.shape(), rhs.memory());
  detail::solve_rows(factor, b, variants);
  if (b_norm == 0.0) {  // X = 0 exactly: nothing to refine
    report.residuals.push_back(0.0);
    report.converged = true;
    report.stop_reason = "converged (B = 0)";
    return report;
  }
  double last = 0.0;
  for (;;) {
    residual(a, b, rhs, r);
    const double rel = norm(r) / b_norm;
    if (!std::isfinite(rel) && report.iterations == 0)
      throw NumericalError(std::string(kWhere) + ": the first solve with the " +
                           options.factor.policy.name() + " factor gave a non-finite residual");
    const bool worse = !std::isfinite(rel) || (report.iterations > 0 && rel >= last);
    if (worse) {
      // The last correction did not help (kappa u_f >~ 1): undo it and report.
      copy_into(b, previous);
      --report.iterations;
      report.stop_reason = "stagnated: correction " + std::to_string(report.iterations + 1) +
                           " raised the relative residual from " + scientific(last) + " to " +
                           scientific(rel) + " and was undone (cond(A) * u of the factor " +
                           "is too large for this policy)";
      break;
    }
    report.residuals.push_back(rel);
    last = rel;
    if (rel <= tolerance) {
      report.converged = true;
      report.stop_reason = "converged";
      break;
    }
    if (report.iterations == options.max_iterations) {
      report.stop_reason = "not converged after " + std::to_string(report.iterations) +
                           " corrections (max_iterations)";
      break;
    }
    copy_into(previous, b);
    detail::solve_rows(factor, r, variants);  // r := D with D A = R
    add(b, r);
    ++report.iterations;
  }
  if (detail::first_non_finite(b) >= 0)
    throw NumericalError(std::string(kWhere) +
                         ": the solution has a non-finite entry although "
                         "every residual was finite");
  return report;
}

}  // namespace halfscope::linalg

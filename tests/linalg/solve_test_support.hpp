// Test matrices, LAPACK FP64 references and error bounds shared by the solve tests
// (test_solve*.cpp, gpu_solve_refine.cpp).
//
// Matrix: a covariance with a nugget, A_ij = rho^|i-j| + delta [i == j] (rho = e^-1/32, the KMS
// correlation of test_cholesky.cpp, so the off-diagonal GEMMs carry real weight; delta = 1, the
// noise term of an AO Cmm). Its eigenvalues lie in [delta + (1-rho)/(1+rho), delta +
// (1+rho)/(1-rho)], so ||A^-1||_2 <= 1 / delta and kappa_2(A) < 66: well conditioned.
//
// Bound (Higham, "Accuracy and Stability", Thms 8.5 and 10.4, first order): the computed X
// satisfies X (A + dA) = B with |dA| <= (e_f + 2 e_s) |L| |L^T|, e_f the factorization's constant
// (gamma_{n+1}(u32) plus the largest GEMM-variant term used there) and e_s one substitution's
// (gamma_n(u32) for the FP32 TRSMs plus the largest variant term of the solve policy). Then
// ||X - X_ref||_F <= ||X||_F ||dA||_2 ||A^-1||_2 <= ||X||_F (e_f + 2 e_s) || |L||L^T| ||_F / delta,
// with || |L||L^T| ||_F computed from LAPACK's FP64 factor, and a factor 2 for the second-order
// terms and ||X|| against ||X_ref||.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::linalg::test {

inline constexpr double kNugget = 1.0;

/// A_ij = rho^|i-j| * scale + nugget [i == j], row-major n x n.
inline std::vector<double> nugget_covariance(std::int64_t n, double rho = std::exp(-1.0 / 32.0),
                                             double nugget = kNugget) {
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[static_cast<std::size_t>(i * n + j)] =
          std::pow(rho, static_cast<double>(std::abs(i - j))) + (i == j ? nugget : 0.0);
  return a;
}

/// A_ij = scale * rho^|i-j| (Kac-Murdock-Szego), row-major n x n; kappa < (1 + rho) / (1 - rho).
inline std::vector<double> kms(std::int64_t n, double rho, double scale = 1.0) {
  std::vector<double> a = nugget_covariance(n, rho, 0.0);
  for (double& x : a) x *= scale;
  return a;
}

/// Sets entry (i, j) and its mirror.
inline void set_sym(std::vector<double>& a, std::int64_t n, std::int64_t i, std::int64_t j,
                    double v) {
  a[static_cast<std::size_t>(i * n + j)] = v;
  a[static_cast<std::size_t>(j * n + i)] = v;
}

inline TileMatrix tiled(const std::vector<double>& dense, std::int64_t n, std::int64_t nb,
                        Memory memory = Memory::host) {
  const Array d = Array::from_values<double>(dense, {n, n});
  return TileMatrix::from_dense(d, nb, TileFill::lower, DType::f32, memory);
}

inline double gamma(std::int64_t n, double u) {
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

/// Error constant of one GEMM variant over a sum of n terms (as test_cholesky.cpp): input
/// rounding of both operands, C and result rounding where the variant stores C in FP16, and the
/// accumulation.
inline double variant_term(GemmVariant v, std::int64_t n) {
  const double u16 = std::ldexp(1.0, -11), u32 = std::ldexp(1.0, -24);
  switch (v) {
    case GemmVariant::DP:
      return u32 + gamma(n, std::ldexp(1.0, -53));
    case GemmVariant::SP:
      return gamma(n, u32);
    case GemmVariant::TF32:
    case GemmVariant::HP1:
      return 2 * u16 + gamma(n, u32);
    case GemmVariant::HP2:
      return 4 * u16 + gamma(n, u32);
    case GemmVariant::HP3:
      return 3 * u16 + gamma(n, u16);
    case GemmVariant::BF16:
      return 2 * std::ldexp(1.0, -8) + gamma(n, u32);
  }
  return 1.0;
}

/// The largest variant term among the variants with a nonzero count, FP32's gamma otherwise.
inline double largest_term(const std::array<std::int64_t, 7>& tiles, std::int64_t n) {
  double e = gamma(n, std::ldexp(1.0, -24));
  for (const GemmVariant v : all_gemm_variants())
    if (tiles[static_cast<std::size_t>(v)] > 0) e = std::max(e, variant_term(v, n));
  return e;
}

#if HALFSCOPE_HAS_LAPACKE
/// X with X A = B by LAPACK dposv in FP64: b is r x n row-major, i.e. the column-major n x r B^T
/// that A X^T = B^T needs (A symmetric).
inline std::vector<double> dposv_rows(std::vector<double> a, std::vector<double> b,
                                      std::int64_t n) {
  const auto r = static_cast<lapack_int>(b.size() / static_cast<std::size_t>(n));
  const lapack_int info =
      LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', static_cast<lapack_int>(n), r, a.data(),
                    static_cast<lapack_int>(n), b.data(), static_cast<lapack_int>(n));
  if (info != 0) throw std::runtime_error("dposv info " + std::to_string(info));
  return b;
}

/// || |L| |L^T| ||_F with L = LAPACK dpotrf's FP64 factor of the row-major A.
inline double abs_factor_product_norm(std::vector<double> a, std::int64_t n) {
  // Row-major A read column-major is A^T = A; 'L' leaves L in the column-major lower triangle.
  const lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', static_cast<lapack_int>(n),
                                         a.data(), static_cast<lapack_int>(n));
  if (info != 0) throw std::runtime_error("dpotrf info " + std::to_string(info));
  auto l = [&](std::int64_t i, std::int64_t j) {
    return i >= j ? std::abs(a[static_cast<std::size_t>(i + j * n)]) : 0.0;
  };
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::int64_t k = 0; k <= std::min(i, j); ++k) s += l(i, k) * l(j, k);
      sum += s * s;
    }
  return std::sqrt(sum);
}
#endif

/// ||x - y||_F / ||y||_F.
inline double relative_error(const float* x, const std::vector<double>& y) {
  double num = 0.0, den = 0.0;
  for (std::size_t e = 0; e < y.size(); ++e) {
    num += (x[e] - y[e]) * (x[e] - y[e]);
    den += y[e] * y[e];
  }
  return std::sqrt(num / den);
}

/// A test name from a policy string (non-alphanumerics become '_').
inline std::string policy_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (const char ch : info.param) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

/// The 11 built-in policy strings of test_cholesky.cpp.
inline const std::vector<std::string>& builtin_policies() {
  static const std::vector<std::string> p{
      "uniform:DP",         "uniform:SP",        "uniform:TF32",     "uniform:HP1",
      "uniform:HP2",        "uniform:HP3",       "uniform:BF16",     "band:SP=2,HP1=rest",
      "band:SP=1,HP3=rest", "adaptive:tol=1e-6", "adaptive:tol=1e-3"};
  return p;
}

#if HALFSCOPE_WITH_CUDA
/// Device lists of the multi-GPU tests (gpu_*_devices.cpp): every device of the host and the last
/// with the first, or on a one-GPU machine device 0 listed two and three times (separate copies,
/// the same peer copies, events and threads).
inline std::vector<std::vector<int>> device_lists() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return {};
  if (count == 1) return {{0, 0}, {0, 0, 0}};
  std::vector<int> all;
  for (int d = 0; d < count; ++d) all.push_back(d);
  return {all, {count - 1, 0}};
}
#endif

}  // namespace halfscope::linalg::test

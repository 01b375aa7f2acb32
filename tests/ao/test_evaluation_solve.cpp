// The FP64 reconstructor and the error covariance on the CPU against independent long-double
// references, on random covariances that are jointly SPD (as the real Cmm, Ctm, Ctt are).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "evaluation_test_problems.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

using test::make_problem;
using test::Matrix;
using test::Problem;
using test::to_long;

constexpr double kUnitRoundoff = 0x1p-53;

// Independent reference: X = Ctm Cmm^-1 by Gauss-Jordan elimination with partial pivoting in long
// double on [Cmm | Ctm^T] (no Cholesky, no LAPACK).
Matrix reference_solve(const Array& cmm, const Array& ctm) {
  const std::int64_t n = cmm.dim(0), m = ctm.dim(0), w = n + m;
  Matrix t(static_cast<std::size_t>(n * w));
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < n; ++c) t[r * w + c] = cmm.at_as_double(r * n + c);
    for (std::int64_t c = 0; c < m; ++c) t[r * w + n + c] = ctm.at_as_double(c * n + r);
  }
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t piv = k;
    for (std::int64_t r = k + 1; r < n; ++r)
      if (std::fabs(t[r * w + k]) > std::fabs(t[piv * w + k])) piv = r;
    for (std::int64_t c = 0; c < w; ++c) std::swap(t[k * w + c], t[piv * w + c]);
    for (std::int64_t r = 0; r < n; ++r) {
      if (r == k) continue;
      const long double f = t[r * w + k] / t[k * w + k];
      for (std::int64_t c = k; c < w; ++c) t[r * w + c] -= f * t[k * w + c];
    }
  }
  Matrix x(static_cast<std::size_t>(m * n));  // X[i][r] = (Cmm^-1 Ctm^T)[r][i]
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < m; ++i) x[i * n + r] = t[r * w + n + i] / t[r * w + r];
  return x;
}

// The four-term definition, in long double.
Matrix reference_cee(const Problem& p, const Matrix& r) {
  const Matrix mm = to_long(p.cmm), tm = to_long(p.ctm), tt = to_long(p.ctt);
  const std::int64_t n = p.n, m = p.m;
  Matrix rc(static_cast<std::size_t>(m * n), 0.0L);  // R Cmm
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t k = 0; k < n; ++k)
      for (std::int64_t j = 0; j < n; ++j) rc[i * n + j] += r[i * n + k] * mm[k * n + j];
  Matrix cee(static_cast<std::size_t>(m * m));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      long double s = tt[i * m + j];
      for (std::int64_t k = 0; k < n; ++k)
        s += -tm[i * n + k] * r[j * n + k] - r[i * n + k] * tm[j * n + k] +
             rc[i * n + k] * r[j * n + k];
      cee[i * m + j] = s;
    }
  return cee;
}

long double max_abs(const Matrix& a) {
  long double v = 0;
  for (long double x : a) v = std::max(v, std::fabs(x));
  return v;
}

#if HALFSCOPE_HAS_LAPACKE
TEST(EvaluationSolve, Fp64ReconstructorMatchesLongDoubleGaussJordan) {
  const Problem p = make_problem(96, 24, 7);
  const Array x = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cpu);
  ASSERT_EQ(x.shape(), (Shape{24, 96}));
  const Matrix ref = reference_solve(p.cmm, p.ctm);
  // Cholesky is backward stable: |dX| / |X| <= kappa(Cmm) * c * n * u with c a small constant
  // (Higham, Thm 10.4: c n u with c ~ 3 for the factor, as much again for the two solves).
  // kappa <= 5 (make_problem), so 5 * 6 * n * u bounds the max-norm error relative to max |X|.
  const double tol = 5.0 * 6.0 * 96.0 * kUnitRoundoff;
  const long double scale = max_abs(ref);
  for (std::int64_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x.at_as_double(i) / scale, ref[i] / scale, tol) << "element " << i;
}

TEST(EvaluationSolve, Float32InputsAreWidenedNotRoundedAgain) {
  const Problem p = make_problem(40, 8, 11);
  const Array x32 =
      reconstructor_fp64(p.cmm.astype(DType::f32), p.ctm.astype(DType::f32), DeviceKind::Cpu);
  const Array x64 =
      reconstructor_fp64(p.cmm.astype(DType::f32).astype(DType::f64),
                         p.ctm.astype(DType::f32).astype(DType::f64), DeviceKind::Cpu);
  ASSERT_EQ(x32.dtype(), DType::f64);
  for (std::int64_t i = 0; i < x32.size(); ++i) EXPECT_EQ(x32.at_as_double(i), x64.at_as_double(i));
}

TEST(EvaluationSolve, NotPositiveDefiniteNamesTheLeadingMinor) {
  const std::int64_t n = 12;
  Array cmm = Array::zeros(DType::f64, {n, n});
  for (std::int64_t i = 0; i < n; ++i) cmm.data_as<double>()[i * n + i] = i == 6 ? -1.0 : 2.0;
  const Array ctm = Array::zeros(DType::f64, {3, n});
  try {
    (void)reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);
    FAIL() << "expected NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    EXPECT_NE(std::string(e.what()).find("order 7"), std::string::npos) << e.what();
  }
}

TEST(EvaluationSolve, ErrorCovarianceOfTheFp64ReconstructorIsTheMinimumVarianceSchurComplement) {
  const Problem p = make_problem(80, 20, 3);
  const Array r = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cpu);
  const Array cee = error_covariance(p.ctt, p.ctm, p.cmm, r, DeviceKind::Cpu);
  ASSERT_EQ(cee.shape(), (Shape{20, 20}));
  // Reference: Ctt - R Ctm^T with the exact (long double) R. Cee's entries are O(1) (eigenvalues in
  // [1, 5]) but are formed from products of size n with O(1) terms: error <= ~ 4 n u |J|, |J| <= 5.
  const Matrix rx = reference_solve(p.cmm, p.ctm);
  const Matrix tm = to_long(p.ctm), tt = to_long(p.ctt);
  const double tol = 4.0 * 80.0 * 5.0 * 5.0 * kUnitRoundoff;
  for (std::int64_t i = 0; i < 20; ++i)
    for (std::int64_t j = 0; j < 20; ++j) {
      long double s = tt[i * 20 + j];
      for (std::int64_t k = 0; k < 80; ++k) s -= rx[i * 80 + k] * tm[j * 80 + k];
      EXPECT_NEAR(cee.at_as_double(i * 20 + j), static_cast<double>(s), tol) << i << "," << j;
      EXPECT_EQ(cee.at_as_double(i * 20 + j), cee.at_as_double(j * 20 + i));
    }
  // PSD: Cee is a Schur complement of J >= I, so its eigenvalues are >= 1, and a Cholesky of
  // Cee - 0.5 I (long double, independent) must succeed.
  Matrix c = to_long(cee);
  for (std::int64_t k = 0; k < 20; ++k) {
    c[k * 20 + k] -= 0.5L;
    for (std::int64_t q = 0; q < k; ++q) c[k * 20 + k] -= c[k * 20 + q] * c[k * 20 + q];
    ASSERT_GT(c[k * 20 + k], 0.0L) << "pivot " << k;
    c[k * 20 + k] = std::sqrt(c[k * 20 + k]);
    for (std::int64_t i = k + 1; i < 20; ++i) {
      for (std::int64_t q = 0; q < k; ++q) c[i * 20 + k] -= c[i * 20 + q] * c[k * 20 + q];
      c[i * 20 + k] /= c[k * 20 + k];
    }
  }
}

TEST(EvaluationSolve, OnlyTheRowMajorLowerTriangleOfCmmIsRead) {
  // The same routines read the same lower triangle: the results are bitwise equal. A swapped
  // fill mode (reading the junk) changes them by orders of magnitude or fails the Cholesky.
  test::expect_only_lower_triangle_read(make_problem(64, 16, 13), 14, DeviceKind::Cpu);
}

TEST(EvaluationSolve, IllConditionedPresetCmmWithinItsConditionNumber) {
  // The real Cmm: 1 arcsec^2 LGS tip-tilt constants on ~1e-2 arcsec^2 turbulence and ~1e-5
  // noise, so kappa is large. Backward stability (Higham Thm 10.4): X Cmm - Ctm is at most c n u
  // |X| |Cmm| whatever kappa (c = 6: factor and two triangular solves); forward error relative to
  // max |X| <= c n u kappa, kappa from LAPACK's dpocon 1-norm estimate (within a factor ~3 of the
  // truth in practice, hence a further factor 10).
  const test::PresetCovariances c = test::check_preset_covariances();
  const Array &cmm = c.cmm, &ctm = c.ctm;
  const std::int64_t n = cmm.dim(0), m = ctm.dim(0);
  const Array x = reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);

  double rcond = 0;
  ASSERT_NO_FATAL_FAILURE(test::estimate_rcond(cmm, &rcond));
  const double kappa = 1.0 / rcond;
  std::printf("check Cmm: n = %lld, kappa_1 ~ %.3g\n", static_cast<long long>(n), kappa);
  ASSERT_GT(kappa, 1e3);  // the point of the case: far beyond make_problem's kappa <= 5

  const Matrix xl = to_long(x), mm = to_long(cmm), tm = to_long(ctm);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double r = -tm[i * n + j], mag = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        r += xl[i * n + k] * mm[k * n + j];
        mag += std::fabs(xl[i * n + k] * mm[k * n + j]);
      }
      ASSERT_LE(std::fabs(r), 6.0L * n * kUnitRoundoff * mag) << i << "," << j;
    }
  const Matrix ref = reference_solve(cmm, ctm);
  const long double scale = max_abs(ref);
  const double tol = 10.0 * 6.0 * static_cast<double>(n) * kUnitRoundoff * kappa;
  for (std::int64_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x.at_as_double(i) / scale, ref[i] / scale, tol) << "element " << i;
}

TEST(EvaluationSolve, AnyOtherReconstructorHasALargerTraceByExactlyTheQuadraticTerm) {
  const Problem p = make_problem(60, 12, 5);
  const Array r = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cpu);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal(0.0, 0.05);
  Array r2 = r.clone();
  for (std::int64_t i = 0; i < r2.size(); ++i) r2.data_as<double>()[i] += normal(rng);
  const Array cee = error_covariance(p.ctt, p.ctm, p.cmm, r, DeviceKind::Cpu);
  const Array cee2 = error_covariance(p.ctt, p.ctm, p.cmm, r2, DeviceKind::Cpu);
  const Matrix ref2 = reference_cee(p, to_long(r2));  // the four-term definition
  double trace = 0, trace2 = 0;
  const double tol = 4.0 * 60.0 * 5.0 * 5.0 * kUnitRoundoff * 4.0;  // |R2| up to ~2x |R|
  for (std::int64_t i = 0; i < 12; ++i) {
    trace += cee.at_as_double(i * 12 + i);
    trace2 += cee2.at_as_double(i * 12 + i);
    for (std::int64_t j = 0; j < 12; ++j)
      EXPECT_NEAR(cee2.at_as_double(i * 12 + j), static_cast<double>(ref2[i * 12 + j]), tol);
  }
  EXPECT_GT(trace2, trace);
}
#endif

TEST(EvaluationSolve, ShapeErrorsNameTheArgument) {
  const Array cmm = Array::zeros(DType::f64, {5, 5});
  const Array ctm = Array::zeros(DType::f64, {2, 4});
  try {
    (void)reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ctm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 x 5"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)reconstructor_fp64(Array::zeros(DType::f64, {4, 5}), ctm, DeviceKind::Cpu),
               InvalidInput);
  EXPECT_THROW((void)reconstructor_fp64(Array::zeros(DType::i32, {5, 5}), ctm, DeviceKind::Cpu),
               InvalidInput);
  EXPECT_THROW((void)error_covariance(Array::zeros(DType::f64, {3, 3}), ctm, cmm,
                                      Array::zeros(DType::f64, {2, 5}), DeviceKind::Cpu),
               InvalidInput);
}

TEST(EvaluationSolve, NonFiniteInputIsRejected) {
  Array cmm = Array::zeros(DType::f64, {3, 3});
  cmm.data_as<double>()[4] = std::nan("");
  EXPECT_THROW((void)reconstructor_fp64(cmm, Array::zeros(DType::f64, {1, 3}), DeviceKind::Cpu),
               InvalidInput);
}

}  // namespace
}  // namespace halfscope::ao

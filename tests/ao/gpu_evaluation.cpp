// The GPU halves of the evaluation (cuSOLVER Xpotrf / Xpotrs reconstructor, cuBLAS Cee) against the
// CPU FP64 path (LAPACK / BLAS), which test_evaluation_solve.cpp checks against long double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::ao {
namespace {

constexpr double kUnitRoundoff = 0x1p-53;

// Jointly SPD covariances: J = B B^T / N + I over n + m slopes (eigenvalues in [1, 5]), split.
struct Problem {
  Array cmm, ctm, ctt;
};

Problem make_problem(std::int64_t n, std::int64_t m, unsigned seed) {
  const std::int64_t t = n + m;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> b(static_cast<std::size_t>(t * t));
  for (double& v : b) v = normal(rng);
  Problem p{Array(DType::f64, {n, n}), Array(DType::f64, {m, n}), Array(DType::f64, {m, m})};
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t c = 0; c < t; ++c) {
      double s = 0;
      for (std::int64_t k = 0; k < t; ++k) s += b[r * t + k] * b[c * t + k];
      const double v = s / static_cast<double>(t) + (r == c ? 1.0 : 0.0);
      if (r < n && c < n) p.cmm.data_as<double>()[r * n + c] = v;
      if (r >= n && c < n) p.ctm.data_as<double>()[(r - n) * n + c] = v;
      if (r >= n && c >= n) p.ctt.data_as<double>()[(r - n) * m + (c - n)] = v;
    }
  return p;
}

double max_abs(const Array& a) {
  double v = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) v = std::max(v, std::fabs(a.at_as_double(i)));
  return v;
}

#if HALFSCOPE_HAS_LAPACKE
TEST(EvaluationGpu, ReconstructorMatchesTheCpuSolve) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, m = 70;
  const Problem p = make_problem(n, m, 21);
  const Array gpu = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cuda);
  const Array cpu = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cpu);
  ASSERT_EQ(gpu.shape(), cpu.shape());
  // Each is within kappa * 6 n u (kappa <= 5) of the exact X relative to max |X| (see
  // test_evaluation_solve.cpp), so they differ by at most twice that.
  const double tol = 2.0 * 5.0 * 6.0 * static_cast<double>(n) * kUnitRoundoff * max_abs(cpu);
  for (std::int64_t i = 0; i < gpu.size(); ++i)
    ASSERT_NEAR(gpu.at_as_double(i), cpu.at_as_double(i), tol) << "element " << i;
}

TEST(EvaluationGpu, ErrorCovarianceMatchesTheCpuProducts) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 256, m = 64;
  const Problem p = make_problem(n, m, 22);
  Array r = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cpu);
  for (std::int64_t i = 0; i < r.size(); i += 7) r.data_as<double>()[i] *= 1.1;  // not optimal
  const Array gpu = error_covariance(p.ctt, p.ctm, p.cmm, r, DeviceKind::Cuda);
  const Array cpu = error_covariance(p.ctt, p.ctm, p.cmm, r, DeviceKind::Cpu);
  // Both sum n products of O(|J| |R|) terms twice: |error| <= 2 * 2 n u |J|^2 max(1, |R|)^2 each.
  const double rr = std::max(1.0, max_abs(r));
  const double tol = 2.0 * 4.0 * static_cast<double>(n) * kUnitRoundoff * 25.0 * rr * rr;
  for (std::int64_t i = 0; i < gpu.size(); ++i)
    ASSERT_NEAR(gpu.at_as_double(i), cpu.at_as_double(i), tol) << "element " << i;
}

TEST(EvaluationGpu, OnlyTheRowMajorLowerTriangleOfCmmIsRead) {
  // Junk in Cmm's strict upper triangle (row-major, = the column-major lower one cuSOLVER and
  // cuBLAS would read with a swapped fill mode): the results stay bitwise those of the symmetric
  // Cmm on the same device.
  HS_REQUIRE_GPU();
  const std::int64_t n = 200, m = 40;
  const Problem p = make_problem(n, m, 23);
  Array junk = p.cmm.clone();
  std::mt19937_64 rng(24);
  std::uniform_real_distribution<double> uniform(-1e3, 1e3);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) junk.data_as<double>()[i * n + j] = uniform(rng);
  const Array r = reconstructor_fp64(p.cmm, p.ctm, DeviceKind::Cuda);
  const Array rj = reconstructor_fp64(junk, p.ctm, DeviceKind::Cuda);
  for (std::int64_t i = 0; i < r.size(); ++i) ASSERT_EQ(rj.at_as_double(i), r.at_as_double(i)) << i;
  const Array cee = error_covariance(p.ctt, p.ctm, p.cmm, r, DeviceKind::Cuda);
  const Array ceej = error_covariance(p.ctt, p.ctm, junk, r, DeviceKind::Cuda);
  for (std::int64_t i = 0; i < cee.size(); ++i)
    ASSERT_EQ(ceej.at_as_double(i), cee.at_as_double(i)) << i;
}

TEST(EvaluationGpu, IllConditionedPresetCmmAgreesWithTheCpuWithinItsConditionNumber) {
  // The check preset's Cmm (kappa ~ 1e7, see test_evaluation_solve.cpp): both solves are within
  // 6 n u kappa of the exact X relative to max |X|, kappa from LAPACK's dpocon estimate (a further
  // factor 10 for the estimate), so they differ by at most twice that.
  HS_REQUIRE_GPU();
  const AoSystem s = ao_preset("check");
  CovarianceOptions co;
  co.device = DeviceKind::Cpu;
  const Array cmm = covariance(s, CovarianceKind::cmm, co);
  const Array ctm = covariance(s, CovarianceKind::ctm, co);
  const std::int64_t n = cmm.dim(0);
  std::vector<double> f(cmm.data_as<double>(), cmm.data_as<double>() + n * n);
  double anorm = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    double col = 0;
    for (std::int64_t i = 0; i < n; ++i) col += std::fabs(f[i * n + j]);
    anorm = std::max(anorm, col);
  }
  ASSERT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), f.data(),
                           static_cast<lapack_int>(n)),
            0);
  double rcond = 0;
  ASSERT_EQ(LAPACKE_dpocon(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), f.data(),
                           static_cast<lapack_int>(n), anorm, &rcond),
            0);
  const Array gpu = reconstructor_fp64(cmm, ctm, DeviceKind::Cuda);
  const Array cpu = reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);
  const double tol =
      2.0 * 10.0 * 6.0 * static_cast<double>(n) * kUnitRoundoff / rcond * max_abs(cpu);
  for (std::int64_t i = 0; i < gpu.size(); ++i)
    ASSERT_NEAR(gpu.at_as_double(i), cpu.at_as_double(i), tol) << "element " << i;
}
#endif

TEST(EvaluationGpu, NotPositiveDefiniteNamesTheLeadingMinor) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 16;
  Array cmm = Array::zeros(DType::f64, {n, n});
  for (std::int64_t i = 0; i < n; ++i) cmm.data_as<double>()[i * n + i] = i == 9 ? -3.0 : 1.0;
  try {
    (void)reconstructor_fp64(cmm, Array::zeros(DType::f64, {2, n}), DeviceKind::Cuda);
    FAIL() << "expected NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    EXPECT_NE(std::string(e.what()).find("order 10"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuSOLVER"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace halfscope::ao

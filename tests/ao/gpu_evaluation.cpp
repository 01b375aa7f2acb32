// The GPU halves of the evaluation (cuSOLVER Xpotrf / Xpotrs reconstructor, cuBLAS Cee) against the
// CPU FP64 path (LAPACK / BLAS), which test_evaluation_solve.cpp checks against long double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

constexpr double kUnitRoundoff = 0x1p-53;

// Jointly SPD covariances: J = B B^T / N + I over n + m slopes (eigenvalues in [1, 5]), split
// (evaluation_test_problems.hpp).
using test::make_problem;
using test::Problem;

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
  test::expect_only_lower_triangle_read(make_problem(200, 40, 23), 24, DeviceKind::Cuda);
}

TEST(EvaluationGpu, IllConditionedPresetCmmAgreesWithTheCpuWithinItsConditionNumber) {
  // The check preset's Cmm (kappa ~ 1e7, see test_evaluation_solve.cpp): both solves are within
  // 6 n u kappa of the exact X relative to max |X|, kappa from LAPACK's dpocon estimate (a further
  // factor 10 for the estimate), so they differ by at most twice that.
  HS_REQUIRE_GPU();
  const test::PresetCovariances c = test::check_preset_covariances();
  const Array &cmm = c.cmm, &ctm = c.ctm;
  const std::int64_t n = cmm.dim(0);
  double rcond = 0;
  ASSERT_NO_FATAL_FAILURE(test::estimate_rcond(cmm, &rcond));
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

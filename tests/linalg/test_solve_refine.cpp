// Mixed-precision solve with iterative refinement (solve_right_refined, solve.hpp) on the CPU.
//
// Theory (Higham, "Accuracy and Stability" Thm 12.2; Carson & Higham 2018): with a factor of
// effective unit roundoff u_f, each correction multiplies the error by about kappa(A) u_f, and the
// residual settles at the working precision's level, u32 (|B| + |X| |A|). So for kappa u_f << 1
// the refined residual must reach the default tolerance 8 u32 sqrt(n) (and about the residual of
// an all-FP32 solve), while for kappa u16 > 1 it need not converge, and the report must say so.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/solve.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

namespace halfscope::linalg {
namespace {

Array random_rows(std::int64_t r, std::int64_t n, std::uint64_t seed) {
  const std::vector<float> v = halfscope::test::random_floats(r * n, -1.0f, 1.0f, seed);
  return Array::from_values<float>(v, {r, n});
}

// ||B - X A||_F / ||B||_F in FP64 for the FP32 A the solver sees (the dense A rounded to FP32:
// against the FP64 A the residual would include X (A - fl32(A)), of order u32 ||X|| ||A||).
double residual(const std::vector<double>& a, const Array& b, const Array& x, std::int64_t n) {
  const std::int64_t r = b.dim(0);
  double num = 0.0, den = 0.0;
  for (std::int64_t c = 0; c < r; ++c)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = b.data_as<float>()[c * n + j];
      den += s * s;
      for (std::int64_t i = 0; i < n; ++i)
        s -= static_cast<double>(x.data_as<float>()[c * n + i]) *
             static_cast<double>(static_cast<float>(a[static_cast<std::size_t>(i * n + j)]));
      num += s * s;
    }
  return std::sqrt(num / den);
}

TEST(SolveRightRefined, Fp16FactorReachesFp32Residual) {
  const std::int64_t n = 300, nb = 64, r = 5;
  const std::vector<double> a = test::nugget_covariance(n);  // kappa < 66
  const TileMatrix am = test::tiled(a, n, nb);
  const Array b = random_rows(r, n, 3);

  // The all-FP32 solve, the level to reach.
  TileMatrix l = test::tiled(a, n, nb);
  (void)cholesky_tiles(l, {});
  Array x_sp = b.clone();
  (void)solve_right(l, x_sp);
  const double sp_residual = residual(a, b, x_sp, n);

  for (const char* factor_policy : {"uniform:HP1", "uniform:HP3", "band:SP=1,HP3=rest"}) {
    RefinementOptions options;
    options.factor.policy = parse_policy(factor_policy);
    // The FP32 solve's own residual level (twice it, for the rounding of X to FP32): tighter
    // than the default tolerance, so each FP16 factor needs corrections to get there.
    options.tolerance = 2 * sp_residual;
    Array x = b.clone();
    const std::vector<float> a_before(am.storage.data_as<float>(),
                                      am.storage.data_as<float>() + am.layout.element_count());
    const RefinementReport report = solve_right_refined(am, x, options);
    const double final_residual = residual(a, b, x, n);
    std::cout << "[refine] " << factor_policy << ": " << report.iterations << " corrections,"
              << " residuals";
    for (const double v : report.residuals) std::cout << " " << v;
    std::cout << "; FP64 check " << final_residual << ", SP solve " << sp_residual << " ("
              << report.stop_reason << ")\n";
    EXPECT_TRUE(report.converged) << factor_policy << ": " << report.stop_reason;
    EXPECT_EQ(report.stop_reason, "converged");
    EXPECT_DOUBLE_EQ(report.tolerance, 2 * sp_residual);
    EXPECT_LE(report.residuals.back(), report.tolerance);
    // The reported residual is the one of the returned X: recomputed here in FP64 from the
    // dense A, it differs only by the FP64 summation (relative 1e-13) and the FP32 rounding
    // of the residual before its norm, below u32 = 6e-8 of it.
    EXPECT_NEAR(final_residual, report.residuals.back(), 1e-6 * report.residuals.back());
    EXPECT_GE(report.iterations, 1) << "an FP16 factor cannot reach FP32 accuracy in 0 steps";
    EXPECT_EQ(report.residuals.size(), static_cast<std::size_t>(report.iterations + 1));
    EXPECT_EQ(report.factor.policy, factor_policy);
    // a is not modified.
    EXPECT_TRUE(std::equal(a_before.begin(), a_before.end(), am.storage.data_as<float>()));
  }
}

// A Gaussian-kernel covariance with a small nugget: kappa about 1e5, kappa u16 >> 1. The HP1
// factor still finishes (the nugget keeps it positive definite in FP32), but the corrections do
// not contract: the report must say it did not converge, and X must stay finite.
TEST(SolveRightRefined, IllConditionedReportsNonConvergence) {
  const std::int64_t n = 200, nb = 32, r = 2;
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(i - j) / 6.0;
      a[static_cast<std::size_t>(i * n + j)] = std::exp(-0.5 * d * d) + (i == j ? 1e-4 : 0.0);
    }
  const TileMatrix am = test::tiled(a, n, nb);
  Array x = random_rows(r, n, 9);
  RefinementOptions options;
  options.factor.policy = uniform_policy(GemmVariant::HP1);
  options.factor.recover = true;  // finish the factor whatever happens; refinement is the topic
  options.max_iterations = 6;
  const RefinementReport report = solve_right_refined(am, x, options);
  std::cout << "[refine ill-conditioned] " << report.iterations << " corrections, residuals";
  for (const double v : report.residuals) std::cout << " " << v;
  std::cout << " (" << report.stop_reason << ")\n";
  EXPECT_FALSE(report.converged);
  EXPECT_GT(report.residuals.back(), report.tolerance);
  EXPECT_FALSE(report.stop_reason.empty());
  EXPECT_NE(report.stop_reason, "converged");
  for (std::int64_t e = 0; e < x.size(); ++e) ASSERT_TRUE(std::isfinite(x.data_as<float>()[e]));
}

// B = 0 has X = 0 exactly; the relative residual is undefined, so the loop must not run.
TEST(SolveRightRefined, ZeroRightHandSideIsSolvedExactly) {
  const std::int64_t n = 24;
  const TileMatrix am = test::tiled(test::nugget_covariance(n), n, 8);
  Array x = Array::zeros(DType::f32, {2, n});
  RefinementOptions options;
  options.factor.policy = uniform_policy(GemmVariant::HP1);
  const RefinementReport report = solve_right_refined(am, x, options);
  EXPECT_TRUE(report.converged);
  EXPECT_EQ(report.iterations, 0);
  EXPECT_EQ(report.stop_reason, "converged (B = 0)");
  EXPECT_GT(report.tolerance, 0.0);
  for (std::int64_t e = 0; e < x.size(); ++e) EXPECT_EQ(x.data_as<float>()[e], 0.0f);
}

TEST(SolveRightRefined, BadOptionsAreInvalidInput) {
  const std::int64_t n = 16;
  const TileMatrix am = test::tiled(test::nugget_covariance(n), n, 8);
  Array x = random_rows(1, n, 1);
  RefinementOptions options;
  options.max_iterations = -1;
  EXPECT_THROW((void)solve_right_refined(am, x, options), InvalidInput);
  options.max_iterations = 3;
  options.tolerance = -1.0;
  EXPECT_THROW((void)solve_right_refined(am, x, options), InvalidInput);
  // The default tolerance is 8 u32 sqrt(n).
  options.tolerance = 0.0;
  EXPECT_DOUBLE_EQ(solve_right_refined(am, x, options).tolerance, 8 * 0x1p-24 * std::sqrt(16.0));
  Array wrong = random_rows(1, n + 2, 1);
  EXPECT_THROW((void)solve_right_refined(am, wrong, {}), InvalidInput);
}

}  // namespace
}  // namespace halfscope::linalg

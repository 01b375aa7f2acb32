// The power-of-two scaling of cholesky_tiles for FP16 variants (src/linalg/scaling.hpp): a matrix
// whose largest diagonal entry d lies outside [2^-6, 2^12] is factored as 4^-k A with d in
// [1, 4). Both scalings are exact, so the factor of 4^e A0 (d(A0) = 1) must be 2^e times the
// factor of A0 bit for bit, whatever the policy; inside the band nothing may change.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "cholesky_test_support.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "linalg/scaling.hpp"

namespace halfscope::linalg {
namespace {

constexpr std::int64_t kN = 160, kNb = 32;

std::vector<double> times(std::vector<double> a, double s) {
  for (double& x : a) x *= s;
  return a;
}

using test::Factoring;

Factoring factor_run(const std::vector<double>& a, const CholeskyOptions& opts) {
  return test::factoring(a, kN, kNb, opts);
}

CholeskyOptions with(const char* policy, bool recover = false) {
  CholeskyOptions o;
  o.policy = parse_policy(policy);
  o.recover = recover;
  return o;
}

void expect_scaled_copy(const Factoring& got, const Factoring& want, int e,
                        const std::string& what) {
  const TileLayout layout(kN, kN, kNb, TileFill::lower);
  EXPECT_EQ(test::scaled_copy_mismatches(layout, got, want, e, true), 0)
      << what << ": entries differing from the scaled factor";
}

TEST(CholeskyScaling, ExponentMovesTheLargestDiagonalIntoOneToFour) {
  using detail::fp16_scaling_exponent;
  for (const double d : {1e-20, 1e-3, 0.01, 1e4, 1e5, 1e30, 3e38}) {
    const int k = fp16_scaling_exponent(d, d);
    const double moved = std::ldexp(d, -2 * k);
    EXPECT_TRUE(moved >= 1.0 && moved < 4.0) << d << " -> " << moved;
  }
  // The band's edges and inside it: untouched.
  for (const double d : {std::ldexp(1.0, -6), 1.0, 100.0, std::ldexp(1.0, 12)})
    EXPECT_EQ(fp16_scaling_exponent(d, d), 0) << d;
  EXPECT_EQ(fp16_scaling_exponent(std::ldexp(1.0, 12) * 1.0001, 1.0), 6);
  EXPECT_EQ(fp16_scaling_exponent(std::ldexp(1.0, -6) * 0.9999, 1.0), -4);
  // No positive finite d, or an entry the scaling would overflow: none.
  for (const double d : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN()})
    EXPECT_EQ(fp16_scaling_exponent(d, 1.0), 0) << d;
  EXPECT_EQ(fp16_scaling_exponent(1e-20, 1e20), 0);
  // Only the FP16 variants are scaled.
  EXPECT_TRUE(detail::rounds_to_fp16({GemmVariant::SP, GemmVariant::HP3}));
  EXPECT_FALSE(detail::rounds_to_fp16(
      {GemmVariant::DP, GemmVariant::SP, GemmVariant::TF32, GemmVariant::BF16}));
}

TEST(CholeskyScaling, FactorOfAScaledMatrixIsTheScaledFactorBitForBit) {
  const std::vector<double> a0 = test::kms(kN, 0.9);  // d = 1; entries >= 0.9^159 = 5e-8
  for (const char* policy : {"uniform:HP1", "uniform:HP2", "uniform:HP3", "adaptive:tol=1e-3"}) {
    const Factoring base = factor_run(a0, with(policy));
    ASSERT_EQ(base.report.scaling_exponent, 0);
    for (const int e : {-40, -4, 7, 30}) {
      const Factoring got = factor_run(times(a0, std::ldexp(1.0, 2 * e)), with(policy));
      EXPECT_EQ(got.report.scaling_exponent, e) << policy;
      EXPECT_EQ(got.report.tiles, base.report.tiles) << policy;
      expect_scaled_copy(got, base, e, std::string(policy) + " e=" + std::to_string(e));
    }
  }
}

TEST(CholeskyScaling, InsideTheBandOrWithoutFp16NothingIsScaled) {
  const std::vector<double> a0 = test::kms(kN, 0.9);
  for (const int e : {-3, 6})  // d = 2^-6 and 2^12: the band's edges
    EXPECT_EQ(
        factor_run(times(a0, std::ldexp(1.0, 2 * e)), with("uniform:HP1")).report.scaling_exponent,
        0);
  const std::vector<double> tiny = times(a0, 1e-20);
  EXPECT_EQ(factor_run(tiny, with("uniform:SP")).report.scaling_exponent, 0);
  EXPECT_EQ(factor_run(tiny, with("uniform:TF32")).report.scaling_exponent, 0);
  CholeskyOptions off = with("uniform:HP1");
  off.scale = false;
  try {
    const Factoring r = factor_run(tiny, off);
    EXPECT_EQ(r.report.scaling_exponent, 0);
  } catch (const NotPositiveDefinite&) {
    // unscaled, FP16 flushes L(i, j) ~ 1e-10 to zero: a pivot may fail
  }
}

TEST(CholeskyScaling, UnderflowAndOverflowOfFp16AreAvoided) {
  // Backward error within the variant's bound (test_cholesky.cpp's) at 1e-20 and 1e5, where the
  // unscaled variants fail: HP1 loses L to underflow (a pivot fails or the error is 1e3 x the
  // bound), HP3 overflows.
  const double rho = std::exp(-1.0 / 32.0);
  for (const auto& [scale, policy] :
       {std::pair{1e-20, "uniform:HP1"}, std::pair{1e-6, "uniform:HP2"},
        std::pair{1e5, "uniform:HP3"}}) {
    const std::vector<double> a = test::kms(kN, rho, scale);
    test::Factored f;
    TileMatrix t = test::tiled(a, kN, kNb);
    f.report = cholesky_tiles(t, with(policy));
    f.l = test::lower_of(t);
    const auto [err, bound] = test::backward(f, a, kN);
    EXPECT_LE(err, bound) << policy << " at " << scale;
    EXPECT_EQ(f.report.attempts, 1);
    std::cout << "[measured] " << policy << " at scale " << scale << ": k "
              << f.report.scaling_exponent << ", backward error " << err << " (bound " << bound
              << ")\n";
    CholeskyOptions off = with(policy);
    off.scale = false;
    TileMatrix u = test::tiled(a, kN, kNb);
    try {
      test::Factored g;
      g.report = cholesky_tiles(u, off);
      g.l = test::lower_of(u);
      const double unscaled = test::backward(g, a, kN).first;
      EXPECT_GT(unscaled, 10 * bound) << policy << " at " << scale;
      std::cout << "  unscaled: backward error " << unscaled << "\n";
    } catch (const NumericalError& e) {
      std::cout << "  unscaled: " << e.what() << "\n";
    }
  }
}

TEST(CholeskyScaling, RecoverRetriesFromTheScaledInput) {
  // rho = 0.999 (kappa 3e5): HP2 loses positive definiteness and needs retries; at 4^-40 the same
  // retries, from the scaled copy kept for them, give 2^-40 times the unscaled run's factor.
  const std::vector<double> a0 = test::kms(kN, 0.999);
  const Factoring base = factor_run(a0, with("uniform:HP2", true));
  ASSERT_GT(base.report.attempts, 1);
  const Factoring got = factor_run(times(a0, std::ldexp(1.0, -80)), with("uniform:HP2", true));
  EXPECT_EQ(got.report.attempts, base.report.attempts);
  EXPECT_EQ(got.report.scaling_exponent, -40);
  expect_scaled_copy(got, base, -40, "recovered uniform:HP2");
}

TEST(CholeskyScaling, FailuresSayTheMatrixWasScaled) {
  std::vector<double> a = test::kms(kN, 0.9, 1e-20);
  a[static_cast<std::size_t>(100 * kN + 100)] = -1e-20;  // tile (3, 3) fails
  TileMatrix t = test::tiled(a, kN, kNb);
  try {
    (void)cholesky_tiles(t, with("uniform:HP1"));
    ADD_FAILURE() << "no NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("uniform:HP1 on A scaled by 2^68"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tile (3, 3)"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace halfscope::linalg

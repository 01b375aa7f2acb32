// The tile-Cholesky GEMM variants (src/linalg/gemm_variants.hpp) against an FP64 reference.
//
// Error bound of one element of C -= A B^T, with S = sum_l |a_il| |b_jl| and gamma_n(u) =
// n u / (1 - n u) (Higham, Accuracy and Stability, sections 2-3):
//   rounding A and B to the input format (unit roundoff u_in) changes each product by at most
//     (2 u_in + u_in^2) |a| |b|;
//   rounding C to the storage format (HP2, HP3) changes it by at most u_c |c|;
//   the k products and k sums in the accumulation format (u_acc) add at most
//     gamma_{k+1}(u_acc) (|c| + (1 + u_in)^2 S)  (FMA or not: the product rounding is counted);
//   rounding the result to the output format (DP -> FP32, HP2 -> FP16) adds u_out |result|.
// The test takes the sum of these terms; it fails if a variant rounds to a coarser format than it
// should (the error exceeds the bound) or skips a rounding (checked separately: the low-precision
// variants must differ from the FP32 result).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"
#include "linalg/gemm_variants.hpp"

namespace halfscope::linalg::detail {
namespace {

struct Units {
  double in, c, acc, out;
};

Units units(GemmVariant v) {
  const double u16 = std::ldexp(1.0, -11), u32 = std::ldexp(1.0, -24);
  switch (v) {
    case GemmVariant::DP:
      return {0.0, 0.0, std::ldexp(1.0, -53), u32};
    case GemmVariant::SP:
      return {0.0, 0.0, u32, 0.0};
    case GemmVariant::TF32:
      return {u16, 0.0, u32, 0.0};
    case GemmVariant::HP1:
      return {u16, 0.0, u32, 0.0};
    case GemmVariant::HP2:
      return {u16, u16, u32, u16};
    case GemmVariant::HP3:
      return {u16, u16, u16, 0.0};
    case GemmVariant::BF16:
      return {std::ldexp(1.0, -8), 0.0, u32, 0.0};
  }
  return {};
}

double gamma(std::int64_t n, double u) {
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

struct Problem {
  std::int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b, c;
};

// Column-major operands with padding rows (ld > rows) that must stay untouched.
Problem make_problem(std::int64_t m, std::int64_t n, std::int64_t k, float scale,
                     std::uint64_t seed) {
  Problem p{m, n, k, m + 3, n + 1, m + 2, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  p.a.resize(static_cast<std::size_t>(p.lda * k));
  p.b.resize(static_cast<std::size_t>(p.ldb * k));
  p.c.resize(static_cast<std::size_t>(p.ldc * n));
  for (float& x : p.a) x = dist(rng);
  for (float& x : p.b) x = dist(rng);
  for (float& x : p.c) x = dist(rng) * scale;
  return p;
}

class GemmVariantsTest : public ::testing::TestWithParam<GemmVariant> {};

TEST_P(GemmVariantsTest, WithinBoundOfFp64Reference) {
  const GemmVariant v = GetParam();
  const Units u = units(v);
  Problem p = make_problem(37, 29, 45, 4.0f, 7);
  const std::vector<float> c0 = p.c;
  gemm_nt_update(v, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, {3, 1});
  double worst_ratio = 0.0, max_err = 0.0;
  for (std::int64_t j = 0; j < p.n; ++j)
    for (std::int64_t i = 0; i < p.m; ++i) {
      double ref = c0[static_cast<std::size_t>(i + j * p.ldc)], s = 0.0;
      for (std::int64_t l = 0; l < p.k; ++l) {
        const double a = p.a[static_cast<std::size_t>(i + l * p.lda)];
        const double b = p.b[static_cast<std::size_t>(j + l * p.ldb)];
        ref -= a * b;
        s += std::abs(a * b);
      }
      const double c_abs =
          std::abs(static_cast<double>(c0[static_cast<std::size_t>(i + j * p.ldc)]));
      const double before_out = (2 * u.in + u.in * u.in) * s + u.c * c_abs +
                                gamma(p.k + 1, u.acc) * (c_abs + (1 + u.in) * (1 + u.in) * s);
      const double bound = before_out + u.out * (std::abs(ref) + before_out);
      const double err = std::abs(p.c[static_cast<std::size_t>(i + j * p.ldc)] - ref);
      max_err = std::max(max_err, err);
      worst_ratio = std::max(worst_ratio, err / bound);
    }
  EXPECT_LE(worst_ratio, 1.0) << gemm_variant_name(v) << " max error " << max_err;
  // Padding rows of C are not written.
  for (std::int64_t j = 0; j < p.n; ++j)
    for (std::int64_t i = p.m; i < p.ldc; ++i)
      EXPECT_EQ(p.c[static_cast<std::size_t>(i + j * p.ldc)],
                c0[static_cast<std::size_t>(i + j * p.ldc)]);
  RecordProperty("max_abs_error", std::to_string(max_err));
}

TEST_P(GemmVariantsTest, LowPrecisionVariantsActuallyRound) {
  // Inputs rounded to a format with u_in >= 2^-11 must move the result away from the FP32 GEMM
  // by far more than FP32 accumulation alone could (about k 2^-24 S): at least 2^-16 S here.
  const GemmVariant v = GetParam();
  if (units(v).in == 0.0) GTEST_SKIP() << "no input rounding in " << gemm_variant_name(v);
  Problem p = make_problem(16, 16, 32, 1.0f, 11);
  Problem q = p;
  gemm_nt_update(v, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, p.c.data(), p.ldc, {});
  gemm_nt_update(GemmVariant::SP, q.m, q.n, q.k, q.a.data(), q.lda, q.b.data(), q.ldb, q.c.data(),
                 q.ldc, {});
  double max_diff = 0.0;
  for (std::size_t x = 0; x < p.c.size(); ++x)
    max_diff = std::max(max_diff, static_cast<double>(std::abs(p.c[x] - q.c[x])));
  EXPECT_GT(max_diff, std::ldexp(1.0, -16) * 32.0 * 0.25);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GemmVariantsTest,
                         ::testing::ValuesIn(all_gemm_variants().begin(),
                                             all_gemm_variants().end()),
                         [](const ::testing::TestParamInfo<GemmVariant>& param_info) {
                           return std::string(gemm_variant_name(param_info.param));
                         });

TEST(GemmVariants, Tf32RoundsToNearestEven) {
  const float one = 1.0f;
  EXPECT_EQ(round_to_tf32(one + std::ldexp(1.0f, -11)), one);  // tie -> even (1)
  EXPECT_EQ(round_to_tf32(one + 3 * std::ldexp(1.0f, -11)), one + std::ldexp(1.0f, -9));
  EXPECT_EQ(round_to_tf32(one + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)),
            one + std::ldexp(1.0f, -10));
  EXPECT_EQ(round_to_tf32(-2.5f), -2.5f);  // exact values are kept
}

// Expects NumericalError naming the tile and `fragment`, and C left unchanged.
void expect_overflow(GemmVariant v, std::vector<float> a, std::vector<float> b,
                     std::vector<float> c, const std::string& fragment) {
  const std::vector<float> c0 = c;
  const std::int64_t k = static_cast<std::int64_t>(a.size());
  try {
    gemm_nt_update(v, 1, 1, k, a.data(), 1, b.data(), 1, c.data(), 1, {4, 2});
    ADD_FAILURE() << gemm_variant_name(v) << ": no NumericalError, C = " << c[0];
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tile (4, 2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    EXPECT_NE(msg.find(gemm_variant_name(v)), std::string::npos) << msg;
  }
  EXPECT_EQ(c, c0);
}

TEST(GemmVariants, Fp16OverflowIsLoud) {
  expect_overflow(GemmVariant::HP1, {7e4f}, {1.0f}, {0.0f}, "A entry");
  expect_overflow(GemmVariant::HP2, {1.0f}, {-7e4f}, {0.0f}, "B entry");
  expect_overflow(GemmVariant::HP2, {1.0f}, {-1e4f}, {6e4f}, "result");  // 6e4 + 1e4 > 65504
  expect_overflow(GemmVariant::HP3, {1.0f}, {1.0f}, {7e4f}, "C entry");
  // 300 * 300 = 9e4: the product overflows FP16 although every operand fits.
  expect_overflow(GemmVariant::HP3, {300.0f, 1.0f}, {300.0f, 1.0f}, {0.0f}, "overflowed");
  // The same products are fine where only the inputs are FP16 or the format has FP32's range.
  for (const GemmVariant v : {GemmVariant::HP1, GemmVariant::BF16, GemmVariant::TF32}) {
    std::vector<float> a{300.0f, 1.0f}, b{300.0f, 1.0f}, c{0.0f};
    gemm_nt_update(v, 1, 1, 2, a.data(), 1, b.data(), 1, c.data(), 1, {});
    EXPECT_EQ(c[0], -90001.0f) << gemm_variant_name(v);
  }
  std::vector<float> big{1e5f}, one{1.0f}, c{0.0f};
  gemm_nt_update(GemmVariant::BF16, 1, 1, 1, big.data(), 1, one.data(), 1, c.data(), 1, {});
  EXPECT_EQ(c[0], -static_cast<float>(BFloat16(1e5f)));
}

}  // namespace
}  // namespace halfscope::linalg::detail

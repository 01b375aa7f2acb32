// Triangular solves with the tile Cholesky factor (include/halfscope/linalg/solve.hpp) against
// LAPACK dposv in FP64, for every built-in solve policy; bounds derived in solve_test_support.hpp.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/solve.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

namespace halfscope::linalg {
namespace {

using test::builtin_policies;

struct Case {
  std::int64_t n, nb, r;
};

std::vector<double> random_rhs(std::int64_t r, std::int64_t n, std::uint64_t seed) {
  const std::vector<float> v = halfscope::test::random_floats(r * n, -1.0f, 1.0f, seed);
  return {v.begin(), v.end()};
}

Array rows_f32(const std::vector<double>& b, std::int64_t r, std::int64_t n) {
  return Array::from_values<double>(b, {r, n}).astype(DType::f32);
}

class SolveRightTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SolveRightTest, MatchesLapackWithinDerivedBound) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  const Policy policy = parse_policy(GetParam());
  // n % nb != 0, n < nb, n = 1, several tiles; r = 1, a few, and more than one thread's slice.
  for (const Case c :
       {Case{300, 64, 37}, Case{256, 64, 1}, Case{97, 7, 5}, Case{50, 64, 3}, Case{1, 8, 2}}) {
    const std::vector<double> a = test::nugget_covariance(c.n);
    const std::vector<double> b = random_rhs(c.r, c.n, 7 + static_cast<std::uint64_t>(c.n));
    const std::vector<double> x_ref = test::dposv_rows(a, b, c.n);
    TileMatrix l = test::tiled(a, c.n, c.nb);
    const CholeskyReport factor = cholesky_tiles(l, {});  // uniform:SP factor
    Array x = rows_f32(b, c.r, c.n);
    const SolveReport report = solve_right(l, x, {policy});
    EXPECT_EQ(report.policy, policy.name());
    const std::int64_t nt = (c.n + c.nb - 1) / c.nb;
    std::int64_t counted = 0;
    for (const std::int64_t t : report.tiles) counted += t;
    EXPECT_EQ(counted, nt * (nt - 1) / 2);
    if (GetParam().rfind("uniform:", 0) == 0 && nt > 1) {
      EXPECT_EQ(report.count(parse_gemm_variant(GetParam().substr(8))), nt * (nt - 1) / 2);
    }
    const double e = test::largest_term(factor.tiles, c.n) + test::gamma(c.n + 1, 0x1p-24) +
                     2 * (test::largest_term(report.tiles, c.n) + test::gamma(c.n, 0x1p-24));
    const double bound = 2 * e * test::abs_factor_product_norm(a, c.n) / test::kNugget;
    const double err = test::relative_error(x.data_as<float>(), x_ref);
    std::cout << "[solve] " << policy.name() << " n=" << c.n << " nb=" << c.nb << " r=" << c.r
              << " forward " << err << " bound " << bound << "\n";
    EXPECT_LE(err, bound) << policy.name() << " n=" << c.n << " nb=" << c.nb;
    EXPECT_TRUE(std::isfinite(err));
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(BuiltinPolicies, SolveRightTest, ::testing::ValuesIn(builtin_policies()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// The variants really round: an HP1 / BF16 solve differs from the SP one, SP from DP only by
// FP32 summation order.
TEST(SolveRight, LowPrecisionPoliciesRound) {
  const std::int64_t n = 200, nb = 32, r = 4;
  const std::vector<double> a = test::nugget_covariance(n);
  TileMatrix l = test::tiled(a, n, nb);
  (void)cholesky_tiles(l, {});
  const std::vector<double> b = random_rhs(r, n, 11);
  Array sp = rows_f32(b, r, n), hp1 = rows_f32(b, r, n), bf16 = rows_f32(b, r, n);
  (void)solve_right(l, sp, {uniform_policy(GemmVariant::SP)});
  (void)solve_right(l, hp1, {uniform_policy(GemmVariant::HP1)});
  (void)solve_right(l, bf16, {uniform_policy(GemmVariant::BF16)});
  const std::vector<double> ref(sp.data_as<float>(), sp.data_as<float>() + r * n);
  const double d_hp1 = test::relative_error(hp1.data_as<float>(), ref);
  const double d_bf16 = test::relative_error(bf16.data_as<float>(), ref);
  EXPECT_GT(d_hp1, 0x1p-20) << "HP1 solve did not round its operands";
  EXPECT_GT(d_bf16, d_hp1) << "BF16 (8-bit mantissa) should be worse than HP1 (11-bit)";
}

// The solve policy is queried with L's norms: ||L||_F^2 = trace(L L^T) = trace(A), an
// independent value (a diagonal tile counted whole would add the A entries left above its
// diagonal). The FP32 factor satisfies L L^T = A + dA with |dA| <= gamma_{n+1}(u32) |L||L^T|
// (Higham Thm 10.3), and diag(|L||L^T|) = diag(L L^T), so |trace(L L^T) - trace(A)| <=
// gamma_{n+1}(u32) trace(A), and the norm (a square root) moves by at most half that.
TEST(SolveRight, PolicySeesTheFactorsNorms) {
  const std::int64_t n = 150, nb = 32, nt = 5;
  const std::vector<double> a = test::nugget_covariance(n);
  TileMatrix l = test::tiled(a, n, nb);
  (void)cholesky_tiles(l, {});
  std::mutex mutex;
  std::vector<TileQuery> queries;
  const Policy spy("spy", [&](const TileQuery& q) {
    const std::lock_guard<std::mutex> lock(mutex);
    queries.push_back(q);
    return q.i - q.j == 1 ? GemmVariant::SP : GemmVariant::HP1;
  });
  Array x = rows_f32(random_rhs(2, n, 4), 2, n);
  const SolveReport report = solve_right(l, x, {spy});
  EXPECT_EQ(report.policy, "spy");
  EXPECT_EQ(report.count(GemmVariant::SP), nt - 1);
  EXPECT_EQ(report.count(GemmVariant::HP1), nt * (nt - 1) / 2 - (nt - 1));
  ASSERT_EQ(queries.size(), static_cast<std::size_t>(nt * (nt - 1) / 2));
  double trace = 0;
  for (std::int64_t i = 0; i < n; ++i) trace += a[static_cast<std::size_t>(i * n + i)];
  for (const TileQuery& q : queries) {
    EXPECT_GT(q.i, q.j);
    EXPECT_EQ(q.tile_rows, nt);
    EXPECT_NEAR(q.matrix_norm, std::sqrt(trace), test::gamma(n + 1, 0x1p-24) * std::sqrt(trace));
    // The tile's own norm, from its stored FP32 entries.
    const float* t = l.storage.data_as<float>() + l.layout.tile_offset(q.i, q.j);
    double sum = 0;
    for (std::int64_t e = 0; e < l.layout.tile_height(q.i) * l.layout.tile_width(q.j); ++e)
      sum += static_cast<double>(t[e]) * t[e];
    EXPECT_NEAR(q.tile_norm, std::sqrt(sum), 1e-12 * std::sqrt(sum));
  }
}

TEST(SolveRight, BadInputIsInvalidInputNamingShapes) {
  const std::int64_t n = 20;
  TileMatrix l = test::tiled(test::nugget_covariance(n), n, 8);
  (void)cholesky_tiles(l, {});
  auto expect_invalid = [&](Array b, const std::vector<std::string>& fragments) {
    try {
      (void)solve_right(l, b);
      ADD_FAILURE() << "no InvalidInput for " << b.describe();
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
    }
  };
  expect_invalid(Array::zeros(DType::f32, {3, n + 1}), {"solve_right: b", "[r, 20]", "[3, 21]"});
  expect_invalid(Array::zeros(DType::f32, {n}), {"[r, 20]", "[20]"});
  expect_invalid(Array::zeros(DType::f64, {2, n}), {"float32", "float64"});
  Array nan = Array::zeros(DType::f32, {2, n});
  nan.data_as<float>()[n + 3] = std::nanf("");
  expect_invalid(nan, {"finite", "row 1, column 3"});
  TileMatrix full =
      TileMatrix::from_dense(Array::zeros(DType::f64, {n, n}), 8, TileFill::full, DType::f32);
  Array b = Array::zeros(DType::f32, {1, n});
  EXPECT_THROW((void)solve_right(full, b), InvalidInput);
  SolveOptions negative;  // checked before any device is touched
  negative.devices = {0};
  negative.device_memory = -1;
  try {
    (void)solve_right(l, b, negative);
    ADD_FAILURE() << "no InvalidInput for device_memory -1";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("device_memory: expected a size in bytes >= 0, found -1"),
              std::string::npos)
        << e.what();
  }
}

// B's solved blocks are FP16 operands of the HP1 updates: 1e6-sized right-hand sides overflow.
TEST(SolveRight, Fp16OverflowIsNumericalErrorNamingTheTile) {
  const std::int64_t n = 40, nb = 16;
  TileMatrix l = test::tiled(test::nugget_covariance(n), n, nb);
  (void)cholesky_tiles(l, {});
  std::vector<double> b(static_cast<std::size_t>(n), 1e6);
  Array x = rows_f32(b, 1, n);
  try {
    (void)solve_right(l, x, {uniform_policy(GemmVariant::HP1)});
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GEMM HP1 of the forward substitution with tile of L (1, 0)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("B entry"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("--recover"), std::string::npos) << msg;
  }
  Array y = rows_f32(b, 1, n);  // FP32 holds the same values
  EXPECT_NO_THROW((void)solve_right(l, y, {uniform_policy(GemmVariant::SP)}));
}

TEST(SolveSpd, VectorAndMatrixRightHandSides) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  const std::int64_t n = 130, nb = 32, r = 6;
  const std::vector<double> a = test::nugget_covariance(n);
  // Column-major n x r B (what dposv takes) = row-major r x n rows; the n x r C-order array
  // solve_spd takes is its transpose.
  const std::vector<double> rows = random_rhs(r, n, 5);
  const std::vector<double> x_rows = test::dposv_rows(a, rows, n);
  std::vector<double> b_nr(static_cast<std::size_t>(n * r));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < r; ++c)
      b_nr[static_cast<std::size_t>(i * r + c)] = rows[static_cast<std::size_t>(c * n + i)];
  const double e = 3 * (test::gamma(n + 1, 0x1p-24) + test::gamma(n, 0x1p-24));
  const double bound = 2 * e * test::abs_factor_product_norm(a, n) / test::kNugget;

  TileMatrix am = test::tiled(a, n, nb);
  Array bm = Array::from_values<double>(b_nr, {n, r}).astype(DType::f32);
  (void)solve_spd(am, bm);
  std::vector<double> x_nr(static_cast<std::size_t>(n * r));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < r; ++c)
      x_nr[static_cast<std::size_t>(i * r + c)] = x_rows[static_cast<std::size_t>(c * n + i)];
  EXPECT_LE(test::relative_error(bm.data_as<float>(), x_nr), bound);

  TileMatrix av = test::tiled(a, n, nb);
  std::vector<double> first(rows.begin(), rows.begin() + n);
  Array bv = Array::from_values<double>(first, {n}).astype(DType::f32);
  const CholeskyReport report = solve_spd(av, bv);
  EXPECT_EQ(report.policy, "uniform:SP");
  EXPECT_EQ(bv.ndim(), 1);
  const std::vector<double> x_first(x_rows.begin(), x_rows.begin() + n);
  EXPECT_LE(test::relative_error(bv.data_as<float>(), x_first), bound);

  TileMatrix bad = test::tiled(a, n, nb);
  Array wrong = Array::zeros(DType::f32, {r, n});
  try {
    (void)solve_spd(bad, wrong);
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& ex) {
    EXPECT_NE(std::string(ex.what()).find("[130] or [130, r]"), std::string::npos) << ex.what();
  }
#endif
}

}  // namespace
}  // namespace halfscope::linalg

// The host factorization behind the `separable` method (conv/separable.hpp): low-rank kernels are
// found with the rank they were built with and rebuilt within the tolerance, full-rank and
// non-finite kernels are refused, and the tolerance and worthwhile rank follow their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "conv/separable.hpp"
#include "halfscope/sim/kernels.hpp"

namespace halfscope::conv {
namespace {

std::vector<double> outer_sum(const std::vector<std::vector<double>>& cols,
                              const std::vector<std::vector<double>>& rows) {
  const std::size_t kr = cols[0].size(), kc = rows[0].size();
  std::vector<double> k(kr * kc, 0.0);
  for (std::size_t r = 0; r < cols.size(); ++r)
    for (std::size_t u = 0; u < kr; ++u)
      for (std::size_t v = 0; v < kc; ++v) k[u * kc + v] += cols[r][u] * rows[r][v];
  return k;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

/// sum |K - factors| / sum |K|, recomputed independently of the factorization's own account.
double rebuilt_residual(const std::vector<double>& k, const SeparableFactors& f) {
  double num = 0, den = 0;
  for (std::int64_t u = 0; u < f.krows; ++u)
    for (std::int64_t v = 0; v < f.kcols; ++v) {
      double s = 0;
      for (int r = 0; r < f.rank; ++r)
        s += f.col[static_cast<std::size_t>(r * f.krows + u)] *
             f.row[static_cast<std::size_t>(r * f.kcols + v)];
      num += std::abs(k[static_cast<std::size_t>(u * f.kcols + v)] - s);
      den += std::abs(k[static_cast<std::size_t>(u * f.kcols + v)]);
    }
  return num / den;
}

TEST(SeparableFactors, GaussianRoundedToFloatIsRankOneWithinFourUnitRoundoffs) {
  for (std::int64_t w : {3, 9, 21, 51, 115}) {
    const Array g = sim::gaussian_kernel(w).astype(DType::f32);
    const auto f = factor_separable(g, separable_tolerance(Precision::Single), kSeparableMaxRank);
    ASSERT_TRUE(f) << "width " << w;
    EXPECT_EQ(f->rank, 1) << "width " << w;
    const Array k64 = g.astype(DType::f64);
    const std::vector<double> k(k64.data_as<double>(), k64.data_as<double>() + k64.size());
    EXPECT_LE(rebuilt_residual(k, *f), separable_tolerance(Precision::Single)) << "width " << w;
    EXPECT_NEAR(rebuilt_residual(k, *f), f->residual, 1e-15);
  }
}

TEST(SeparableFactors, SignedSumsOfOuterProductsKeepTheirRank) {
  for (int rank = 1; rank <= kSeparableMaxRank; ++rank) {
    std::vector<std::vector<double>> cols, rows;
    for (int r = 0; r < rank; ++r) {
      cols.push_back(random_vector(13, 10 + r, -1, 1));
      rows.push_back(random_vector(17, 20 + r, -1, 1));
    }
    const std::vector<double> k = outer_sum(cols, rows);
    const auto f = factor_separable(k.data(), 13, 17, 1e-13, kSeparableMaxRank);
    ASSERT_TRUE(f) << "rank " << rank;
    EXPECT_EQ(f->rank, rank);
    EXPECT_LE(rebuilt_residual(k, *f), 1e-13);
    // One term fewer than needed does not represent it.
    EXPECT_FALSE(factor_separable(k.data(), 13, 17, 1e-13, rank - 1)) << "rank " << rank;
  }
}

TEST(SeparableFactors, FullRankAndNonFiniteKernelsAreRefused) {
  const std::vector<double> noise = random_vector(15 * 15, 7, -1, 1);
  EXPECT_FALSE(factor_separable(noise.data(), 15, 15, 1e-6, kSeparableMaxRank));
  std::vector<double> k = outer_sum({random_vector(5, 1, 0, 1)}, {random_vector(5, 2, 0, 1)});
  k[7] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(factor_separable(k.data(), 5, 5, 1e-6, kSeparableMaxRank));
  k[7] = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(factor_separable(k.data(), 5, 5, 1e-6, kSeparableMaxRank));
}

TEST(SeparableFactors, ZeroKernelIsOneZeroTerm) {
  const std::vector<double> k(12, 0.0);
  const auto f = factor_separable(k.data(), 3, 4, 1e-6, 1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->rank, 1);
  for (double c : f->col) EXPECT_EQ(c, 0.0);
}

TEST(SeparableFactors, ToleranceAndWorthwhileRankFollowTheirDefinitions) {
  EXPECT_EQ(separable_tolerance(Precision::Single), 4 * std::ldexp(1.0, -24));
  EXPECT_EQ(separable_tolerance(Precision::Mixed), 4 * std::ldexp(1.0, -11));
  // r (kr + kc) <= kr kc / 2: width 3 never, 9 up to 2, 16 up to 4 (the cap).
  EXPECT_EQ(separable_worthwhile_rank(3, 3), 0);
  EXPECT_EQ(separable_worthwhile_rank(9, 9), 2);
  EXPECT_EQ(separable_worthwhile_rank(16, 16), 4);
  EXPECT_EQ(separable_worthwhile_rank(115, 115), kSeparableMaxRank);
  EXPECT_EQ(separable_worthwhile_rank(1, 115), 0);
}

}  // namespace
}  // namespace halfscope::conv

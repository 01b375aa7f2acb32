// Mixed-precision tile Cholesky (include/halfscope/linalg/cholesky.hpp) against LAPACK in double.
//
// Test matrix: the Kac-Murdock-Szego covariance A_ij = s rho^|i-j| (rho = e^-1/32, a correlation
// length of half a 64-tile, so the off-diagonal GEMMs carry real weight), SPD with
// kappa_2(A) <= (1 + rho) / (1 - rho) < 64, so forward errors stay within a known multiple of the
// backward error.
// Backward error bound (Higham, Thm 10.3, to first order): |L L^T - A| <= e |L| |L^T| with
// e = gamma_{n+1}(2^-24) for the FP32 POTRF / TRSM / SYRK plus, for the GEMM variants in use, the
// largest 2 u_in + u_c + u_out + gamma_n(u_acc) (input, C and output rounding, accumulation; the
// same terms as test_cholesky_gemm.cpp). || |L| |L^T| ||_F <= ||L||_F^2 = trace(A), hence
// ||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F.
// Forward error: ||L - L_ref||_F / ||L_ref||_F <= kappa_2(A) * backward bound (first order, with
// a factor 2 of slack for the second-order terms).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "solve_test_support.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::linalg {
namespace {

const double kRho = std::exp(-1.0 / 32.0);
[[maybe_unused]] const double kKappaBound = (1 + kRho) / (1 - kRho);  // about 64

// gamma_n(u) and the per-variant error term e_v: solve_test_support.hpp.
using test::gamma;
using test::variant_term;

struct Errors {
  double backward = 0.0, bound = 0.0, forward = 0.0;
};

// Factors A (dense FP64, rounded to FP32 by the tiling) and measures the errors of L in FP64.
Errors factor_and_measure(const std::vector<double>& dense, std::int64_t n, std::int64_t nb,
                          const CholeskyOptions& opts, CholeskyReport* report_out = nullptr) {
  TileMatrix t = test::tiled(dense, n, nb);
  // The FP32-rounded input is the matrix the factorization sees.
  const Array a32 = t.to_dense();
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::size_t x = 0; x < a.size(); ++x) a[x] = a32.data_as<float>()[x];
  const CholeskyReport report = cholesky_tiles(t, opts);
  if (report_out) *report_out = report;
  std::vector<double> l(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      l[static_cast<std::size_t>(i * n + j)] =
          t.storage.data_as<float>()[t.layout.element_offset(i, j)];
  double num = 0.0, den = 0.0, trace = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    trace += a[static_cast<std::size_t>(i * n + i)];
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p <= std::min(i, j); ++p)
        s += l[static_cast<std::size_t>(i * n + p)] * l[static_cast<std::size_t>(j * n + p)];
      const double aij = a[static_cast<std::size_t>(i * n + j)];
      num += (s - aij) * (s - aij);
      den += aij * aij;
    }
  }
  Errors e;
  e.backward = std::sqrt(num / den);
  double worst = gamma(n + 1, std::ldexp(1.0, -24));
  double used = 0.0;
  for (const GemmVariant v : all_gemm_variants())
    if (report.count(v) > 0) used = std::max(used, variant_term(v, n));
  e.bound = (worst + used) * trace / std::sqrt(den);
#if HALFSCOPE_HAS_LAPACKE
  std::vector<double> ref = a;  // row-major lower = column-major upper; ask for 'L' row-major
  EXPECT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), ref.data(),
                           static_cast<lapack_int>(n)),
            0);
  double fnum = 0.0, fden = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const double r = ref[static_cast<std::size_t>(i * n + j)];
      const double d = l[static_cast<std::size_t>(i * n + j)] - r;
      fnum += d * d;
      fden += r * r;
    }
  e.forward = std::sqrt(fnum / fden);
#endif
  return e;
}

struct Case {
  std::int64_t n, nb;
};

class CholeskyPolicyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CholeskyPolicyTest, FactorsWithinBoundsOfPrecisionsUsed) {
  for (const Case c : {Case{300, 64}, Case{256, 64}, Case{50, 64}, Case{1, 8}, Case{97, 7}}) {
    CholeskyOptions opts;
    opts.policy = parse_policy(GetParam());
    CholeskyReport report;
    const Errors e = factor_and_measure(test::kms(c.n, kRho, 1.0), c.n, c.nb, opts, &report);
    EXPECT_LE(e.backward, e.bound) << GetParam() << " n=" << c.n << " nb=" << c.nb;
#if HALFSCOPE_HAS_LAPACKE
    EXPECT_LE(e.forward, 2 * kKappaBound * e.bound) << GetParam() << " n=" << c.n;
#endif
    std::int64_t total = 0;
    for (const std::int64_t t : report.tiles) total += t;
    const std::int64_t nt = (c.n + c.nb - 1) / c.nb;
    EXPECT_EQ(total, nt * (nt - 1) / 2);
    EXPECT_EQ(report.attempts, 1);
    EXPECT_EQ(report.policy, opts.policy.name());
    if (c.n == 300)
      std::cout << "[measured] " << GetParam() << " n=300 nb=64 backward " << e.backward
                << " (bound " << e.bound << ") forward " << e.forward << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIns, CholeskyPolicyTest,
                         ::testing::ValuesIn(test::builtin_policies()), test::policy_test_name);

TEST(Cholesky, LowPrecisionPoliciesAreLessAccurateThanSP) {
  // Guards against a policy being silently ignored: HP1 GEMMs must cost accuracy. Only the GEMM
  // part of the error grows (by up to 2^13 in unit roundoff); measured 30x (OpenBLAS) and 6x
  // (the loops used without BLAS) at n = 300, so 4x detects a skipped rounding with margin.
  CholeskyOptions sp, hp1;
  hp1.policy = parse_policy("uniform:HP1");
  const std::vector<double> a = test::kms(300, kRho, 1.0);
  EXPECT_GT(factor_and_measure(a, 300, 64, hp1).backward,
            4 * factor_and_measure(a, 300, 64, sp).backward);
}

TEST(Cholesky, TileCountsMatchPolicy) {
  CholeskyOptions opts;
  opts.policy = parse_policy("band:SP=2,HP1=rest");
  TileMatrix t = test::tiled(test::kms(300, kRho, 1.0), 300,
                             64);  // NT = 5: distances 1..4 hold 4, 3, 2, 1 tiles
  const CholeskyReport r = cholesky_tiles(t, opts);
  EXPECT_EQ(r.count(GemmVariant::SP), 7);
  EXPECT_EQ(r.count(GemmVariant::HP1), 3);
  EXPECT_EQ(r.count(GemmVariant::HP3), 0);

  // Adaptive: the counts are what the rule gives on the input's norms, recomputed here.
  opts.policy = parse_policy("adaptive:tol=1e-4");
  const std::int64_t n = 300, nb = 64, nt = 5;
  const std::vector<double> a = test::kms(n, kRho, 1.0);
  TileMatrix u = test::tiled(a, n, nb);
  std::vector<double> norm2(static_cast<std::size_t>(nt * nt), 0.0);
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = static_cast<float>(a[static_cast<std::size_t>(i * n + j)]);
      total += x * x;
      if (i >= j) norm2[static_cast<std::size_t>((i / nb) * nt + j / nb)] += x * x;
    }
  std::array<std::int64_t, 7> expected{};
  for (std::int64_t i = 1; i < nt; ++i)
    for (std::int64_t j = 0; j < i; ++j) {
      const double ratio =
          std::sqrt(norm2[static_cast<std::size_t>(i * nt + j)]) * nt / std::sqrt(total);
      const GemmVariant v = ratio < 1e-4 / std::ldexp(1.0, -8)    ? GemmVariant::BF16
                            : ratio < 1e-4 / std::ldexp(1.0, -11) ? GemmVariant::HP1
                                                                  : GemmVariant::SP;
      ++expected[static_cast<std::size_t>(v)];
    }
  const CholeskyReport ra = cholesky_tiles(u, opts);
  EXPECT_EQ(ra.tiles, expected);
  EXPECT_GT(ra.count(GemmVariant::SP), 0);  // the near-diagonal tiles are too heavy for 16 bits
  EXPECT_GT(ra.count(GemmVariant::BF16) + ra.count(GemmVariant::HP1), 0);
}

TEST(Cholesky, NotPositiveDefiniteNamesTileAndPolicy) {
  std::vector<double> a = test::kms(300, kRho, 1.0);
  a[static_cast<std::size_t>(200 * 300 + 200)] = -1.0;  // minors of order <= 200 stay SPD
  for (const bool recover : {false, true}) {
    CholeskyOptions opts;
    opts.policy = parse_policy("band:SP=1,HP1=rest");
    opts.recover = recover;  // promotion cannot help a matrix that is not SPD
    TileMatrix t = test::tiled(a, 300, 64);
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << "no NotPositiveDefinite";
    } catch (const NotPositiveDefinite& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tile (3, 3)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("leading minor of order 201"), std::string::npos) << msg;
      EXPECT_NE(msg.find("band:SP=1,HP1=rest"), std::string::npos) << msg;
    }
  }
}

TEST(Cholesky, RecoverFinishesFailingHp3Run) {
  // Scale 1e5: the matrix entries exceed 65504, L's entries are about sqrt(1e5) = 316, so their
  // FP16 products overflow (HP3) and so does C in FP16 (HP2); HP1 (FP32 C) works.
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = test::kms(n, kRho, 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.scale = false;  // scaled (1e5 / 4^8), nothing would overflow (ScalingKeepsFp16InRange)
  TileMatrix t = test::tiled(a, n, nb);
  EXPECT_THROW((void)cholesky_tiles(t, opts), NumericalError);

  opts.recover = true;
  CholeskyReport report;
  const Errors e = factor_and_measure(a, n, nb, opts, &report);
  EXPECT_GT(report.attempts, 1);
  EXPECT_EQ(static_cast<std::int64_t>(report.recoveries.size()), report.attempts - 1);
  // A C entry beyond FP16 goes straight to HP1 (HP2 would round C to FP16 again).
  EXPECT_NE(report.recoveries.front().find("HP3->HP1"), std::string::npos)
      << report.recoveries.front();
  // Tiles of column 0 get no GEMM and keep HP3; only tiles whose GEMMs overflowed were promoted.
  EXPECT_GE(report.count(GemmVariant::HP3), 4);
  EXPECT_GT(report.count(GemmVariant::HP1), 0);
  EXPECT_EQ(report.count(GemmVariant::SP), 0);
  EXPECT_LE(e.backward, e.bound);
  std::cout << "[measured] recovered uniform:HP3 scale 1e5: attempts " << report.attempts
            << " backward " << e.backward << " (bound " << e.bound
            << ")\n  first recovery: " << report.recoveries.front() << "\n";
}

TEST(Cholesky, RejectsWrongLayoutDtypeAndMemory) {
  const Array d = Array::from_values<double>(test::kms(10, kRho, 1.0), {10, 10});
  TileMatrix full = TileMatrix::from_dense(d, 4, TileFill::full, DType::f32);
  EXPECT_THROW((void)cholesky_tiles(full, {}), InvalidInput);
  TileMatrix f64 = TileMatrix::from_dense(d, 4, TileFill::lower, DType::f64);
  EXPECT_THROW((void)cholesky_tiles(f64, {}), InvalidInput);
}

}  // namespace
}  // namespace halfscope::linalg

// GPU tile Cholesky (cholesky_tiles on device storage, src/linalg/cholesky_cuda.cu) against
// LAPACK in double and against the CPU emulation of every variant.
//
// Same matrix and bounds as test_cholesky.cpp: KMS A_ij = s rho^|i-j|, rho = e^-1/32,
// kappa_2(A) < 64. Backward error ||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F with
// e = gamma_{n+1}(2^-24) + the largest variant term in use (input, C and output roundings plus
// gamma_n of the accumulation); forward error vs LAPACKE_dpotrf <= 2 kappa e trace / ||A||.
// GPU vs CPU: both factor the same FP32 input with the same input roundings and differ in
// summation order (and, under a policy with tiles below FP32, in the GPU's split16 diagonal-tile
// updates and panel blocks between halves, a few FP32 roundings per product), and each is within
// the forward bound of the exact
// factor, so
// ||L_gpu - L_cpu|| / ||L|| <= 2 (2 kappa e trace / ||A||) by the triangle inequality.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cholesky_test_support.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "test_support.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::linalg {
namespace {

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

// gamma_n(u) and the per-variant error term e_v: solve_test_support.hpp.
using test::gamma;
using test::variant_term;

// The factor as a dense FP64 lower triangle and relative differences: cholesky_test_support.hpp.
using test::lower_of;
using test::rel_diff;

struct Measured {
  double backward = 0.0, bound = 0.0, forward = -1.0;
  std::vector<double> l;
  CholeskyReport report;
};

Measured factor_on_gpu(const std::vector<double>& dense, std::int64_t n, std::int64_t nb,
                       const CholeskyOptions& opts) {
  TileMatrix t = test::tiled(dense, n, nb, Memory::device);
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::size_t x = 0; x < a.size(); ++x) a[x] = static_cast<float>(dense[x]);
  Measured m;
  m.report = cholesky_tiles(t, opts);
  m.l = lower_of(t);
  double num = 0.0, den = 0.0, trace = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    trace += a[static_cast<std::size_t>(i * n + i)];
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p <= std::min(i, j); ++p)
        s += m.l[static_cast<std::size_t>(i * n + p)] * m.l[static_cast<std::size_t>(j * n + p)];
      const double aij = a[static_cast<std::size_t>(i * n + j)];
      num += (s - aij) * (s - aij);
      den += aij * aij;
    }
  }
  m.backward = std::sqrt(num / den);
  double used = 0.0;
  for (const GemmVariant v : all_gemm_variants())
    if (m.report.count(v) > 0) used = std::max(used, variant_term(v, n));
  m.bound = (gamma(n + 1, std::ldexp(1.0, -24)) + used) * trace / std::sqrt(den);
#if HALFSCOPE_HAS_LAPACKE
  std::vector<double> ref = a;
  EXPECT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), ref.data(),
                           static_cast<lapack_int>(n)),
            0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) ref[static_cast<std::size_t>(i * n + j)] = 0.0;
  m.forward = rel_diff(m.l, ref);
#endif
  return m;
}

class GpuCholeskyPolicyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCholeskyPolicyTest, MatchesLapackAndCpuEmulation) {
  HS_REQUIRE_GPU();
  struct Case {
    std::int64_t n, nb;
  };
  for (const Case c : {Case{300, 64}, Case{256, 64}, Case{50, 64}, Case{1, 8}, Case{97, 7}}) {
    CholeskyOptions opts;
    opts.policy = parse_policy(GetParam());
    const std::vector<double> a = test::kms(c.n, kRho, 1.0);
    const Measured m = factor_on_gpu(a, c.n, c.nb, opts);
    EXPECT_LE(m.backward, m.bound) << GetParam() << " n=" << c.n << " nb=" << c.nb;
    if (m.forward >= 0) {
      EXPECT_LE(m.forward, 2 * kKappaBound * m.bound) << GetParam();
    }
    // The CPU path on the same input: same tile counts, factors within the summation-order bound.
    TileMatrix host = test::tiled(a, c.n, c.nb, Memory::host);
    const CholeskyReport cpu = cholesky_tiles(host, opts);
    EXPECT_EQ(m.report.tiles, cpu.tiles) << GetParam();
    const double diff = rel_diff(m.l, lower_of(host));
    EXPECT_LE(diff, 4 * kKappaBound * m.bound) << GetParam() << " n=" << c.n;
    const std::int64_t nt = (c.n + c.nb - 1) / c.nb;
    std::int64_t total = 0;
    for (const std::int64_t t : m.report.tiles) total += t;
    EXPECT_EQ(total, nt * (nt - 1) / 2);
    EXPECT_EQ(m.report.attempts, 1);
    if (c.n == 300)
      std::cout << "[measured gpu] " << GetParam() << " n=300 nb=64 backward " << m.backward
                << " (bound " << m.bound << ") forward " << m.forward << " gpu-cpu " << diff
                << " workspace " << m.report.workspace_bytes << " B\n";
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIns, GpuCholeskyPolicyTest,
                         ::testing::ValuesIn(test::builtin_policies()), test::policy_test_name);

TEST(GpuCholesky, LowPrecisionIsLessAccurateThanSP) {
  HS_REQUIRE_GPU();
  // A policy silently ignored on the GPU would give SP accuracy; HP1 must cost (CPU: 30x).
  CholeskyOptions sp, hp1;
  hp1.policy = parse_policy("uniform:HP1");
  const std::vector<double> a = test::kms(300, kRho, 1.0);
  EXPECT_GT(factor_on_gpu(a, 300, 64, hp1).backward, 4 * factor_on_gpu(a, 300, 64, sp).backward);
}

TEST(GpuCholesky, NotPositiveDefiniteNamesTileAndPolicy) {
  HS_REQUIRE_GPU();
  std::vector<double> a = test::kms(300, kRho, 1.0);
  a[static_cast<std::size_t>(200 * 300 + 200)] = -1.0;  // minors of order <= 200 stay SPD
  for (const bool recover : {false, true}) {
    CholeskyOptions opts;
    opts.policy = parse_policy("band:SP=1,HP1=rest");
    opts.recover = recover;
    TileMatrix t = test::tiled(a, 300, 64, Memory::device);
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

TEST(GpuCholesky, RecoverFinishesFailingHp3Run) {
  HS_REQUIRE_GPU();
  // Scale 1e5: C entries exceed 65504, so HP3 (FP16 C) overflows; HP1 (FP32 C) works.
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = test::kms(n, kRho, 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.scale = false;  // scaled, nothing would overflow
  TileMatrix t = test::tiled(a, n, nb, Memory::device);
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("GEMM HP3 updating tile ("), std::string::npos)
        << e.what();
  }
  opts.recover = true;
  const Measured m = factor_on_gpu(a, n, nb, opts);
  EXPECT_GT(m.report.attempts, 1);
  EXPECT_EQ(static_cast<std::int64_t>(m.report.recoveries.size()), m.report.attempts - 1);
  // A C entry beyond FP16 goes straight to HP1; an FP16 result overflow one level up.
  const std::string& first = m.report.recoveries.front();
  EXPECT_TRUE(first.find("HP3->HP1") != std::string::npos ||
              first.find("HP3->HP2") != std::string::npos)
      << first;
  EXPECT_EQ(m.report.count(GemmVariant::SP), 0);
  EXPECT_GT(m.report.count(GemmVariant::HP1), 0);
  EXPECT_LE(m.backward, m.bound);
  std::cout << "[measured gpu] recovered uniform:HP3 scale 1e5: attempts " << m.report.attempts
            << " backward " << m.backward << " (bound " << m.bound << ")\n";
}

}  // namespace
}  // namespace halfscope::linalg

// `bench cholesky` / `bench tor` on the CPU (include/halfscope/bench/cholesky_bench.hpp): the FP64
// backward error against a dense computation written here, the sampled estimate, the cases and
// their schema on the small check system.
//
// Reference factor: a plain FP64 Cholesky (below) of the KMS matrix A_ij = rho^|i-j|, rounded to
// FP32, so that L L^T - A is dominated by that rounding: about u32 relative per entry of L, i.e.
// a backward error near u32 sqrt(n)-ish, the same in every tile (which the sampled estimate needs
// to be meaningful).
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "test_support.hpp"

namespace halfscope::bench {
namespace {

using linalg::TileFill;
using linalg::TileMatrix;

std::vector<double> kms(std::int64_t n) {
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[static_cast<std::size_t>(i * n + j)] = std::exp(-std::fabs(double(i - j)) / 32.0);
  return a;
}

// Dense FP64 Cholesky (row-major, lower; upper left zero).
std::vector<double> cholesky64(const std::vector<double>& a, std::int64_t n) {
  std::vector<double> l(a.size(), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      double s = a[static_cast<std::size_t>(i * n + j)];
      for (std::int64_t k = 0; k < j; ++k)
        s -= l[static_cast<std::size_t>(i * n + k)] * l[static_cast<std::size_t>(j * n + k)];
      l[static_cast<std::size_t>(i * n + j)] =
          i == j ? std::sqrt(s) : s / l[static_cast<std::size_t>(j * n + j)];
    }
  return l;
}

TileMatrix tiles_of(const std::vector<double>& dense, std::int64_t n, std::int64_t nb) {
  const Array a = Array::from_values<double>(dense, {n, n});
  return TileMatrix::from_dense(a, nb, TileFill::lower, DType::f32);
}

struct Pair {
  TileMatrix l, a;
  double exact = 0;  // ||L32 L32^T - A32||_F / ||A32||_F by dense FP64 loops
};

Pair factored_kms(std::int64_t n, std::int64_t nb) {
  const std::vector<double> a = kms(n);
  std::vector<double> l = cholesky64(a, n);
  Pair p{tiles_of(l, n, nb), tiles_of(a, n, nb), 0};
  // The tiles hold FP32: the reference uses the same rounded values.
  double e2 = 0, a2 = 0;
  for (auto& x : l) x = static_cast<double>(static_cast<float>(x));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k <= std::min(i, j); ++k)
        s += l[static_cast<std::size_t>(i * n + k)] * l[static_cast<std::size_t>(j * n + k)];
      const double aij =
          static_cast<double>(static_cast<float>(a[static_cast<std::size_t>(i * n + j)]));
      e2 += (s - aij) * (s - aij);
      a2 += aij * aij;
    }
  p.exact = std::sqrt(e2 / a2);
  return p;
}

TEST(CholeskyBackwardError, AllTilesMatchDenseFp64) {
  for (const auto& [n, nb] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{300, 64}, {97, 7}, {1, 8}, {50, 64}}) {
    const Pair p = factored_kms(n, nb);
    const BackwardError e = cholesky_backward_error(p.l, p.a);
    EXPECT_FALSE(e.sampled());
    EXPECT_EQ(e.tiles_checked, e.tiles_total);
    // Two FP64 evaluations of the same sums in different orders: they agree to a few u64 times
    // the size of the terms (entries of A are <= 1, so the absolute sum error is ~n u64).
    EXPECT_NEAR(e.relative, p.exact, 1e-9 * p.exact + 1e-13) << "n = " << n << " nb = " << nb;
    if (n > 1) {
      EXPECT_GT(e.relative, 0.0);  // the FP32 rounding of L is visible (n = 1: L = 1 exactly)
    }
    // |L32 L32^T - A32| <= 2 u32 |L||L^T| + u32 |A| (first order), and || |L||L^T| ||_F <=
    // trace(A) = n, ||A||_F >= sqrt(n) here: relative <= u32 (2 sqrt(n) + 1).
    EXPECT_LT(e.relative, std::ldexp(1.0, -24) * (2 * std::sqrt(double(n)) + 1));
  }
}

TEST(CholeskyBackwardError, SampledEstimate) {
  const Pair p = factored_kms(300, 16);  // 19 tile rows, 190 stored tiles
  const BackwardError e = cholesky_backward_error(p.l, p.a, 40);
  EXPECT_TRUE(e.sampled());
  EXPECT_EQ(e.tiles_checked, 40);
  EXPECT_EQ(e.tiles_total, 190);
  // The error is spread evenly (FP32 rounding of every entry of L): a fifth of the tiles
  // estimates it within a factor 2.
  EXPECT_GT(e.relative, 0.5 * p.exact);
  EXPECT_LT(e.relative, 2.0 * p.exact);
  EXPECT_THROW((void)cholesky_backward_error(p.l, factored_kms(300, 32).a), InvalidInput);
}

TEST(CholeskyBench, EeltFirstSensors) {
  EXPECT_EQ(ao::measurement_count(eelt_first_sensors(2)), 22304);
  EXPECT_EQ(ao::measurement_count(eelt_first_sensors(9)), 100368);
  EXPECT_THROW((void)eelt_first_sensors(0), InvalidInput);
  EXPECT_THROW((void)eelt_first_sensors(10), InvalidInput);
}

template <class T>
T param(const BenchCase& c, const char* key) {
  return std::get<T>(c.params.at(key));
}

TEST(CholeskyBench, CheckSystemOnTheCpu) {
  CholBenchOptions o;
  o.systems = {"check"};
  o.policies = {"uniform:SP", "band:SP=1,HP1=rest"};
  o.tile = 128;  // n = 912: 8 tile rows, 28 off-diagonal tiles
  o.repeats = 2;
  o.device = DeviceKind::Cpu;
  o.error_tiles = 0;
  const BenchReport r = run_cholesky_bench(o);
  ASSERT_EQ(r.cases.size(), 2u);  // no cuSOLVER on the CPU
  EXPECT_EQ(r.benchmark, "cholesky");
  for (const BenchCase& c : r.cases) {
    EXPECT_EQ(c.stats.repeats, 2);  // timed; one untimed warm-up before them by default
    EXPECT_EQ(param<std::int64_t>(c, "warmup"), 1);
    EXPECT_EQ(param<std::int64_t>(c, "n"), 912);
    EXPECT_EQ(param<std::int64_t>(c, "tiles_SP") + param<std::int64_t>(c, "tiles_HP1"), 28);
    EXPECT_EQ(param<std::int64_t>(c, "error_tiles_checked"), 36);  // 8 diagonal + 28
    // Backward bound of tests/linalg/test_cholesky.cpp, e trace(A) / ||A||_F with e at most
    // gamma_{n+1}(u32) + 2 u16 + gamma_n(u32); trace / ||A||_F <= sqrt(n) for any SPD A.
    const double u32 = std::ldexp(1.0, -24), u16 = std::ldexp(1.0, -11);
    const double e = 2 * 913 * u32 / (1 - 913 * u32) + (c.precision == "uniform:SP" ? 0 : 2 * u16);
    EXPECT_LT(c.error.at("backward"), e * std::sqrt(912.0)) << c.precision;
    EXPECT_GT(c.TFLOPs, 0.0);
  }
  EXPECT_EQ(param<std::int64_t>(r.cases[0], "tiles_SP"), 28);
  o.warmup = -1;
  EXPECT_THROW((void)run_cholesky_bench(o), InvalidInput);
  EXPECT_EQ(param<std::int64_t>(r.cases[1], "tiles_SP"), 7);  // distance 1: 7 tiles
  // The schema round-trips.
  const std::string json = r.to_json();
  const BenchReport back =
      parse_bench_report(std::as_bytes(std::span(json.data(), json.size())), "report");
  EXPECT_EQ(back.cases.size(), 2u);
  EXPECT_THROW((void)run_cholesky_bench([] {
                 CholBenchOptions bad;
                 bad.sizes = {12345};
                 return bad;
               }()),
               InvalidInput);
}

#if HALFSCOPE_HAS_LAPACKE
TEST(TorBench, CheckSystemOnTheCpu) {
  TorBenchOptions o;
  o.systems = {"check"};
  o.policies = {"uniform:SP", "band:SP=1,HP1=rest"};
  o.tile = 128;
  o.repeats = 1;
  o.device = DeviceKind::Cpu;
  const BenchReport r = run_tor_bench(o);
  ASSERT_EQ(r.cases.size(), 3u);  // FP64 reference + 2 policies
  EXPECT_EQ(r.cases[0].method, "reconstructor_fp64");
  const double s64 = r.cases[0].error.at("strehl_otf");
  EXPECT_GT(s64, 0.0);
  EXPECT_LT(s64, 1.0);
  for (std::size_t i = 1; i < r.cases.size(); ++i) {
    const BenchCase& c = r.cases[i];
    ASSERT_FALSE(c.params.count("failed")) << std::get<std::string>(c.params.at("failed"));
    // The criterion (Strehl within 0.001 of FP64's) for FP32 and FP32 + HP1 far bands.
    EXPECT_LT(std::fabs(c.error.at("strehl_otf_diff_vs_fp64")), 1e-3) << c.precision;
    EXPECT_DOUBLE_EQ(c.error.at("strehl_otf") - s64, c.error.at("strehl_otf_diff_vs_fp64"));
    EXPECT_GE(param<double>(c, "total_with_generation_ms"), c.stats.median_ms);
  }
}
#endif

}  // namespace
}  // namespace halfscope::bench

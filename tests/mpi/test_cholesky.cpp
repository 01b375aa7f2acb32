// The MPI tile Cholesky (halfscope/mpi/cholesky.hpp) against the one-process
// linalg::cholesky_tiles on the same input: every tile receives the same kernels on the same
// operands in the same order, so the gathered factor must equal the one-process factor bit for
// bit (memcmp), for every policy kind and grid shape; the reports' tile counts must match; and
// failures (a non-positive pivot, an FP16 overflow) must reach every rank as the one-process
// error, with the same recovery.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/mpi/cholesky.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {
namespace {

using linalg::CholeskyOptions;
using linalg::CholeskyReport;
using linalg::TileFill;
using linalg::TileMatrix;

constexpr std::int64_t kN = 203;  // not a multiple of the tile size: a short last tile
constexpr std::int64_t kNb = 32;  // 7 x 7 tiles

// A random SPD matrix, the same on every rank: the KMS covariance rho^|i-j| (SPD, decaying away
// from the diagonal, so band and adaptive policies mix variants) plus R R^T / n (PSD, random).
std::vector<double> random_spd(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> r(static_cast<std::size_t>(n * n));
  for (double& x : r) x = u(gen);
  std::vector<double> a(static_cast<std::size_t>(n * n));
  const double rho = std::exp(-1.0 / 16.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p < n; ++p)
        s += r[static_cast<std::size_t>(i * n + p)] * r[static_cast<std::size_t>(j * n + p)];
      const double v = std::pow(rho, static_cast<double>(i - j)) + s / static_cast<double>(n);
      a[static_cast<std::size_t>(i * n + j)] = a[static_cast<std::size_t>(j * n + i)] = v;
    }
  return a;
}

// The tiles of the n x n matrix `a` (row-major), rounded to FP32.
TileMatrix tiled(const std::vector<double>& a, std::int64_t n) {
  Array dense = Array::zeros(DType::f64, {n, n});
  std::memcpy(dense.data(), a.data(), a.size() * sizeof(double));
  return TileMatrix::from_dense(dense, kNb, TileFill::lower, DType::f32);
}

TileMatrix copy_of(const TileMatrix& m) {
  TileMatrix c(m.layout, DType::f32);
  std::memcpy(c.storage.data(), m.storage.data(),
              static_cast<std::size_t>(m.layout.element_count()) * sizeof(float));
  return c;
}

bool same_bits(const TileMatrix& x, const TileMatrix& y) {
  return x.layout.element_count() == y.layout.element_count() &&
         std::memcmp(x.storage.data(), y.storage.data(),
                     static_cast<std::size_t>(x.layout.element_count()) * sizeof(float)) == 0;
}

std::vector<ProcessGrid> grids(int ranks) {
  std::vector<ProcessGrid> g{ProcessGrid::for_ranks(ranks)};
  if (ranks > 1) g.push_back(ProcessGrid{1, ranks});
  if (ranks > 2) g.push_back(ProcessGrid{ranks, 1});
  return g;
}

// linalg::cholesky_tiles on `input`, run once, on rank 0 (on every rank it would only be repeated,
// and oversubscribed ranks pay for each copy): the factor on rank 0, and on every rank the
// report's tile counts and attempts or the error's kind and message.
struct OneProcess {
  TileMatrix l;  // rank 0 only
  std::array<std::int64_t, 7> tiles{};
  std::int64_t attempts = 0;  // 0 when it failed
  bool not_positive_definite = false;
  std::string error;
};

OneProcess one_process(const Comm& world, const TileMatrix& input, const CholeskyOptions& options) {
  OneProcess r;
  std::array<std::int64_t, 9> shared{};  // tiles, attempts, not positive definite
  if (world.rank() == 0) {
    r.l = copy_of(input);
    try {
      const CholeskyReport report = linalg::cholesky_tiles(r.l, options);
      std::copy(report.tiles.begin(), report.tiles.end(), shared.begin());
      shared[7] = report.attempts;
    } catch (const NotPositiveDefinite& e) {
      r.error = e.what();
      shared[8] = 1;
    } catch (const NumericalError& e) {
      r.error = e.what();
    }
  }
  world.broadcast(std::span<std::int64_t>(shared), 0);
  std::copy_n(shared.begin(), 7, r.tiles.begin());
  r.attempts = shared[7];
  r.not_positive_definite = shared[8] != 0;
  r.error = world.broadcast_string(r.error, 0);
  return r;
}

// The message of an error agree() raised, without its "MPI rank r: " prefix.
std::string without_rank(const std::exception& e) {
  const std::string text = e.what();
  EXPECT_EQ(text.rfind("MPI rank ", 0), 0u) << text;
  return text.substr(text.find(": ") + 2);
}

TEST(MpiCholesky, EqualsTheOneProcessFactorBitForBit) {
  const Comm world = Comm::world();
  const TileMatrix input = tiled(random_spd(kN, 5), kN);
  for (const char* policy :
       {"uniform:SP", "uniform:HP1", "uniform:HP3", "uniform:BF16", "uniform:DP", "uniform:TF32",
        "band:DP=1,SP=2,HP1=4,HP3=rest", "adaptive:tol=1e-4"}) {
    CholeskyOptions options;
    options.policy = linalg::parse_policy(policy);
    const OneProcess want = one_process(world, input, options);
    ASSERT_EQ(want.attempts, 1) << want.error;
    for (const ProcessGrid grid : grids(world.size())) {
      SCOPED_TRACE(std::string(policy) + " on a " + std::to_string(grid.rows) + " x " +
                   std::to_string(grid.cols) + " grid");
      DistTileMatrix a = DistTileMatrix::scatter(world, input, grid);
      CholeskyTraffic traffic;
      const CholeskyReport got = cholesky(a, options, &traffic);
      EXPECT_EQ(got.policy, options.policy.name());
      EXPECT_EQ(got.tiles, want.tiles);
      EXPECT_EQ(got.attempts, 1);
      // Several ranks must have exchanged tiles; one rank sends nothing.
      EXPECT_EQ(world.sum(traffic.bytes_sent) > 0, world.size() > 1);
      // Every byte a root sends to a rank of its broadcast is received there once.
      EXPECT_EQ(world.sum(traffic.bytes_sent), world.sum(traffic.bytes_received));
      const TileMatrix l = a.gather(0);
      if (world.rank() == 0) {
        EXPECT_TRUE(same_bits(l, want.l));
      }
    }
  }
  // The band and adaptive policies above must have mixed variants, or they test nothing more.
  CholeskyOptions adaptive;
  adaptive.policy = linalg::parse_policy("adaptive:tol=1e-4");
  const OneProcess mixed = one_process(world, input, adaptive);
  EXPECT_GE(std::count_if(mixed.tiles.begin(), mixed.tiles.end(), [](auto c) { return c > 0; }), 2);
}

std::vector<double> times(std::vector<double> a, double s) {
  for (double& x : a) x *= s;
  return a;
}

TEST(MpiCholesky, ScaledForFp16LikeOneProcess) {
  // Diagonal about 4/3: at 2^-80 and 2^40 the FP16 variants factor 4^-k A with k = -40 and 20 on
  // every rank (the largest diagonal entry agreed on), and the factor scaled back equals the
  // one-process one bit for bit; a failure names the scaled policy as one process does.
  const Comm world = Comm::world();
  for (const int e : {-40, 20}) {
    const std::vector<double> a = times(random_spd(kN, 5), std::ldexp(1.0, 2 * e));
    std::vector<double> bad = a;
    bad[static_cast<std::size_t>(150 * kN + 150)] = -std::ldexp(1.0, 2 * e);
    for (const char* policy : {"uniform:HP1", "uniform:HP3", "adaptive:tol=1e-4"}) {
      CholeskyOptions options;
      options.policy = linalg::parse_policy(policy);
      const TileMatrix input = tiled(a, kN), failing = tiled(bad, kN);
      const OneProcess want = one_process(world, input, options);
      const OneProcess fails = one_process(world, failing, options);
      ASSERT_EQ(want.attempts, 1) << want.error;
      ASSERT_NE(fails.error.find(" on A scaled by 2^" + std::to_string(-2 * e)), std::string::npos)
          << fails.error;
      for (const ProcessGrid grid : grids(world.size())) {
        SCOPED_TRACE(std::string(policy) + " at 4^" + std::to_string(e) + " on a " +
                     std::to_string(grid.rows) + " x " + std::to_string(grid.cols) + " grid");
        DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
        const CholeskyReport got = cholesky(d, options);
        EXPECT_EQ(got.scaling_exponent, e);
        EXPECT_EQ(got.tiles, want.tiles);
        const TileMatrix l = d.gather(0);
        if (world.rank() == 0) {
          EXPECT_TRUE(same_bits(l, want.l));
        }
        DistTileMatrix f = DistTileMatrix::scatter(world, failing, grid);
        try {
          (void)cholesky(f, options);
          ADD_FAILURE() << "no error on rank " << world.rank();
        } catch (const NotPositiveDefinite& x) {
          EXPECT_EQ(without_rank(x), fails.error);
        }
      }
    }
  }
}

TEST(MpiCholesky, MatricesOfFewerTilesThanRanksFactorToo) {
  // One tile (only the diagonal broadcast), and two tile rows on grids where some ranks own no
  // tile at all: they still take part in every broadcast of their row and column.
  const Comm world = Comm::world();
  for (const std::int64_t n : {std::int64_t{20}, std::int64_t{45}}) {
    const TileMatrix input = tiled(random_spd(n, 9), n);
    CholeskyOptions options;
    options.policy = linalg::parse_policy("uniform:HP1");
    const OneProcess want = one_process(world, input, options);
    for (const ProcessGrid grid : grids(world.size())) {
      DistTileMatrix a = DistTileMatrix::scatter(world, input, grid);
      (void)cholesky(a, options);
      const TileMatrix l = a.gather(0);
      if (world.rank() == 0) {
        EXPECT_TRUE(same_bits(l, want.l)) << "n = " << n;
      }
    }
  }
}

TEST(MpiCholesky, NonPositivePivotFailsOnEveryRankNamingTheTile) {
  const Comm world = Comm::world();
  std::vector<double> a = random_spd(kN, 6);
  a[static_cast<std::size_t>(150 * kN + 150)] = -1.0;  // tile (4, 4); minors of order <= 150 SPD
  const TileMatrix input = tiled(a, kN);
  for (const bool recover : {false, true}) {
    CholeskyOptions options;
    options.policy = linalg::parse_policy("band:SP=1,HP1=rest");
    options.recover = recover;  // promotion cannot make a matrix that is not SPD factor
    const OneProcess want = one_process(world, input, options);
    ASSERT_TRUE(want.not_positive_definite) << want.error;
    ASSERT_NE(want.error.find("tile (4, 4)"), std::string::npos) << want.error;
    for (const ProcessGrid grid : grids(world.size())) {
      DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
      try {
        (void)cholesky(d, options);
        ADD_FAILURE() << "no error on rank " << world.rank();
      } catch (const NotPositiveDefinite& e) {
        // The one-process message (the last attempt's, with recover).
        EXPECT_EQ(without_rank(e), want.error);
        EXPECT_TRUE(failure_was_agreed(e.what()));
      }
    }
  }
}

// SPD with one off-diagonal entry beyond FP16 (A(170, 40) = 7e4, tile (5, 1)), the diagonal
// raised so that the added 2 x 2 block [[1e5, 7e4], [7e4, 1e5]] is positive definite: HP3 rounds
// C of tile (5, 1) to FP16 in the first GEMM and overflows there, and nowhere else.
TileMatrix overflowing_input() {
  std::vector<double> a = random_spd(kN, 7);
  a[static_cast<std::size_t>(170 * kN + 40)] = a[static_cast<std::size_t>(40 * kN + 170)] = 7e4;
  a[static_cast<std::size_t>(170 * kN + 170)] += 1e5;
  a[static_cast<std::size_t>(40 * kN + 40)] += 1e5;
  return tiled(a, kN);
}

TEST(MpiCholesky, Fp16OverflowFailsOnEveryRankAndRecoversLikeOneProcess) {
  const Comm world = Comm::world();
  const TileMatrix input = overflowing_input();
  CholeskyOptions options;
  options.policy = linalg::parse_policy("uniform:HP3");
  options.scale = false;  // scaled by 4^-9, nothing would overflow
  const OneProcess want = one_process(world, input, options);
  ASSERT_FALSE(want.not_positive_definite);
  ASSERT_NE(want.error.find("GEMM HP3 updating tile (5, 1)"), std::string::npos) << want.error;
  CholeskyOptions recover = options;
  recover.recover = true;
  const OneProcess recovered = one_process(world, input, recover);
  ASSERT_EQ(recovered.attempts, 2) << recovered.error;
  for (const ProcessGrid grid : grids(world.size())) {
    DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
    try {
      (void)cholesky(d, options);
      ADD_FAILURE() << "no error on rank " << world.rank();
    } catch (const NotPositiveDefinite& e) {
      ADD_FAILURE() << "an overflow reported as a pivot: " << e.what();
    } catch (const NumericalError& e) {
      EXPECT_EQ(without_rank(e), want.error);
    }
    DistTileMatrix r = DistTileMatrix::scatter(world, input, grid);
    const CholeskyReport report = cholesky(r, recover);
    EXPECT_EQ(report.attempts, recovered.attempts);
    EXPECT_EQ(report.tiles, recovered.tiles);
    ASSERT_EQ(report.recoveries.size(), 1u);
    EXPECT_NE(report.recoveries[0].find("promoted tile (5, 1)"), std::string::npos)
        << report.recoveries[0];
    const TileMatrix l = r.gather(0);
    if (world.rank() == 0) {
      EXPECT_TRUE(same_bits(l, recovered.l));
    }
  }
}

TEST(MpiCholesky, BadInputIsRefusedOnEveryRank) {
  const Comm world = Comm::world();
  const ProcessGrid grid = ProcessGrid::for_ranks(world.size());
  DistTileMatrix full(world, linalg::TileLayout(40, 40, 8, TileFill::full), grid);
  std::memset(full.local_data(), 0, static_cast<std::size_t>(full.local_elements()) * 4);
  EXPECT_THROW((void)cholesky(full, CholeskyOptions{}), InvalidInput);
  // A NaN in tile (3, 1), named by its global row and column.
  std::vector<double> a = random_spd(40, 8);
  a[static_cast<std::size_t>(27 * 40 + 9)] = a[static_cast<std::size_t>(9 * 40 + 27)] = NAN;
  Array dense = Array::zeros(DType::f64, {40, 40});
  std::memcpy(dense.data(), a.data(), a.size() * sizeof(double));
  const TileMatrix input = TileMatrix::from_dense(dense, 8, TileFill::lower, DType::f32);
  DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
  try {
    (void)cholesky(d, CholeskyOptions{});
    ADD_FAILURE() << "a NaN was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("tile (3, 1) has nan at row 27, column 9"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace halfscope::mpi

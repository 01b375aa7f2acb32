// GPU ranks of the MPI tile Cholesky (mpi::cholesky with one device per rank,
// src/linalg/rank_kernels_cuda.cu) against the one-process CPU factorization of the same input,
// on every grid shape of 1, 2 and 4 ranks (ranks share the host's devices round-robin).
//
// Bounds as tests/linalg/gpu_cholesky.cpp: KMS A_ij = rho^|i-j|, rho = e^-1/32, kappa_2 < 64;
// backward error ||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F with e = gamma_{n+1}(2^-24)
// plus the largest variant term in use; the GPU and CPU factors differ in summation order only
// (the same input roundings per variant), each within the forward bound 2 kappa e trace / ||A||
// of the exact factor, so ||L_gpu - L_cpu|| / ||L|| <= 4 kappa e trace / ||A||. Failures (a
// non-positive pivot, an FP16 overflow) must reach every rank with the one-process CPU text, and
// recover must promote the same tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../linalg/solve_test_support.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/mpi/cholesky.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {
namespace {

using linalg::CholeskyOptions;
using linalg::CholeskyReport;
using linalg::GemmVariant;
using linalg::TileMatrix;

namespace lt = linalg::test;

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

std::vector<ProcessGrid> grids(int ranks) {
  std::vector<ProcessGrid> g{ProcessGrid::for_ranks(ranks)};
  if (ranks > 1) g.push_back(ProcessGrid{1, ranks});
  if (ranks > 2) g.push_back(ProcessGrid{ranks, 1});
  return g;
}

// This rank's device: the host's devices dealt round-robin over the ranks.
CholeskyOptions on_my_gpu(const Comm& world, const std::string& policy) {
  CholeskyOptions o;
  o.policy = linalg::parse_policy(policy);
  o.devices = {world.rank() % static_cast<int>(query_devices().devices.size())};
  return o;
}

// Lower triangle, dense row-major FP64.
std::vector<double> lower_of(const TileMatrix& t) {
  const std::int64_t n = t.layout.rows();
  const Array d = t.to_dense();
  std::vector<double> l(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      l[static_cast<std::size_t>(i * n + j)] = d.data_as<float>()[i * n + j];
  return l;
}

double rel_diff(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    num += (x[k] - ref[k]) * (x[k] - ref[k]);
    den += ref[k] * ref[k];
  }
  return std::sqrt(num / den);
}

// ||L L^T - A||_F / ||A||_F and the bound e trace(A) / ||A||_F for the variants of `report`.
std::pair<double, double> backward(const std::vector<double>& l, const std::vector<double>& a,
                                   std::int64_t n, const CholeskyReport& report) {
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
  double used = 0.0;
  for (const GemmVariant v : linalg::all_gemm_variants())
    if (report.count(v) > 0) used = std::max(used, lt::variant_term(v, n));
  return {std::sqrt(num / den),
          (lt::gamma(n + 1, std::ldexp(1.0, -24)) + used) * trace / std::sqrt(den)};
}

// The KMS matrix rounded to FP32, as the factorizations see it.
std::vector<double> as_float(std::vector<double> a) {
  for (double& x : a) x = static_cast<float>(x);
  return a;
}

// The message of an error agree() raised, without its "MPI rank r: " prefix.
std::string without_rank(const std::exception& e) {
  const std::string text = e.what();
  return text.rfind("MPI rank ", 0) == 0 ? text.substr(text.find(": ") + 2) : text;
}

TEST(MpiCholeskyGpu, GpuRanksAgreeWithTheCpuFactorWithinThePrecision) {
  const Comm world = Comm::world();
  if (query_devices().devices.empty()) GTEST_SKIP() << "no CUDA device";
  // 300 = 4 x 64 + 44: a short last tile; 97 with tiles of 7: 14 tile rows, a deeper schedule.
  for (const auto& [n, nb] : {std::pair<std::int64_t, std::int64_t>{300, 64}, {97, 7}}) {
    const std::vector<double> a = lt::kms(n, kRho, 1.0);
    const std::vector<double> a32 = as_float(a);
    const TileMatrix input = lt::tiled(a, n, nb, Memory::host);
    for (const std::string& policy : lt::builtin_policies()) {
      CholeskyOptions cpu_options;
      cpu_options.policy = linalg::parse_policy(policy);
      TileMatrix cpu = lt::tiled(a, n, nb, Memory::host);
      const CholeskyReport want = linalg::cholesky_tiles(cpu, cpu_options);
      const std::vector<double> l_cpu = lower_of(cpu);
      for (const ProcessGrid grid : grids(world.size())) {
        SCOPED_TRACE(policy + " n = " + std::to_string(n) + " on a " + std::to_string(grid.rows) +
                     " x " + std::to_string(grid.cols) + " grid");
        DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
        CholeskyTraffic traffic;
        const CholeskyReport got = cholesky(d, on_my_gpu(world, policy), &traffic);
        EXPECT_EQ(got.tiles, want.tiles);
        EXPECT_EQ(got.attempts, 1);
        EXPECT_GT(got.workspace_bytes, 0);
        EXPECT_EQ(world.sum(traffic.bytes_sent), world.sum(traffic.bytes_received));
        const TileMatrix l = d.gather(0);
        if (world.rank() != 0) continue;
        const std::vector<double> l_gpu = lower_of(l);
        const auto [err, bound] = backward(l_gpu, a32, n, got);
        EXPECT_LE(err, bound);
        EXPECT_LE(rel_diff(l_gpu, l_cpu), 4 * kKappaBound * bound);
      }
    }
  }
}

TEST(MpiCholeskyGpu, LowPrecisionPoliciesReallyRunBelowFp32) {
  // A variant silently run in FP32 would pass the bounds above: HP1 must cost accuracy.
  const Comm world = Comm::world();
  if (query_devices().devices.empty()) GTEST_SKIP() << "no CUDA device";
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = lt::kms(n, kRho, 1.0);
  const TileMatrix input = lt::tiled(a, n, nb, Memory::host);
  double errors[2] = {};
  for (int x = 0; x < 2; ++x) {
    const char* policy = x == 0 ? "uniform:SP" : "uniform:HP1";
    DistTileMatrix d = DistTileMatrix::scatter(world, input, ProcessGrid::for_ranks(world.size()));
    const CholeskyReport r = cholesky(d, on_my_gpu(world, policy));
    const TileMatrix l = d.gather(0);
    if (world.rank() == 0) errors[x] = backward(lower_of(l), as_float(a), n, r).first;
  }
  if (world.rank() == 0) {
    EXPECT_GT(errors[1], 4 * errors[0]);
  }
}

TEST(MpiCholeskyGpu, NonPositivePivotReachesEveryRankWithTheCpuText) {
  const Comm world = Comm::world();
  if (query_devices().devices.empty()) GTEST_SKIP() << "no CUDA device";
  std::vector<double> a = lt::kms(300, kRho, 1.0);
  a[static_cast<std::size_t>(200 * 300 + 200)] = -1.0;  // tile (3, 3); minors <= 200 SPD
  const TileMatrix input = lt::tiled(a, 300, 64, Memory::host);
  CholeskyOptions cpu_options;
  cpu_options.policy = linalg::parse_policy("band:SP=1,HP1=rest");
  TileMatrix cpu = lt::tiled(a, 300, 64, Memory::host);
  std::string want;
  try {
    (void)linalg::cholesky_tiles(cpu, cpu_options);
  } catch (const NotPositiveDefinite& e) {
    want = e.what();
  }
  ASSERT_NE(want.find("leading minor of order 201"), std::string::npos) << want;
  for (const ProcessGrid grid : grids(world.size())) {
    DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
    try {
      (void)cholesky(d, on_my_gpu(world, "band:SP=1,HP1=rest"));
      ADD_FAILURE() << "no error on rank " << world.rank();
    } catch (const NotPositiveDefinite& e) {
      EXPECT_EQ(without_rank(e), want);
      EXPECT_TRUE(failure_was_agreed(e.what()));
    }
  }
}

TEST(MpiCholeskyGpu, Fp16OverflowIsReportedAndRecoveredOnEveryRank) {
  const Comm world = Comm::world();
  if (query_devices().devices.empty()) GTEST_SKIP() << "no CUDA device";
  // Scale 1e5: C entries exceed 65504, so HP3 (FP16 C) overflows in its first GEMM of tile
  // (1, 0)'s column; HP1 (FP32 C) does not.
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = lt::kms(n, kRho, 1e5);
  const TileMatrix input = lt::tiled(a, n, nb, Memory::host);
  for (const ProcessGrid grid : grids(world.size())) {
    DistTileMatrix d = DistTileMatrix::scatter(world, input, grid);
    try {
      (void)cholesky(d, on_my_gpu(world, "uniform:HP3"));
      ADD_FAILURE() << "no error on rank " << world.rank();
    } catch (const NotPositiveDefinite& e) {
      ADD_FAILURE() << "an overflow reported as a pivot: " << e.what();
    } catch (const NumericalError& e) {
      EXPECT_NE(without_rank(e).find("GEMM HP3 updating tile ("), std::string::npos) << e.what();
      EXPECT_NE(without_rank(e).find("(step 0, policy uniform:HP3)"), std::string::npos)
          << e.what();
    }
    DistTileMatrix r = DistTileMatrix::scatter(world, input, grid);
    CholeskyOptions recover = on_my_gpu(world, "uniform:HP3");
    recover.recover = true;
    const CholeskyReport report = cholesky(r, recover);
    EXPECT_GT(report.attempts, 1);
    EXPECT_EQ(static_cast<std::int64_t>(report.recoveries.size()), report.attempts - 1);
    EXPECT_GT(report.count(GemmVariant::HP1) + report.count(GemmVariant::HP2), 0);
    const TileMatrix l = r.gather(0);
    if (world.rank() == 0) {
      const auto [err, bound] = backward(lower_of(l), as_float(a), n, report);
      EXPECT_LE(err, bound);
    }
  }
}

TEST(MpiCholeskyGpu, MoreThanOneDevicePerRankIsRefused) {
  const Comm world = Comm::world();
  const TileMatrix input = lt::tiled(lt::kms(40, kRho, 1.0), 40, 8, Memory::host);
  DistTileMatrix d = DistTileMatrix::scatter(world, input, ProcessGrid::for_ranks(world.size()));
  CholeskyOptions o;
  o.devices = {0, 0};
  try {
    (void)cholesky(d, o);
    ADD_FAILURE() << "two devices accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("at most one CUDA device per rank"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace halfscope::mpi

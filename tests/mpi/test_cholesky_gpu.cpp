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

#include "../linalg/cholesky_test_support.hpp"
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
    const TileMatrix input = lt::tiled(a, n, nb, Memory::host);
    for (const std::string& policy : lt::builtin_policies()) {
      CholeskyOptions cpu_options;
      cpu_options.policy = linalg::parse_policy(policy);
      TileMatrix cpu = lt::tiled(a, n, nb, Memory::host);
      const CholeskyReport want = linalg::cholesky_tiles(cpu, cpu_options);
      const std::vector<double> l_cpu = lt::lower_of(cpu);
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
        const lt::Factored f{lt::lower_of(l), got};
        const auto [err, bound] = lt::backward(f, a, n);
        EXPECT_LE(err, bound);
        EXPECT_LE(lt::rel_diff(f.l, l_cpu), 4 * kKappaBound * bound);
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
    if (world.rank() == 0) errors[x] = lt::backward(lt::Factored{lt::lower_of(l), r}, a, n).first;
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
    CholeskyOptions unscaled = on_my_gpu(world, "uniform:HP3");
    unscaled.scale = false;  // scaled, nothing would overflow
    try {
      (void)cholesky(d, unscaled);
      ADD_FAILURE() << "no error on rank " << world.rank();
    } catch (const NotPositiveDefinite& e) {
      ADD_FAILURE() << "an overflow reported as a pivot: " << e.what();
    } catch (const NumericalError& e) {
      EXPECT_NE(without_rank(e).find("GEMM HP3 updating tile ("), std::string::npos) << e.what();
      EXPECT_NE(without_rank(e).find("(step 0, policy uniform:HP3)"), std::string::npos)
          << e.what();
    }
    DistTileMatrix r = DistTileMatrix::scatter(world, input, grid);
    CholeskyOptions recover = unscaled;
    recover.recover = true;
    const CholeskyReport report = cholesky(r, recover);
    EXPECT_GT(report.attempts, 1);
    EXPECT_EQ(static_cast<std::int64_t>(report.recoveries.size()), report.attempts - 1);
    EXPECT_GT(report.count(GemmVariant::HP1) + report.count(GemmVariant::HP2), 0);
    const TileMatrix l = r.gather(0);
    if (world.rank() == 0) {
      const auto [err, bound] = lt::backward(lt::Factored{lt::lower_of(l), report}, a, n);
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

// GPU ranks of the MPI reconstructor (device cuda: mpi::cholesky and mpi::solve_right on one CUDA
// device per rank, ranks sharing the host's devices round-robin).
//
// - Covariance tiles and Ctm rows generated on a GPU rank's device equal the one-process GPU
//   covariance_tiles / covariance bit for bit (the same element kernels, only the addresses
//   differ), on systems taking every generator path (offset tables, edge points, direct sums).
// - The distributed GPU solve against the one-process GPU solve (linalg::solve_right on a device
//   copy of the same factor) with the bounds of tests/linalg/gpu_solve_devices.cpp: both within
//   2 kappa 3 e of the exact solution, and within one unit of the operand format of each other
//   (the same roundings of L's tiles and of each solved block; summation order aside). Every grid
//   shape; with several ranks the last one holds no rows (it only broadcasts).
// - R by GPU ranks against small_system's FP64 covariances and R with the criteria of
//   test_reconstructor_tolerance.cpp (componentwise backward error, Strehl), the one-process GPU
//   R printed beside it; the factor's and the solve's variant tables equal the one-process ones.
// - Failures reach every rank: an FP16 overflow in one rank's rows, two devices per rank, and
//   (on a machine without a GPU, as in CI) device cuda.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../ao/covariance_test_systems.hpp"
#include "../ao/reconstructor_mixed_checks.hpp"
#include "../linalg/solve_test_support.hpp"
#include "ao/covariance_select.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/solve.hpp"
#include "halfscope/mpi/covariance.hpp"
#include "halfscope/mpi/reconstructor.hpp"
#include "halfscope/mpi/solve.hpp"
#include "share_cores.hpp"
#include "small_system_options.hpp"
#include "test_support.hpp"

namespace halfscope::mpi {
namespace {

using linalg::GemmVariant;
using linalg::TileMatrix;

namespace lt = linalg::test;

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

bool have_gpu() {
  return !query_devices().devices.empty();
}

int my_device(const Comm& world) {
  return world.rank() % static_cast<int>(query_devices().devices.size());
}

std::vector<ProcessGrid> grids(int ranks) {
  std::vector<ProcessGrid> g{ProcessGrid::for_ranks(ranks)};
  if (ranks > 1) g.push_back(ProcessGrid{1, ranks});
  if (ranks > 2) g.push_back(ProcessGrid{ranks, 1});
  return g;
}

// This rank's right-hand sides: 5 + rank rows, none on the last of several ranks.
Array my_rows(const Comm& world, std::int64_t n, float scale) {
  const std::int64_t r =
      world.size() > 1 && world.rank() == world.size() - 1 ? 0 : 5 + world.rank();
  if (r == 0) return Array{};
  std::mt19937 rng(static_cast<unsigned>(17 + world.rank()));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(r * n));
  for (float& x : values) x = scale * u(rng);
  return Array::from_values<float>(values, {r, n});
}

ao::CovarianceOptions gpu_f32() {
  ao::CovarianceOptions o;
  o.device = DeviceKind::Cuda;
  o.dtype = DType::f32;
  return o;
}

TEST(MpiReconstructorGpu, CovarianceOnGpuRanksEqualsTheOneProcessGpuCovariance) {
  const Comm world = Comm::world();
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  prepare_device(my_device(world));  // the device of the whole-matrix references and of the rows
  for (const ao::AoSystem& system : {ao::test::small_system(), ao::test::mixed_system()}) {
    for (const ao::CovarianceKind kind : {ao::CovarianceKind::cmm, ao::CovarianceKind::ctt})
      for (const ProcessGrid grid : grids(world.size())) {
        const std::int64_t nb = 13;  // partial tiles
        const TileMatrix whole = ao::covariance_tiles(system, kind, nb, gpu_f32());
        const DistTileMatrix mine =
            covariance_tiles(world, system, kind, nb, grid, true, my_device(world));
        const linalg::TileLayout& layout = mine.layout();
        std::int64_t owned = 0;
        for (std::int64_t tj = 0; tj < layout.tile_cols(); ++tj)
          for (std::int64_t ti = tj; ti < layout.tile_rows(); ++ti) {
            if (!mine.owns(ti, tj)) continue;
            ++owned;
            const float* want = whole.storage.data_as<float>() + layout.tile_offset(ti, tj);
            EXPECT_EQ(std::memcmp(want, mine.tile(ti, tj),
                                  sizeof(float) * layout.tile_height(ti) * layout.tile_width(tj)),
                      0)
                << system.name << " " << ao::covariance_kind_name(kind) << " tile (" << ti << ", "
                << tj << ") grid " << grid.rows << " x " << grid.cols;
          }
        EXPECT_EQ(world.sum(owned), layout.tile_count());
      }
    // Ctm rows: a block per rank, and ranges that start and end inside the edge-point blocks.
    const Array ctm = ao::covariance(system, ao::CovarianceKind::ctm, gpu_f32());
    const std::int64_t m = ctm.dim(0), n = ctm.dim(1);
    for (const auto& [begin, end] :
         {std::pair<std::int64_t, std::int64_t>{m * world.rank() / world.size(),
                                                m * (world.rank() + 1) / world.size()},
          {3, m - 5},
          {m - 1, m}}) {
      Array rows(DType::f32, {end - begin, n}, Memory::device);  // on this rank's device
      ao::detail::covariance_rows_selected_cuda(system, ao::CovarianceKind::ctm, begin, end,
                                                rows.data_as<float>(), true);
      const Array got = rows.to(Memory::host);
      EXPECT_EQ(std::memcmp(got.data(), ctm.data_as<float>() + begin * n,
                            static_cast<std::size_t>(got.nbytes())),
                0)
          << system.name << " Ctm rows [" << begin << ", " << end << ")";
    }
  }
}

TEST(MpiReconstructorGpu, DeviceSolveAgreesWithTheOneProcessGpuSolve) {
  const Comm world = Comm::world();
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  prepare_device(my_device(world));
  for (const auto& [n, nb] : {std::pair<std::int64_t, std::int64_t>{300, 64}, {97, 7}}) {
    const std::vector<double> a = lt::kms(n, kRho, 1.0);
    double trace = 0, norm = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      trace += a[static_cast<std::size_t>(i * n + i)];
      for (std::int64_t j = 0; j < n; ++j)
        norm += a[static_cast<std::size_t>(i * n + j)] * a[static_cast<std::size_t>(i * n + j)];
    }
    // Every rank factors the whole matrix on its CPU: the factor mpi::cholesky would give.
    TileMatrix l = lt::tiled(a, n, nb, Memory::host);
    (void)linalg::cholesky_tiles(l, linalg::CholeskyOptions{});
    TileMatrix on_device(l.layout, DType::f32, Memory::device);
    on_device.storage = l.storage.to(Memory::device);
    for (const std::string policy : {"uniform:SP", "uniform:HP1"}) {
      const GemmVariant v = policy == "uniform:SP" ? GemmVariant::SP : GemmVariant::HP1;
      const double e = (lt::gamma(n + 1, std::ldexp(1.0, -24)) + lt::variant_term(v, n)) * trace /
                       std::sqrt(norm);
      const double unit = v == GemmVariant::HP1 ? std::ldexp(1.0, -11) : 1e-5;
      const Array b = my_rows(world, n, 1.0f);
      linalg::SolveOptions options;
      options.policy = linalg::parse_policy(policy);
      Array want;
      linalg::SolveReport one;
      if (!b.empty()) {
        Array x = b.to(Memory::device);
        one = linalg::solve_right(on_device, x, options);
        want = x.to(Memory::host);
      }
      options.devices = {my_device(world)};
      for (const ProcessGrid grid : grids(world.size())) {
        SCOPED_TRACE(policy + " n = " + std::to_string(n) + " on a " + std::to_string(grid.rows) +
                     " x " + std::to_string(grid.cols) + " grid, rank " +
                     std::to_string(world.rank()));
        const DistTileMatrix d = DistTileMatrix::scatter(world, l, grid);
        Array x = b.empty() ? Array{} : b.clone(Memory::host);
        SolveTraffic traffic;
        const linalg::SolveReport got = solve_right(d, x, options, &traffic);
        const std::int64_t nt = (n + nb - 1) / nb;
        EXPECT_EQ(got.count(v), nt * (nt - 1) / 2);
        EXPECT_EQ(world.sum(traffic.bytes_sent), world.sum(traffic.bytes_received));
        if (!b.empty()) {
          EXPECT_EQ(got.tiles, one.tiles);
          EXPECT_LE(halfscope::test::relative_difference(x, want), 2 * (2 * kKappaBound * 3 * e));
          EXPECT_LE(halfscope::test::relative_difference(x, want), unit);
        }
        // Rows already on the rank's device are solved there, with the same arithmetic.
        Array on_gpu = b.empty() ? Array{} : b.to(Memory::device);
        (void)solve_right(d, on_gpu, options);
        if (!b.empty()) {
          EXPECT_EQ(std::memcmp(on_gpu.to(Memory::host).data(), x.data(),
                                static_cast<std::size_t>(x.nbytes())),
                    0);
        }
      }
    }
  }
}

TEST(MpiReconstructorGpu, Fp16OverflowInOneRanksRowsReachesEveryRank) {
  const Comm world = Comm::world();
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::int64_t n = 97, nb = 7;
  TileMatrix l = lt::tiled(lt::kms(n, kRho, 1.0), n, nb, Memory::host);
  (void)linalg::cholesky_tiles(l, linalg::CholeskyOptions{});
  const DistTileMatrix d = DistTileMatrix::scatter(world, l, ProcessGrid::for_ranks(world.size()));
  // Rank 0's rows beyond FP16's range (65504): HP1's conversion of its first solved block
  // overflows; the other ranks' rows are fine.
  Array x = my_rows(world, n, world.rank() == 0 ? 1e6f : 1.0f);
  linalg::SolveOptions options;
  options.policy = linalg::parse_policy("uniform:HP1");
  options.devices = {my_device(world)};
  try {
    (void)solve_right(d, x, options);
    ADD_FAILURE() << "no error on rank " << world.rank();
  } catch (const NumericalError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("MPI rank 0: ", 0), 0u) << e.what();
    EXPECT_TRUE(failure_was_agreed(e.what()));
  }
}

#if HALFSCOPE_HAS_LAPACKE
void expect_gpu_ranks_within_tolerance(const char* policy, const char* solve_policy,
                                       ao::TiptiltMethod tiptilt, double bound_to_ctm,
                                       double strehl_tolerance) {
  const Comm world = Comm::world();
  const ao::ReconstructorOptions o =
      test::small_system_options(policy, solve_policy, tiptilt, DeviceKind::Cuda);
  const ReconstructorPart part = tomographic_reconstructor_rows(
      world, ao::test::small_system(), o, ProcessGrid::for_ranks(world.size()));
  EXPECT_EQ(part.device, my_device(world));
  EXPECT_EQ(part.local.device, DeviceKind::Cuda);
  const Array r = gather_rows(world, part, 0);
  if (world.rank() != 0) return;

  const std::string label = std::string(policy) + " / " + solve_policy + " / " +
                            std::string(ao::tiptilt_method_name(tiptilt)) + ", " +
                            std::to_string(world.size()) + " GPU ranks";
  static const ao::test::CheckReference ref = ao::test::check_reference(ao::test::small_system());
  static const ao::test::CmmFacts facts = ao::test::cmm_facts(ref.cmm);
  const ao::Reconstructor one = ao::tomographic_reconstructor(ref.system, o);
  ASSERT_EQ(r.shape(), one.matrix.shape()) << label;
  EXPECT_EQ(part.local.factor.tiles, one.factor.tiles) << label;
  EXPECT_EQ(part.local.solve.tiles, one.solve.tiles) << label;

  ao::Reconstructor got = part.local;
  got.matrix = r;
  std::printf("[%s]\n ranks:", label.c_str());
  EXPECT_LT(ao::test::expect_componentwise_residual_within_bound(ref, got, facts, label),
            bound_to_ctm)
      << label;
  std::printf(" one process on the GPU:");
  (void)ao::test::expect_componentwise_residual_within_bound(ref, one, facts, label);
  ao::EvaluationOptions eo;
  eo.device = DeviceKind::Cpu;
  const double strehl = ao::evaluate_reconstructor(ref.system, r, eo).strehl_otf;
  std::printf(" Strehl %.6f (FP64 %.6f); max |R - R_one| / max |R_one| %.3e\n", strehl,
              ref.eval64.strehl_otf, ao::test::compare(r, one.matrix).max_rel);
  EXPECT_LE(std::fabs(strehl - ref.eval64.strehl_otf), strehl_tolerance) << label;
}
#endif

TEST(MpiReconstructorGpu, SinglePrecisionWithinBoundAndStrehl) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const ao::TiptiltMethod t : {ao::TiptiltMethod::woodbury, ao::TiptiltMethod::direct})
    expect_gpu_ranks_within_tolerance("uniform:SP", "uniform:SP", t, 0.05, 1e-4);
#endif
}

TEST(MpiReconstructorGpu, MixedPolicyWithinBoundAndStrehl) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const ao::TiptiltMethod t : {ao::TiptiltMethod::woodbury, ao::TiptiltMethod::direct})
    expect_gpu_ranks_within_tolerance("band:SP=1,HP1=rest", "uniform:HP1", t, 1.0, 0.01);
#endif
}

TEST(MpiReconstructorGpu, DeviceCudaWithoutAGpuIsRefusedOnEveryRank) {
  const Comm world = Comm::world();
  if (have_gpu()) GTEST_SKIP() << "this host has a CUDA device";
  ao::ReconstructorOptions o;
  o.device = DeviceKind::Cuda;
  o.tile = 24;
  try {
    (void)tomographic_reconstructor_rows(world, ao::test::small_system(), o,
                                         ProcessGrid::for_ranks(world.size()));
    ADD_FAILURE() << "device cuda accepted without a GPU";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("no usable CUDA device"), std::string::npos) << e.what();
    EXPECT_TRUE(failure_was_agreed(e.what()));
  }
}

TEST(MpiReconstructorGpu, MoreThanOneDevicePerRankIsRefused) {
  const Comm world = Comm::world();
  ao::ReconstructorOptions o;
  o.device = DeviceKind::Cuda;
  o.devices = {0, 0};
  o.tile = 24;
  try {
    (void)tomographic_reconstructor_rows(world, ao::test::small_system(), o,
                                         ProcessGrid::for_ranks(world.size()));
    ADD_FAILURE() << "two devices accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("at most one CUDA device per rank"), std::string::npos)
        << e.what();
  }
  TileMatrix l = lt::tiled(lt::kms(40, kRho, 1.0), 40, 8, Memory::host);
  (void)linalg::cholesky_tiles(l, linalg::CholeskyOptions{});
  const DistTileMatrix d = DistTileMatrix::scatter(world, l, ProcessGrid::for_ranks(world.size()));
  Array x = my_rows(world, 40, 1.0f);
  linalg::SolveOptions options;
  options.devices = {0, 0};
  EXPECT_THROW((void)solve_right(d, x, options), InvalidInput);
}

}  // namespace
}  // namespace halfscope::mpi

// The tomographic reconstructor over MPI ranks (mpi/reconstructor.hpp) against the one-process
// ao::tomographic_reconstructor on the CPU: the same FP32 covariances, the same factor (mpi::
// cholesky equals cholesky_tiles bit for bit) and the same substitution kernels in the same order
// on every row, so R is compared bit for bit, rows on their ranks and gathered on rank 0, for
// uniform SP and a mixed policy, both LGS tip-tilt methods (with OpenBLAS pinned to kernels that
// round each element alike whatever the call's shape: tests/mpi/CMakeLists.txt). Failures reach
// every rank.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "../ao/covariance_test_systems.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/mpi/reconstructor.hpp"
#include "share_cores.hpp"
#include "small_system_options.hpp"

namespace halfscope::mpi {
namespace {

void expect_same_reconstructor(const char* policy, const char* solve_policy,
                               ao::TiptiltMethod tiptilt) {
  const Comm world = Comm::world();
  const ao::AoSystem system = ao::test::small_system();
  const ao::ReconstructorOptions o = test::small_system_options(policy, solve_policy, tiptilt);
  const std::string label = std::string(policy) + " / " + solve_policy + " / " +
                            std::string(ao::tiptilt_method_name(tiptilt));
  const ao::Reconstructor ref = ao::tomographic_reconstructor(system, o);
  const std::int64_t m = ref.matrix.dim(0), n = ref.matrix.dim(1);
  const float* want = ref.matrix.data_as<float>();

  // Each rank's rows, on the default grid and on a single process column (P = ranks).
  for (const ProcessGrid grid :
       {ProcessGrid::for_ranks(world.size()), ProcessGrid{world.size(), 1}}) {
    const ReconstructorPart part = tomographic_reconstructor_rows(world, system, o, grid);
    ASSERT_EQ(part.m, m);
    ASSERT_EQ(part.n, n);
    EXPECT_EQ(part.rows.begin, row_block(m, world.rank(), world.size()).begin);
    if (part.rows.count() > 0) {
      ASSERT_EQ(part.local.matrix.dim(0), part.rows.count());
      EXPECT_EQ(std::memcmp(part.local.matrix.data(), want + part.rows.begin * n,
                            sizeof(float) * part.rows.count() * n),
                0)
          << label << ", grid " << grid.rows << " x " << grid.cols << ", rows [" << part.rows.begin
          << ", " << part.rows.end << ")";
    }
    EXPECT_EQ(part.local.factor.tiles, ref.factor.tiles) << label;
    EXPECT_EQ(part.local.solve.tiles, ref.solve.tiles) << label;
    EXPECT_EQ(part.local.tiptilt_groups, ref.tiptilt_groups) << label;
    if (world.size() > 1) {
      EXPECT_GT(part.bytes_moved, 0);
    }
  }

  // Gathered on rank 0.
  const ao::Reconstructor got =
      tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size()));
  if (world.rank() == 0) {
    ASSERT_EQ(got.matrix.dim(0), m);
    ASSERT_EQ(got.matrix.dim(1), n);
    EXPECT_EQ(std::memcmp(got.matrix.data(), want, sizeof(float) * m * n), 0) << label;
  } else {
    EXPECT_TRUE(got.matrix.empty());
  }
}

TEST(MpiReconstructor, UniformSinglePrecisionEqualsOneProcess) {
  expect_same_reconstructor("uniform:SP", "uniform:SP", ao::TiptiltMethod::woodbury);
  expect_same_reconstructor("uniform:SP", "uniform:SP", ao::TiptiltMethod::direct);
}

TEST(MpiReconstructor, MixedPolicyEqualsOneProcess) {
  expect_same_reconstructor("band:SP=1,HP1=rest", "uniform:HP1", ao::TiptiltMethod::woodbury);
  expect_same_reconstructor("band:SP=1,HP1=rest", "uniform:HP1", ao::TiptiltMethod::direct);
}

// More ranks than rows of R (a 1 x 1 truth sensor: m = 2): ranks without rows take part in every
// collective with an empty block, and R is still the one-process R.
TEST(MpiReconstructor, RanksWithoutRowsTakePart) {
  const Comm world = Comm::world();
  ao::AoSystem system = ao::test::one_ngs_system();
  system.noise.enabled = true;
  system.truth.subapertures = 1;
  ao::ReconstructorOptions o =
      test::small_system_options("uniform:SP", "uniform:SP", ao::TiptiltMethod::woodbury);
  o.tile = 5;
  const ao::Reconstructor ref = ao::tomographic_reconstructor(system, o);
  ASSERT_EQ(ref.matrix.dim(0), 2);
  const ao::Reconstructor got =
      tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size()));
  if (world.rank() == 0) {
    ASSERT_EQ(got.matrix.size(), ref.matrix.size());
    EXPECT_EQ(std::memcmp(got.matrix.data(), ref.matrix.data(), ref.matrix.nbytes()), 0);
  }
}

// A non-positive pivot, by construction: LGS tip-tilt constants of 2^26 arcsec^2 factored
// directly. Every entry of an LGS x-slope block is then c + k with |k| < 4 (turbulence and noise,
// a few arcsec^2 at most), which rounds to c in FP32 (ulp(2^26) = 8): the first tile (inside the
// first LGS's x block) is c times a matrix of ones, whose second pivot c - sqrt(c)^2 is exactly 0
// (sqrt(c) = 2^13). The one-process factorization is checked first, so the case cannot pass
// vacuously; then every rank must throw it.
TEST(MpiReconstructor, NotPositiveDefiniteReachesEveryRank) {
  const Comm world = Comm::world();
  ao::AoSystem system = ao::test::small_system();
  for (ao::Sensor& s : system.sensors)
    if (s.guide_star == ao::GuideStar::lgs) s.lgs_tiptilt_arcsec2 = 67108864.0;  // 2^26
  const ao::ReconstructorOptions o =
      test::small_system_options("uniform:SP", "uniform:SP", ao::TiptiltMethod::direct);
  ASSERT_THROW((void)ao::tomographic_reconstructor(system, o), NotPositiveDefinite);
  try {
    (void)tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size()));
    ADD_FAILURE() << "no NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    // The first tile, named with the policy, as the one-process factorization names it.
    const std::string what = e.what();
    EXPECT_NE(what.find("policy uniform:SP: tile (0, 0)"), std::string::npos) << what;
  }
}

TEST(MpiReconstructor, BadOptionsAreRefusedOnEveryRank) {
  const Comm world = Comm::world();
  const ao::AoSystem system = ao::test::small_system();
  ao::ReconstructorOptions o =
      test::small_system_options("uniform:SP", "uniform:SP", ao::TiptiltMethod::woodbury);
  // R stays in the ranks' host memory; CPU ranks take no device list (GPU ranks:
  // test_reconstructor_gpu.cpp).
  o.result_memory = Memory::device;
  EXPECT_THROW(
      (void)tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size())),
      Unsupported);
  o.result_memory = Memory::host;
  o.devices = {0};
  EXPECT_THROW(
      (void)tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size())),
      Unsupported);
  o.devices.clear();
  o.tile = 0;
  EXPECT_THROW(
      (void)tomographic_reconstructor(world, system, o, ProcessGrid::for_ranks(world.size())),
      InvalidInput);
  o.tile = 24;
  EXPECT_THROW((void)tomographic_reconstructor(world, system, o, ProcessGrid{world.size() + 1, 1}),
               InvalidInput);
}

}  // namespace
}  // namespace halfscope::mpi

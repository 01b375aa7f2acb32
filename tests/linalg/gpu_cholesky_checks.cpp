// Finiteness checks of the GPU tile Cholesky (cholesky.cpp, tile_norms.cpp, tile_norms_cuda.cu):
// a NaN/Inf in device A is found by the tile norms kernel (one readback) and rejected as
// InvalidInput naming the tile and entry, before any work; the diagonal scan of a device factor
// agrees with the host one. Exact checks (exception, entry, bitwise storage): no tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "linalg/tile_norms.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

namespace halfscope::linalg {
namespace {

TEST(GpuCholeskyChecks, NonFiniteDeviceInputRejectedNamingEntry) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, nb = 64;
  std::vector<double> a = test::kms(n, 0.9);
  test::set_sym(a, n, 250, 70, std::numeric_limits<double>::quiet_NaN());
  for (const bool recover : {false, true}) {
    TileMatrix t = test::tiled(a, n, nb, Memory::device);
    const Array before = t.storage.to(Memory::host);
    CholeskyOptions opts;
    opts.policy = parse_policy("band:SP=1,HP1=rest");
    opts.recover = recover;
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << "no InvalidInput for a NaN in A";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tile (3, 1)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 250, column 70"), std::string::npos) << msg;
    }
    const Array after = t.storage.to(Memory::host);
    const auto bytes = static_cast<std::size_t>(t.layout.element_count()) * sizeof(float);
    EXPECT_EQ(std::memcmp(after.data(), before.data(), bytes), 0) << "A changed before rejection";
  }
}

TEST(GpuCholeskyChecks, DiagonalScanMatchesHost) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, nb = 64;
  std::vector<double> a = test::kms(n, 0.9);
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, n, nb, Memory::device)), -1);
  test::set_sym(a, n, 290, 260,
                std::numeric_limits<double>::infinity());  // tile (4, 4), short tile
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, n, nb, Memory::device)), 4);
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, n, nb, Memory::host)), 4);
}

TEST(GpuCholeskyChecks, RecoverPromotesAllConsumersOfAnOverflowingOperand) {
  HS_REQUIRE_GPU();
  // As the CPU test (test_cholesky_checks.cpp): scale 1e11, rho = 0.9, so L(1, 0) and the
  // sub-diagonal tiles L(p, p - 1) exceed FP16; one retry per such operand moves all its FP16
  // consumers to SP: at most NT - 1 attempts (one consumer per retry needed 10).
  const std::int64_t n = 48, nb = 8, nt = 6;
  std::vector<double> a = test::kms(n, 0.9);
  for (double& x : a) x *= 1e11;
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP1");
  opts.recover = true;
  opts.scale = false;  // scaled, nothing would overflow
  TileMatrix t = test::tiled(a, n, nb, Memory::device);
  const CholeskyReport report = cholesky_tiles(t, opts);
  EXPECT_LE(report.attempts, nt - 1);
  ASSERT_FALSE(report.recoveries.empty());
  EXPECT_NE(report.recoveries.front().find("consumers of operand tile L("), std::string::npos)
      << report.recoveries.front();
  EXPECT_EQ(report.count(GemmVariant::HP1), nt - 1);
  EXPECT_EQ(report.count(GemmVariant::SP), (nt - 1) * (nt - 2) / 2);
}

}  // namespace
}  // namespace halfscope::linalg

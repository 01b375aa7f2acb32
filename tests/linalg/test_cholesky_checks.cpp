// Finiteness checks of the tile Cholesky (cholesky.cpp, tile_norms.cpp): a NaN/Inf in A is an
// InvalidInput naming the tile and entry, raised before any work (A is left as it was, --recover
// does not retry it); a finished factor with a non-finite entry is found through its diagonal
// tiles. These are exact checks (which exception, which entry, bitwise equal storage): no
// tolerance is involved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "linalg/tile_norms.hpp"
#include "solve_test_support.hpp"

namespace halfscope::linalg {
namespace {

void expect_rejected(const std::vector<double>& a, std::int64_t n, std::int64_t nb,
                     const std::string& tile, const std::string& entry) {
  for (const bool recover : {false, true}) {
    TileMatrix t = test::tiled(a, n, nb);
    const Array before = t.storage.clone();
    CholeskyOptions opts;
    opts.policy = parse_policy("uniform:HP1");
    opts.recover = recover;
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << "no InvalidInput for a non-finite A";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("cholesky_tiles"), std::string::npos) << msg;
      EXPECT_NE(msg.find("finite"), std::string::npos) << msg;
      EXPECT_NE(msg.find(tile), std::string::npos) << msg;
      EXPECT_NE(msg.find(entry), std::string::npos) << msg;
    }
    // Rejected before any work: the storage is bitwise what it was (NaN compares by bits).
    const auto bytes = static_cast<std::size_t>(t.layout.element_count()) * sizeof(float);
    EXPECT_EQ(std::memcmp(t.storage.data(), before.data(), bytes), 0);
  }
}

TEST(CholeskyChecks, NanOffDiagonalRejectedNamingEntry) {
  std::vector<double> a = test::kms(20, 0.9);
  test::set_sym(a, 20, 13, 5, std::numeric_limits<double>::quiet_NaN());
  expect_rejected(a, 20, 8, "tile (1, 0)", "row 13, column 5");
}

TEST(CholeskyChecks, InfOnDiagonalRejectedNamingEntry) {
  std::vector<double> a = test::kms(20, 0.9);
  test::set_sym(a, 20, 17, 17, std::numeric_limits<double>::infinity());
  expect_rejected(a, 20, 8, "tile (2, 2)", "row 17, column 17");
}

TEST(CholeskyChecks, FloatOverflowOfInputRejected) {
  // 1e39 is finite in FP64 but rounds to +Inf in the float32 tiles: the check sees the tiles.
  std::vector<double> a = test::kms(20, 0.9);
  test::set_sym(a, 20, 9, 2, 1e39);
  expect_rejected(a, 20, 8, "tile (1, 0)", "row 9, column 2");
}

TEST(CholeskyChecks, NonFiniteDiagonalOfFactorFound) {
  std::vector<double> a = test::kms(20, 0.9);
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, 20, 8)), -1);
  // An off-diagonal tile is not scanned: in a factor its NaN reaches (i, i) through SYRK.
  test::set_sym(a, 20, 12, 3, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, 20, 8)), -1);
  test::set_sym(a, 20, 18, 16, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, 20, 8)), 2);
  test::set_sym(a, 20, 9, 8, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(detail::first_non_finite_diagonal(test::tiled(a, 20, 8)), 1);
}

TEST(CholeskyChecks, RecoverPromotesAllConsumersOfAnOverflowingOperand) {
  // Scale 1e11, rho = 0.9: the KMS factor has L(i, 0) = 3.2e5 rho^i and L(i, j) = 1.4e5
  // rho^(i-j) for j > 0, so the first-column tile L(1, 0) and the sub-diagonal tiles L(p, p - 1)
  // hold entries beyond FP16 (> 65504) while C stays FP32 (HP1). One retry per overflowing operand
  // tile moves all its FP16 consumers to SP: L(1, 0), L(2, 1), L(3, 2), L(4, 3) have consumers,
  // so at most NT - 1 attempts; one consumer per retry (the old behaviour) needed one attempt
  // per GEMM tile, (NT - 1)(NT - 2) / 2 = 10 here. Their consumers are all tiles (i, j), j >= 1.
  const std::int64_t n = 48, nb = 8, nt = 6;
  std::vector<double> a = test::kms(n, 0.9);
  for (double& x : a) x *= 1e11;
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP1");
  opts.recover = true;
  opts.scale = false;  // the study's variants: scaled, L would stay far below FP16's limit
  TileMatrix t = test::tiled(a, n, nb);
  const CholeskyReport report = cholesky_tiles(t, opts);
  EXPECT_LE(report.attempts, nt - 1);
  std::cout << "[measured] operand overflow, uniform:HP1 scale 1e11 NT=6: attempts "
            << report.attempts << "\n";
  ASSERT_FALSE(report.recoveries.empty());
  EXPECT_NE(report.recoveries.front().find("consumers of operand tile L("), std::string::npos)
      << report.recoveries.front();
  EXPECT_NE(report.recoveries.front().find("HP1->SP"), std::string::npos);
  // Column 0 gets no GEMM and keeps HP1; every other tile ends in SP.
  EXPECT_EQ(report.count(GemmVariant::HP1), nt - 1);
  EXPECT_EQ(report.count(GemmVariant::SP), (nt - 1) * (nt - 2) / 2);
}

TEST(CholeskyChecks, DeviceMemoryNeedsDevicesAndNoSign) {
  // Checked before any work, on every build: the input is left as it was.
  TileMatrix t = test::tiled(test::kms(40, 0.5), 40, 16);
  const Array before = t.storage.clone();
  CholeskyOptions opts;
  opts.device_memory = -1;
  opts.devices = {0};
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "negative device_memory accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("found -1"), std::string::npos) << e.what();
  }
  opts.device_memory = 1 << 30;
  opts.devices.clear();
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "device_memory without devices accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("no devices were given"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::memcmp(before.data(), t.storage.data(), static_cast<std::size_t>(before.nbytes())),
            0);
}

}  // namespace
}  // namespace halfscope::linalg

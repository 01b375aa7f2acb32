// The out-of-core tile Cholesky (CholeskyOptions::device_memory, src/linalg/cholesky_ooc_cuda.cu)
// against the in-core factorization of the same input on the same device. The budget leaves room
// for two slabs of about a sixth of the layout, so every case runs in several slabs whatever the
// GPU's memory.
//
// Matrix: A = I + G G^T / n with G an n x n/4 standard normal matrix (fixed seed): L is dense, so
// every factored column streamed to a later slab changes it (a stale or skipped column cannot
// hide behind decay); the eigenvalues of G G^T / n lie below (1 + 1/2)^2 = 2.25 (Marchenko-
// Pastur, plus O(n^-2/3)), so kappa_2(A) < 4. Backward error ||L L^T - A||_F / ||A||_F <=
// e trace(A) / ||A||_F with e = gamma_{n+1}(2^-24) + the largest variant term in use. Both
// factorizations apply the same updates to every tile from identically rounded operands (split16
// diagonal updates and panel solves alike); they differ in the order of each tile's sum (out of
// core, the previous slab's panels come first) and in the GEMM kernels cuBLAS picks for other
// batch sizes, each within the forward bound 2 kappa e trace / ||A|| of the exact factor, so
// ||L_ooc - L_in|| / ||L|| <= 4 kappa e trace / ||A||.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cholesky_test_support.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "linalg/cholesky_cuda.hpp"
#include "linalg/tile_norms.hpp"
#endif

namespace halfscope::linalg {
namespace {

#if HALFSCOPE_WITH_CUDA

const double kKappaBound = 4.0;

// I + G G^T / n, G n x n/4 standard normal (seed 9), row-major.
std::vector<double> dense_spd(std::int64_t n) {
  const std::int64_t r = std::max<std::int64_t>(n / 4, 1);
  std::mt19937_64 gen(9);
  std::normal_distribution<double> normal;
  std::vector<double> g(static_cast<std::size_t>(n * r)), a(static_cast<std::size_t>(n * n));
  for (double& x : g) x = normal(gen);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      double s = i == j ? 1.0 : 0.0;
      for (std::int64_t p = 0; p < r; ++p)
        s += g[static_cast<std::size_t>(i * r + p)] * g[static_cast<std::size_t>(j * r + p)] /
             static_cast<double>(n);
      a[static_cast<std::size_t>(i * n + j)] = a[static_cast<std::size_t>(j * n + i)] = s;
    }
  return a;
}

using test::backward;
using test::factor;
using test::Factored;
using test::rel_diff;

// A device budget that leaves room for two slabs of about a sixth of the layout each.
std::int64_t slab_budget(const std::vector<double>& a, std::int64_t n, std::int64_t nb,
                         const Policy& policy) {
  const TileMatrix t = test::tiled(a, n, nb);
  const auto variants = detail::choose_variants(t, detail::tile_norms(t), policy);
  const std::int64_t layout = t.layout.element_count() * 4;
  return detail::out_of_core_fixed_bytes(t.layout, variants) + 2 * std::max(layout / 6, n * nb * 4);
}

class GpuCholeskyOutOfCoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCholeskyOutOfCoreTest, AgreesWithInCore) {
  HS_REQUIRE_GPU();
  struct Case {
    std::int64_t n, nb;
  };
  // Enough tile columns (33 or more) that two staging columns, two factors' step buffers (FP64
  // panels and C scratch under DP) and two sixth-slabs weigh less than the layout and one
  // factor's step buffers (else the in-core factorization fits the budget and runs instead); a
  // short last tile.
  for (const Case c : {Case{600, 16}, Case{97, 3}, Case{333, 10}}) {
    const std::vector<double> a = dense_spd(c.n);
    CholeskyOptions opts;
    opts.policy = parse_policy(GetParam());
    const Factored in_core = factor(a, c.n, c.nb, opts, Memory::device);
    const double bound = backward(in_core, a, c.n).second;
    opts.devices = {0};
    opts.device_memory = slab_budget(a, c.n, c.nb, opts.policy);
    const std::int64_t layout = test::tiled(a, c.n, c.nb).layout.element_count() * 4;
    for (const Memory memory : {Memory::host, Memory::pinned}) {
      const Factored ooc = factor(a, c.n, c.nb, opts, memory);
      const auto [err, err_bound] = backward(ooc, a, c.n);
      const std::string what = GetParam() + " n=" + std::to_string(c.n) +
                               " nb=" + std::to_string(c.nb) + " " +
                               std::string(memory_name(memory)) + ", " +
                               std::to_string(ooc.report.out_of_core_slabs) + " slabs";
      EXPECT_LE(err, err_bound) << what;
      EXPECT_LE(rel_diff(ooc.l, in_core.l), 4 * kKappaBound * bound) << what;
      EXPECT_EQ(ooc.report.tiles, in_core.report.tiles) << what;
      EXPECT_EQ(ooc.report.attempts, 1) << what;
      // Every column went in and came out once; the factored columns streamed to later slabs
      // come on top of the input.
      EXPECT_GE(ooc.report.out_of_core_slabs, 3) << what;
      EXPECT_EQ(ooc.report.device_to_host_bytes, layout) << what;
      EXPECT_GT(ooc.report.host_to_device_bytes, ooc.report.device_to_host_bytes) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIns, GpuCholeskyOutOfCoreTest,
                         ::testing::ValuesIn(test::builtin_policies()), test::policy_test_name);

TEST(GpuCholeskyOutOfCore, NotPositiveDefiniteNamesTheSameTile) {
  HS_REQUIRE_GPU();
  std::vector<double> a = dense_spd(600);
  a[static_cast<std::size_t>(200 * 600 + 200)] = -10.0;  // minors of order <= 200 stay SPD
  CholeskyOptions opts;
  opts.policy = parse_policy("band:SP=1,HP1=rest");
  opts.devices = {0};
  opts.device_memory = slab_budget(a, 600, 16, opts.policy);
  TileMatrix t = test::tiled(a, 600, 16);
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tile (12, 12)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("leading minor of order 201"), std::string::npos) << msg;
  }
}

// Scale 1e5: C entries exceed 65504, so HP3 (FP16 C) overflows in the first slabs (KMS, rho =
// e^-1/32, kappa < 64: the in-core tests' matrix and bound).
TEST(GpuCholeskyOutOfCore, Hp3OverflowIsReportedFromTheSlabFlags) {
  HS_REQUIRE_GPU();
  // Without recover the error must come from the slabs' failure words (the GEMM, its tile and
  // what overflowed), not from a NaN reaching a pivot or a diagonal tile later.
  const std::vector<double> a = test::kms(600, std::exp(-1.0 / 32.0), 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.scale = false;  // scaled, nothing would overflow
  opts.devices = {0};
  opts.device_memory = slab_budget(a, 600, 16, opts.policy);
  TileMatrix t = test::tiled(a, 600, 16);
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no NumericalError";
  } catch (const NotPositiveDefinite& e) {
    ADD_FAILURE() << "the overflow surfaced as a pivot failure: " << e.what();
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GEMM HP3 updating tile ("), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not fit the variant's format"), std::string::npos) << msg;
  }
}

TEST(GpuCholeskyOutOfCore, RecoverFinishesFailingHp3Run) {
  HS_REQUIRE_GPU();
  const double rho = std::exp(-1.0 / 32.0);
  const std::int64_t n = 600, nb = 16;
  const std::vector<double> a = test::kms(n, rho, 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.recover = true;
  opts.scale = false;
  opts.devices = {0};
  opts.device_memory = slab_budget(a, n, nb, opts.policy);
  const Factored ooc = factor(a, n, nb, opts, Memory::host);
  EXPECT_GT(ooc.report.attempts, 1);
  EXPECT_EQ(ooc.report.recoveries.size(), static_cast<std::size_t>(ooc.report.attempts - 1));
  EXPECT_GE(ooc.report.out_of_core_slabs, 3);
  const auto [err, bound] = backward(ooc, a, n);
  EXPECT_LE(err, bound);
}

TEST(GpuCholeskyOutOfCore, NonFiniteInputRejectedWithTheInputUntouched) {
  HS_REQUIRE_GPU();
  // With uniform / band the checks run beside the first slab (the variants need no norms); a NaN
  // in the last tile must still end the call with the in-core message before any column of L is
  // written back, whichever policy.
  std::vector<double> a = dense_spd(600);
  a[static_cast<std::size_t>(590 * 600 + 7)] = a[static_cast<std::size_t>(7 * 600 + 590)] = NAN;
  for (const char* text : {"band:SP=1,HP1=rest", "uniform:SP", "adaptive:tol=1e-6"}) {
    CholeskyOptions opts;
    opts.policy = parse_policy(text);
    opts.devices = {0};
    opts.device_memory = slab_budget(test::kms(600, 0.5), 600, 16, opts.policy);
    TileMatrix t = test::tiled(a, 600, 16);
    const Array before = t.storage.clone();
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << text << ": no InvalidInput";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("must hold finite values"), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 590, column 7"), std::string::npos) << msg;
    }
    EXPECT_EQ(
        std::memcmp(before.data(), t.storage.data(), static_cast<std::size_t>(before.nbytes())), 0)
        << text;
  }
}

TEST(GpuCholeskyOutOfCore, TooSmallBudgetIsInvalidInput) {
  HS_REQUIRE_GPU();
  TileMatrix t = test::tiled(dense_spd(97), 97, 7);
  const Array before = t.storage.clone();
  CholeskyOptions opts;
  opts.devices = {0};
  opts.device_memory = 1 << 20;  // below the scratch alone
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("device_memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs at least"), std::string::npos) << msg;
  }
  EXPECT_EQ(std::memcmp(before.data(), t.storage.data(), static_cast<std::size_t>(before.nbytes())),
            0);
}

TEST(GpuCholeskyOutOfCore, SeveralDevicesMustHoldTheLayout) {
  HS_REQUIRE_GPU();
  const std::vector<double> a = dense_spd(600);
  TileMatrix t = test::tiled(a, 600, 16);
  CholeskyOptions opts;
  opts.devices = {0, 0};
  opts.device_memory = slab_budget(a, 600, 16, opts.policy);
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("list one device"), std::string::npos) << e.what();
  }
}

#endif

}  // namespace
}  // namespace halfscope::linalg

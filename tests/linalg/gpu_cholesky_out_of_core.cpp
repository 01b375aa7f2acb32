// The out-of-core tile Cholesky (CholeskyOptions::device_memory, src/linalg/cholesky_ooc_cuda.cu)
// against the in-core factorization of the same input on the same device. The budget is set so
// that the layout needs about four slabs, whatever the GPU's memory.
//
// Matrix and bounds as gpu_cholesky_devices.cpp: KMS A_ij = s rho^|i-j|, rho = e^-1/32,
// kappa_2(A) < 64; backward error ||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F with
// e = gamma_{n+1}(2^-24) + the largest variant term in use. Both factorizations apply the same
// updates to every tile in the same order (k ascending) from identically rounded operands; they
// differ only in the GEMM kernels cuBLAS picks for other batch sizes (summation order), each
// within the forward bound 2 kappa e trace / ||A|| of the exact factor, so
// ||L_ooc - L_in|| / ||L|| <= 4 kappa e trace / ||A||.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

using test::backward;
using test::factor;
using test::Factored;
using test::rel_diff;

// A device budget that leaves room for two slabs of about a quarter of the layout each.
std::int64_t quarter_budget(const std::vector<double>& a, std::int64_t n, std::int64_t nb,
                            const Policy& policy) {
  const TileMatrix t = test::tiled(a, n, nb);
  const auto variants = detail::choose_variants(t, detail::tile_norms(t), policy);
  const std::int64_t layout = t.layout.element_count() * 4;
  return detail::out_of_core_fixed_bytes(t.layout, variants) + 2 * std::max(layout / 4, n * nb * 4);
}

class GpuCholeskyOutOfCoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCholeskyOutOfCoreTest, AgreesWithInCore) {
  HS_REQUIRE_GPU();
  struct Case {
    std::int64_t n, nb;
  };
  // Enough tile columns that two staging columns and two quarter slabs weigh less than the
  // layout (else the in-core factorization fits the budget and runs instead); a short last tile.
  for (const Case c : {Case{300, 32}, Case{97, 7}, Case{333, 24}}) {
    const std::vector<double> a = test::kms(c.n, kRho, 1.0);
    CholeskyOptions opts;
    opts.policy = parse_policy(GetParam());
    const Factored in_core = factor(a, c.n, c.nb, opts, Memory::device);
    const double bound = backward(in_core, a, c.n).second;
    opts.devices = {0};
    opts.device_memory = quarter_budget(a, c.n, c.nb, opts.policy);
    const std::int64_t nt = (c.n + c.nb - 1) / c.nb;
    const std::int64_t layout = nt * (nt + 1) / 2 * c.nb * c.nb * 4;  // an upper bound
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
      EXPECT_LE(ooc.report.device_to_host_bytes, layout) << what;
      EXPECT_GT(ooc.report.host_to_device_bytes, ooc.report.device_to_host_bytes) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIns, GpuCholeskyOutOfCoreTest,
                         ::testing::ValuesIn(test::builtin_policies()), test::policy_test_name);

TEST(GpuCholeskyOutOfCore, NotPositiveDefiniteNamesTheSameTile) {
  HS_REQUIRE_GPU();
  std::vector<double> a = test::kms(300, kRho, 1.0);
  a[static_cast<std::size_t>(200 * 300 + 200)] = -1.0;  // minors of order <= 200 stay SPD
  CholeskyOptions opts;
  opts.policy = parse_policy("band:SP=1,HP1=rest");
  opts.devices = {0};
  opts.device_memory = quarter_budget(a, 300, 32, opts.policy);
  TileMatrix t = test::tiled(a, 300, 32);
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no NotPositiveDefinite";
  } catch (const NotPositiveDefinite& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tile (6, 6)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("leading minor of order 201"), std::string::npos) << msg;
  }
}

TEST(GpuCholeskyOutOfCore, RecoverFinishesFailingHp3Run) {
  HS_REQUIRE_GPU();
  // Scale 1e5: C entries exceed 65504, so HP3 (FP16 C) overflows in some slab; the failure is
  // reported like the in-core one and the retries promote until the factorization finishes.
  const std::int64_t n = 300, nb = 32;
  const std::vector<double> a = test::kms(n, kRho, 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.recover = true;
  opts.devices = {0};
  opts.device_memory = quarter_budget(a, n, nb, opts.policy);
  const Factored ooc = factor(a, n, nb, opts, Memory::host);
  EXPECT_GT(ooc.report.attempts, 1);
  EXPECT_EQ(ooc.report.recoveries.size(), static_cast<std::size_t>(ooc.report.attempts - 1));
  EXPECT_GE(ooc.report.out_of_core_slabs, 3);
  const auto [err, bound] = backward(ooc, a, n);
  EXPECT_LE(err, bound);
}

TEST(GpuCholeskyOutOfCore, TooSmallBudgetIsInvalidInput) {
  HS_REQUIRE_GPU();
  TileMatrix t = test::tiled(test::kms(300, kRho, 1.0), 300, 32);
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
  const std::vector<double> a = test::kms(300, kRho, 1.0);
  TileMatrix t = test::tiled(a, 300, 32);
  CholeskyOptions opts;
  opts.devices = {0, 0};
  opts.device_memory = quarter_budget(a, 300, 32, opts.policy);
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

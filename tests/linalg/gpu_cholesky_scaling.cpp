// The Cholesky's power-of-two scaling for FP16 variants on the GPU paths (test_cholesky_scaling.cpp
// has the CPU cases and the reasoning): a device matrix (the scaling kernels), a host matrix on a
// listed device, and out of core (scaled on the host; scaling up reads the whole matrix for its
// largest entry). The factor of 4^e A0, with A0's largest diagonal entry 1, must be 2^e times the
// factor of A0 on the same path bit for bit (on and below the diagonal: the GPU paths use the
// strict upper half of some diagonal tiles as scratch); a rejected input must be left as it came.
#include <gtest/gtest.h>

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

using test::Factoring;

std::vector<double> times(std::vector<double> a, double s) {
  for (double& x : a) x *= s;
  return a;
}

CholeskyOptions with(const char* policy) {
  CholeskyOptions o;
  o.policy = parse_policy(policy);
  return o;
}

// Room for two slabs of about a sixth of the layout (as gpu_cholesky_out_of_core.cpp).
std::int64_t slab_budget(std::int64_t n, std::int64_t nb, const Policy& policy) {
  const TileMatrix t = test::tiled(test::kms(n, 0.5), n, nb);
  const auto variants = detail::choose_variants(t, detail::tile_norms(t), policy);
  const std::int64_t layout = t.layout.element_count() * 4;
  return detail::out_of_core_fixed_bytes(t.layout, variants) + 2 * std::max(layout / 6, n * nb * 4);
}

TEST(GpuCholeskyScaling, FactorOfAScaledMatrixIsTheScaledFactorBitForBit) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, nb = 64;
  const TileLayout layout(n, n, nb, TileFill::lower);
  const std::vector<double> a0 = test::kms(n, std::exp(-1.0 / 32.0));
  for (const char* policy : {"uniform:HP1", "uniform:HP3", "adaptive:tol=1e-3"})
    for (const bool listed : {false, true}) {  // device storage in place; host storage, device 0
      CholeskyOptions opts = with(policy);
      if (listed) opts.devices = {0};
      const Memory memory = listed ? Memory::host : Memory::device;
      const Factoring base = test::factoring(a0, n, nb, opts, memory);
      ASSERT_EQ(base.report.scaling_exponent, 0);
      for (const int e : {-40, 7}) {
        const Factoring got =
            test::factoring(times(a0, std::ldexp(1.0, 2 * e)), n, nb, opts, memory);
        const std::string what = std::string(policy) + (listed ? " devices {0}" : " in place") +
                                 " e=" + std::to_string(e);
        EXPECT_EQ(got.report.scaling_exponent, e) << what;
        EXPECT_EQ(got.report.tiles, base.report.tiles) << what;
        std::string first;
        EXPECT_EQ(test::scaled_copy_mismatches(layout, got, base, e, false, &first), 0)
            << what << first;
      }
    }
}

TEST(GpuCholeskyScaling, OutOfCoreScalesOnTheHost) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 600, nb = 16;
  const TileLayout layout(n, n, nb, TileFill::lower);
  const std::vector<double> a0 = test::kms(n, std::exp(-1.0 / 32.0));
  for (const char* policy : {"uniform:HP1", "band:SP=1,HP2=rest"}) {
    CholeskyOptions opts = with(policy);
    opts.devices = {0};
    opts.device_memory = slab_budget(n, nb, opts.policy);
    const Factoring base = test::factoring(a0, n, nb, opts, Memory::host);
    ASSERT_GE(base.report.out_of_core_slabs, 3);
    for (const int e : {-40, 7}) {
      const Factoring got =
          test::factoring(times(a0, std::ldexp(1.0, 2 * e)), n, nb, opts, Memory::host);
      EXPECT_EQ(got.report.scaling_exponent, e) << policy;
      EXPECT_EQ(got.report.out_of_core_slabs, base.report.out_of_core_slabs) << policy;
      std::string first;
      EXPECT_EQ(test::scaled_copy_mismatches(layout, got, base, e, false, &first), 0)
          << policy << " e=" << e << ": " << first;
    }
  }
}

TEST(GpuCholeskyScaling, RejectedInputsAreLeftAsTheyCame) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 600, nb = 16;
  // A NaN out of core with a policy that reads no norms (the checks would run beside the first
  // slab): the scaling needs them first.
  std::vector<double> a = test::kms(n, std::exp(-1.0 / 32.0), 1e-20);
  test::set_sym(a, n, 590, 7, NAN);
  CholeskyOptions opts = with("uniform:HP1");
  opts.devices = {0};
  opts.device_memory = slab_budget(n, nb, opts.policy);
  for (const bool small_budget : {false, true}) {
    // A budget below the scratch is refused inside the factorization, after the scaling.
    if (small_budget) {
      a = test::kms(n, std::exp(-1.0 / 32.0), 1e-20);
      opts.device_memory = 1 << 20;
    }
    TileMatrix t = test::tiled(a, n, nb);
    const Array before = t.storage.clone();
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << "no InvalidInput";
    } catch (const InvalidInput& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(small_budget ? "needs at least" : "row 590, column 7"), std::string::npos)
          << msg;
    }
    EXPECT_EQ(
        std::memcmp(before.data(), t.storage.data(), static_cast<std::size_t>(before.nbytes())), 0)
        << (small_budget ? "small budget" : "NaN");
  }
}

#endif

}  // namespace
}  // namespace halfscope::linalg

// The mixed-precision tomographic reconstructor on the GPU: the checks of
// test_reconstructor_mixed.cpp with Cmm / Ctm generated, factored and solved in device memory,
// compared with the same CPU FP64 reference. Skips without a device.
#include <gtest/gtest.h>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/solve.hpp"
#include "reconstructor_mixed_checks.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

const test::CheckReference& reference() {
  static const test::CheckReference ref = test::check_reference();
  return ref;
}

#if HALFSCOPE_HAS_LAPACKE
const test::CmmFacts& facts() {
  static const test::CmmFacts f = test::cmm_facts(reference().cmm);
  return f;
}
#endif

TEST(ReconstructorMixedGpu, SinglePrecisionWithinBoundAndStrehl) {
  HS_REQUIRE_GPU();
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  test::check_policy(reference(), "uniform:SP", DeviceKind::Cuda, 1e-4, facts());
#endif
}

TEST(ReconstructorMixedGpu, HalfPrecisionPoliciesStrehl) {
  HS_REQUIRE_GPU();
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  test::check_policy(reference(), "band:SP=1,HP1=rest", DeviceKind::Cuda, 0.01, facts());
  test::check_policy(reference(), "uniform:HP1", DeviceKind::Cuda, 1.0, facts());
  test::check_policy(reference(), "adaptive:tol=1e-6", DeviceKind::Cuda, 0.01, facts());
#endif
}

TEST(ReconstructorMixedGpu, ResultCanStayOnTheDevice) {
  HS_REQUIRE_GPU();
  ReconstructorOptions options;
  options.device = DeviceKind::Cuda;
  options.tile = 256;
  options.result_memory = Memory::device;
  const Reconstructor rec = tomographic_reconstructor(ao_preset("check"), options);
  EXPECT_EQ(rec.matrix.memory(), Memory::device);
  ASSERT_EQ(rec.matrix.ndim(), 2);
  EXPECT_EQ(rec.matrix.dim(0), 152);
  EXPECT_EQ(rec.matrix.dim(1), 912);
#if HALFSCOPE_HAS_LAPACKE
  test::expect_residual_within_bound(reference(), rec, facts(), "uniform:SP, R on the device");
#endif
}

// Preset mid: Cmm with the LGS tip-tilt constants has kappa 5.4e7 and an FP32 Cholesky of it
// fails (NotPositiveDefinite); K (kappa 1.9e5) factors, and with the Woodbury correction the SP
// and band:SP=1,HP1=rest reconstructors keep the FP64 Strehl within the 0.001.
TEST(ReconstructorMixedGpu, MidNeedsWoodbury) {
  HS_REQUIRE_GPU();
  const AoSystem mid = ao_preset("mid");
  ReconstructorOptions o;
  o.device = DeviceKind::Cuda;
  o.tiptilt = TiptiltMethod::direct;
  EXPECT_THROW((void)tomographic_reconstructor(mid, o), NotPositiveDefinite);

  CovarianceOptions co;
  co.device = DeviceKind::Cuda;
  const Array r64 = reconstructor_fp64(covariance(mid, CovarianceKind::cmm, co),
                                       covariance(mid, CovarianceKind::ctm, co), DeviceKind::Cuda);
  EvaluationOptions eo;
  eo.device = DeviceKind::Cuda;
  const double strehl64 = evaluate_reconstructor(mid, r64, eo).strehl_otf;
  o.tiptilt = TiptiltMethod::woodbury;
  for (const char* policy : {"uniform:SP", "band:SP=1,HP1=rest"}) {
    o.policy = linalg::parse_policy(policy);
    o.solve_policy = o.policy;
    const Reconstructor rec = tomographic_reconstructor(mid, o);
    EXPECT_EQ(rec.tiptilt_groups, 10);
    const double strehl = evaluate_reconstructor(mid, rec.matrix, eo).strehl_otf;
    std::printf(
        "[mid gpu] %-20s R rel F %.3e, Strehl %.6f (FP64 %.6f, diff %+.2e), factor %.1f "
        "ms, solve %.1f ms\n",
        policy, test::compare(rec.matrix, r64).frobenius, strehl, strehl64, strehl - strehl64,
        rec.factor_ms, rec.solve_ms);
    EXPECT_LE(std::fabs(strehl - strehl64), 1e-3) << policy;
  }
}

}  // namespace
}  // namespace halfscope::ao

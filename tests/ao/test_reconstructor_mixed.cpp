// The mixed-precision tomographic reconstructor on the CPU (reconstructor_mixed_checks.hpp):
// uniform:SP within the derived bound of the FP64 one and its Strehl within 1e-4; HP1 policies'
// Strehl difference reported, band:SP=1,HP1=rest within 0.01 (study 002 Fig. 5: mixed policies
// that finish keep the SP Strehl).
#include <gtest/gtest.h>

#include <string>

#include "halfscope/core/error.hpp"
#include "reconstructor_mixed_checks.hpp"

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

TEST(ReconstructorMixed, SinglePrecisionWithinBoundAndStrehl) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  test::check_policy(reference(), "uniform:SP", DeviceKind::Cpu, 1e-4, facts());
#endif
}

TEST(ReconstructorMixed, HalfPrecisionPoliciesStrehl) {
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "no LAPACKE for the FP64 reference";
#else
  test::check_policy(reference(), "band:SP=1,HP1=rest", DeviceKind::Cpu, 0.01, facts());
  // Reported; uniform HP1 has no asserted accuracy beyond finishing with a meaningful Strehl.
  test::check_policy(reference(), "uniform:HP1", DeviceKind::Cpu, 1.0, facts());
  test::check_policy(reference(), "adaptive:tol=1e-6", DeviceKind::Cpu, 0.01, facts());
#endif
}

TEST(ReconstructorMixed, BadTileIsInvalidInput) {
  ReconstructorOptions options;
  options.tile = 0;
  options.device = DeviceKind::Cpu;
  EXPECT_THROW((void)tomographic_reconstructor(ao_preset("check"), options), InvalidInput);
  options.tile = 64;
  options.result_memory = Memory::device;
  EXPECT_THROW((void)tomographic_reconstructor(ao_preset("check"), options), InvalidInput);
  // GPUs listed for a CPU run: refused before any covariance is generated.
  options.result_memory = Memory::host;
  options.devices = {0};
  try {
    (void)tomographic_reconstructor(ao_preset("check"), options);
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("devices: expected the CUDA device"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace halfscope::ao

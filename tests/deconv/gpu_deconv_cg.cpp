// The CUDA backend's device-side CG step (src/deconv/backend_cuda_cg.cuh) against the host-scalar
// step of backend.hpp (cg_step.cpp) run through a second CUDA backend of the same problem: the
// same element arithmetic and reductions, so every report and every vector must be equal, not
// merely close; steps are queued two ahead, as split's solver queues them. Then a breakdown
// (rr = 0) halting the queued steps, and an FP16 overflow inside a step.
#include <string>

#include "gpu_deconv_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv {
namespace {

#if HALFSCOPE_WITH_CUDA

using namespace gputest;
using detail::CgReport;

constexpr std::int64_t kN = 32;
constexpr int kSteps = 6;

/// The vectors of one CG run on a backend, x = 0 and r = p = `r0`.
struct CgVectors {
  Backend& b;
  Vec x, r, p, q, tmp;
  CgVectors(Backend& be, const Array& r0) : b(be) {
    x = b.create();
    r = b.create();
    p = b.create();
    q = b.create();
    tmp = b.create();
    load(b, r, r0);
    load(b, p, r0);
  }
};

void expect_same(const CgReport& a, const CgReport& b, int step) {
  SCOPED_TRACE("step " + std::to_string(step));
  EXPECT_EQ(a.rr, b.rr);
  EXPECT_EQ(a.e, b.e);
  EXPECT_EQ(a.pq, b.pq);
  EXPECT_EQ(a.alpha, b.alpha);
  EXPECT_EQ(a.rn, b.rn);
  EXPECT_EQ(a.halted, b.halted);
}

TEST(GpuDeconvCg, DeviceStep_EveryPrecisionAndBoundary_EqualsHostScalarStep) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  for (const Boundary bd : kBoundaries)
    for (const Precision p : kBackendPrecisions) {
      SCOPED_TRACE(label(p, bd));
      const detail::Problem prob = problem_of(t, 0.01, bd);
      auto dev = detail::make_cuda_backend(prob, p);
      auto host = detail::make_cuda_backend(prob, p);
      // A right-hand side of the order of 1e2: the FP16 scale e is then far from 1, and
      // ||Q|| = 1e4 makes normal_scale_bias 6, as a peak-1 PSF would.
      Array r0 = random_image(kN, kN, Precision::Double, 5);
      for (std::int64_t k = 0; k < r0.size(); ++k) r0.data_as<double>()[k] *= 100;
      r0 = rounded(r0, p);
      CgVectors d(*dev, r0), h(*host, r0);
      const double norm_q = 1e4;
      const double rr = dev->dot(d.r, d.r);
      dev->cg_reset(rr, 0.0);
      host->Backend::cg_reset(rr, 0.0);
      dev->cg_step(d.x, d.r, d.p, d.q, d.tmp, norm_q);  // one step ahead from here on
      for (int s = 0; s < kSteps; ++s) {
        if (s + 1 < kSteps) dev->cg_step(d.x, d.r, d.p, d.q, d.tmp, norm_q);
        host->Backend::cg_step(h.x, h.r, h.p, h.q, h.tmp, norm_q);
        const CgReport a = dev->cg_report(), b = host->Backend::cg_report();
        expect_same(a, b, s);
        if (s + 1 == kSteps) {
          EXPECT_EQ(a.rn, dev->dot(d.r, d.r));  // the report's r . r is the residual's
        }
        EXPECT_FALSE(a.halted);
        EXPECT_GT(a.rn, 0);
        if (p == Precision::Mixed || p == Precision::Half) {
          EXPECT_NE(a.e, 1.0);  // the scaled operator ran
        }
      }
      EXPECT_EQ(diff_norm(fetch(*dev, d.x), fetch(*host, h.x)), 0.0);
      EXPECT_EQ(diff_norm(fetch(*dev, d.r), fetch(*host, h.r)), 0.0);
      EXPECT_EQ(diff_norm(fetch(*dev, d.p), fetch(*host, h.p)), 0.0);
    }
}

TEST(GpuDeconvCg, Breakdown_HaltsTheQueuedSteps_UntilReset) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  for (const Precision p : {Precision::Single, Precision::Mixed}) {
    SCOPED_TRACE(precision_name(p));
    auto be = detail::make_cuda_backend(problem_of(t, 0.01, Boundary::Circular), p);
    const Array r0 = random_image(kN, kN, p, 9);
    CgVectors run(*be, r0);
    be->cg_reset(0.0, 0.0);  // rr = 0: the first step halts
    be->cg_step(run.x, run.r, run.p, run.q, run.tmp, 1.0);
    be->cg_step(run.x, run.r, run.p, run.q, run.tmp, 1.0);
    EXPECT_THROW(be->cg_reset(1.0, 0.0), InvalidInput);  // reports unread
    EXPECT_TRUE(be->cg_report().halted);
    EXPECT_TRUE(be->cg_report().halted);
    EXPECT_THROW(be->cg_report(), InvalidInput);  // none queued
    EXPECT_EQ(norm(fetch(*be, run.x)), 0.0);
    EXPECT_EQ(diff_norm(fetch(*be, run.r), r0), 0.0);
    // After a reset the steps move again.
    be->cg_reset(be->dot(run.r, run.r), 0.0);
    be->cg_step(run.x, run.r, run.p, run.q, run.tmp, 1.0);
    const CgReport s = be->cg_report();
    EXPECT_FALSE(s.halted);
    EXPECT_GT(norm(fetch(*be, run.x)), 0.0);
  }
}

TEST(GpuDeconvCg, Fp16OverflowInAStep_IsANumericalError) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  auto be = detail::make_cuda_backend(problem_of(t, 0.01, Boundary::Circular), Precision::Mixed);
  Array r0(DType::f64, {kN, kN});
  for (std::int64_t k = 0; k < r0.size(); ++k) r0.data_as<double>()[k] = 60000.0;
  CgVectors run(*be, r0);
  be->cg_reset(1.0, 1.0);  // p = r + p = 120000: beyond FP16
  be->cg_step(run.x, run.r, run.p, run.q, run.tmp, 1.0);
  try {
    be->cg_report();
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("overflowed FP16"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(be->synchronize());  // the status was cleared with the throw
}

#endif

}  // namespace
}  // namespace halfscope::deconv

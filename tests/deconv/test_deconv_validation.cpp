// Every bad input of deconvolve / tikhonov_exact / tikhonov_criterion: the right error type and a
// message that names the argument, what was expected and what was found.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>

#include "deconv_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::deconv {
namespace {

/// Runs `f`, expects exception E whose message contains every one of `parts`.
template <class E>
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string m = e.what();
    for (const char* part : parts) EXPECT_NE(m.find(part), std::string::npos) << m;
  }
}

class Validation : public ::testing::Test {
 protected:
  test::Problem p = test::make_problem(16, 16, Boundary::Circular);
  DeconvOptions o{.iterations = 3, .device = DeviceKind::Cpu};
  void run(const Array& g, const Array& h) { deconvolve(g, h, o); }
  void run() { deconvolve(p.dirty, p.psf, o); }
};

TEST_F(Validation, ShapesDiffer) {
  const Array h = test::beam_psf(16, 8);
  expect_error<InvalidInput>([&] { run(p.dirty, h); }, {"PSF", "[16, 16]", "[16, 8]"});
}

TEST_F(Validation, EmptyAndNot2D) {
  const Array e = Array::zeros(DType::f64, {0, 16});
  expect_error<InvalidInput>([&] { run(e, e); }, {"empty"});
  const Array v = Array::zeros(DType::f64, {16});
  expect_error<InvalidInput>([&] { run(v, p.psf); }, {"2-D"});
}

TEST_F(Validation, NonFiniteValuesNameTheArrayAndTheFirstPixel) {
  Array g = p.dirty.clone();
  g.data_as<double>()[3 * 16 + 5] = std::nan("");
  g.data_as<double>()[9 * 16 + 1] = std::nan("");
  expect_error<InvalidInput>([&] { run(g, p.psf); }, {"dirty image", "nan", "row 3, column 5"});
  Array h = p.psf.clone();
  h.data_as<double>()[17] = std::numeric_limits<double>::infinity();
  expect_error<InvalidInput>([&] { run(p.dirty, h); }, {"PSF", "inf", "row 1, column 1"});
}

TEST_F(Validation, ZeroPsf) {
  const Array h = Array::zeros(DType::f64, {16, 16});
  expect_error<InvalidInput>([&] { run(p.dirty, h); }, {"PSF is zero everywhere"});
}

TEST_F(Validation, Lambda) {
  o.lambda = -0.1;
  expect_error<InvalidInput>([&] { run(); }, {"lambda", ">= 0", "-0.1"});
  o.lambda = std::numeric_limits<double>::infinity();
  expect_error<InvalidInput>([&] { run(); }, {"lambda", "finite"});
  // A single-pixel-wide PSF pattern [1, -1] has a spectrum zero at frequency 0: H^T H singular.
  Array h = Array::zeros(DType::f64, {16, 16});
  h.data_as<double>()[8 * 16 + 8] = 1;
  h.data_as<double>()[8 * 16 + 9] = -1;
  o.lambda = 0;
  expect_error<InvalidInput>([&] { run(p.dirty, h); }, {"lambda = 0", "singular"});
  // The beam's spectrum has no zero on this grid: lambda = 0 is accepted.
  EXPECT_NO_THROW(run());
  // ... but not with the zero boundary, whose cropped H^T H is singular whatever the spectrum.
  o.boundary = Boundary::Zero;
  expect_error<InvalidInput>([&] { run(); }, {"lambda = 0", "zero boundary", "singular"});
}

TEST_F(Validation, HalfThenFloatTakesOnlyHalfOrSingle) {
  o.solver = Solver::HalfThenFloat;
  o.precision = Precision::Double;
  expect_error<InvalidInput>([&] { run(); }, {"half-then-float", "half or single", "double"});
  o.precision = Precision::Half;
  EXPECT_NO_THROW(run());
}

TEST_F(Validation, IterationsAndCounts) {
  o.iterations = -1;
  expect_error<InvalidInput>([&] { run(); }, {"iterations", ">= 0", "-1"});
  o.iterations = 3;
  o.backtrack_retries = -2;
  expect_error<InvalidInput>([&] { run(); }, {"backtrack_retries", "-2"});
  o.backtrack_retries = 20;
  o.trace_every = -1;
  expect_error<InvalidInput>([&] { run(); }, {"trace_every"});
  o.trace_every = 1;
  o.target_distance = std::nan("");
  expect_error<InvalidInput>([&] { run(); }, {"target_distance"});
}

TEST_F(Validation, StepOutsideTheConvergenceInterval) {
  o.solver = Solver::Fixed;
  const auto r = deconvolve(p.dirty, p.psf, o);
  o.step = 2 / r.lipschitz;  // the open bound itself
  expect_error<InvalidInput>([&] { run(); }, {"step", "[0, 2/L)", "L = 2 (max|h^|^2 + lambda)"});
  o.step = -1e-3;
  expect_error<InvalidInput>([&] { run(); }, {"step"});
  o.step = 1.9 / r.lipschitz;
  EXPECT_NO_THROW(run());
}

TEST_F(Validation, UnsupportedPrecisionListsTheSupportedOnes) {
  o.precision = Precision::BF16;
  expect_error<InvalidInput>([&] { run(); },
                             {"precision bf16", "double", "single", "half", "mixed", "split"});
}

TEST_F(Validation, HalfNeedsPowerOfTwoGridsOnTheCircularBoundary) {
  const auto q = test::make_problem(24, 16, Boundary::Circular);
  o.precision = Precision::Half;
  expect_error<InvalidInput>([&] { deconvolve(q.dirty, q.psf, o); },
                             {"power-of-two", "row count 24", "mixed or split"});
  // The zero boundary pads to a power of two itself.
  o.boundary = Boundary::Zero;
  EXPECT_NO_THROW(deconvolve(q.dirty, q.psf, o));
}

TEST_F(Validation, CudaWithoutADevice) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  o.device = DeviceKind::Cuda;
  expect_error<Unsupported>([&] { run(); }, {"cuda"});
}

TEST(DeconvNames, ParseAndPrintEveryName) {
  for (Solver s : {Solver::Fixed, Solver::Optimal, Solver::Backtracking, Solver::HalfThenFloat,
                   Solver::CG, Solver::Wiener})
    EXPECT_EQ(parse_solver(solver_name(s)), s);
  EXPECT_EQ(solver_name(Solver::HalfThenFloat), "half-then-float");
  expect_error<InvalidInput>([] { parse_solver("lbfgs"); },
                             {"unknown solver 'lbfgs'", "fixed", "half-then-float", "wiener"});
  EXPECT_EQ(stop_reason_name(StopReason::TargetReached), "target");
  EXPECT_EQ(stop_reason_name(StopReason::Stalled), "stalled");
  EXPECT_EQ(deconv_precisions().size(), 5u);
}

TEST(DeconvPublic, CriterionAndExactValidateToo) {
  const auto p = test::make_problem(16, 16, Boundary::Zero);
  const Array small = Array::zeros(DType::f64, {8, 8});
  expect_error<InvalidInput>(
      [&] { tikhonov_criterion(p.dirty, p.psf, small, 0.1, Boundary::Zero); },
      {"tikhonov_criterion", "[16, 16]"});
  expect_error<InvalidInput>(
      [&] { tikhonov_exact(p.dirty, p.psf, -1, Boundary::Zero, DeviceKind::Cpu); },
      {"tikhonov_exact", "lambda"});
  // J(0) = ||g||^2 exactly.
  double gg = 0;
  for (std::int64_t k = 0; k < p.dirty.size(); ++k)
    gg += p.dirty.data_as<double>()[k] * p.dirty.data_as<double>()[k];
  EXPECT_DOUBLE_EQ(
      tikhonov_criterion(p.dirty, p.psf, Array::zeros(DType::f64, {16, 16}), 0.1, Boundary::Zero),
      gg);
}

// kappa(Q) = (max|h^|^2 + lambda) / (min|h^|^2 + lambda) on the circular grid, lambda the floor
// on the zero boundary; the warning appears exactly when kappa u > 0.01 for the working precision.
TEST(DeconvCondition, ReportedAndWarnedFromTheWorkingPrecision) {
  const test::Problem p = test::make_problem(16, 16, Boundary::Circular);
  DeconvOptions o{.solver = Solver::CG, .lambda = 0.01, .iterations = 5, .device = DeviceKind::Cpu};
  const DeconvResult r = deconvolve(p.dirty, p.psf, o);
  // Independent kappa: the FP64 spectrum of the PSF shifted to the origin.
  double hi = 0, lo = std::numeric_limits<double>::infinity();
  const double* h = p.psf.data_as<double>();
  for (int u = 0; u < 16; ++u)
    for (int v = 0; v < 16; ++v) {
      double re = 0, im = 0;
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
          const double a = -2 * std::numbers::pi * (u * (i - 8) + v * (j - 8)) / 16.0;
          re += h[i * 16 + j] * std::cos(a);
          im += h[i * 16 + j] * std::sin(a);
        }
      const double m2 = re * re + im * im;
      hi = std::max(hi, m2);
      lo = std::min(lo, m2);
    }
  const double kappa = (hi + 0.01) / (lo + 0.01);
  EXPECT_NEAR(r.condition, kappa, 1e-9 * kappa);
  const bool warn32 = kappa * 0x1p-24 > 0.01, warn16 = kappa * 0x1p-11 > 0.01;
  EXPECT_EQ(r.stop_detail.find("warning: kappa") != std::string::npos, warn32) << r.stop_detail;
  o.precision = Precision::Mixed;
  const DeconvResult m = deconvolve(p.dirty, p.psf, o);
  EXPECT_EQ(m.stop_detail.find("warning: kappa") != std::string::npos, warn16) << m.stop_detail;
  // A tiny lambda makes the problem hopeless for FP32: the warning must say so.
  o.precision = Precision::Single;
  o.lambda = 1e-9;
  const DeconvResult w = deconvolve(p.dirty, p.psf, o);
  EXPECT_NE(w.stop_detail.find("warning: kappa"), std::string::npos) << w.stop_detail;
  // Zero boundary: lambda is the floor.
  const test::Problem z = test::make_problem(16, 16, Boundary::Zero);
  o.boundary = Boundary::Zero;
  o.lambda = 0.01;
  const DeconvResult zr = deconvolve(z.dirty, z.psf, o);
  EXPECT_GT(zr.condition, 0);
  EXPECT_NEAR(zr.condition * 0.01 - 0.01, zr.lipschitz / 2 - 0.01, 1e-9 * zr.condition);
  // Wiener reports it too.
  o.solver = Solver::Wiener;
  EXPECT_GT(deconvolve(z.dirty, z.psf, o).condition, 1);
}

// A fixed step too small for FP16 to move the image ends as a stall, not a silent spin.
TEST(DeconvStall, FixedHalfStepsBelowResolution) {
  const test::Problem p = test::make_problem(16, 16, Boundary::Circular);
  DeconvOptions o{.solver = Solver::Fixed,
                  .precision = Precision::Half,
                  .iterations = 400,
                  .device = DeviceKind::Cpu,
                  .step = 1e-12};
  const DeconvResult r = deconvolve(p.dirty, p.psf, o);
  EXPECT_EQ(r.stop, StopReason::Stalled) << r.stop_detail;
  EXPECT_NE(r.stop_detail.find("has not changed"), std::string::npos) << r.stop_detail;
  EXPECT_LT(r.iterations, 400);
  // The same step in single does move it (FP32 resolves it): no stall.
  o.precision = Precision::Single;
  o.step =
      1e-6 / deconvolve(p.dirty, p.psf, {.iterations = 0, .device = DeviceKind::Cpu}).lipschitz;
  EXPECT_NE(deconvolve(p.dirty, p.psf, o).stop, StopReason::Stalled);
}

}  // namespace
}  // namespace halfscope::deconv

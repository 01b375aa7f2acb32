// Every bad input of deconvolve / tikhonov_exact / tikhonov_criterion: the right error type and a
// message that names the argument, what was expected and what was found.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
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

}  // namespace
}  // namespace halfscope::deconv

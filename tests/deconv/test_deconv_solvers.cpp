// The iterative solvers in every precision and boundary against the exact FP64 solution f*.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "deconv/backend.hpp"
#include "deconv_testing.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::deconv {
namespace {

using test::make_problem;
using test::rel_distance;

/// max |h^| on the FFTW grid of the boundary.
double detail_max_spectrum(const test::Problem& p, double lambda, Boundary b) {
  return detail::max_abs_spectrum(detail::Problem{p.dirty, p.psf, lambda, b}, false);
}

DeconvOptions opts(Solver s, Precision p, Boundary b, std::int64_t iterations, double lambda) {
  return {.solver = s,
          .precision = p,
          .lambda = lambda,
          .iterations = iterations,
          .boundary = b,
          .device = DeviceKind::Cpu};
}

TEST(DeconvSolvers, OptimalStepDecreasesJMonotonicallyInSingle) {
  // Exact line search on a quadratic strictly decreases J; in FP32 the decrease per step must
  // exceed the FP64 evaluation's rounding, so J may only stay flat at the level J* (1 + ~1e-6).
  const auto p = make_problem(64, 64, Boundary::Circular);
  const auto r = deconvolve(p.dirty, p.psf,
                            opts(Solver::Optimal, Precision::Single, Boundary::Circular, 60, 0.05));
  ASSERT_EQ(r.trace.size(), 61u);
  const double jstar = tikhonov_criterion(
      p.dirty, p.psf, tikhonov_exact(p.dirty, p.psf, 0.05, Boundary::Circular, DeviceKind::Cpu),
      0.05, Boundary::Circular);
  for (std::size_t i = 1; i < r.trace.size(); ++i)
    EXPECT_LE(r.trace[i].criterion, r.trace[i - 1].criterion + 1e-6 * jstar) << "iteration " << i;
  EXPECT_LT(r.trace.back().criterion, 0.5 * r.trace.front().criterion);
}

TEST(DeconvSolvers, BacktrackingNeverAcceptsAnIncrease) {
  for (Precision prec : {Precision::Single, Precision::Half, Precision::Mixed}) {
    const auto p = make_problem(32, 32, Boundary::Circular);
    const auto r =
        deconvolve(p.dirty, p.psf, opts(Solver::Backtracking, prec, Boundary::Circular, 80, 0.05));
    ASSERT_GE(r.trace.size(), 2u);
    for (std::size_t i = 1; i < r.trace.size(); ++i) {
      ASSERT_FALSE(std::isnan(r.trace[i].criterion_solver));
      EXPECT_LT(r.trace[i].criterion_solver, r.trace[i - 1].criterion_solver)
          << precision_name(prec) << " iteration " << r.trace[i].iteration;
    }
  }
}

TEST(DeconvSolvers, FixedStepStaysBelowTwoOverL) {
  const auto p = make_problem(32, 32, Boundary::Zero);
  const auto r =
      deconvolve(p.dirty, p.psf, opts(Solver::Fixed, Precision::Single, Boundary::Zero, 5, 0.05));
  EXPECT_GT(r.step, 0);
  EXPECT_LT(r.step, 2 / r.lipschitz);
  EXPECT_DOUBLE_EQ(r.step, 1 / r.lipschitz);
  for (std::size_t i = 1; i < r.trace.size(); ++i) EXPECT_DOUBLE_EQ(r.trace[i].step, r.step);
  // The largest step the API accepts still converges (J decreases): L bounds ||Q|| from above.
  DeconvOptions o = opts(Solver::Fixed, Precision::Double, Boundary::Zero, 40, 0.05);
  o.step = 1.99 / r.lipschitz;
  const auto big = deconvolve(p.dirty, p.psf, o);
  EXPECT_LT(big.trace.back().distance, big.trace.front().distance);
}

/// The largest distance to f* a run may end at (relative to ||f*||), from the precision's unit
/// roundoff u and kappa = (max|h^|^2 + lambda) / lambda, the condition bound of Q:
///  - single: rounding errors of size u ||Q|| ||f|| in each application move f by up to kappa u
///    (16 kappa u leaves room for the accumulation over iterations); split must reach the same
///    FP32 grade (the brief: <= 1e-5 on a well-conditioned problem);
///  - mixed: f and the gradient are stored in FP16, so each step perturbs f by ~u16 relative and
///    the fixed point sits up to kappa u16 away;
///  - half: the same storage plus FP16 FFTs: 4 kappa u16;
///  - backtracking accepts a step only when J visibly decreases: J - J* >= lambda ||f - f*||^2
///    and J's rounding error is <= N u J* (N terms), so it can stall at
///    sqrt(N u J* / lambda) / ||f*|| (u of the criterion's arithmetic: FP32 for mixed).
double bound(Solver s, Precision p, double kappa, double jstar, double norm_f, std::int64_t n,
             double lambda) {
  const double u16 = 0x1p-11, u32 = 0x1p-24;
  double b = 0;
  switch (p) {
    case Precision::Single:
      b = 16 * kappa * u32;
      break;
    case Precision::Split:
      b = std::min(16 * kappa * u32, 1e-5);
      break;
    case Precision::Mixed:
      b = kappa * u16;
      break;
    default:
      b = 4 * kappa * u16;
      break;
  }
  if (s == Solver::Backtracking) {
    const double u = p == Precision::Half ? u16 : u32;
    b = std::max(b, std::sqrt(static_cast<double>(n) * u * jstar / lambda) / norm_f);
  }
  return b;
}

struct Case {
  Solver solver;
  Precision precision;
  Boundary boundary;
};

class EverySolver : public ::testing::TestWithParam<Case> {};

TEST_P(EverySolver, RunsWithoutNaNAndApproachesTheExactSolution) {
  const auto [solver, prec, boundary] = GetParam();
  // Emulated FP16 FFTs cost ~100x FFTW's: half with the zero boundary's padded grid runs 16 x 16.
  const std::int64_t n = prec == Precision::Half && boundary == Boundary::Zero ? 16 : 32;
  const double lambda = 0.5;
  const auto p = make_problem(n, n, boundary);
  // Iterations to get below the bounds: gradient descent contracts by ~(1 - 1 / kappa) per
  // step (kappa ~ 56 here), CG by ~(1 - 2 / sqrt(kappa)).
  const std::int64_t iterations = solver == Solver::CG ? 100 : solver == Solver::Fixed ? 800 : 400;
  DeconvOptions o = opts(solver, prec, boundary, iterations, lambda);
  o.trace_every = 50;
  const auto r = deconvolve(p.dirty, p.psf, o);
  const double* x = r.image.data_as<double>();
  for (std::int64_t k = 0; k < r.image.size(); ++k) ASSERT_TRUE(std::isfinite(x[k]));
  ASSERT_FALSE(r.trace.empty());
  EXPECT_EQ(r.trace.back().iteration, r.iterations);
  const double d = r.trace.back().distance;
  EXPECT_NEAR(
      d, rel_distance(r.image, tikhonov_exact(p.dirty, p.psf, lambda, boundary, DeviceKind::Cpu)),
      1e-9);  // the trace's last row is the returned image
  const Array exact = tikhonov_exact(p.dirty, p.psf, lambda, boundary, DeviceKind::Cpu);
  const double jstar = tikhonov_criterion(p.dirty, p.psf, exact, lambda, boundary);
  double norm_f = 0;
  for (std::int64_t k = 0; k < exact.size(); ++k)
    norm_f += exact.data_as<double>()[k] * exact.data_as<double>()[k];
  const double m = detail_max_spectrum(p, lambda, boundary);
  const double kappa = (m * m + lambda) / lambda;
  EXPECT_LT(d, bound(solver, prec, kappa, jstar, std::sqrt(norm_f), n * n, lambda))
      << solver_name(solver) << " " << precision_name(prec) << " " << boundary_name(boundary)
      << " stop " << stop_reason_name(r.stop) << " " << r.stop_detail;
  if (r.stop == StopReason::Stalled) {
    EXPECT_FALSE(r.stop_detail.empty());
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (Solver s : {Solver::Fixed, Solver::Optimal, Solver::Backtracking, Solver::CG})
    for (Precision p : {Precision::Single, Precision::Half, Precision::Mixed, Precision::Split})
      for (Boundary b : {Boundary::Circular, Boundary::Zero}) v.push_back({s, p, b});
  v.push_back({Solver::HalfThenFloat, Precision::Single, Boundary::Circular});
  v.push_back({Solver::HalfThenFloat, Precision::Single, Boundary::Zero});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, EverySolver, ::testing::ValuesIn(all_cases()),
                         [](const auto& param_info) {
                           std::string s = std::string(solver_name(param_info.param.solver)) + "_" +
                                           std::string(precision_name(param_info.param.precision)) +
                                           "_" +
                                           std::string(boundary_name(param_info.param.boundary));
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(DeconvSolvers, SplitReachesFp32GradeWhereMixedCannot) {
  const auto p = make_problem(64, 64, Boundary::Circular);
  const auto split =
      deconvolve(p.dirty, p.psf, opts(Solver::CG, Precision::Split, Boundary::Circular, 200, 0.5));
  const auto mixed =
      deconvolve(p.dirty, p.psf, opts(Solver::CG, Precision::Mixed, Boundary::Circular, 200, 0.5));
  EXPECT_LT(split.trace.back().distance, 1e-5) << split.stop_detail;
  // FP32 grade: as close as CG run wholly in single (which stops at its own rounding level).
  const auto single =
      deconvolve(p.dirty, p.psf, opts(Solver::CG, Precision::Single, Boundary::Circular, 200, 0.5));
  EXPECT_LT(split.trace.back().distance, 2 * single.trace.back().distance);
  EXPECT_EQ(split.stop, StopReason::Converged) << split.stop_detail;
  // Rounding f* itself to FP16 moves it by u16 = 4.9e-4 relative per pixel (~u16 / sqrt(3) in
  // norm): mixed, which stores f in FP16, cannot get within 1e-5.
  EXPECT_GT(mixed.trace.back().distance, 1e-5);
}

TEST(DeconvSolvers, HalfThenFloatSwitchesPhases) {
  const auto p = make_problem(32, 32, Boundary::Circular);
  DeconvOptions o = opts(Solver::HalfThenFloat, Precision::Single, Boundary::Circular, 300, 0.5);
  o.half_iterations = 30;
  const auto r = deconvolve(p.dirty, p.psf, o);
  ASSERT_FALSE(r.trace.empty());
  EXPECT_EQ(r.trace.front().phase, "half");
  EXPECT_EQ(r.trace.back().phase, "single");
  // Half rows first (at most 30 iterations, fewer when backtracking stalls), then single ones.
  std::size_t first_single = 0;
  while (first_single < r.trace.size() && r.trace[first_single].phase == "half") ++first_single;
  ASSERT_LT(first_single, r.trace.size());
  EXPECT_LE(r.trace[first_single].iteration, 31);
  for (std::size_t i = first_single; i < r.trace.size(); ++i) EXPECT_EQ(r.trace[i].phase, "single");
  // The single phase's optimal step from the half result reaches FP32 grade (see bound()).
  EXPECT_LT(r.trace.back().distance, 1e-4);
}

TEST(DeconvSolvers, TraceRowsFirstEveryKAndLast) {
  const auto p = make_problem(32, 32, Boundary::Circular);
  DeconvOptions o = opts(Solver::Fixed, Precision::Single, Boundary::Circular, 20, 0.5);
  o.trace_every = 7;
  const auto r = deconvolve(p.dirty, p.psf, o);
  ASSERT_EQ(r.trace.size(), 4u);
  const std::int64_t expected[] = {0, 7, 14, 20};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.trace[i].iteration, expected[i]);
    EXPECT_EQ(r.trace[i].phase, "single");
    EXPECT_TRUE(std::isnan(r.trace[i].criterion_solver));  // fixed never computes J
    if (i > 0) {
      EXPECT_GE(r.trace[i].elapsed_ms, r.trace[i - 1].elapsed_ms);
    }
  }
  EXPECT_TRUE(std::isnan(r.trace[0].step));
  EXPECT_DOUBLE_EQ(r.trace[0].distance, 1.0);  // from f = 0
  EXPECT_LE(r.trace.back().elapsed_ms, r.solver_ms);
  EXPECT_EQ(r.iterations, 20);
  EXPECT_EQ(r.stop, StopReason::Iterations);
  // The FP64 criterion of the trace is tikhonov_criterion of the returned image.
  EXPECT_NEAR(r.trace.back().criterion,
              tikhonov_criterion(p.dirty, p.psf, r.image, 0.5, Boundary::Circular),
              1e-12 * r.trace.back().criterion);
  // No trace: no rows, the same image (tracing does not change the arithmetic).
  o.trace_every = 0;
  const auto quiet = deconvolve(p.dirty, p.psf, o);
  EXPECT_TRUE(quiet.trace.empty());
  EXPECT_EQ(rel_distance(quiet.image, r.image), 0.0);
}

TEST(DeconvSolvers, TargetDistanceStopsEarly) {
  const auto p = make_problem(32, 32, Boundary::Circular);
  DeconvOptions o = opts(Solver::CG, Precision::Single, Boundary::Circular, 500, 0.05);
  o.target_distance = 1e-3;
  o.trace_every = 0;
  const auto r = deconvolve(p.dirty, p.psf, o);
  EXPECT_EQ(r.stop, StopReason::TargetReached);
  EXPECT_LT(r.iterations, 500);
  EXPECT_TRUE(r.trace.empty());
  EXPECT_LT(rel_distance(r.image,
                         tikhonov_exact(p.dirty, p.psf, 0.05, Boundary::Circular, DeviceKind::Cpu)),
            1e-3 * (1 + 1e-3));
}

TEST(DeconvSolvers, HalfStallIsReportedNotNaN) {
  // lambda tiny: the FP16 criterion cannot resolve the decrease near f*, so backtracking runs out
  // of halvings; the run must end as Stalled with finite values, never NaN.
  const auto p = make_problem(32, 32, Boundary::Circular);
  const auto r = deconvolve(
      p.dirty, p.psf, opts(Solver::Backtracking, Precision::Half, Boundary::Circular, 3000, 1e-3));
  EXPECT_EQ(r.stop, StopReason::Stalled) << r.stop_detail;
  EXPECT_NE(r.stop_detail.find("backtracking: no decrease after 20 halvings"), std::string::npos);
  for (std::int64_t k = 0; k < r.image.size(); ++k)
    ASSERT_TRUE(std::isfinite(r.image.data_as<double>()[k]));
}

TEST(DeconvSolvers, DirtyImagesOfAnyScaleGiveTheSameSolutionInTheirUnits) {
  // Tikhonov's minimiser is linear in g and deconvolve hands its solvers g scaled to max 1 by a
  // power of two: scaling g by 2^k must scale the image by exactly 2^k and the criteria by 4^k,
  // in every precision, from 2^-100 (FP16 and FP32 would flush it to zero) to 2^100 (beyond FP16
  // and, squared, beyond FP32). A scale that is no power of two (1e-6 Jy) stays as close to the
  // FP64 optimum f* as flux 1 does.
  const auto p = make_problem(32, 32, Boundary::Circular);
  for (const Precision prec :
       {Precision::Half, Precision::Mixed, Precision::Single, Precision::Split}) {
    const auto o = opts(Solver::CG, prec, Boundary::Circular, 40, 0.05);
    const auto one = deconvolve(p.dirty, p.psf, o);
    for (const int k : {-100, -20, 17, 100}) {
      SCOPED_TRACE(std::string(precision_name(prec)) + " 2^" + std::to_string(k));
      Array g = p.dirty.clone();
      for (std::int64_t i = 0; i < g.size(); ++i)
        g.data_as<double>()[i] = std::ldexp(g.data_as<double>()[i], k);
      const auto r = deconvolve(g, p.psf, o);
      ASSERT_EQ(r.image.size(), one.image.size());
      for (std::int64_t i = 0; i < r.image.size(); ++i)
        ASSERT_EQ(r.image.data_as<double>()[i], std::ldexp(one.image.data_as<double>()[i], k))
            << "pixel " << i;
      ASSERT_EQ(r.trace.size(), one.trace.size());
      for (std::size_t j = 0; j < r.trace.size(); ++j) {
        // NaN (the initial row's step) equals NaN here.
        const auto same = [](double a, double b) { return a == b || (a != a && b != b); };
        EXPECT_TRUE(same(r.trace[j].criterion, std::ldexp(one.trace[j].criterion, 2 * k))) << j;
        EXPECT_TRUE(
            same(r.trace[j].criterion_solver, std::ldexp(one.trace[j].criterion_solver, 2 * k)))
            << j;
        EXPECT_TRUE(same(r.trace[j].distance, one.trace[j].distance)) << j;
        EXPECT_TRUE(same(r.trace[j].step, one.trace[j].step)) << j;
      }
      EXPECT_EQ(r.stop_detail, one.stop_detail);
    }
    Array micro = p.dirty.clone();
    for (std::int64_t i = 0; i < micro.size(); ++i) micro.data_as<double>()[i] *= 1e-6;
    const auto r = deconvolve(micro, p.psf, o);
    const Array exact = tikhonov_exact(micro, p.psf, 0.05, Boundary::Circular, DeviceKind::Cpu);
    EXPECT_LT(rel_distance(r.image, exact), 2 * one.trace.back().distance + 1e-4)
        << precision_name(prec);
  }
}

TEST(DeconvSolvers, HalfOverflowIsANumericalError) {
  // A PSF of peak 1e5 (lambda scaled by its square: the same minimiser, 1e-5 times the image):
  // H^T g cannot be stored in FP16 (max 65504). deconvolve scales g, never the PSF.
  auto p = make_problem(32, 32, Boundary::Circular);
  for (std::int64_t i = 0; i < p.psf.size(); ++i) p.psf.data_as<double>()[i] *= 1e5;
  try {
    deconvolve(p.dirty, p.psf,
               opts(Solver::Fixed, Precision::Half, Boundary::Circular, 5, 0.05 * 1e10));
    FAIL() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("overflowed FP16"), std::string::npos) << e.what();
  }
  // In single the same problem runs.
  const auto r = deconvolve(
      p.dirty, p.psf, opts(Solver::CG, Precision::Single, Boundary::Circular, 100, 0.5 * 1e10));
  EXPECT_LT(r.trace.back().distance, 1e-5);
}

TEST(DeconvSolvers, SingleOverflowIsANumericalErrorNotAStall) {
  // A PSF of peak 1e20 (lambda 1e40 times): Q = H^T H + lambda I passes FP32's 3.4e38. The
  // operator's output or the line-search and CG scalars come out non-finite; the run must end
  // with an error naming the precision, not "stalled" with a blank image (no step length
  // recovers from it).
  auto p = make_problem(32, 32, Boundary::Circular);
  for (std::int64_t i = 0; i < p.psf.size(); ++i) p.psf.data_as<double>()[i] *= 1e20;
  for (const Solver s : {Solver::CG, Solver::Optimal, Solver::Backtracking}) {
    try {
      const auto r = deconvolve(p.dirty, p.psf,
                                opts(s, Precision::Single, Boundary::Circular, 20, 0.05 * 1e40));
      ADD_FAILURE() << solver_name(s) << ": no NumericalError, stop " << r.stop_detail;
    } catch (const NumericalError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("single arithmetic overflowed") != std::string::npos ||
                  m.find("single: normal operator produced") != std::string::npos)
          << m;
    }
  }
  // In double the same problem runs.
  const auto r = deconvolve(
      p.dirty, p.psf, opts(Solver::CG, Precision::Double, Boundary::Circular, 20, 0.05 * 1e40));
  for (std::int64_t k = 0; k < r.image.size(); ++k)
    ASSERT_TRUE(std::isfinite(r.image.data_as<double>()[k]));
}

TEST(DeconvSolvers, HalfRunsWithDirtyPixelsUpToAThousand) {
  // Sources up to 1e3 on the peak-1 beam: dirty pixels up to ~1e3, H^T g and Q f* larger. Every
  // FFT is scaled by powers of two, the FP16 products of the reductions too, and the optimal
  // step and CG apply Q to their direction scaled to max 1 (Q k itself, ~27 |k|, would exceed
  // 65504): nothing overflows, and the result is as close to f* as at flux 1 (relative
  // distances do not depend on the units).
  for (Boundary b : {Boundary::Circular, Boundary::Zero}) {
    const std::int64_t n = b == Boundary::Zero ? 16 : 32;
    const auto big = make_problem(n, n, b, 1000.0);
    const auto one = make_problem(n, n, b, 1.0);
    double gmax = 0;
    for (std::int64_t k = 0; k < big.dirty.size(); ++k)
      gmax = std::max(gmax, std::fabs(big.dirty.data_as<double>()[k]));
    EXPECT_GT(gmax, 500.0);
    for (Solver s : {Solver::Optimal, Solver::CG}) {
      const auto o = opts(s, Precision::Half, b, 60, 0.5);
      const auto rb = deconvolve(big.dirty, big.psf, o);
      const auto r1 = deconvolve(one.dirty, one.psf, o);
      EXPECT_LT(rb.trace.back().distance, 2 * r1.trace.back().distance + 1e-3)
          << boundary_name(b) << " " << solver_name(s);
    }
  }
}

}  // namespace
}  // namespace halfscope::deconv

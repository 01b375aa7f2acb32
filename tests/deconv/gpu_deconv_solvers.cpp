// The CUDA deconvolution beyond single operations: the FP64 evaluator against tikhonov_criterion,
// wiener_cuda against the CPU's exact solution, `deconvolve` on the GPU against the same run on
// the CPU for every solver x precision x boundary, and (HALFSCOPE_DECONV_GPU_TIMING=1) the time of
// a 2048x2048 normal() per precision.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_deconv_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "deconv/backend_cuda_stream.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::deconv {
namespace {

#if HALFSCOPE_WITH_CUDA

using namespace gputest;

constexpr std::int64_t kN = 32;
constexpr double kLambda = 0.01;

TEST(GpuDeconvEvaluator, Fp64CriterionAndDistance_MatchTikhonovCriterion_EveryInputDtype) {
  HS_REQUIRE_GPU();
  for (const Boundary b : kBoundaries) {
    SCOPED_TRACE(b == Boundary::Circular ? "circular" : "zero");
    const test::Problem t = test::make_problem(kN, kN, b);
    const Array exact = tikhonov_exact(t.dirty, t.psf, kLambda, b, DeviceKind::Cpu);
    auto ev = detail::make_cuda_evaluator(problem_of(t, kLambda, b), exact);
    auto no_exact = detail::make_cuda_evaluator(problem_of(t, kLambda, b), Array());
    for (const DType dt : {DType::f64, DType::f32, DType::f16}) {
      SCOPED_TRACE(dtype_name(dt));
      const Array x_host = t.sky.astype(dt);
      const Array x = x_host.astype(DType::f64);
      const detail::Evaluation e = ev->evaluate(x_host.to(Memory::device));
      // Both sides in FP64 through FFTs of ~10 levels: ~1e-14 relative; 1e-11 leaves room for the
      // residual's cancellation (J is ~1e-2 of ||g||^2 here).
      const double j_ref = tikhonov_criterion(t.dirty, t.psf, x, kLambda, b);
      EXPECT_NEAR(e.criterion, j_ref, 1e-11 * j_ref);
      const double d_ref = test::rel_distance(x, exact);
      EXPECT_NEAR(e.distance, d_ref, 1e-12 * d_ref);
      EXPECT_TRUE(std::isnan(no_exact->evaluate(x_host.to(Memory::device)).distance));
      // A host image (the driver's Wiener result) is uploaded once and evaluated the same way.
      EXPECT_NEAR(ev->evaluate(x_host).criterion, e.criterion, 1e-14 * j_ref);
    }
    EXPECT_THROW((void)ev->evaluate(Array::zeros(DType::f64, {kN, kN + 1}).to(Memory::device)),
                 InvalidInput);
  }
}

TEST(GpuDeconvWiener, CircularFp64_MatchesCpuExactSolution) {
  HS_REQUIRE_GPU();
  for (const double lambda : {0.01, 1.0}) {
    const test::Problem t = test::make_problem(64, 48, Boundary::Circular);
    const detail::Problem p = problem_of(t, lambda, Boundary::Circular);
    const Array gpu = detail::wiener_cuda(p);
    const Array cpu = tikhonov_exact(t.dirty, t.psf, lambda, Boundary::Circular, DeviceKind::Cpu);
    // Both are the FP64 filter conj(h^) G / (|h^|^2 + lambda): their difference is the FFTs'
    // rounding amplified by the filter's condition kappa = (max|h^|^2 + lambda) / lambda at most:
    // kappa 2 log2(N) 7 u.
    const double hmax = detail::max_abs_spectrum(p, false);
    const double kappa = (hmax * hmax + lambda) / lambda;
    const double bound = kappa * 2 * std::log2(64.0 * 48.0) * 7 * 0x1p-53;
    EXPECT_LE(test::rel_distance(gpu, cpu), bound) << "lambda " << lambda;
  }
  const test::Problem t = test::make_problem(kN, kN, Boundary::Zero);
  EXPECT_THROW((void)detail::wiener_cuda(problem_of(t, kLambda, Boundary::Zero)), InvalidInput);
}

TEST(GpuDeconvSolvers, EverySolverPrecisionBoundary_AgreesWithTheCpuRun) {
  HS_REQUIRE_GPU();
  const Solver solvers[] = {Solver::Fixed, Solver::Optimal, Solver::Backtracking,
                            Solver::HalfThenFloat, Solver::CG};
  const Precision precisions[] = {Precision::Single, Precision::Half, Precision::Mixed,
                                  Precision::Split};
  for (const Boundary b : kBoundaries) {
    const test::Problem t = test::make_problem(kN, kN, b);
    const Array exact = tikhonov_exact(t.dirty, t.psf, kLambda, b, DeviceKind::Cpu);
    for (const Solver s : solvers)
      for (const Precision p : precisions) {
        // half-then-float fixes its phases' precisions and accepts only half or single.
        if (s == Solver::HalfThenFloat && p != Precision::Half && p != Precision::Single) continue;
        const std::string what = std::string(solver_name(s)) + " " +
                                 std::string(precision_name(p)) +
                                 (b == Boundary::Circular ? " circular" : " zero");
        SCOPED_TRACE(what);
        DeconvOptions o;
        o.solver = s;
        o.precision = p;
        o.lambda = kLambda;
        o.iterations = 40;
        o.boundary = b;
        o.trace_every = 0;
        o.trace_distance = false;
        o.device = DeviceKind::Cpu;
        const DeconvResult cpu = deconvolve(t.dirty, t.psf, o);
        o.device = DeviceKind::Cuda;
        const DeconvResult gpu = deconvolve(t.dirty, t.psf, o);
        EXPECT_EQ(gpu.device, DeviceKind::Cuda);
        const double dc = test::rel_distance(cpu.image, exact);
        const double dg = test::rel_distance(gpu.image, exact);
        std::printf(
            "measured %s: distance cpu %.3g gpu %.3g, iterations %lld / %lld, stop %s / %s\n",
            what.c_str(), dc, dg, static_cast<long long>(cpu.iterations),
            static_cast<long long>(gpu.iterations), std::string(stop_reason_name(cpu.stop)).c_str(),
            std::string(stop_reason_name(gpu.stop)).c_str());
        ASSERT_TRUE(std::isfinite(dg));
        // The same algorithm in the same arithmetic, rounded in another order. Each iteration
        // perturbs the iterate by ~u of its storage relative to the CPU's; fixed, optimal and
        // backtracking steps are contractions (perturbations do not grow), CG follows exact CG
        // for a nearby operator (Greenbaum 1989) but its Krylov sequence amplifies them by up to
        // sqrt(kappa) ~ 40 here. So the distances agree to 5% where the iterate is FP32 (single,
        // split) and to 25% with FP16 storage in the loop (half, mixed, half-then-float's first
        // phase; ~40 iterations x u16 x 40 / sqrt(40 iterations)), or both lie at the storage
        // floor (64 u).
        const bool fp16 =
            p == Precision::Half || p == Precision::Mixed || s == Solver::HalfThenFloat;
        const double rel = fp16 ? 0.25 : 0.05;
        const Precision final_p = s == Solver::HalfThenFloat ? Precision::Single : p;
        const double floor = 64 * storage_unit_roundoff(final_p);
        EXPECT_LE(std::fabs(dg - dc), rel * std::max(dg, dc) + floor);
      }
  }
}

TEST(GpuDeconvSolvers, WellConditionedCg_ReachesThePrecisionFloorOnBothDevices) {
  HS_REQUIRE_GPU();
  // lambda = 1: kappa(Q) <= (max|h^|^2 + lambda) / lambda, ~28 for this beam, so 100 CG
  // iterations reach the attainable accuracy, ~kappa u of the solution's storage (FP32 for
  // split: its reliable updates recompute the residual in FP32); bound 4 kappa u. (Plain single
  // CG is compared with the CPU run above.)
  const double lambda = 1.0;
  for (const Boundary b : kBoundaries) {
    const test::Problem t = test::make_problem(kN, kN, b);
    const Array exact = tikhonov_exact(t.dirty, t.psf, lambda, b, DeviceKind::Cpu);
    for (const Precision p : {Precision::Split, Precision::Mixed, Precision::Half}) {
      const std::string what =
          std::string(precision_name(p)) + (b == Boundary::Circular ? " circular" : " zero");
      SCOPED_TRACE(what);
      const double hmax = detail::max_abs_spectrum(problem_of(t, lambda, b), p == Precision::Half);
      const double kappa = (hmax * hmax + lambda) / lambda;
      DeconvOptions o;
      o.solver = Solver::CG;
      o.precision = p;
      o.lambda = lambda;
      o.iterations = 100;
      o.boundary = b;
      o.trace_every = 0;
      o.trace_distance = false;
      for (const DeviceKind d : {DeviceKind::Cpu, DeviceKind::Cuda}) {
        o.device = d;
        const double dist = test::rel_distance(deconvolve(t.dirty, t.psf, o).image, exact);
        std::printf("measured cg lambda 1 %s %s: distance %.3g (bound %.3g)\n", what.c_str(),
                    d == DeviceKind::Cpu ? "cpu" : "gpu", dist,
                    4 * kappa * storage_unit_roundoff(p));
        EXPECT_LE(dist, 4 * kappa * storage_unit_roundoff(p))
            << (d == DeviceKind::Cpu ? "cpu" : "gpu");
      }
    }
  }
}

/// Time of `normal` on a 2048x2048 problem per precision and boundary, CUDA events on the
/// backend's stream, median of 50 after 3 warm-up calls; also checks Q 1 = (|h^(0)|^2 + lambda) 1
/// (circular: the constant image is an eigenvector) at that size.
TEST(GpuDeconvTiming, Normal2048_PerPrecision) {
  HS_REQUIRE_GPU();
  if (!std::getenv("HALFSCOPE_DECONV_GPU_TIMING"))
    GTEST_SKIP() << "HALFSCOPE_DECONV_GPU_TIMING unset";
  constexpr std::int64_t n = 2048;
  const Array psf = test::beam_psf(n, n, 2.0);
  double h0 = 0;
  for (std::int64_t k = 0; k < psf.size(); ++k) h0 += psf.data_as<double>()[k];
  for (const Boundary b : kBoundaries)
    for (const Precision p : kBackendPrecisions) {
      const std::string what =
          std::string(precision_name(p)) + (b == Boundary::Circular ? " circular" : " zero");
      detail::Problem prob;
      prob.dirty = psf;
      prob.psf = psf;
      prob.lambda = kLambda;
      prob.boundary = b;
      auto be = detail::make_cuda_backend(prob, p);
      const Vec x = be->create(), y = be->create();
      Array ones(DType::f64, {n, n});
      std::fill_n(ones.data_as<double>(), ones.size(), 0.5);
      be->assign(ones.to(Memory::device), 1.0, 0.0, x);
      const cudaStream_t stream = detail::cuda_backend_stream(*be);
      for (int w = 0; w < 3; ++w) be->normal(x, y);
      be->synchronize();
      std::vector<float> ms;
      for (int r = 0; r < 50; ++r) {
        cuda::EventTimer timer(stream);
        timer.start();
        be->normal(x, y);
        ms.push_back(timer.stop_ms());
      }
      be->synchronize();
      std::sort(ms.begin(), ms.end());
      std::printf("timing normal() %lldx%lld %s: median %.3f ms (min %.3f, max %.3f)\n",
                  static_cast<long long>(n), static_cast<long long>(n), what.c_str(), ms[25], ms[0],
                  ms[49]);
      if (b == Boundary::Circular) {
        // Every pixel of Q (0.5) is 0.5 (h0^2 + lambda) up to the filter's rounding.
        const double want = 0.5 * (h0 * h0 + kLambda);
        const double hmax = detail::max_abs_spectrum(prob, p == Precision::Half);
        const double tol = filter_bound(p, n * n, 1) * (hmax * hmax + kLambda) * 0.5;
        EXPECT_NEAR(be->max_abs(y), std::fabs(want), tol) << what;
      }
    }
}

#endif  // HALFSCOPE_WITH_CUDA

}  // namespace
}  // namespace halfscope::deconv

// The FP64 foundations of deconvolution: the forward model against a direct sum, the exact
// solutions against independent references (the converged FP64 CG for the Wiener filter, a dense
// LAPACK solve for the zero boundary), the criterion and the gradient.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <cmath>
#include <random>
#include <vector>

#include "deconv/backend.hpp"
#include "deconv/backend_cpu.hpp"
#include "deconv_testing.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::deconv {
namespace {

using test::make_problem;
using test::rel_distance;

constexpr double kU64 = 0x1p-53;

/// Condition bound of Q = H^T H + lambda I: (max|h^|^2 + lambda) / lambda.
double kappa_bound(const Array& psf, double lambda, Boundary b) {
  detail::Problem p{psf, psf, lambda, b};
  const double m = detail::max_abs_spectrum(p, false);
  return (m * m + lambda) / lambda;
}

class BoundaryTest : public ::testing::TestWithParam<Boundary> {};

TEST_P(BoundaryTest, ApplyPsfMatchesDirectSum) {
  // Both compute sums of rows * cols products of O(1) values in FP64; the FFT's error is
  // ~ u log2(N) relative to the largest output, the direct sum's ~ u N: 1e3 u on 24 x 20 covers
  // both.
  const auto p = make_problem(24, 20, GetParam());
  const Array fft = apply_psf(p.sky, p.psf, GetParam());
  const Array direct = test::direct_psf(p.sky, p.psf, GetParam());
  double scale = 0, err = 0;
  for (std::int64_t k = 0; k < fft.size(); ++k) {
    scale = std::max(scale, std::fabs(direct.data_as<double>()[k]));
    err = std::max(err, std::fabs(fft.data_as<double>()[k] - direct.data_as<double>()[k]));
  }
  EXPECT_LE(err, 1e3 * kU64 * scale);
}

TEST_P(BoundaryTest, ConvergedCgEqualsExactSolution) {
  // FP64 CG run far past convergence: its distance to f* is limited by the rounding of both,
  // ~ kappa u; the bound is 1e-6.
  const Boundary b = GetParam();
  const auto p = make_problem(32, 32, b);
  const double lambda = 0.01;
  const Array exact = tikhonov_exact(p.dirty, p.psf, lambda, b, DeviceKind::Cpu);
  const auto r = deconvolve(p.dirty, p.psf,
                            {.solver = Solver::CG,
                             .precision = Precision::Double,
                             .lambda = lambda,
                             .iterations = 600,
                             .boundary = b,
                             .device = DeviceKind::Cpu,
                             .trace_every = 0,
                             .trace_distance = false});
  EXPECT_LT(rel_distance(r.image, exact), 1e-6);
  // The zero boundary's f* is itself FP64 CG stopped at a relative residual of 1e-12: its error
  // is <= kappa 1e-12.
  const double kappa = kappa_bound(p.psf, lambda, b);
  EXPECT_LT(rel_distance(r.image, exact),
            100 * kappa * kU64 + (b == Boundary::Zero ? kappa * 1e-12 : 0.0));
}

TEST_P(BoundaryTest, GradientMatchesFiniteDifferences) {
  // grad J = 2 k with k = Q f - b; J is quadratic, so the central difference along v is exact
  // up to rounding: |J| u / h per evaluation.
  const Boundary b = GetParam();
  const auto p = make_problem(16, 16, b);
  const double lambda = 0.05;
  detail::Problem prob{p.dirty, p.psf, lambda, b};
  auto be = detail::make_cpu_backend(prob, Precision::Double);
  const detail::Vec f = be->create(), k = be->create(), rhs = be->create();
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(0, 1);
  Array fa(DType::f64, {16, 16}), va(DType::f64, {16, 16});
  for (std::int64_t i = 0; i < 256; ++i) {
    fa.data_as<double>()[i] = n(rng);
    va.data_as<double>()[i] = n(rng);
  }
  be->assign(fa, 1.0, 0.0, f);
  be->rhs(rhs);
  be->normal(f, k);
  be->axpby(-1.0, rhs, 1.0, k);
  const Array kv = be->view(k);
  double directional = 0;
  for (std::int64_t i = 0; i < 256; ++i)
    directional += 2 * kv.data_as<double>()[i] * va.data_as<double>()[i];
  const double h = 1e-3;
  Array fp = fa.clone(), fm = fa.clone();
  for (std::int64_t i = 0; i < 256; ++i) {
    fp.data_as<double>()[i] += h * va.data_as<double>()[i];
    fm.data_as<double>()[i] -= h * va.data_as<double>()[i];
  }
  const double jp = tikhonov_criterion(p.dirty, p.psf, fp, lambda, b);
  const double jm = tikhonov_criterion(p.dirty, p.psf, fm, lambda, b);
  const double fd = (jp - jm) / (2 * h);
  EXPECT_NEAR(directional, fd, 1e3 * kU64 * std::fabs(jp) / h);
  // The backend's own criterion agrees with the public FP64 one.
  EXPECT_NEAR(be->criterion(f), tikhonov_criterion(p.dirty, p.psf, fa, lambda, b),
              1e3 * kU64 * std::fabs(jp));
}

INSTANTIATE_TEST_SUITE_P(Boundaries, BoundaryTest,
                         ::testing::Values(Boundary::Circular, Boundary::Zero),
                         [](const auto& param_info) {
                           return std::string(boundary_name(param_info.param));
                         });

TEST(DeconvExact, ZeroBoundaryEqualsDenseSolve) {
  // Dense H from the direct sum of unit vectors (independent of the FFT), then LAPACK's Cholesky
  // solve of (H^T H + lambda I) f = H^T g. Both sides are accurate to ~ kappa u; the FP64 CG
  // reference stops at a relative residual of 1e-12, so its error is <= kappa 1e-12.
  const std::int64_t n = 12, N = n * n;
  const auto p = make_problem(n, n, Boundary::Zero);
  const double lambda = 0.02;
  std::vector<double> H(static_cast<std::size_t>(N * N));
  for (std::int64_t c = 0; c < N; ++c) {
    Array e = Array::zeros(DType::f64, {n, n});
    e.data_as<double>()[c] = 1;
    const Array col = test::direct_psf(e, p.psf, Boundary::Zero);
    for (std::int64_t r = 0; r < N; ++r)
      H[static_cast<std::size_t>(r * N + c)] = col.data_as<double>()[r];
  }
  std::vector<double> A(static_cast<std::size_t>(N * N)), rhs(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (std::int64_t r = 0; r < N; ++r)
        s += H[static_cast<std::size_t>(r * N + i)] * H[static_cast<std::size_t>(r * N + j)];
      A[static_cast<std::size_t>(i * N + j)] = s + (i == j ? lambda : 0.0);
    }
    double s = 0;
    for (std::int64_t r = 0; r < N; ++r)
      s += H[static_cast<std::size_t>(r * N + i)] * p.dirty.data_as<double>()[r];
    rhs[static_cast<std::size_t>(i)] = s;
  }
  ASSERT_EQ(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(N), 1, A.data(),
                          static_cast<lapack_int>(N), rhs.data(), 1),
            0);
  const Array dense = Array::from_values<double>(rhs, {n, n});
  const Array exact = tikhonov_exact(p.dirty, p.psf, lambda, Boundary::Zero, DeviceKind::Cpu);
  const double kappa = kappa_bound(p.psf, lambda, Boundary::Zero);
  EXPECT_LT(rel_distance(exact, dense), 2 * kappa * 1e-12 + 100 * kappa * kU64);
  // The double-precision CG solver run to convergence gets there too.
  const auto r = deconvolve(p.dirty, p.psf,
                            {.solver = Solver::CG,
                             .precision = Precision::Double,
                             .lambda = lambda,
                             .iterations = 400,
                             .boundary = Boundary::Zero,
                             .device = DeviceKind::Cpu,
                             .trace_every = 0,
                             .trace_distance = false});
  EXPECT_LT(rel_distance(r.image, dense), 1e-9);
}

TEST(DeconvExact, WienerSolverReturnsTheExactSolution) {
  const auto p = make_problem(32, 16, Boundary::Circular);
  const auto r = deconvolve(p.dirty, p.psf,
                            {.solver = Solver::Wiener, .lambda = 0.01, .device = DeviceKind::Cpu});
  EXPECT_EQ(r.stop, StopReason::Converged);
  ASSERT_EQ(r.trace.size(), 1u);
  EXPECT_EQ(r.trace[0].distance, 0.0);
  // f* minimises J: any perturbation raises it (J(f* + e) - J(f*) = e.Q e > 0).
  Array moved = r.image.clone();
  moved.data_as<double>()[5] += 1e-3;
  EXPECT_GT(tikhonov_criterion(p.dirty, p.psf, moved, 0.01, Boundary::Circular),
            r.trace[0].criterion);
  EXPECT_NEAR(r.trace[0].criterion,
              tikhonov_criterion(p.dirty, p.psf, r.image, 0.01, Boundary::Circular),
              1e3 * kU64 * r.trace[0].criterion);
}

}  // namespace
}  // namespace halfscope::deconv

// The evaluation on whole AO systems: the Fried building block of the phase projection against an
// independent Fried gradient model, and the end-to-end evaluation of FP64 and deliberately
// degraded reconstructors on a hand-built system. The matched projection and its units are in
// test_evaluation_projection.cpp, the "check" preset pinned in test_evaluation_check.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ao/evaluation_internal.hpp"
#include "covariance_test_systems.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

constexpr double kUnitRoundoff = 0x1p-53;

using test::test_lgs;
using test::test_ngs;

// The NGS here are one magnitude brighter than the covariance tests' default (13).
constexpr double kNgsMagnitude = 12;

// An 8 m telescope, 8 x 8 subapertures, 2 LGS + 1 NGS around a target 5 arcsec off axis.
AoSystem small_system(double truth_rotation_deg = 0) {
  AoSystem s = test::test_telescope("aoeval-small", 8, 0.14);
  s.sensors.push_back(test_lgs("LGS1", 20, 0, 8));
  s.sensors.push_back(test_lgs("LGS2", -10, 17, 8));
  s.sensors.push_back(test_ngs("NGS1", 5, -30, 8, kNgsMagnitude));
  s.truth = test_ngs("truth", 3, 4, 8, kNgsMagnitude);
  s.truth.rotation_deg = truth_rotation_deg;
  s.atmosphere.r0_m = 0.15;
  s.atmosphere.layers = {{0, 0.6, 25}, {5000, 0.25, 25}, {11000, 0.15, 25}};
  s.noise.atmosphere_throughput = 0.84;
  return s;
}

// The Fried gradient model written directly from its definition (evaluation.hpp): G phi in arcsec
// for phi in metres on the used points, x slopes then y slopes, rotated into the pupil frame.
std::vector<double> apply_gradient(const AoSystem& s, const PhaseProjection& p,
                                   const std::vector<double>& phi) {
  const std::int64_t side = s.truth.subapertures + 1;
  std::vector<std::int64_t> index(static_cast<std::size_t>(side * side), -1);
  std::int64_t k = 0;
  for (std::int64_t q = 0; q < side * side; ++q)
    if (p.point_mask.data_as<std::uint8_t>()[q]) index[q] = k++;
  const std::vector<Subaperture> subs = valid_subapertures(s, s.truth);
  const auto ns = static_cast<std::int64_t>(subs.size());
  const double th = s.truth.rotation_deg * std::acos(-1.0) / 180.0;
  std::vector<double> slopes(static_cast<std::size_t>(2 * ns));
  for (std::int64_t i = 0; i < ns; ++i) {
    const auto& sub = subs[i];
    auto v = [&](int dc, int dr) { return phi[index[(sub.row + dr) * side + sub.column + dc]]; };
    const double gx = (v(1, 0) - v(0, 0) + v(1, 1) - v(0, 1)) / (2 * p.pitch_m) * 206265.0;
    const double gy = (v(0, 1) - v(0, 0) + v(1, 1) - v(1, 0)) / (2 * p.pitch_m) * 206265.0;
    slopes[i] = std::cos(th) * gx - std::sin(th) * gy;
    slopes[ns + i] = std::sin(th) * gx + std::cos(th) * gy;
  }
  return slopes;
}

#if HALFSCOPE_HAS_LAPACKE
TEST(EvaluationSystem, ProjectionInvertsTheFriedGradientOnPistonAndWaffleFreePhase) {
  for (double rotation : {0.0, 7.0}) {
    const AoSystem s = small_system(rotation);
    // The Fried building block on every touching corner (the public fried projection keeps the
    // annulus rows of it, piston removed: test_evaluation_projection.cpp).
    const PhaseProjection p = detail::fried_pseudo_inverse(s);
    const std::int64_t points = p.matrix.dim(0), m = p.matrix.dim(1);
    ASSERT_EQ(m, truth_count(s));
    ASSERT_DOUBLE_EQ(p.pitch_m, 1.0);
    // Random phase with its components on piston u and waffle w removed (Gram-Schmidt).
    const std::int64_t side = 9;
    std::vector<double> u(points, 1.0), w;
    for (std::int64_t q = 0; q < side * side; ++q)
      if (p.point_mask.data_as<std::uint8_t>()[q])
        w.push_back((q / side + q % side) % 2 ? -1.0 : 1.0);
    auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
      double r = 0;
      for (std::size_t i = 0; i < a.size(); ++i) r += a[i] * b[i];
      return r;
    };
    const double wu = dot(w, u) / dot(u, u);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= wu * u[i];
    std::mt19937_64 rng(17);
    std::normal_distribution<double> normal(0.0, 1e-7);
    std::vector<double> phi(points);
    for (double& v : phi) v = normal(rng);
    const double cu = dot(phi, u) / dot(u, u), cw = dot(phi, w) / dot(w, w);
    for (std::int64_t i = 0; i < points; ++i) phi[i] -= cu * u[i] + cw * w[i];

    const std::vector<double> slopes = apply_gradient(s, p, phi);
    // P G phi = phi up to the normal equations' error: kappa(A) n u with kappa(A) <~ 8 / (pi /
    // (Nssp + 1))^2 ~ 66 for the 9 x 9 points (the discrete Laplacian's spectrum) and n = points,
    // relative to max |phi| (~ 4e-7); a factor 10 for the constant.
    const double tol = 10.0 * 66.0 * static_cast<double>(points) * kUnitRoundoff * 4e-7;
    const double* pm = p.matrix.data_as<double>();
    for (std::int64_t i = 0; i < points; ++i) {
      double r = 0;
      for (std::int64_t j = 0; j < m; ++j) r += pm[i * m + j] * slopes[j];
      EXPECT_NEAR(r, phi[i], tol) << "point " << i << " rotation " << rotation;
    }
    // Every output is piston-free and waffle-free: P's columns are orthogonal to u and w.
    for (std::int64_t j = 0; j < m; ++j) {
      double su = 0, sw = 0, scale = 0;
      for (std::int64_t i = 0; i < points; ++i) {
        su += pm[i * m + j];
        sw += pm[i * m + j] * w[i];
        scale += std::fabs(pm[i * m + j]);
      }
      EXPECT_LE(std::fabs(su), 1e3 * kUnitRoundoff * scale) << "column " << j;
      EXPECT_LE(std::fabs(sw), 1e3 * kUnitRoundoff * scale) << "column " << j;
    }
  }
}

TEST(EvaluationSystem, Fp64ReconstructorEvaluatesAndAHalvedOneIsWorse) {
  const AoSystem s = small_system();
  CovarianceOptions co;
  co.device = DeviceKind::Cpu;
  const Array cmm = covariance(s, CovarianceKind::cmm, co);
  const Array ctm = covariance(s, CovarianceKind::ctm, co);
  const Array r = reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);
  EvaluationOptions o;
  o.device = DeviceKind::Cpu;
  o.psf_size = 128;
  const Evaluation e = evaluate_reconstructor(s, r, o);
  EXPECT_TRUE(std::isfinite(e.tomographic_error_nm));
  EXPECT_GT(e.tomographic_error_nm, 0.0);
  EXPECT_GT(e.strehl_marechal, 0.0);
  EXPECT_LE(e.strehl_marechal, 1.0);
  EXPECT_GT(e.strehl_otf, 0.0);
  EXPECT_LE(e.strehl_otf, 1.0);
  EXPECT_EQ(e.error_covariance.shape(), (Shape{truth_count(s), truth_count(s)}));
  EXPECT_NEAR(e.psf.at_as_double(64 * 128 + 64), e.strehl_otf, 1e-12);
  EXPECT_DOUBLE_EQ(e.strehl_marechal, marechal_strehl(e.tomographic_error_nm, 1.65e-6));

  Array half = r.clone();
  for (std::int64_t i = 0; i < half.size(); ++i) half.data_as<double>()[i] *= 0.5;
  const Evaluation worse = evaluate_reconstructor(s, half, o);
  EXPECT_GT(worse.tomographic_error_nm, e.tomographic_error_nm);
  EXPECT_LT(worse.strehl_marechal, e.strehl_marechal);
  EXPECT_LT(worse.strehl_otf, e.strehl_otf);
}

TEST(EvaluationSystem, ZeroErrorCovarianceGivesAStrehlOfExactlyOneOnBothPaths) {
  const AoSystem s = small_system();
  const std::int64_t m = truth_count(s);
  const Evaluation e = evaluate_error_covariance(s, Array::zeros(DType::f64, {m, m}));
  EXPECT_EQ(e.tomographic_error_nm, 0.0);
  EXPECT_EQ(e.strehl_marechal, 1.0);
  EXPECT_EQ(e.strehl_otf, 1.0);
}

#endif

TEST(EvaluationSystem, WrongShapesNameBothShapes) {
  const AoSystem s = small_system();
  const std::int64_t m = truth_count(s), n = measurement_count(s);
  try {
    (void)evaluate_reconstructor(s, Array::zeros(DType::f64, {n, m}));
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(m) + " x " + std::to_string(n)), std::string::npos) << msg;
    EXPECT_NE(msg.find("[" + std::to_string(n) + ", " + std::to_string(m) + "]"), std::string::npos)
        << msg;
  }
  EXPECT_THROW((void)evaluate_error_covariance(s, Array::zeros(DType::f64, {m, m + 1})),
               InvalidInput);
}

}  // namespace
}  // namespace halfscope::ao

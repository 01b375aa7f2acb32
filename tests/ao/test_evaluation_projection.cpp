// The phase projection (evaluation.hpp, ProjectionMethod): the evaluation points, the phase-slope
// covariance of the matched projection against an independent long-double evaluation with the
// reference structure function (turbulence.hpp), and the units end to end at the presets' pitch
// d = 3.9 m against the von Karman phase variance on the points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ao/evaluation_internal.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/turbulence.hpp"
#include "halfscope/config.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

constexpr double kUnitRoundoff = 0x1p-53;
constexpr long double kOpdPerRad = 0.5e-6L / (2.0L * 3.14159265358979323846264L);  // 500 nm

// The check preset (39 m, 10 x 10 subapertures: d = 3.9 m), its truth lenslet array rotated.
AoSystem check_system(double rotation_deg) {
  AoSystem s = ao_preset("check");
  s.truth.rotation_deg = rotation_deg;
  return s;
}

// Lattice corner k of the truth sensor in the pupil frame, written from the definition (corner
// (col, row) at -D/2 + d (col, row) in the lenslet frame, rotated then shifted).
void corner_position(const AoSystem& s, std::int64_t k, long double& x, long double& y) {
  const std::int64_t side = s.truth.subapertures + 1;
  const long double d = static_cast<long double>(s.diameter_m) / s.truth.subapertures;
  const long double x0 = -0.5L * s.diameter_m + d * static_cast<long double>(k % side);
  const long double y0 = -0.5L * s.diameter_m + d * static_cast<long double>(k / side);
  const long double th = s.truth.rotation_deg * 3.14159265358979323846264L / 180.0L;
  x = x0 * std::cos(th) - y0 * std::sin(th) + s.truth.pupil_shift_x_m;
  y = x0 * std::sin(th) + y0 * std::cos(th) + s.truth.pupil_shift_y_m;
}

// The pupil-frame positions of the used points, in mask order.
void used_points(const AoSystem& s, const Array& mask, std::vector<long double>& x,
                 std::vector<long double>& y) {
  for (std::int64_t k = 0; k < mask.size(); ++k)
    if (mask.data_as<std::uint8_t>()[k]) {
      long double px = 0, py = 0;
      corner_position(s, k, px, py);
      x.push_back(px);
      y.push_back(py);
    }
}

// The layer-summed phase structure function of the target direction in rad^2 at 500 nm (an NGS
// truth: every layer is seen at full size, so separations are the same on all layers).
long double phase_structure(const AoSystem& s, long double r) {
  long double sum = 0;
  for (const Layer& l : s.atmosphere.layers)
    sum += l.fraction *
           vonkarman_structure_function(static_cast<double>(r), s.atmosphere.r0_m, l.outer_scale_m);
  return sum;
}

#if HALFSCOPE_HAS_LAPACKE
TEST(EvaluationProjection, PointsAreTheTouchingCornersInsideTheAnnulus) {
  for (double rotation : {0.0, 7.0}) {
    const AoSystem s = check_system(rotation);
    const PhaseProjection p = truth_phase_projection(s, ProjectionMethod::fried, DeviceKind::Cpu);
    const std::int64_t side = s.truth.subapertures + 1;
    std::vector<int> touches(static_cast<std::size_t>(side * side), 0);
    for (const Subaperture& sub : valid_subapertures(s, s.truth))
      for (int dr = 0; dr <= 1; ++dr)
        for (int dc = 0; dc <= 1; ++dc) touches[(sub.row + dr) * side + sub.column + dc] = 1;
    std::int64_t used = 0, outside = 0;
    for (std::int64_t k = 0; k < side * side; ++k) {
      // The annulus in the lenslet frame (rotation about the centre keeps the radius).
      const double x = -0.5 * s.diameter_m + p.pitch_m * static_cast<double>(k % side);
      const double y = -0.5 * s.diameter_m + p.pitch_m * static_cast<double>(k / side);
      const double r = std::hypot(x, y);
      const bool inside = r <= 0.5 * s.diameter_m * (1 + 1e-12) &&
                          r >= 0.5 * s.diameter_m * s.obstruction * (1 - 1e-12);
      EXPECT_EQ(p.point_mask.data_as<std::uint8_t>()[k], inside && touches[k] ? 1 : 0) << k;
      used += inside && touches[k];
      outside += !inside && touches[k];
    }
    EXPECT_EQ(p.matrix.dim(0), used);
    EXPECT_GT(outside, 0);  // the corners outside the pupil / in the obstruction are dropped
  }
}

TEST(EvaluationProjection, FriedIsThePseudoInverseOnTheAnnulusWithPistonRemovedThere) {
  const AoSystem s = check_system(7.0);
  const PhaseProjection p = truth_phase_projection(s, ProjectionMethod::fried, DeviceKind::Cpu);
  const PhaseProjection full = detail::fried_pseudo_inverse(s);
  const std::int64_t m = p.matrix.dim(1), side = s.truth.subapertures + 1;
  std::vector<std::int64_t> rows;
  for (std::int64_t k = 0, row = 0; k < side * side; ++k) {
    if (p.point_mask.data_as<std::uint8_t>()[k]) rows.push_back(row);
    if (full.point_mask.data_as<std::uint8_t>()[k]) ++row;
  }
  ASSERT_EQ(static_cast<std::int64_t>(rows.size()), p.matrix.dim(0));
  const auto n = static_cast<double>(rows.size());
  for (std::int64_t j = 0; j < m; ++j) {
    long double mean = 0, scale = 0;
    for (std::int64_t r : rows) mean += full.matrix.at_as_double(r * m + j) / n;
    for (std::int64_t r : rows) scale += std::fabs(full.matrix.at_as_double(r * m + j));
    // One mean and one subtraction in FP64: <= (n + 1) u of the column's magnitude.
    for (std::size_t i = 0; i < rows.size(); ++i)
      EXPECT_NEAR(p.matrix.at_as_double(static_cast<std::int64_t>(i) * m + j),
                  static_cast<double>(full.matrix.at_as_double(rows[i] * m + j) - mean),
                  static_cast<double>((n + 1) * kUnitRoundoff * scale));
  }
}

TEST(EvaluationProjection, PhaseSlopeCovarianceMatchesALongDoubleReference) {
  for (double rotation : {0.0, 7.0}) {
    const AoSystem s = check_system(rotation);
    const Array mask = detail::lattice_point_mask(s, true);
    const Array c = detail::phase_slope_covariance(s, mask);
    std::vector<long double> px, py;
    used_points(s, mask, px, py);
    const std::vector<Subaperture> subs = valid_subapertures(s, s.truth);
    const auto ns = static_cast<std::int64_t>(subs.size());
    ASSERT_EQ(c.dim(0), static_cast<std::int64_t>(px.size()));
    ASSERT_EQ(c.dim(1), 2 * ns);
    const long double d = static_cast<long double>(s.diameter_m) / s.truth.subapertures;
    // Cov(OPD(P), slope) = opd * (206265 opd / d) * [D(P - B) - D(P - A)] / 2, A / B the slope's
    // baseline ends c +- d/2 along its axis, opd = metres of OPD per radian at 500 nm.
    const long double unit = kOpdPerRad * 206265.0L * kOpdPerRad / d;
    std::mt19937_64 rng(5);
    for (int sample = 0; sample < 200; ++sample) {
      const auto i = static_cast<std::int64_t>(rng() % px.size());
      const auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * ns));
      const Subaperture& sub = subs[static_cast<std::size_t>(j % ns)];
      const long double ex = j < ns ? 0.5L * d : 0.0L, ey = j < ns ? 0.0L : 0.5L * d;
      const long double db =
          phase_structure(s, std::hypot(px[i] - (sub.x_m - ex), py[i] - (sub.y_m - ey)));
      const long double da =
          phase_structure(s, std::hypot(px[i] - (sub.x_m + ex), py[i] - (sub.y_m + ey)));
      const long double ref = unit * (db - da) / 2.0L;
      // The fast D agrees with the reference to 2e-15 relative (test_covariance_model.cpp) and the
      // sum over 10 layers adds ~10 roundings: 1e-14 of the terms' magnitude bounds the error.
      const long double tol = 1e-14L * unit * (db + da) / 2.0L;
      EXPECT_NEAR(c.at_as_double(i * 2 * ns + j), static_cast<double>(ref),
                  static_cast<double>(tol))
          << "point " << i << " slope " << j << " rotation " << rotation;
    }
  }
}

// mean diag(A C B^T) / rows for row-major rows x m A, B and m x m C, in long double.
long double mean_quadratic(const Array& a, const Array& c, const Array& b) {
  const std::int64_t rows = a.dim(0), m = a.dim(1);
  long double sum = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      long double t = 0;
      for (std::int64_t k = 0; k < m; ++k)
        t += static_cast<long double>(c.at_as_double(j * m + k)) * b.at_as_double(i * m + k);
      sum += a.at_as_double(i * m + j) * t;
    }
  return sum / static_cast<long double>(rows);
}

TEST(EvaluationProjection, UnitsAgainstTheVonKarmanPhaseVarianceAtTheCheckPitch) {
  // No correction: the projected uncorrected slopes W Ctt W^T against the piston-removed von
  // Karman phase covariance on the points, Pi C Pi = -1/2 Pi D Pi (only D enters), whose mean
  // diagonal is var_true = 1 / (2 P^2) sum_ij D(|x_i - x_j|) (OPD m^2), from turbulence.hpp.
  // Bounds, with N = N_t the regulariser and C_pt the phase-slope covariance:
  //  - above: W = Pi C_pt (Ctt + N)^-1, so W Ctt W^T <= W (Ctt + N) W^T = Pi C_pt (Ctt + N)^-1
  //    C_tp Pi <= Pi C_pt Ctt^+ C_tp Pi <= Pi C_pp Pi (a Schur complement of the joint
  //    covariance of phase and slopes is PSD): var_W <= var_true.
  //  - below: W minimises E(A) + tr(A N A^T) / P over all A (E(A) = mean squared error of the
  //    estimate A s of Pi phi), and E(W) = var_true - var_W - 2 tr(W N W^T) / P (expand E with
  //    W C_tp = W (Ctt + N) W^T). With A = the Fried projection F:
  //      var_W >= var_true - E(F) - tr(F N F^T) / P - tr(W N W^T) / P.
  // A unit error (206265, 2 pi, the pitch) scales var_W by its square and breaks one of them.
  const AoSystem s = check_system(0.0);
  ASSERT_NEAR(s.diameter_m / s.truth.subapertures, 3.9, 1e-12);
  CovarianceOptions co;
  co.device = DeviceKind::Cpu;
  co.noise = false;
  const Array ctt = covariance(s, CovarianceKind::ctt, co);
  const PhaseProjection w = detail::matched_projection(s, ctt);
  const PhaseProjection f = truth_phase_projection(s, ProjectionMethod::fried, DeviceKind::Cpu);
  ASSERT_EQ(w.matrix.shape(), f.matrix.shape());
  std::vector<long double> px, py;
  used_points(s, w.point_mask, px, py);
  const auto points = static_cast<std::int64_t>(px.size());
  const std::int64_t m = ctt.dim(0);
  ASSERT_EQ(w.matrix.dim(0), points);

  long double dsum = 0;
  for (std::int64_t i = 0; i < points; ++i)
    for (std::int64_t j = 0; j < i; ++j)
      dsum += 2.0L * phase_structure(s, std::hypot(px[i] - px[j], py[i] - py[j]));
  const long double var_true =
      kOpdPerRad * kOpdPerRad * dsum / (2.0L * static_cast<long double>(points * points));

  const Array cpt = detail::phase_slope_covariance(s, w.point_mask);
  const std::vector<double> noise = detail::truth_regulariser(s, ctt);
  long double cross_f = 0, wnw = 0, fnf = 0;
  for (std::int64_t i = 0; i < points; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      const long double fw = f.matrix.at_as_double(i * m + j),
                        ww = w.matrix.at_as_double(i * m + j);
      cross_f += fw * cpt.at_as_double(i * m + j);
      fnf += fw * fw * noise[static_cast<std::size_t>(j)];
      wnw += ww * ww * noise[static_cast<std::size_t>(j)];
    }
  cross_f /= points;
  fnf /= points;
  wnw /= points;
  const long double var_w = mean_quadratic(w.matrix, ctt, w.matrix);
  const long double var_f = mean_quadratic(f.matrix, ctt, f.matrix);
  const long double e_fried = var_true - 2.0L * cross_f + var_f;
  std::printf(
      "d = 3.9 m, %lld points: rms true %.1f nm, matched %.1f nm, Fried %.1f nm; Fried "
      "error %.1f nm, N terms %.3g / %.3g nm^2\n",
      static_cast<long long>(points), static_cast<double>(std::sqrt(var_true) * 1e9),
      static_cast<double>(std::sqrt(var_w) * 1e9), static_cast<double>(std::sqrt(var_f) * 1e9),
      static_cast<double>(std::sqrt(e_fried) * 1e9), static_cast<double>(wnw * 1e18),
      static_cast<double>(fnf * 1e18));
  // Rounding: W comes from a Cholesky solve with Ctt + N, whose condition number is at most
  // trace(Ctt) / min N (Ctt PSD); its relative error is <= kappa m u times a small constant, and
  // var_W inherits twice that. The fast D's 2e-15 relative error moves Ctt and C_pt consistently.
  long double trace = 0, min_noise = noise.front();
  for (std::int64_t j = 0; j < m; ++j) trace += ctt.at_as_double(j * m + j);
  for (double v : noise) min_noise = std::min<long double>(min_noise, v);
  const long double kappa = trace / min_noise + 1;
  const long double rel = 20.0L * kappa * m * kUnitRoundoff + 1e-13L;
  std::printf("kappa bound %.3g, relative tolerance %.3g\n", static_cast<double>(kappa),
              static_cast<double>(rel));
  EXPECT_LE(var_w, var_true * (1 + rel));
  EXPECT_GE(var_w, (var_true - e_fried - fnf - wnw) * (1 - rel) - rel * var_true);
  EXPECT_GT(e_fried, 0.0L);
}
#endif

}  // namespace
}  // namespace halfscope::ao

// The noise terms of the covariance: where they go (diagonal, LGS tip-tilt on LGS blocks) and
// their values against the formulas written out independently here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "covariance_test_systems.hpp"
#include "halfscope/ao/covariance.hpp"

namespace halfscope::ao {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

// NGS centroid variance (arcsec^2) from the photometry, as documented in noise.cpp / the doc:
// F = 10^(2.9 - 0.4 m) photons / cm^2 / s / A x 1e4 d^2 x 1e10 bandwidth x t x throughputs,
// s = 0.5 um / r0 (0.5 um / lambda)^(1/5) rad, sigma^2 = 0.32 s^2 / F + 0.82 (RON / (F p))^2 s^4.
double ngs_variance(const AoSystem& s, const Sensor& w) {
  const double d = s.diameter_m / w.subapertures;
  const double flux = std::pow(10.0, 2.9 - 0.4 * w.magnitude) * 1e4 * d * d * 1e10 *
                      s.noise.bandwidth_m * s.noise.frame_time_s * w.throughput *
                      s.noise.atmosphere_throughput;
  const double seeing =
      0.5e-6 / s.atmosphere.r0_m * std::pow(0.5e-6 / w.wavelength_m, 0.2) * 206265;
  const double ron = w.readout_noise_e / (flux * w.pixel_arcsec);
  return 0.32 * seeing * seeing / flux + 0.82 * ron * ron * std::pow(seeing, 4);
}

struct Difference {
  Array with, without;
  double at(std::int64_t i, std::int64_t j) const {
    const std::int64_t n = with.dim(1);
    return with.data_as<double>()[i * n + j] - without.data_as<double>()[i * n + j];
  }
};

Difference noise_of(const AoSystem& s, CovarianceKind kind) {
  CovarianceOptions on, off;
  on.device = off.device = DeviceKind::Cpu;
  off.noise = false;
  return {covariance(s, kind, on), covariance(s, kind, off)};
}

TEST(CovarianceNoise, OnlyOnDiagonalAndLgsTipTilt) {
  const AoSystem s = test::small_system();
  const Difference diff = noise_of(s, CovarianceKind::cmm);
  const std::int64_t n = diff.with.dim(0), per = 64, subs = 32;  // 32 valid subapertures each
  ASSERT_EQ(n, 4 * per);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t wi = i / per, wj = j / per;
      const bool lgs = wi < 2, same = wi == wj, same_axis = (i % per) / subs == (j % per) / subs;
      const bool same_sub = (i % subs) == (j % subs);
      const double v = diff.at(i, j);
      // The turbulent parts of both matrices are the same numbers, so outside the noise
      // pattern the difference is exactly 0; inside it carries the rounding of one addition.
      const double scale = std::abs(diff.with.data_as<double>()[i * n + j]);
      if (!same || (!same_sub && !(lgs && same_axis))) {
        EXPECT_EQ(v, 0.0) << "(" << i << ", " << j << ")";
      } else if (lgs && same_axis && !same_sub) {
        EXPECT_NEAR(v, 0.5, 4 * kEps * scale) << "(" << i << ", " << j << ")";  // tip-tilt
      } else if (!lgs && same_sub && same_axis) {
        EXPECT_NEAR(v, ngs_variance(s, s.sensors[static_cast<std::size_t>(wi)]), 8 * kEps * scale);
      } else if (!lgs && same_sub) {
        EXPECT_EQ(v, 0.0);  // NGS: no x-y noise correlation
      }
    }
}

TEST(CovarianceNoise, LgsElongationIsARotatedEllipse) {
  // For each LGS subaperture the 2 x 2 noise block [xx xy; xy yy] (tip-tilt removed) is the
  // rotation of diag(long, short): its trace and determinant are rotation invariants, and the
  // long axis points from the launch telescope (pupil edge toward the LGS) to the subaperture.
  const AoSystem s = test::small_system();
  const Difference diff = noise_of(s, CovarianceKind::cmm);
  const Sensor& w = s.sensors[0];  // LGS1 at (20, 0) arcsec: launch at (+4, 0) m
  const auto subs = valid_subapertures(s, w);
  const std::int64_t m = 32;
  const double d = 8.0 / 6, flux = w.lgs_flux * d * d * s.noise.frame_time_s * w.throughput;
  const double seeing = 0.5e-6 / 0.15 * std::pow(0.5e-6 / w.wavelength_m, 0.2) * 206265;
  const double p2 = seeing * seeing + w.spot_fwhm_arcsec * w.spot_fwhm_arcsec;
  const double ron2 = std::pow(w.readout_noise_e / (flux * w.pixel_arcsec), 2);
  for (std::int64_t k = 0; k < m; ++k) {
    const double xx = diff.at(k, k) - 0.5, yy = diff.at(m + k, m + k) - 0.5, xy = diff.at(k, m + k);
    EXPECT_EQ(xy, diff.at(m + k, k));
    const double dx = subs[static_cast<std::size_t>(k)].x_m - 4.0;
    const double dy = subs[static_cast<std::size_t>(k)].y_m;
    const double e = std::hypot(dx, dy) * 206265 * 10e3 / (90e3 * 90e3);
    const double l2 = p2 + e * e;
    // Read-out term: RON^2 over the spot's pixels ~ (long size x short size) / pixel^2, each
    // weighted by its lever arm^2 along the axis (long size^2 or short size^2), over F^2.
    const double lsize = std::sqrt(l2), ssize = std::sqrt(p2), pixels = lsize * ssize;
    const double lng = 0.32 * l2 / flux + 0.82 * ron2 * pixels * lsize * lsize;
    const double sht = 0.32 * p2 / flux + 0.82 * ron2 * pixels * ssize * ssize;
    // The differences carry the rounding of the turbulent part they were added to (~eps x the
    // diagonal, which holds the tip-tilt constant 0.5 plus the turbulence ~ 1).
    const double tol = 64 * kEps * std::abs(diff.with.data_as<double>()[k * diff.with.dim(1) + k]);
    EXPECT_NEAR(xx + yy, lng + sht, tol);
    EXPECT_NEAR(xx * yy - xy * xy, lng * sht, tol * (lng + sht));
    // The long axis along (dx, dy): the quadratic form's value there is the long-axis variance.
    const double c = dx / std::hypot(dx, dy), sn = dy / std::hypot(dx, dy);
    EXPECT_NEAR(xx * c * c + 2 * xy * c * sn + yy * sn * sn, lng, tol);
  }
}

TEST(CovarianceNoise, TruthSensorCarriesNoNoise) {
  // The truth slopes are the noise-free turbulence in the target direction: Ctt and Ctm are the
  // same numbers with the noise on or off, even for a faint, noisy truth star, while the
  // measurement noise is there (Cmm differs).
  AoSystem s = test::small_system();
  s.truth.magnitude = 18;
  s.truth.readout_noise_e = 20;
  for (const CovarianceKind kind : {CovarianceKind::ctt, CovarianceKind::ctm}) {
    const Difference d = noise_of(s, kind);
    for (std::int64_t k = 0; k < d.with.size(); ++k)
      ASSERT_EQ(d.with.data_as<double>()[k], d.without.data_as<double>()[k])
          << covariance_kind_name(kind) << " element " << k;
  }
  EXPECT_GT(noise_of(s, CovarianceKind::cmm).at(128, 128), 0.0);  // NGS1's first x slope
  // Nor through covariance_entry, which shares the plan.
  EXPECT_EQ(covariance_entry(s, CovarianceKind::ctt, 5, 5, true),
            covariance_entry(s, CovarianceKind::ctt, 5, 5, false));
  // The system switch gates the noise as well.
  AoSystem quiet = s;
  quiet.noise.enabled = false;
  const Array a = covariance(quiet, CovarianceKind::cmm, {DeviceKind::Cpu, DType::f64});
  const Difference cmm = noise_of(s, CovarianceKind::cmm);
  for (std::int64_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a.data_as<double>()[k], cmm.without.data_as<double>()[k]);
}

}  // namespace
}  // namespace halfscope::ao

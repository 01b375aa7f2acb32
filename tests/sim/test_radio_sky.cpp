// The model sky and the dirty image (sim/radio.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope {
namespace {

bool same_bits(const Array& a, const Array& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.nbytes())) == 0;
}

double sum_of(const Array& a) {
  double s = 0;
  for (std::int64_t k = 0; k < a.size(); ++k) s += a.at_as_double(k);
  return s;
}

TEST(RadioSky, SeededReproducibleAndHaloPeakIsTheRatio) {
  const sim::SkyOptions o{.rows = 96,
                          .cols = 80,
                          .sources = 40,
                          .halo_ratio = 1e-3,
                          .halo_correlation_px = 4,
                          .seed = 7};
  const sim::SkyResult a = sim::simulate_sky(o), b = sim::simulate_sky(o);
  EXPECT_TRUE(same_bits(a.sky, b.sky));
  sim::SkyOptions other = o;
  other.seed = 8;
  EXPECT_FALSE(same_bits(a.sky, sim::simulate_sky(other).sky));
  // The halo's peak is ratio x brightest up to the two roundings of the scaling (2 ulp).
  EXPECT_NEAR(a.halo_peak, 1e-3 * a.brightest, 4e-16 * 1e-3 * a.brightest);
  double halo_max = 0, points_max = 0;
  for (std::int64_t r = 0; r < o.rows; ++r)
    for (std::int64_t c = 0; c < o.cols; ++c) {
      const std::int64_t k = r * o.cols + c;
      const double h = a.halo.at_as_double(k), p = a.points.at_as_double(k);
      EXPECT_GE(h, 0);
      EXPECT_EQ(a.sky.at_as_double(k), p + h);
      halo_max = std::max(halo_max, h);
      points_max = std::max(points_max, p);
      // Outside the soft disc (0.45 min(rows, cols) = 36 px from the centre) the halo is 0.
      if (std::hypot(r - o.rows / 2, c - o.cols / 2) >= 36) {
        EXPECT_EQ(h, 0);
      }
    }
  EXPECT_EQ(halo_max, a.halo_peak);
  EXPECT_EQ(points_max, a.brightest);
  // Fluxes lie in [flux_min, flux_max] (pixels where two sources meet hold their sum).
  std::int64_t lit = 0;
  for (std::int64_t k = 0; k < a.points.size(); ++k)
    if (a.points.at_as_double(k) > 0) {
      ++lit;
      EXPECT_GE(a.points.at_as_double(k), o.flux_min);
    }
  EXPECT_GE(lit, 30);
  EXPECT_LE(lit, 40);
}

TEST(RadioSky, PowerLawFluxesHaveTheirMean) {
  // dN/dS ~ S^a on [0.01, 1]: the mean flux is ln(100) / 99 for a = -2 and 0.99 / ln(100) for
  // a = -1 (log-uniform). The total over n sources (coincident ones add, so the total is exact)
  // is n mean +- 5 sd sqrt(n), sd^2 = 0.01 - mean^2 (a = -2: E[S^2] = 0.99 / 99).
  const std::int64_t n = 20000;
  for (const auto& [index, mean, second] :
       {std::tuple{-2.0, std::log(100.0) / 99, 0.01},
        std::tuple{-1.0, 0.99 / std::log(100.0), (1 - 1e-4) / 2 / std::log(100.0)}}) {
    const sim::SkyOptions o{.rows = 64,
                            .cols = 64,
                            .sources = n,
                            .flux_index = index,
                            .flux_min = 0.01,
                            .flux_max = 1,
                            .halo_ratio = 0,
                            .seed = 3};
    const double total = sum_of(sim::simulate_sky(o).points);
    const double sd = std::sqrt(second - mean * mean);
    EXPECT_NEAR(total / n, mean, 5 * sd / std::sqrt(static_cast<double>(n))) << index;
  }
}

TEST(RadioSky, BadOptions) {
  EXPECT_THROW((void)sim::simulate_sky({.rows = 0}), InvalidInput);
  EXPECT_THROW((void)sim::simulate_sky({.rows = 8, .cols = 8, .flux_min = 0}), InvalidInput);
  EXPECT_THROW((void)sim::simulate_sky({.rows = 8, .cols = 8, .flux_min = 2, .flux_max = 1}),
               InvalidInput);
  EXPECT_THROW((void)sim::simulate_sky({.rows = 8, .cols = 8, .sources = 0}), InvalidInput);
  EXPECT_THROW((void)sim::simulate_sky({.rows = 8, .cols = 8, .halo_ratio = -1}), InvalidInput);
}

// A PSF with several fringes (an east-west pair over a short track) for the observation tests.
Array test_psf(std::int64_t n) {
  const sim::AntennaTable t{"pair", {{"a", 0, 0, 0}, {"b", 40, 25, 0}, {"c", -30, 60, 1}}};
  sim::PsfOptions o;
  o.rows = o.cols = n;
  o.track.ha_start_h = -2;
  o.track.ha_end_h = 2;
  o.track.ha_step_s = 1200;
  return sim::simulate_psf(t, o).gridded.psf;
}

TEST(RadioObservation, NoiseHasTheSigmaOfTheRequestedSnr) {
  const std::int64_t n = 128;
  const Array sky = sim::simulate_sky({.rows = n, .cols = n, .sources = 30, .seed = 5}).sky;
  const Array psf = test_psf(n);
  for (const Boundary bc : {Boundary::Circular, Boundary::Zero})
    for (double snr : {37.0, 16.0}) {
      const sim::ObservationResult r = sim::simulate_observation(sky, psf, {snr, 11, bc});
      const Array clean = deconv::apply_psf(sky, psf, bc);
      double signal = 0, noise = 0, mean = 0;
      for (std::int64_t k = 0; k < n * n; ++k) {
        const double s = clean.at_as_double(k), e = r.dirty.at_as_double(k) - s;
        signal += s * s;
        noise += e * e;
        mean += e;
      }
      EXPECT_DOUBLE_EQ(r.signal_power, signal / (n * n));
      EXPECT_NEAR(r.sigma, std::sqrt(signal / (n * n) / std::pow(10, snr / 10)), 1e-12 * r.sigma);
      // ||n||^2 / (N sigma^2) is chi^2_N / N: mean 1, sd sqrt(2 / N); in dB the realised SNR has
      // sd (10 / ln 10) sqrt(2 / N) = 0.048 dB for N = 128^2. Allow 5 sd.
      const double realised = 10 * std::log10(signal / noise);
      EXPECT_NEAR(realised, snr, 5 * 10 / std::log(10.0) * std::sqrt(2.0 / (n * n)));
      EXPECT_NEAR(mean / (n * n), 0, 5 * r.sigma / n);  // white, zero-mean: 5 sd of the mean
    }
}

TEST(RadioObservation, SeededAndScaledBySigma) {
  const std::int64_t n = 32;
  const Array sky = sim::simulate_sky({.rows = n, .cols = n, .sources = 5, .seed = 2}).sky;
  const Array psf = test_psf(n);
  const auto a = sim::simulate_observation(sky, psf, {37, 4, Boundary::Circular});
  const auto b = sim::simulate_observation(sky, psf, {37, 4, Boundary::Circular});
  EXPECT_TRUE(same_bits(a.dirty, b.dirty));
  // The same seed draws the same normals: the 16 dB noise is the 37 dB noise times 10^(21/20).
  const auto c = sim::simulate_observation(sky, psf, {16, 4, Boundary::Circular});
  const Array clean = deconv::apply_psf(sky, psf, Boundary::Circular);
  for (std::int64_t k = 0; k < n * n; ++k) {
    const double na = a.dirty.at_as_double(k) - clean.at_as_double(k);
    const double nc = c.dirty.at_as_double(k) - clean.at_as_double(k);
    EXPECT_NEAR(nc, na * std::pow(10, 21.0 / 20), 1e-9 * c.sigma);
  }
}

TEST(RadioObservation, BadInput) {
  const Array psf = test_psf(16);
  const Array sky = sim::simulate_sky({.rows = 16, .cols = 16, .sources = 3}).sky;
  EXPECT_THROW((void)sim::simulate_observation(sky, test_psf(32), {}), InvalidInput);
  EXPECT_THROW((void)sim::simulate_observation(Array::zeros(DType::f64, {16, 16}), psf, {}),
               InvalidInput);
  Array nan_sky = sky.clone();
  nan_sky.data_as<double>()[7] = NAN;
  EXPECT_THROW((void)sim::simulate_observation(nan_sky, psf, {}), InvalidInput);
  EXPECT_THROW((void)sim::simulate_observation(sky, psf, {.snr_db = INFINITY}), InvalidInput);
}

}  // namespace
}  // namespace halfscope

// The interferometer PSF (sim/radio.hpp) against analytic fringes and direct DFTs.
//
// Tolerances: the PSF is one FP64 inverse FFT of a grid of small integers, normalised by its sum;
// the FFT's error is O(eps log2 N) relative to the peak (eps = 2^-53, N <= 2^13 here), so 1e-12
// leaves a margin of ~100 over the worst case. The references below are direct sums of cosines
// over at most a few thousand terms, also O(n eps).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <utility>

#include "halfscope/core/error.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kArcsec = kPi / 180 / 3600;

sim::AntennaTable east_west(double b) {
  return {"test", {{"a", 0, 0, 0}, {"b", b, 0, 0}}};
}

// The PSF of gridded cells {(iu, iv) -> weight} by a direct DFT: sum_k w_k cos(2 pi (iu (j - cc) /
// cols + iv (i - cr) / rows)) / sum_k w_k, the cells listed with their mirrors.
double dft_psf(const std::map<std::pair<long, long>, double>& cells, std::int64_t rows,
               std::int64_t cols, std::int64_t i, std::int64_t j) {
  double s = 0, w = 0;
  for (const auto& [cell, weight] : cells) {
    const double phase = 2 * kPi *
                         (static_cast<double>(cell.first) * static_cast<double>(j - cols / 2) /
                              static_cast<double>(cols) +
                          static_cast<double>(cell.second) * static_cast<double>(i - rows / 2) /
                              static_cast<double>(rows));
    s += weight * std::cos(phase);
    w += weight;
  }
  return s / w;
}

TEST(RadioPsf, SingleSnapshotOfAnEastWestPairIsTheCosineFringe) {
  // At hour angle 0 an east-west baseline B gives (u, v) = (B / lambda, 0); put u on cell 5.
  const std::int64_t rows = 16, cols = 64;
  const double pixel_arcsec = 2.0, freq = 1.4e9, lambda = sim::kSpeedOfLight / freq;
  const double du = 1 / (static_cast<double>(cols) * pixel_arcsec * kArcsec);
  const double u = 5 * du;
  sim::PsfOptions o;
  o.rows = rows;
  o.cols = cols;
  o.pixel_arcsec = pixel_arcsec;
  o.track = {.dec_deg = -30, .ha_start_h = 0, .ha_end_h = 0, .ha_step_s = 60, .freq_hz = freq};
  const sim::PsfResult r = sim::simulate_psf(east_west(u * lambda), o);
  ASSERT_EQ(r.gridded.samples, 1);
  EXPECT_EQ(r.gridded.dropped, 0);
  EXPECT_EQ(r.gridded.occupied_cells, 2);
  EXPECT_NEAR(r.uv.at_as_double(0), u, 1e-9 * u);
  EXPECT_NEAR(r.uv.at_as_double(1), 0, 1e-9 * u);
  const double* p = r.gridded.psf.data_as<double>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double l = static_cast<double>(j - cols / 2) * pixel_arcsec * kArcsec;
      EXPECT_NEAR(p[i * cols + j], std::cos(2 * kPi * u * l), 1e-12) << i << "," << j;
    }
}

TEST(RadioPsf, EarthRotationTrackMatchesTheDftOfItsSamples) {
  // East-west baseline B: X = Z = 0, Y = B, so u = B cos(H) / lambda, v = B sin(d) sin(H) / lambda
  // (independent of the latitude): the track is an ellipse the test computes on its own.
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{32, 48}, {33, 31}}) {
    const double b = 600, freq = 1.0e9, dec = -50, pixel = 20;
    sim::PsfOptions o;
    o.rows = rows;
    o.cols = cols;
    o.pixel_arcsec = pixel;
    o.track = {.dec_deg = dec, .ha_start_h = -3, .ha_end_h = 3, .ha_step_s = 900, .freq_hz = freq};
    const sim::PsfResult r = sim::simulate_psf(east_west(b), o);
    const double lambda = sim::kSpeedOfLight / freq;
    const double du = 1 / (static_cast<double>(cols) * pixel * kArcsec);
    const double dv = 1 / (static_cast<double>(rows) * pixel * kArcsec);
    std::map<std::pair<long, long>, double> cells;
    std::int64_t n = 0;
    for (int k = 0; k <= 24; ++k, ++n) {
      const double h = (-3 + k * 0.25) * kPi / 12;
      const double u = b * std::cos(h) / lambda,
                   v = b * std::sin(dec * kPi / 180) * std::sin(h) / lambda;
      EXPECT_NEAR(r.uv.at_as_double(2 * k), u, 1e-9 * b / lambda);
      EXPECT_NEAR(r.uv.at_as_double(2 * k + 1), v, 1e-9 * b / lambda);
      const long iu = std::lround(u / du), iv = std::lround(v / dv);
      cells[{iu, iv}] += 1;
      cells[{-iu, -iv}] += 1;
    }
    ASSERT_EQ(r.gridded.samples, n);
    ASSERT_EQ(r.gridded.dropped, 0);
    EXPECT_EQ(r.gridded.occupied_cells, static_cast<std::int64_t>(cells.size()));
    const double* p = r.gridded.psf.data_as<double>();
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        EXPECT_NEAR(p[i * cols + j], dft_psf(cells, rows, cols, i, j), 1e-12) << i << "," << j;
  }
}

TEST(RadioPsf, NorthSouthBaselineAtZenithHasItsFullLength) {
  // A north baseline N: X = -sin(lat) N, Z = cos(lat) N; at H = 0, v = N cos(d - lat) / lambda,
  // which is N / lambda for a source at the zenith (d = lat) and N cos(30 deg) / lambda 30 deg off.
  const sim::AntennaTable t{"ns", {{"a", 0, 0, 0}, {"b", 0, 1000, 0}}};
  const double lambda = sim::kSpeedOfLight / 1.4e9;
  for (double offset : {0.0, 30.0}) {
    sim::UvTrackOptions o{.dec_deg = -30.7129 + offset, .ha_start_h = 0, .ha_end_h = 0};
    const Array uv = sim::uv_samples(t, o);
    EXPECT_NEAR(uv.at_as_double(0), 0, 1e-9);
    EXPECT_NEAR(uv.at_as_double(1), 1000 * std::cos(offset * kPi / 180) / lambda, 1e-9);
  }
}

TEST(RadioPsf, RealEvenAndPeakOneAtTheOrigin) {
  const sim::AntennaTable ants = sim::meerkat_antennas();
  for (const auto w : {sim::Weighting::Natural, sim::Weighting::Uniform}) {
    sim::PsfOptions o;
    o.rows = 128;
    o.cols = 96;
    o.weighting = w;
    o.track.ha_start_h = -1;
    o.track.ha_end_h = 1;
    o.track.ha_step_s = 600;
    const sim::PsfResult r = sim::simulate_psf(ants, o);
    EXPECT_EQ(r.gridded.dropped, 0);  // the default pixel keeps every sample
    const Array& psf = r.gridded.psf;
    ASSERT_EQ(psf.dtype(), DType::f64);
    ASSERT_EQ(psf.shape(), (Shape{128, 96}));
    const double* p = psf.data_as<double>();
    EXPECT_EQ(p[64 * 96 + 48], 1.0);
    for (std::int64_t i = 1; i < 128; ++i)
      for (std::int64_t j = 1; j < 96; ++j) {
        // Pixel (64 + a, 48 + b) mirrors (64 - a, 48 - b): i -> 128 - i, j -> 96 - j.
        EXPECT_NEAR(p[i * 96 + j], p[(128 - i) * 96 + (96 - j)], 1e-13);
        EXPECT_LE(p[i * 96 + j], 1.0 + 1e-13);
      }
  }
}

TEST(RadioPsf, UniformWeightingGivesEveryOccupiedCellWeightOne) {
  // A slow track on a coarse grid: many samples share a cell, so natural weights (counts) and
  // uniform weights (1 per cell) differ, and each must equal the DFT of its own weights.
  const std::int64_t rows = 24, cols = 24;
  const double b = 300, freq = 1.4e9, dec = -60, pixel = 60;
  sim::PsfOptions o;
  o.rows = rows;
  o.cols = cols;
  o.pixel_arcsec = pixel;
  o.track = {.dec_deg = dec, .ha_start_h = -2, .ha_end_h = 2, .ha_step_s = 120, .freq_hz = freq};
  const Array uv = sim::uv_samples(east_west(b), o.track);
  const double du = 1 / (static_cast<double>(cols) * pixel * kArcsec);
  const double dv = 1 / (static_cast<double>(rows) * pixel * kArcsec);
  std::map<std::pair<long, long>, double> natural, uniform;
  for (std::int64_t k = 0; k < uv.dim(0); ++k) {
    const long iu = std::lround(uv.at_as_double(2 * k) / du);
    const long iv = std::lround(uv.at_as_double(2 * k + 1) / dv);
    natural[{iu, iv}] += 1;
    natural[{-iu, -iv}] += 1;
    uniform[{iu, iv}] = uniform[{-iu, -iv}] = 1;
  }
  ASSERT_LT(natural.size() * 2, static_cast<std::size_t>(uv.dim(0)));  // cells are shared
  o.weighting = sim::Weighting::Natural;
  const Array pn = sim::simulate_psf(east_west(b), o).gridded.psf;
  o.weighting = sim::Weighting::Uniform;
  const sim::PsfResult ru = sim::simulate_psf(east_west(b), o);
  EXPECT_EQ(ru.gridded.occupied_cells, static_cast<std::int64_t>(uniform.size()));
  double largest_change = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double n = pn.at_as_double(i * cols + j), u = ru.gridded.psf.at_as_double(i * cols + j);
      EXPECT_NEAR(n, dft_psf(natural, rows, cols, i, j), 1e-12);
      EXPECT_NEAR(u, dft_psf(uniform, rows, cols, i, j), 1e-12);
      largest_change = std::max(largest_change, std::abs(n - u));
    }
  EXPECT_GT(largest_change, 1e-2);
}

TEST(RadioPsf, SamplesOutsideTheGridAreDroppedAndCounted) {
  // Antennas at east 0, 100 and 1000 m: baselines of 100, 1000 and 900 m, u ~ B cos(H) / lambda.
  // With a cell of du = 10 wavelengths on 128 columns (reach 63 cells = 630 wavelengths), the
  // 100 m baseline (467 wavelengths) stays and the other two (> 4000) fall off, at every H.
  const sim::AntennaTable t{"three", {{"a", 0, 0, 0}, {"b", 100, 0, 0}, {"c", 1000, 0, 0}}};
  const double freq = 1.4e9;
  const std::int64_t n = 128;
  const double pixel = 1 / (static_cast<double>(n) * 10) / kArcsec;
  sim::PsfOptions o;
  o.rows = o.cols = n;
  o.pixel_arcsec = pixel;
  o.track = {.dec_deg = -30, .ha_start_h = 0, .ha_end_h = 0.5, .ha_step_s = 600, .freq_hz = freq};
  const sim::PsfResult r = sim::simulate_psf(t, o);
  EXPECT_EQ(r.gridded.samples, 3 * 4);  // 3 baselines x 4 hour angles (0, 10, 20, 30 min)
  EXPECT_EQ(r.gridded.dropped, 2 * 4);
  // Nothing left on the grid: an error naming the remedy.
  const sim::AntennaTable far{"far", {{"a", 0, 0, 0}, {"c", 1000, 0, 0}}};
  try {
    (void)sim::simulate_psf(far, o);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("larger pixel"), std::string::npos) << e.what();
  }
}

TEST(RadioPsf, TrackOptions) {
  const sim::UvTrackOptions d;
  EXPECT_EQ(sim::track_hour_angles(d).size(), 481u);  // -4 h .. +4 h every 60 s
  const sim::UvTrackOptions wide{.freq_hz = 1.4e9, .bandwidth_hz = 4e8, .channels = 4};
  const auto f = sim::track_frequencies(wide);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f[0], 1.25e9);
  EXPECT_DOUBLE_EQ(f[3], 1.55e9);
  // Samples scale with frequency: channel 3's u over channel 0's is 1.55 / 1.25.
  const sim::AntennaTable t = east_west(500);
  const Array uv = sim::uv_samples(
      t, {.ha_start_h = 1, .ha_end_h = 1, .freq_hz = 1.4e9, .bandwidth_hz = 4e8, .channels = 4});
  ASSERT_EQ(uv.shape(), (Shape{4, 2}));
  EXPECT_NEAR(uv.at_as_double(6) / uv.at_as_double(0), 1.55 / 1.25, 1e-14);
  for (const sim::UvTrackOptions bad :
       {sim::UvTrackOptions{.dec_deg = 91}, sim::UvTrackOptions{.ha_step_s = 0},
        sim::UvTrackOptions{.ha_start_h = 1, .ha_end_h = 0}, sim::UvTrackOptions{.freq_hz = -1},
        sim::UvTrackOptions{.channels = 2}, sim::UvTrackOptions{.latitude_deg = NAN}})
    EXPECT_THROW((void)sim::uv_samples(t, bad), InvalidInput);
  EXPECT_THROW((void)sim::parse_weighting("robust"), InvalidInput);
  EXPECT_THROW((void)sim::grid_psf(uv, 0, 8, 1, sim::Weighting::Natural), InvalidInput);
  EXPECT_THROW((void)sim::grid_psf(uv, 8, 8, -1, sim::Weighting::Natural), InvalidInput);
}

}  // namespace
}  // namespace halfscope

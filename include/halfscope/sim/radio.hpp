// Simulated radio-interferometric observations (issue 7; study 000, section II): the point spread
// function of an antenna array, a model sky, and the dirty image g = H f + n.
//
//   const sim::AntennaTable ants = sim::load_antennas("meerkat");
//   const sim::PsfResult p = sim::simulate_psf(ants, {.rows = 512, .cols = 512});
//   const Array sky = sim::simulate_sky({.rows = 512, .cols = 512}).sky;
//   const sim::ObservationResult o = sim::simulate_observation(sky, p.psf, {.snr_db = 37});
//
// Conventions. Antenna positions are (east, north, up) in metres relative to the array's reference
// point. A baseline of antennas i < j is r_j - r_i, turned into local equatorial coordinates
// (X towards hour angle 0 on the equator, Y towards hour angle -6 h, Z towards the celestial pole)
// at the array latitude phi:  X = -sin(phi) N + cos(phi) U,  Y = E,  Z = cos(phi) N + sin(phi) U.
// For a source at hour angle H and declination d, at wavelength lambda (Thompson, Moran & Swenson,
// eq. 4.1):
//   u = (sin(H) X + cos(H) Y) / lambda,
//   v = (-sin(d) cos(H) X + sin(d) sin(H) Y + cos(d) Z) / lambda.
// No horizon, shadowing or w-term is modelled: the PSF is that of a small field at the phase
// centre, as in the study.
//
// Gridding: the image has rows x cols pixels of `pixel` radians; the uv cell is 1 / (cols pixel)
// along u (image columns, l) and 1 / (rows pixel) along v (image rows, m). Each sample goes to its
// nearest cell (round half away from zero, so (-u, -v) lands exactly on the mirror of (u, v)); both
// (u, v) and (-u, -v) are gridded, so the grid is real and even and so is the PSF. A sample whose
// cell index exceeds (n - 1) / 2 in magnitude on either axis (integer division; n = cols for u,
// rows for v) is dropped with its mirror and counted. Natural weighting adds 1 per sample, uniform
// weighting gives every occupied cell the weight 1 (each sample 1 / the samples in its cell). The
// PSF is the real inverse DFT of the grid, its origin at pixel (rows / 2, cols / 2) (the
// deconvolution's PSF origin, halfscope/deconv.hpp), normalised to 1 there (its maximum).
//
// Randomness: std::mt19937_64 with halfscope's own transforms (uniform = the top 53 bits times
// 2^-53; normal = Box-Muller), so a seed gives the same numbers with every standard library (up
// to the last bit of libm's log / cos and of FFTW's transforms, which the halo passes through).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/conv.hpp"
#include "halfscope/core/array.hpp"

namespace halfscope::sim {

/// MeerKAT's latitude in degrees (the array reference point), the default of every uv track.
inline constexpr double kMeerKatLatitudeDeg = -30.7129;

/// The speed of light in m/s (exact, SI).
inline constexpr double kSpeedOfLight = 299792458.0;

/// One antenna: a name and its position (east, north, up) in metres from the array reference.
struct Antenna {
  std::string name;
  double east = 0, north = 0, up = 0;
};

/// An array: where its table came from ("meerkat (built in)" or the file) and its antennas.
struct AntennaTable {
  std::string source;
  std::vector<Antenna> antennas;
};

/// MeerKAT's 64 antennas (data/antennas/meerkat.csv, embedded in the library at build time).
AntennaTable meerkat_antennas();

/// Parses an antenna table held in memory: lines `name,east,north,up` (metres), one header line
/// first, blank lines and lines starting with '#' ignored. Throws InvalidInput naming `source`, the
/// line, the field and what was expected and found (a missing header, a wrong field count, a
/// number that is not finite, an empty or duplicate name), or fewer than 2 antennas.
AntennaTable parse_antenna_csv(std::string_view text, std::string_view source);

/// Reads an antenna table from a CSV file (see parse_antenna_csv); IoError when it cannot be read.
AntennaTable read_antenna_csv(const std::filesystem::path& path);

/// "meerkat" (any case) -> meerkat_antennas(); anything else is read as a CSV file.
AntennaTable load_antennas(std::string_view spec);

/// The number of baselines n (n - 1) / 2.
std::int64_t baseline_count(const AntennaTable& table);

/// The longest baseline |r_j - r_i| in metres (3-D).
double max_baseline_m(const AntennaTable& table);

/// The observation that makes uv tracks.
struct UvTrackOptions {
  double dec_deg = -30;     // declination of the phase centre
  double ha_start_h = -4;   // first hour angle (hours)
  double ha_end_h = 4;      // last hour angle (inclusive when the step divides the range)
  double ha_step_s = 60;    // integration time (seconds of hour angle)
  double freq_hz = 1.4e9;   // centre frequency
  double bandwidth_hz = 0;  // total bandwidth, split into `channels` equal channels
  std::int64_t channels =
      1;  // channel centres: freq + (c - (channels - 1) / 2) bandwidth / channels
  double latitude_deg = kMeerKatLatitudeDeg;
};

/// The hour angles (hours) of a track: ha_start + k ha_step / 3600 for k = 0, 1, ... while
/// <= ha_end (with a tolerance of 1e-9 step for the rounding of the range).
std::vector<double> track_hour_angles(const UvTrackOptions& options);

/// The channel frequencies (Hz) of a track.
std::vector<double> track_frequencies(const UvTrackOptions& options);

/// All uv samples of a track in wavelengths: float64 {n, 2} (u, v), ordered by channel, then hour
/// angle, then baseline (i < j in table order). Throws InvalidInput for a non-finite or
/// out-of-range option (|dec| > 90, |latitude| > 90, step <= 0, end < start, frequency <= 0,
/// channels < 1, a bandwidth that is negative, >= 2 freq, or 0 with several channels).
Array uv_samples(const AntennaTable& table, const UvTrackOptions& options);

/// How samples are weighted on the uv grid.
enum class Weighting { Natural, Uniform };
/// "natural" / "uniform"; InvalidInput listing them otherwise.
Weighting parse_weighting(std::string_view text);
/// The name parse_weighting reads ("natural" / "uniform").
std::string_view weighting_name(Weighting w) noexcept;

/// The gridded PSF of given uv samples.
struct GriddedPsf {
  Array psf;                        // float64 rows x cols, 1 at (rows / 2, cols / 2)
  std::int64_t samples = 0;         // uv samples given
  std::int64_t dropped = 0;         // samples outside the grid (with their mirrors)
  std::int64_t occupied_cells = 0;  // distinct grid cells holding a sample or a mirror
};

/// Grids `uv` ({n, 2} wavelengths) on the rows x cols grid of a `pixel_arcsec` image and returns
/// the normalised PSF. Throws InvalidInput for a bad shape or pixel, or when every sample falls
/// outside the grid (the message suggests a larger pixel).
GriddedPsf grid_psf(const Array& uv, std::int64_t rows, std::int64_t cols, double pixel_arcsec,
                    Weighting weighting);

/// What `simulate psf` computes.
struct PsfOptions {
  std::int64_t rows = 2048, cols = 2048;
  UvTrackOptions track;
  /// Pixel size in arcsec; 0: a quarter of the synthesized beam lambda_min / B_max (the highest
  /// channel's wavelength over the longest baseline), so no sample leaves the grid.
  double pixel_arcsec = 0;
  Weighting weighting = Weighting::Natural;
};

/// The PSF and what was used to make it.
struct PsfResult {
  GriddedPsf gridded;
  Array uv;                   // the samples, float64 {n, 2} wavelengths (uv_samples)
  double pixel_arcsec = 0;    // the pixel used
  double max_baseline_m = 0;  // the longest baseline
};

/// Tracks, grids and transforms (see the file comment). Throws InvalidInput for bad options.
PsfResult simulate_psf(const AntennaTable& table, const PsfOptions& options);

/// The model sky of `simulate sky`.
struct SkyOptions {
  std::int64_t rows = 2048, cols = 2048;
  std::int64_t sources = 100;  // point sources (0 allowed only with halo_ratio = 0)
  double flux_index = -2;      // dN/dS proportional to S^flux_index between flux_min and flux_max
  double flux_min = 0.01, flux_max = 1;
  /// The halo's peak over the brightest pixel of the point-source image (0: no halo).
  double halo_ratio = 1e-3;
  /// The halo: white noise smoothed by a Gaussian of this standard deviation (pixels), shifted to
  /// be >= 0, times a soft disc (1 within 0.3 min(rows, cols) of the centre, a cos^2 fall to 0 at
  /// 0.45 min(rows, cols)).
  double halo_correlation_px = 16;
  std::uint64_t seed = 1;
};

/// The sky and its two parts (sky = points + halo), float64 rows x cols.
struct SkyResult {
  Array sky, points, halo;
  double brightest = 0;  // max of `points`
  double halo_peak = 0;  // max of `halo` (= halo_ratio brightest up to rounding)
};

/// Draws the sources (positions uniform over the pixels, fluxes from the power law by inverse
/// transform), then the halo, from one generator seeded with `seed`. Throws InvalidInput for bad
/// options (sizes < 1, flux_min <= 0, flux_max < flux_min, negative ratio or correlation length).
SkyResult simulate_sky(const SkyOptions& options);

/// What `simulate observation` adds.
struct ObservationOptions {
  /// SNR = 10 log10(||H f||^2 / (N sigma^2)), N the number of pixels: the mean signal power over
  /// the noise variance. sigma follows from it.
  double snr_db = 37;
  std::uint64_t seed = 1;
  Boundary boundary = Boundary::Circular;
};

/// The dirty image and its noise.
struct ObservationResult {
  Array dirty;              // g = H f + n, float64
  double sigma = 0;         // the noise standard deviation used
  double signal_power = 0;  // ||H f||^2 / N
};

/// g = deconv::apply_psf(sky, psf, boundary) + white Gaussian noise of the sigma above. Throws
/// InvalidInput (shapes differ, non-finite values, a non-finite SNR, H f = 0).
ObservationResult simulate_observation(const Array& sky, const Array& psf,
                                       const ObservationOptions& options);

namespace detail {
/// The embedded text of data/antennas/meerkat.csv (generated at build time).
std::string_view meerkat_csv_text();
}  // namespace detail

}  // namespace halfscope::sim

// Earth-rotation uv tracks, gridding and the PSF (sim/radio.hpp has the conventions).
#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "conv/fft_plan_cache.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope::sim {

namespace {

constexpr double kDeg = std::numbers::pi / 180.0;
constexpr double kArcsec = kDeg / 3600.0;

void require(bool ok, const std::string& what, double found) {
  if (!ok) throw InvalidInput("uv track: " + what + ", found " + std::to_string(found));
}

void check_track(const UvTrackOptions& o) {
  require(std::isfinite(o.dec_deg) && std::abs(o.dec_deg) <= 90,
          "declination: expected degrees in [-90, 90]", o.dec_deg);
  require(std::isfinite(o.latitude_deg) && std::abs(o.latitude_deg) <= 90,
          "latitude: expected degrees in [-90, 90]", o.latitude_deg);
  require(std::isfinite(o.ha_start_h), "hour-angle start: expected a finite number", o.ha_start_h);
  require(std::isfinite(o.ha_end_h) && o.ha_end_h >= o.ha_start_h,
          "hour-angle end: expected a finite number >= the start", o.ha_end_h);
  require(std::isfinite(o.ha_step_s) && o.ha_step_s > 0, "hour-angle step: expected seconds > 0",
          o.ha_step_s);
  require((o.ha_end_h - o.ha_start_h) * 3600 / o.ha_step_s < 1e7,
          "hour-angle range / step: expected at most 1e7 integrations",
          (o.ha_end_h - o.ha_start_h) * 3600 / o.ha_step_s);
  require(std::isfinite(o.freq_hz) && o.freq_hz > 0, "frequency: expected Hz > 0", o.freq_hz);
  require(o.channels >= 1 && o.channels <= 100000, "channels: expected 1 to 100000",
          static_cast<double>(o.channels));
  require(std::isfinite(o.bandwidth_hz) && o.bandwidth_hz >= 0 && o.bandwidth_hz < 2 * o.freq_hz,
          "bandwidth: expected Hz in [0, 2 freq)", o.bandwidth_hz);
  require(o.channels == 1 || o.bandwidth_hz > 0, "bandwidth: expected > 0 with several channels",
          o.bandwidth_hz);
}

}  // namespace

std::vector<double> track_hour_angles(const UvTrackOptions& o) {
  check_track(o);
  // Counted once from the range so no step accumulates rounding; the 1e-9 tolerance keeps the
  // end point of a range the step divides (-4 h .. +4 h every 60 s: 481 hour angles).
  const double steps = (o.ha_end_h - o.ha_start_h) * 3600.0 / o.ha_step_s;
  const auto n = static_cast<std::int64_t>(std::floor(steps + 1e-9)) + 1;
  std::vector<double> ha(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    ha[static_cast<std::size_t>(k)] = o.ha_start_h + static_cast<double>(k) * o.ha_step_s / 3600.0;
  return ha;
}

std::vector<double> track_frequencies(const UvTrackOptions& o) {
  check_track(o);
  std::vector<double> f(static_cast<std::size_t>(o.channels));
  const double width = o.bandwidth_hz / static_cast<double>(o.channels);
  for (std::int64_t c = 0; c < o.channels; ++c)
    f[static_cast<std::size_t>(c)] =
        o.freq_hz + (static_cast<double>(c) - static_cast<double>(o.channels - 1) / 2) * width;
  return f;
}

Array uv_samples(const AntennaTable& table, const UvTrackOptions& o) {
  const std::vector<double> ha = track_hour_angles(o);
  const std::vector<double> freqs = track_frequencies(o);
  if (table.antennas.size() < 2)
    throw InvalidInput(table.source + ": expected at least 2 antennas, found " +
                       std::to_string(table.antennas.size()));
  // Baselines in local equatorial coordinates (metres), once.
  const double sp = std::sin(o.latitude_deg * kDeg), cp = std::cos(o.latitude_deg * kDeg);
  std::vector<std::array<double, 3>> xyz;
  const auto& a = table.antennas;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = i + 1; j < a.size(); ++j) {
      const double e = a[j].east - a[i].east, n = a[j].north - a[i].north, u = a[j].up - a[i].up;
      xyz.push_back({-sp * n + cp * u, e, cp * n + sp * u});
    }
  const double sd = std::sin(o.dec_deg * kDeg), cd = std::cos(o.dec_deg * kDeg);
  const auto nb = static_cast<std::int64_t>(xyz.size());
  const auto nh = static_cast<std::int64_t>(ha.size());
  const auto nf = static_cast<std::int64_t>(freqs.size());
  // Each factor is bounded above, their product is not: refuse rather than fail to allocate.
  const double samples =
      static_cast<double>(nf) * static_cast<double>(nh) * static_cast<double>(nb);
  if (samples > 0x1p31)
    throw InvalidInput("uv samples: channels x integrations x baselines = " + std::to_string(nf) +
                       " x " + std::to_string(nh) + " x " + std::to_string(nb) +
                       " exceeds 2^31; use fewer channels or a longer step");
  Array out(DType::f64, {nf * nh * nb, 2});
  double* p = out.data_as<double>();
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t c = 0; c < nf; ++c)
    for (std::int64_t h = 0; h < nh; ++h) {
      const double inv_lambda = freqs[static_cast<std::size_t>(c)] / kSpeedOfLight;
      const double hr = ha[static_cast<std::size_t>(h)] * 15.0 * kDeg;  // 1 h = 15 degrees
      const double sh = std::sin(hr), ch = std::cos(hr);
      double* row = p + 2 * ((c * nh + h) * nb);
      for (std::int64_t b = 0; b < nb; ++b) {
        const auto& [x, y, z] = xyz[static_cast<std::size_t>(b)];
        row[2 * b] = (sh * x + ch * y) * inv_lambda;
        row[2 * b + 1] = (-sd * ch * x + sd * sh * y + cd * z) * inv_lambda;
      }
    }
  return out;
}

Weighting parse_weighting(std::string_view text) {
  if (text == "natural") return Weighting::Natural;
  if (text == "uniform") return Weighting::Uniform;
  throw InvalidInput("weighting: expected natural or uniform, found \"" + std::string(text) + "\"");
}

std::string_view weighting_name(Weighting w) noexcept {
  return w == Weighting::Natural ? "natural" : "uniform";
}

GriddedPsf grid_psf(const Array& uv_in, std::int64_t rows, std::int64_t cols, double pixel_arcsec,
                    Weighting weighting) {
  if (uv_in.ndim() != 2 || uv_in.dim(1) != 2)
    throw InvalidInput("grid_psf: expected uv samples of shape {n, 2}, found " +
                       shape_to_string(uv_in.shape()));
  if (rows < 1 || cols < 1 || rows > (1 << 16) || cols > (1 << 16))
    throw InvalidInput("PSF size: expected rows and cols in [1, 65536], found " +
                       std::to_string(rows) + " x " + std::to_string(cols));
  if (!std::isfinite(pixel_arcsec) || pixel_arcsec <= 0)
    throw InvalidInput("pixel: expected arcsec > 0, found " + std::to_string(pixel_arcsec));
  const Array uv = uv_in.to(Memory::host).astype(DType::f64).contiguous();
  const double* s = uv.data_as<double>();
  GriddedPsf out;
  out.samples = uv.dim(0);
  // Cell sizes in wavelengths; cell indices beyond (n - 1) / 2 would alias with their mirrors.
  const double pixel = pixel_arcsec * kArcsec;
  const double du = 1.0 / (static_cast<double>(cols) * pixel);
  const double dv = 1.0 / (static_cast<double>(rows) * pixel);
  const std::int64_t ku_max = (cols - 1) / 2, kv_max = (rows - 1) / 2;
  // The grid in FFT order (index 0 = zero spacing), rows x cols, counts per cell. Serial: the
  // scatter is ~1 M samples, milliseconds, and the sum order stays fixed.
  std::vector<double> grid(static_cast<std::size_t>(rows * cols), 0.0);
  for (std::int64_t k = 0; k < out.samples; ++k) {
    const double u = s[2 * k], v = s[2 * k + 1];
    if (!std::isfinite(u) || !std::isfinite(v))
      throw InvalidInput("grid_psf: uv sample " + std::to_string(k) + " is not finite");
    const double fu = std::round(u / du), fv = std::round(v / dv);
    if (std::abs(fu) > static_cast<double>(ku_max) || std::abs(fv) > static_cast<double>(kv_max)) {
      ++out.dropped;
      continue;
    }
    const auto iu = static_cast<std::int64_t>(fu), iv = static_cast<std::int64_t>(fv);
    grid[static_cast<std::size_t>(((iv + rows) % rows) * cols + (iu + cols) % cols)] += 1;
    grid[static_cast<std::size_t>(((-iv + rows) % rows) * cols + (-iu + cols) % cols)] += 1;
  }
  if (out.dropped == out.samples)
    throw InvalidInput("grid_psf: all " + std::to_string(out.samples) +
                       " uv samples fall outside the " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " grid (pixel " + std::to_string(pixel_arcsec) +
                       " arcsec): expected a larger pixel or image");
  for (double& w : grid)
    if (w > 0) {
      ++out.occupied_cells;
      if (weighting == Weighting::Uniform) w = 1;
    }
  // The grid is real and even, so its DFT is real: the c2r transform of its first cols / 2 + 1
  // columns (the Hermitian half, which is all c2r reads) gives the PSF with its origin at (0, 0).
  const std::int64_t half = cols / 2 + 1;
  conv::cpu::FftwBuffer<fftw_complex> spec(rows * half, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < half; ++c) {
      spec.data()[r * half + c][0] = grid[static_cast<std::size_t>(r * cols + c)];
      spec.data()[r * half + c][1] = 0;
    }
  conv::cpu::FftwBuffer<double> image(rows * cols, false);
  conv::cpu::execute_c2r(conv::cpu::plan_c2r<double>(rows, cols), spec.data(), image.data());
  // The value at the origin is the sum of the weights, the PSF's maximum (all weights >= 0).
  const double peak = image.data()[0];
  if (!(peak > 0))
    throw NumericalError("grid_psf: the PSF peak is not positive (" + std::to_string(peak) + ")");
  out.psf = Array(DType::f64, {rows, cols});
  double* psf = out.psf.data_as<double>();
  const std::int64_t cr = rows / 2, cc = cols / 2;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      psf[((r + cr) % rows) * cols + (c + cc) % cols] = image.data()[r * cols + c] / peak;
  return out;
}

PsfResult simulate_psf(const AntennaTable& table, const PsfOptions& o) {
  PsfResult r;
  r.max_baseline_m = max_baseline_m(table);
  r.uv = uv_samples(table, o.track);
  r.pixel_arcsec = o.pixel_arcsec;
  if (r.pixel_arcsec == 0) {
    if (!(r.max_baseline_m > 0))
      throw InvalidInput(table.source + ": every antenna is at the same place (no baseline)");
    const std::vector<double> f = track_frequencies(o.track);
    const double lambda_min = kSpeedOfLight / *std::max_element(f.begin(), f.end());
    // A quarter of the synthesized beam: |uv| <= B_max / lambda_min = 1 / (4 pixel), half the
    // grid's reach 1 / (2 pixel), so no sample is dropped.
    r.pixel_arcsec = lambda_min / r.max_baseline_m / 4 / kArcsec;
  }
  r.gridded = grid_psf(r.uv, o.rows, o.cols, r.pixel_arcsec, o.weighting);
  return r;
}

}  // namespace halfscope::sim

// The model sky: power-law point sources plus a faint Gaussian-random-field halo (sim/radio.hpp).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "conv/fft_plan_cache.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/sim/radio.hpp"
#include "sim/radio_random.hpp"

namespace halfscope::sim {

namespace {

void check_sky(const SkyOptions& o) {
  auto fail = [](const std::string& what, double found) {
    throw InvalidInput("simulate sky: " + what + ", found " + std::to_string(found));
  };
  if (o.rows < 1 || o.cols < 1 || o.rows > (1 << 16) || o.cols > (1 << 16))
    fail("size: expected rows and cols in [1, 65536]",
         static_cast<double>(std::min(o.rows, o.cols)));
  if (o.sources < 0) fail("sources: expected >= 0", static_cast<double>(o.sources));
  if (!std::isfinite(o.flux_index)) fail("flux index: expected a finite number", o.flux_index);
  if (!std::isfinite(o.flux_min) || o.flux_min <= 0) fail("flux min: expected > 0", o.flux_min);
  if (!std::isfinite(o.flux_max) || o.flux_max < o.flux_min)
    fail("flux max: expected a finite number >= flux min", o.flux_max);
  if (!std::isfinite(o.halo_ratio) || o.halo_ratio < 0) fail("halo: expected >= 0", o.halo_ratio);
  if (o.halo_ratio > 0 && o.sources == 0)
    fail("halo: expected 0 without sources (its peak is relative to the brightest)", o.halo_ratio);
  if (!std::isfinite(o.halo_correlation_px) || o.halo_correlation_px < 0)
    fail("halo correlation length: expected pixels >= 0", o.halo_correlation_px);
}

/// dN/dS proportional to S^index on [lo, hi], by inverting the cumulative distribution at u.
double power_law_flux(double u, double index, double lo, double hi) {
  const double a = index + 1;
  if (std::abs(a) < 1e-12) return lo * std::pow(hi / lo, u);  // dN/dS ~ 1/S: log-uniform
  const double la = std::pow(lo, a), ha = std::pow(hi, a);
  return std::clamp(std::pow(la + u * (ha - la), 1 / a), lo, hi);
}

/// White noise smoothed by a Gaussian of standard deviation `sigma_px` (circularly, by FFT: the
/// transfer function exp(-2 pi^2 sigma^2 (fx^2 + fy^2)), frequencies in cycles per pixel).
std::vector<double> smoothed_noise(std::int64_t rows, std::int64_t cols, double sigma_px,
                                   std::mt19937_64& rng) {
  detail::NormalSource normal(rng);
  const std::int64_t n = rows * cols, half = cols / 2 + 1;
  conv::cpu::FftwBuffer<double> field(n, false);
  for (std::int64_t k = 0; k < n; ++k) field.data()[k] = normal();
  conv::cpu::FftwBuffer<fftw_complex> spec(rows * half, false);
  conv::cpu::execute_r2c(conv::cpu::plan_r2c<double>(rows, cols), field.data(), spec.data());
  const double c = -2 * std::numbers::pi * std::numbers::pi * sigma_px * sigma_px;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double fy = static_cast<double>(r <= rows / 2 ? r : r - rows) / static_cast<double>(rows);
    for (std::int64_t k = 0; k < half; ++k) {
      const double fx = static_cast<double>(k) / static_cast<double>(cols);
      const double g = std::exp(c * (fx * fx + fy * fy)) / static_cast<double>(n);
      spec.data()[r * half + k][0] *= g;
      spec.data()[r * half + k][1] *= g;
    }
  }
  conv::cpu::execute_c2r(conv::cpu::plan_c2r<double>(rows, cols), spec.data(), field.data());
  return {field.data(), field.data() + n};
}

/// The soft disc: 1 within 0.3 m of the centre pixel (m = min(rows, cols)), cos^2 down to 0 at
/// 0.45 m, so the halo fades out well inside the field (no edge for a zero boundary to cut).
double soft_disc(std::int64_t r, std::int64_t c, std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double d = std::hypot(static_cast<double>(r - rows / 2), static_cast<double>(c - cols / 2));
  const double r0 = 0.3 * m, r1 = 0.45 * m;
  if (d <= r0) return 1;
  if (d >= r1) return 0;
  const double t = std::cos(0.5 * std::numbers::pi * (d - r0) / (r1 - r0));
  return t * t;
}

double max_of(const Array& a) {
  const double* p = a.data_as<double>();
  return *std::max_element(p, p + a.size());
}

}  // namespace

SkyResult simulate_sky(const SkyOptions& o) {
  check_sky(o);
  std::mt19937_64 rng(o.seed);
  SkyResult s;
  s.points = Array::zeros(DType::f64, {o.rows, o.cols});
  double* pts = s.points.data_as<double>();
  // Three draws per source, in this order: row, column, flux (the documented sequence the seed
  // reproduces). U < 1, but U n can round up to n, hence the min.
  auto pixel = [&rng](std::int64_t n) {
    return std::min(n - 1,
                    static_cast<std::int64_t>(detail::uniform01(rng) * static_cast<double>(n)));
  };
  for (std::int64_t k = 0; k < o.sources; ++k) {
    const std::int64_t r = pixel(o.rows);
    const std::int64_t c = pixel(o.cols);
    pts[r * o.cols + c] +=
        power_law_flux(detail::uniform01(rng), o.flux_index, o.flux_min, o.flux_max);
  }
  s.brightest = o.sources > 0 ? max_of(s.points) : 0;
  s.halo = Array::zeros(DType::f64, {o.rows, o.cols});
  if (o.halo_ratio > 0) {
    const std::vector<double> g = smoothed_noise(o.rows, o.cols, o.halo_correlation_px, rng);
    // Made positive by shifting its minimum to 0 (a Gaussian field has no natural floor), then
    // windowed by the disc and scaled so its peak is halo_ratio times the brightest pixel.
    const double lo = *std::min_element(g.begin(), g.end());
    double* h = s.halo.data_as<double>();
    for (std::int64_t r = 0; r < o.rows; ++r)
      for (std::int64_t c = 0; c < o.cols; ++c)
        h[r * o.cols + c] =
            (g[static_cast<std::size_t>(r * o.cols + c)] - lo) * soft_disc(r, c, o.rows, o.cols);
    const double peak = max_of(s.halo);
    if (!(peak > 0))
      throw InvalidInput("simulate sky: the halo vanishes on a " + std::to_string(o.rows) + " x " +
                         std::to_string(o.cols) + " image: expected a larger image or --halo 0");
    const double scale = o.halo_ratio * s.brightest / peak;
    for (std::int64_t k = 0; k < s.halo.size(); ++k) h[k] *= scale;
  }
  s.halo_peak = max_of(s.halo);
  s.sky = Array(DType::f64, {o.rows, o.cols});
  const double* h = s.halo.data_as<double>();
  double* sky = s.sky.data_as<double>();
  for (std::int64_t k = 0; k < s.sky.size(); ++k) sky[k] = pts[k] + h[k];
  return s;
}

}  // namespace halfscope::sim

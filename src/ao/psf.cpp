// The OTF path of the evaluation (evaluation_internal.hpp): the error's phase structure function on
// the evaluation points of the truth lattice, the telescope OTF, the long-exposure PSF and its
// Strehl ratio.
//
// A simplified form of the "Vii" method of the MOAO code (reference notes section 1.4 item 7):
// rather than going through the DM's influence functions, the structure function of the projected
// error is averaged directly over point pairs per separation vector on the lattice,
//   D(rho) = < C_ii + C_jj - 2 C_ij >,   OTF_err(rho) = exp(-D(rho) / 2 (2 pi / lambda)^2),
// interpolated bilinearly (in D, before the exponential) onto the OTF grid. The long-exposure PSF
// is the Fourier transform of OTF_tel OTF_err and the Strehl ratio is its peak over the diffraction
// peak, sum(OTF_tel OTF_err) / sum(OTF_tel). Only the tomographic error (with the noise the model
// carries) is in the PSF: no fitting, aliasing or servo-lag terms.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "ao/evaluation_internal.hpp"
#include "conv/fft_plan_cache.hpp"  // fftw_planner_mutex: FFTW's planner is not thread-safe
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {

namespace {

constexpr double kPi = 3.14159265358979323846;

struct FftwFree {
  void operator()(fftw_complex* p) const noexcept { fftw_free(p); }
};
using FftwBuffer = std::unique_ptr<fftw_complex[], FftwFree>;

FftwBuffer fftw_buffer(std::int64_t count) {
  auto* p = static_cast<fftw_complex*>(
      fftw_malloc(static_cast<std::size_t>(count) * sizeof(fftw_complex)));
  if (p == nullptr) throw std::bad_alloc();
  return FftwBuffer(p);
}

// In-place unnormalised 2-D DFT of an n x n array (sign FFTW_FORWARD or FFTW_BACKWARD).
void fft2d(fftw_complex* data, std::int64_t n, int sign) {
  fftw_plan plan = nullptr;
  {
    std::lock_guard lock(conv::cpu::fftw_planner_mutex());
    plan =
        fftw_plan_dft_2d(static_cast<int>(n), static_cast<int>(n), data, data, sign, FFTW_ESTIMATE);
  }
  if (plan == nullptr)
    throw Error("otf_path: FFTW could not plan a " + std::to_string(n) + "^2 DFT");
  fftw_execute(plan);
  std::lock_guard lock(conv::cpu::fftw_planner_mutex());
  fftw_destroy_plan(plan);
}

// Index of a centred coordinate (shift k - n/2) in FFT order, and back: fftshift / ifftshift.
std::int64_t wrapped(std::int64_t centred, std::int64_t n) {
  return (centred - n / 2 + n) % n;
}

// The real part of the DFT of a centred, even, real n x n array, centred again, divided by `norm`.
Array centred_transform(const std::vector<double>& centred, std::int64_t n, double norm) {
  FftwBuffer buf = fftw_buffer(n * n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      fftw_complex& z = buf[wrapped(i, n) * n + wrapped(j, n)];
      z[0] = centred[static_cast<std::size_t>(i * n + j)];
      z[1] = 0;
    }
  fft2d(buf.get(), n, FFTW_FORWARD);
  Array out(DType::f64, {n, n});
  double* o = out.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      o[i * n + j] = buf[wrapped(i, n) * n + wrapped(j, n)][0] / norm;
  return out;
}

// OTF_tel on the centred grid (index k <-> shift (k - n/2) pixels of 2 D / n): the autocorrelation
// of the pupil, by |FFT|^2 and an inverse FFT. The pupil spans n/2 pixels, so its autocorrelation
// (support below n pixels across) does not wrap around in the n-periodic transform.
std::vector<double> telescope_otf(double obstruction, std::int64_t n) {
  FftwBuffer buf = fftw_buffer(n * n);
  const double radius = static_cast<double>(n) / 4.0;  // D / 2 in pixels of 2 D / n
  const double inner = obstruction * radius;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double y = static_cast<double>(i - n / 2) + 0.5,
                   x = static_cast<double>(j - n / 2) + 0.5;
      const double r2 = x * x + y * y;
      buf[i * n + j][0] = (r2 < radius * radius && r2 >= inner * inner) ? 1.0 : 0.0;
      buf[i * n + j][1] = 0;
    }
  fft2d(buf.get(), n, FFTW_FORWARD);
  for (std::int64_t k = 0; k < n * n; ++k) {
    buf[k][0] = buf[k][0] * buf[k][0] + buf[k][1] * buf[k][1];
    buf[k][1] = 0;
  }
  fft2d(buf.get(), n, FFTW_BACKWARD);
  // The autocorrelation is an integer (an overlap count) times n^2: rounding removes the FFT's
  // round-off exactly, so the support edge is clean and sums are exact.
  std::vector<double> otf(static_cast<std::size_t>(n * n));
  const double scale = static_cast<double>(n) * static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      otf[static_cast<std::size_t>(i * n + j)] =
          std::max(0.0, std::round(buf[wrapped(i, n) * n + wrapped(j, n)][0] / scale));
  return otf;
}

// A value in scientific notation for messages (std::to_string prints 1e-20 as 0.000000).
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// Bilinear interpolation of the lattice map at (u, v) lattice steps, clamped to its extent.
double interpolate(const StructureFunctionMap& map, double u, double v) {
  const auto h = static_cast<double>(map.half);
  u = std::clamp(u, -h, h);
  v = std::clamp(v, -h, h);
  const auto a0 = std::min(static_cast<std::int64_t>(std::floor(u)), map.half - 1);
  const auto b0 = std::min(static_cast<std::int64_t>(std::floor(v)), map.half - 1);
  const double fu = u - static_cast<double>(a0), fv = v - static_cast<double>(b0);
  return (1 - fu) * (1 - fv) * map.at(a0, b0) + fu * (1 - fv) * map.at(a0 + 1, b0) +
         (1 - fu) * fv * map.at(a0, b0 + 1) + fu * fv * map.at(a0 + 1, b0 + 1);
}

}  // namespace

StructureFunctionMap structure_function_map(const Array& phase_cov, const Array& point_mask) {
  const std::int64_t side = point_mask.dim(0);
  const auto* mask = point_mask.data_as<std::uint8_t>();
  std::vector<std::int64_t> col, row;
  for (std::int64_t k = 0; k < side * side; ++k)
    if (mask[k]) {
      col.push_back(k % side);
      row.push_back(k / side);
    }
  const auto points = static_cast<std::int64_t>(col.size());
  if (phase_cov.ndim() != 2 || phase_cov.dim(0) != points || phase_cov.dim(1) != points)
    throw InvalidInput("structure_function_map: phase covariance: expected " +
                       std::to_string(points) + " x " + std::to_string(points) +
                       " (the used points), found " + phase_cov.describe());
  StructureFunctionMap map;
  map.half = side - 1;
  const std::int64_t width = 2 * map.half + 1;
  std::vector<double> sum(static_cast<std::size_t>(width * width), 0.0);
  std::vector<std::int64_t> count(sum.size(), 0);
  const double* c = phase_cov.data_as<double>();
  for (std::int64_t i = 0; i < points; ++i)
    for (std::int64_t j = 0; j < points; ++j) {
      const std::int64_t a = col[static_cast<std::size_t>(j)] - col[static_cast<std::size_t>(i)];
      const std::int64_t b = row[static_cast<std::size_t>(j)] - row[static_cast<std::size_t>(i)];
      const auto cell = static_cast<std::size_t>((b + map.half) * width + a + map.half);
      sum[cell] += c[i * points + i] + c[j * points + j] - 2.0 * c[i * points + j];
      ++count[cell];
    }
  map.d.assign(sum.size(), 0.0);
  map.realised.assign(sum.size(), 0);
  // D = (e_i - e_j)^T C (e_i - e_j) >= 0 for a PSD C; a negative value would make OTF_err exceed
  // 1 and raise the Strehl, so only round-off is clamped to 0. Bound: the C handed in is a
  // projection of an FP64 Cee = Ctt - ... whose own rounding is ~ n u ||Ctt|| (n <= ~1e5
  // measurement slopes, u = 2^-53 ~ 1.1e-16: ~1e-11 ||Ctt||), while any residual worth
  // evaluating keeps >= 1e-2 of the uncorrected variance, so a PSD-in-exact-arithmetic Cee gives
  // D >= -1e-9 max D; the pair average itself adds <= (count + 2) u 4 max C_ii. More negative than
  // that, Cee is not PSD: NumericalError rather than a silently better Strehl.
  double max_d = 0, max_diag = 0;
  std::int64_t max_count = 0;
  for (std::int64_t i = 0; i < points; ++i) max_diag = std::max(max_diag, c[i * points + i]);
  for (std::size_t k = 0; k < sum.size(); ++k)
    if (count[k] > 0) {
      max_d = std::max(max_d, sum[k] / static_cast<double>(count[k]));
      max_count = std::max(max_count, count[k]);
    }
  const double tolerance = 1e-9 * max_d + static_cast<double>(max_count + 2) * 4.0 *
                                              std::numeric_limits<double>::epsilon() * 0.5 *
                                              std::fabs(max_diag);
  for (std::size_t k = 0; k < sum.size(); ++k)
    if (count[k] > 0) {
      const double value = sum[k] / static_cast<double>(count[k]);
      if (value < -tolerance) {
        const auto cell = static_cast<std::int64_t>(k);
        throw NumericalError(
            "structure_function_map: the error's phase structure function is negative (" +
            sci(value) + " m^2 at lattice separation (" + std::to_string(cell % width - map.half) +
            ", " + std::to_string(cell / width - map.half) + "), below -" + sci(tolerance) +
            " = the round-off bound): the error covariance is not positive semi-definite");
      }
      map.d[k] = std::max(0.0, value);
      map.realised[k] = 1;
    }
  // Unrealised separations: walk the ray towards the origin (always realised) to the first
  // realised cell. Only separations where OTF_tel is (nearly) zero are concerned.
  for (std::int64_t b = -map.half; b <= map.half; ++b)
    for (std::int64_t a = -map.half; a <= map.half; ++a) {
      const auto cell = static_cast<std::size_t>((b + map.half) * width + a + map.half);
      if (map.realised[cell]) continue;
      const std::int64_t steps = std::max(std::abs(a), std::abs(b));
      for (std::int64_t t = steps - 1; t >= 0; --t) {
        const auto ra = static_cast<std::int64_t>(
            std::lround(static_cast<double>(a * t) / static_cast<double>(steps)));
        const auto rb = static_cast<std::int64_t>(
            std::lround(static_cast<double>(b * t) / static_cast<double>(steps)));
        const auto inner = static_cast<std::size_t>((rb + map.half) * width + ra + map.half);
        if (map.realised[inner]) {
          map.d[cell] = map.d[inner];
          break;
        }
      }
    }
  return map;
}

OtfResult otf_path(const StructureFunctionMap& map, double pitch_m, double diameter_m,
                   double obstruction, double wavelength_m, std::int64_t psf_size) {
  const std::int64_t n = psf_size;
  if (n < 64 || n > 8192 || (n & (n - 1)) != 0)
    throw InvalidInput("evaluation: psf_size: expected a power of two in [64, 8192], found " +
                       std::to_string(n));
  if (!(wavelength_m > 0) || !std::isfinite(wavelength_m))
    throw InvalidInput(
        "evaluation: wavelength_m: expected a positive wavelength in metres, found " +
        std::to_string(wavelength_m));
  if (map.half < 1 || !(pitch_m > 0))
    throw InvalidInput("otf_path: expected a lattice of at least one subaperture");
  const std::vector<double> tel = telescope_otf(obstruction, n);
  const double step = 2.0 * diameter_m / static_cast<double>(n);  // OTF grid spacing, metres
  const double k2 = (2.0 * kPi / wavelength_m) * (2.0 * kPi / wavelength_m);
  std::vector<double> product(tel.size(), 0.0);
  double sum_tel = 0, sum_product = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(i * n + j);
      if (tel[k] == 0) continue;
      const double u = static_cast<double>(j - n / 2) * step / pitch_m;
      const double v = static_cast<double>(i - n / 2) * step / pitch_m;
      product[k] = tel[k] * std::exp(-0.5 * k2 * interpolate(map, u, v));
      sum_tel += tel[k];
      sum_product += product[k];
    }
  OtfResult out;
  out.strehl = sum_product / sum_tel;
  out.psf = centred_transform(product, n, sum_tel);
  out.psf_diffraction = centred_transform(tel, n, sum_tel);
  return out;
}

}  // namespace halfscope::ao::detail

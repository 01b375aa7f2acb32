// Synthetic deconvolution problems for the deconv tests: a peak-1 beam with a negative sidelobe
// ring (the shape of a radio PSF's main lobe and first sidelobe, without the empty uv cells that
// make a real PSF's problem ill-conditioned), a sky of point sources on a faint positive halo,
// and the dirty image H f computed independently of the library by a direct sum.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::test {

/// Beam exp(-r^2 / (2 s^2)) - 0.15 exp(-(r - 3 s)^2 / (2 s^2)) centred at (rows / 2, cols / 2)
/// (the library's PSF origin), peak 1. Its spectrum has no zeros on small grids with s ~ 1.
inline Array beam_psf(std::int64_t rows, std::int64_t cols, double s = 1.0) {
  Array a(DType::f64, {rows, cols});
  double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double di = static_cast<double>(i - rows / 2), dj = static_cast<double>(j - cols / 2);
      const double r = std::sqrt(di * di + dj * dj);
      p[i * cols + j] = std::exp(-r * r / (2 * s * s)) -
                        0.15 * std::exp(-(r - 3 * s) * (r - 3 * s) / (2 * s * s));
    }
  const double peak = p[(rows / 2) * cols + cols / 2];
  for (std::int64_t k = 0; k < rows * cols; ++k) p[k] /= peak;
  return a;
}

/// A few point sources of flux up to `flux` on a positive halo of 1e-2 of it, seeded.
inline Array point_sky(std::int64_t rows, std::int64_t cols, double flux, std::uint64_t seed) {
  Array a(DType::f64, {rows, cols});
  double* p = a.data_as<double>();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::int64_t k = 0; k < rows * cols; ++k) p[k] = 0.01 * flux * (0.5 + 0.5 * u(rng));
  for (int s = 0; s < 8; ++s) {
    const auto i = static_cast<std::int64_t>(u(rng) * static_cast<double>(rows));
    const auto j = static_cast<std::int64_t>(u(rng) * static_cast<double>(cols));
    p[i * cols + j] += flux * (0.2 + 0.8 * u(rng));
  }
  return a;
}

/// H f, or with `adjoint` H^T f, by a direct sum (no FFT):
///   H:   out(i, j) = sum_{u, v} h(u, v) f(i - (u - cr), j - (v - cc)),
///   H^T: out(i, j) = sum_{u, v} h(u, v) f(i + (u - cr), j + (v - cc)),
/// the PSF origin at (cr, cc) = (rows / 2, cols / 2); indices wrap (circular) or read zero.
inline Array direct_sum(const Array& image, const Array& psf, Boundary boundary, bool adjoint) {
  const std::int64_t rows = image.shape()[0], cols = image.shape()[1];
  const std::int64_t sign = adjoint ? 1 : -1;
  const double* f = image.data_as<double>();
  const double* h = psf.data_as<double>();
  Array out = Array::zeros(DType::f64, {rows, cols});
  double* o = out.data_as<double>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (std::int64_t u = 0; u < rows; ++u)
        for (std::int64_t v = 0; v < cols; ++v) {
          std::int64_t a = i + sign * (u - rows / 2), b = j + sign * (v - cols / 2);
          if (boundary == Boundary::Circular) {
            a = ((a % rows) + rows) % rows;
            b = ((b % cols) + cols) % cols;
          } else if (a < 0 || a >= rows || b < 0 || b >= cols) {
            continue;
          }
          s += h[u * cols + v] * f[a * cols + b];
        }
      o[i * cols + j] = s;
    }
  return out;
}

/// H f by a direct sum (direct_sum).
inline Array direct_psf(const Array& image, const Array& psf, Boundary boundary) {
  return direct_sum(image, psf, boundary, false);
}

/// ||a - b|| / ||b|| over float64 host arrays.
inline double rel_distance(const Array& a, const Array& b) {
  const Array x = a.astype(DType::f64), y = b.astype(DType::f64);
  const double* p = x.data_as<double>();
  const double* q = y.data_as<double>();
  double dd = 0, nn = 0;
  for (std::int64_t k = 0; k < x.size(); ++k) {
    dd += (p[k] - q[k]) * (p[k] - q[k]);
    nn += q[k] * q[k];
  }
  return std::sqrt(dd / nn);
}

/// A deconvolution problem: the beam, a sky, the dirty image H f plus seeded white noise.
struct Problem {
  Array psf, sky, dirty;
};

inline Problem make_problem(std::int64_t rows, std::int64_t cols, Boundary boundary,
                            double flux = 1.0, double noise = 1e-3, std::uint64_t seed = 7) {
  Problem p{beam_psf(rows, cols), point_sky(rows, cols, flux, seed), Array()};
  p.dirty = deconv::apply_psf(p.sky, p.psf, boundary);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> n(0.0, noise * flux);
  double* g = p.dirty.data_as<double>();
  for (std::int64_t k = 0; k < p.dirty.size(); ++k) g[k] += n(rng);
  return p;
}

}  // namespace halfscope::test

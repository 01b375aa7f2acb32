// Helpers of the CUDA deconvolution tests (gpu_deconv_*.cpp): FP64 host references built without
// any FFT (direct sums of deconv_testing.hpp and the adjoint below), moving values in and out of a
// backend, and the error bounds derived from the precision's unit roundoff.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "deconv/backend.hpp"
#include "deconv_testing.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"
#include "halfscope/deconv.hpp"
#include "test_support.hpp"

namespace halfscope::deconv::gputest {

using detail::Backend;
using detail::Vec;

/// H^T y by a direct sum, the adjoint of direct_psf (deconv_testing.hpp's direct_sum).
inline Array direct_adjoint(const Array& y, const Array& psf, Boundary boundary) {
  return test::direct_sum(y, psf, boundary, true);
}

/// Q x = H^T H x + lambda x in FP64 by direct sums.
inline Array direct_normal(const Array& x, const Array& psf, double lambda, Boundary boundary) {
  Array out = direct_adjoint(test::direct_psf(x, psf, boundary), psf, boundary);
  for (std::int64_t k = 0; k < out.size(); ++k)
    out.data_as<double>()[k] += lambda * x.data_as<double>()[k];
  return out;
}

/// The problem as the driver hands it to a backend.
inline detail::Problem problem_of(const test::Problem& t, double lambda, Boundary boundary) {
  detail::Problem p;
  p.dirty = t.dirty;
  p.psf = t.psf;
  p.lambda = lambda;
  p.boundary = boundary;
  return p;
}

/// `a` (float64 host) rounded to the storage of `p`, as float64 again: what a backend holds.
inline Array rounded(const Array& a, Precision p) {
  return a.astype(storage_dtype(p)).astype(DType::f64);
}

/// Uniform values in [-1, 1) rounded to the storage of `p` (so uploading them is exact).
inline Array random_image(std::int64_t rows, std::int64_t cols, Precision p, std::uint64_t seed) {
  Array a(DType::f64, {rows, cols});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::int64_t k = 0; k < a.size(); ++k) a.data_as<double>()[k] = u(rng);
  return rounded(a, p);
}

/// Writes host float64 values (already representable in the storage) into vector v.
inline void load(Backend& b, Vec v, const Array& host) {
  b.assign(host.to(Memory::device), 1.0, 0.0, v);
}

/// The vector's values as float64 on the host.
inline Array fetch(Backend& b, Vec v) {
  return b.view(v).to(Memory::host).astype(DType::f64);
}

inline double norm(const Array& a) {
  double s = 0;
  for (std::int64_t k = 0; k < a.size(); ++k) s += a.data_as<double>()[k] * a.data_as<double>()[k];
  return std::sqrt(s);
}

inline double diff_norm(const Array& a, const Array& b) {
  double s = 0;
  for (std::int64_t k = 0; k < a.size(); ++k) {
    const double d = a.data_as<double>()[k] - b.data_as<double>()[k];
    s += d * d;
  }
  return std::sqrt(s);
}

/// Norm-wise bound on ||y^ - y|| / (max|S| ||x||) for `pairs` FFT filter passes
/// y = IFFT(S FFT(x)) on a grid of N points in precision p. Each radix-2 transform of length N
/// has a relative norm-wise error of at most log2(N) eta with eta ~ 7u (Higham, Accuracy and
/// Stability, Thm 24.2: eta = mu + gamma_4 (sqrt 2 + mu), mu ~ u the twiddle error), two per pass,
/// plus the spectrum's rounding and the complex product (~4u); the output's rounding to storage
/// and half's scaled input (power-of-two scalings: exact but for subnormals) add 2 u_storage.
inline double filter_bound(Precision p, std::int64_t grid_points, int pairs) {
  const double u = compute_unit_roundoff(p);
  const double log2n = std::log2(static_cast<double>(grid_points));
  return pairs * u * (14 * log2n + 6) + 2 * storage_unit_roundoff(p);
}

/// "mixed circular", "half zero": a test's SCOPED_TRACE label.
inline std::string label(Precision p, Boundary b) {
  return std::string(precision_name(p)) + (b == Boundary::Circular ? " circular" : " zero");
}

/// The precisions a backend implements.
inline const Precision kBackendPrecisions[] = {Precision::Double, Precision::Single,
                                               Precision::Mixed, Precision::Half};
inline const Boundary kBoundaries[] = {Boundary::Circular, Boundary::Zero};

}  // namespace halfscope::deconv::gputest

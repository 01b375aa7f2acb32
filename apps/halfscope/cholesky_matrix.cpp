// The matrices of `halfscope cholesky` in and out (cholesky_matrix.hpp): A read and checked, L
// written dense.
#include "cholesky_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::cli {

namespace {
// Relative asymmetry accepted: |a_ij - a_ji| <= kSymmetryTolerance max(|a_ij|, |a_ji|). Only the
// lower triangle is factored, so a matrix that is not symmetric would silently be replaced by
// its lower half; 1e-6 lets FP32 files written from FP64 data through (they round identically or
// within one FP32 ulp, 6e-8 relative) and rejects anything that is really asymmetric.
constexpr double kSymmetryTolerance = 1e-6;

}  // namespace

std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

Array read_symmetric(const std::string& path) {
  const Array raw = io::read_npy(path);
  if (raw.dtype() != DType::f32 && raw.dtype() != DType::f64)
    throw InvalidInput(path + ": expected a float32 or float64 matrix, found " + raw.describe());
  if (raw.ndim() != 2 || raw.dim(0) != raw.dim(1) || raw.dim(0) < 1)
    throw InvalidInput(path + ": expected a square n x n matrix (n >= 1), found " + raw.describe());
  const Array a = raw.astype(DType::f64).contiguous();
  const std::int64_t n = a.dim(0);
  const double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const double lo = p[i * n + j], up = p[j * n + i];
      if (!std::isfinite(lo) || !std::isfinite(up))
        throw InvalidInput(path + ": expected finite entries, found " +
                           number_text(std::isfinite(lo) ? up : lo) + " at (" +
                           std::to_string(std::isfinite(lo) ? j : i) + ", " +
                           std::to_string(std::isfinite(lo) ? i : j) + ")");
      if (std::fabs(lo - up) > kSymmetryTolerance * std::max(std::fabs(lo), std::fabs(up)))
        throw InvalidInput(path + ": expected a symmetric matrix (relative 1e-6), found A(" +
                           std::to_string(i) + ", " + std::to_string(j) + ") = " + number_text(lo) +
                           " but A(" + std::to_string(j) + ", " + std::to_string(i) +
                           ") = " + number_text(up));
    }
  return a;
}

Array dense_lower(const linalg::TileMatrix& l_any) {
  const Array storage = l_any.storage.on_device() ? l_any.storage.to(Memory::host) : l_any.storage;
  const linalg::TileLayout& layout = l_any.layout;
  const std::int64_t n = layout.rows();
  Array out = Array::zeros(DType::f32, {n, n});
  float* o = out.data_as<float>();
  const float* s = storage.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) o[i * n + j] = s[layout.element_offset(i, j)];
  return out;
}

}  // namespace halfscope::cli

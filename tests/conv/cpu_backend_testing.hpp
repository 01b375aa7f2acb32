// Shared by the CPU convolution backend tests (test_direct_cpu.cpp, test_fft_cpu.cpp): an FP64
// reference written from geometry.hpp's formula alone (plain quadruple loop, its own index
// wrapping), inputs rounded to the storage type, NaN-poisoned outputs, and the geometries the
// tests sweep (odd and even kernels, kernels larger than the image, non-square and 1xN images,
// full / same / valid and arbitrary windows, both boundaries).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "conv/geometry.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/half.hpp"
#include "test_support.hpp"

namespace halfscope::conv::testing {

/// The FP64 result and, per pixel, sum |kernel(u, v)| * |in(...)| (what rounding errors scale
/// with).
struct Reference {
  std::vector<double> value, abs;
};

inline std::int64_t periodic(std::int64_t y, std::int64_t n) {
  return ((y % n) + n) % n;
}

/// out(i, j) = sum_{u, v} k(u, v) * in(i + row0 - u, j + col0 - v), in zero or periodic
/// extension, accumulated in double.
inline Reference reference(const Geometry& g, const std::vector<double>& img,
                           const std::vector<double>& ker) {
  Reference r;
  r.value.assign(static_cast<std::size_t>(g.out_rows * g.out_cols), 0.0);
  r.abs = r.value;
  // Rows in parallel (each writes its own pixels): the GPU tests' large kernels need it.
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 0; j < g.out_cols; ++j) {
      double s = 0, a = 0;
      for (std::int64_t u = 0; u < g.krows; ++u)
        for (std::int64_t v = 0; v < g.kcols; ++v) {
          std::int64_t y = i + g.row0 - u, x = j + g.col0 - v;
          if (g.boundary == Boundary::Zero) {
            if (y < 0 || y >= g.rows || x < 0 || x >= g.cols) continue;
          } else {
            y = periodic(y, g.rows);
            x = periodic(x, g.cols);
          }
          const double p = ker[static_cast<std::size_t>(u * g.kcols + v)] *
                           img[static_cast<std::size_t>(y * g.cols + x)];
          s += p;
          a += std::fabs(p);
        }
      r.value[static_cast<std::size_t>(i * g.out_cols + j)] = s;
      r.abs[static_cast<std::size_t>(i * g.out_cols + j)] = a;
    }
  return r;
}

/// A rows x cols host array of S holding `values` rounded to S; `exact` receives what was stored.
template <class S>
Array storage_array(const std::vector<float>& values, std::int64_t rows, std::int64_t cols,
                    std::vector<double>& exact) {
  Array a(dtype_of<S>, Shape{rows, cols});
  S* p = a.data_as<S>();
  exact.resize(values.size());
  for (std::size_t t = 0; t < values.size(); ++t) {
    p[t] = static_cast<S>(values[t]);
    exact[t] = static_cast<double>(p[t]);
  }
  return a;
}

/// An output array of S filled with NaN, so a pixel the backend forgot is seen.
template <class S>
Array poisoned(std::int64_t rows, std::int64_t cols) {
  Array a(dtype_of<S>, Shape{rows, cols});
  S nan;
  if constexpr (std::is_same_v<S, Half>)
    nan = Half::from_bits(0x7e00);
  else if constexpr (std::is_same_v<S, BFloat16>)
    nan = BFloat16::from_bits(0x7fc0);
  else
    nan = std::numeric_limits<S>::quiet_NaN();
  for (std::int64_t t = 0; t < a.size(); ++t) a.data_as<S>()[t] = nan;
  return a;
}

template <class S>
std::vector<double> values_of(const Array& a) {
  std::vector<double> v(static_cast<std::size_t>(a.size()));
  for (std::int64_t t = 0; t < a.size(); ++t)
    v[static_cast<std::size_t>(t)] = static_cast<double>(a.data_as<S>()[t]);
  return v;
}

/// Image and kernel extents of one test case.
struct Shape4 {
  std::int64_t rows, cols, krows, kcols;
};

/// Geometries of one shape: full, same (convolution and correlation centring), valid when the
/// kernel fits, and windows reaching outside the full result, for both boundaries.
inline std::vector<Geometry> geometries(Shape4 s) {
  std::vector<Geometry> out;
  const auto add = [&](std::int64_t orows, std::int64_t ocols, std::int64_t r0, std::int64_t c0) {
    for (Boundary b : {Boundary::Zero, Boundary::Circular})
      out.push_back({s.rows, s.cols, s.krows, s.kcols, orows, ocols, r0, c0, b});
  };
  add(s.rows + s.krows - 1, s.cols + s.kcols - 1, 0, 0);      // full
  add(s.rows, s.cols, (s.krows - 1) / 2, (s.kcols - 1) / 2);  // same
  add(s.rows, s.cols, s.krows / 2, s.kcols / 2);              // same, correlation
  if (s.rows >= s.krows && s.cols >= s.kcols)                 // valid
    add(s.rows - s.krows + 1, s.cols - s.kcols + 1, s.krows - 1, s.kcols - 1);
  add(3, s.cols + s.kcols + 3, -2, -3);                  // past both ends
  add(s.rows + 2, 5, s.rows / 2, s.cols + s.kcols - 3);  // a strip near the end
  return out;
}

/// The shapes every precision is tested on (small: the whole CPU suite runs in about a second).
inline std::vector<Shape4> shapes() {
  return {
      {16, 16, 3, 3},    // odd kernel, square image
      {23, 17, 4, 6},    // even kernel, non-square image
      {1, 40, 1, 7},     // 1xN image and kernel
      {1, 37, 3, 5},     // 1xN image, kernel taller than the image
      {9, 7, 12, 11},    // kernel larger than the image in both directions
      {32, 20, 5, 31},   // wide kernel, larger than the image's width
      {64, 48, 15, 15},  // larger image, the benchmark's typical width
  };
}

inline std::string describe(const Geometry& g) {
  return "image " + std::to_string(g.rows) + "x" + std::to_string(g.cols) + ", kernel " +
         std::to_string(g.krows) + "x" + std::to_string(g.kcols) + ", out " +
         std::to_string(g.out_rows) + "x" + std::to_string(g.out_cols) + " at (" +
         std::to_string(g.row0) + ", " + std::to_string(g.col0) + "), " +
         (g.boundary == Boundary::Zero ? "zero" : "circular");
}

}  // namespace halfscope::conv::testing

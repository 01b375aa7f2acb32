// Internal: the one description of a convolution that every backend computes.
//
// Dispatch (conv.cpp) turns any call (mode, boundary, correlate, SciPy's valid-mode swap) into
// a Geometry and a kernel that is already flipped for correlation, so every backend computes only
//
//   out(i, j) = sum_{u < krows, v < kcols} kernel(u, v) * in(i + row0 - u, j + col0 - v)
//
// for 0 <= i < out_rows, 0 <= j < out_cols, where in(y, x) is image(y, x) inside the image and,
// outside, 0 (Boundary::Zero) or image(y mod rows, x mod cols) (Boundary::Circular). With row0 =
// col0 = 0 and out = rows + krows - 1 this is the full convolution; `same` and `valid` are windows
// of it (row0 = (krows-1)/2 or krows-1; for correlation `same` uses krows/2).
#pragma once

#include <cstdint>

#include "halfscope/conv.hpp"

namespace halfscope::conv {

struct Geometry {
  std::int64_t rows = 0, cols = 0;    // image
  std::int64_t krows = 0, kcols = 0;  // kernel (flipped already for correlation)
  std::int64_t out_rows = 0, out_cols = 0;
  std::int64_t row0 = 0, col0 = 0;  // full-convolution index of out(0, 0)
  Boundary boundary = Boundary::Zero;

  /// Multiply-adds of the direct method: out_rows * out_cols * krows * kcols.
  [[nodiscard]] double direct_macs() const {
    return static_cast<double>(out_rows) * static_cast<double>(out_cols) *
           static_cast<double>(krows) * static_cast<double>(kcols);
  }
};

/// Wraps y into [0, n) (Boundary::Circular), for any y, including y < -n.
inline std::int64_t wrap_index(std::int64_t y, std::int64_t n) {
  const std::int64_t m = y % n;
  return m < 0 ? m + n : m;
}

}  // namespace halfscope::conv

// Internal: how the FFT methods lay a convolution out on a transform grid (host and device code).
//
// Every Geometry (geometry.hpp) becomes, per axis, one transform length n and three index maps:
//
//   padded image   P(y)  = image(image_source(y)), or 0 where image_source(y) < 0
//   padded kernel  Q(a)  = sum of kernel(u) over the taps u = a, a + period, ... (a < kfold)
//   output         out(i) = C(readout(i)), or 0 where readout(i) < 0
//
// with C the circular convolution of P and Q on the n-point grid (what R2C, multiply, C2R give).
//
// Zero boundary. The full linear convolution has length full = image + kernel - 1. A circular
// convolution of length n aliases index m onto m - n and m + n; the outputs we read lie in
// [lo, hi) = [out0, out0 + out_len) clipped to [0, full), so nothing aliases onto them as soon as
// n >= max(full - lo, hi). That is full for `full` mode, image + kernel/2 or so for `same` and only
// `image` for `valid`: the window decides the padding, not the full extent.
//
// Circular boundary. Taps u and u + image act on the same pixel, so the kernel is first folded
// onto kfold = min(kernel, image) taps. If `image` itself is a length cuFFT transforms well
// ("exact"), C on the image grid is the answer: out(i) = C((i + out0) mod image). Otherwise
// ("extended") the image is laid out periodically over ext = image + kfold - 1 positions,
// P(y) = image((y - shift) mod image) with shift = kfold - 1, and the linear convolution of P with
// Q read at (i + out0) mod image + shift is the circular one; any n >= ext is then alias-free, so
// n can be a fast length (a power of two for FP16) whatever the image size.
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv/geometry.hpp"

#if defined(__CUDACC__)
#define HS_HOST_DEVICE __host__ __device__
#else
#define HS_HOST_DEVICE
#endif

namespace halfscope::conv {

/// Which transform lengths are acceptable: cuFFT is fast on 2^a 3^b 5^c 7^d (FP32, FP64); its FP16
/// transforms accept powers of two only.
enum class FftSizeRule { Smooth, PowerOfTwo };

/// True when cuFFT transforms length `n` without Bluestein (any 7-smooth n, or a power of two).
inline bool is_fft_length(std::int64_t n, FftSizeRule rule) {
  if (n < 1) return false;
  if (rule == FftSizeRule::PowerOfTwo) return (n & (n - 1)) == 0;
  for (const std::int64_t p : {2, 3, 5, 7})
    while (n % p == 0) n /= p;
  return n == 1;
}

/// The smallest length >= n that the rule accepts; for Smooth an even one (cuFFT's R2C halves
/// even lengths into complex transforms of n/2), except 1 for n <= 1. Enumerates 3^b 5^c 7^d and
/// completes with a power of two, so it costs O(log^3 n) even for huge n.
inline std::int64_t next_fft_length(std::int64_t n, FftSizeRule rule) {
  if (n <= 1) return 1;
  std::int64_t best = 2;
  while (best < n) best *= 2;  // a power of two always qualifies
  if (rule == FftSizeRule::PowerOfTwo) return best;
  for (std::int64_t f7 = 1; f7 < best; f7 *= 7)
    for (std::int64_t f5 = f7; f5 < best; f5 *= 5)
      for (std::int64_t f3 = f5; f3 < best; f3 *= 3) {
        std::int64_t m = f3 * 2;
        while (m < n) m *= 2;
        best = std::min(best, m);
      }
  return best;
}

/// One axis of the transform grid (see the file comment for the maps).
struct FftAxis {
  std::int64_t n = 1;       // transform length
  std::int64_t image = 1;   // image extent along the axis (the circular period)
  std::int64_t ext = 1;     // padded positions [0, ext) hold image values
  std::int64_t shift = 0;   // padded position y holds image((y - shift) mod image)
  std::int64_t kernel = 1;  // kernel extent
  std::int64_t kfold = 1;   // padded kernel positions [0, kfold) hold (folded) taps
  std::int64_t period = 1;  // taps u and u + period land on one position (circular: image)
  std::int64_t out0 = 0;    // full-convolution index of the first output
  std::int64_t full = 1;    // zero boundary: outputs outside [0, full) are 0
  bool circular = false;

  /// Image index held by padded position y in [0, n), or -1 for a zero.
  HS_HOST_DEVICE std::int64_t image_source(std::int64_t y) const {
    if (y >= ext) return -1;
    const std::int64_t z = y - shift;  // in [-(kfold - 1), image): one add wraps it
    return z < 0 ? z + image : z;
  }

  /// Grid index read by output i, or -1 for an output that is 0.
  HS_HOST_DEVICE std::int64_t readout(std::int64_t i) const {
    const std::int64_t f = i + out0;
    if (!circular) return (f >= 0 && f < full) ? f : -1;
    const std::int64_t m = f % image;
    return (m < 0 ? m + image : m) + shift;
  }

  /// True when outputs i .. i + count - 1 read `count` consecutive grid positions starting at
  /// readout(i) (no wrap, no zero inside), so they can be loaded as one vector.
  HS_HOST_DEVICE bool readout_contiguous(std::int64_t i, std::int64_t count) const {
    if (!circular) return i + out0 >= 0 && i + out0 + count <= full;
    return readout(i) - shift + count <= image;
  }

  /// True when padded positions y .. y + count - 1 hold image(image_source(y)) onwards, without
  /// a wrap or a zero inside.
  HS_HOST_DEVICE bool source_contiguous(std::int64_t y, std::int64_t count) const {
    return y - shift >= 0 && y + count <= ext;
  }
};

/// Both axes and what the transforms need.
struct FftLayout {
  FftAxis rows, cols;
  bool all_zero =
      false;  // no output can be nonzero (a zero-boundary window outside the full extent)

  [[nodiscard]] std::int64_t real_elems() const { return rows.n * cols.n; }
  /// Complex elements of the half spectrum: the R2C layout of the transform that plan_dims names.
  [[nodiscard]] std::int64_t spectrum_elems() const {
    if (cols.n > 1) return rows.n * (cols.n / 2 + 1);
    return rows.n / 2 + 1;  // a column vector: one 1-D transform over the rows
  }
  /// The transform's rank and lengths (slowest first): axes of length 1 are dropped (an image of
  /// one row is a 1-D transform), which cuFFT wants and which keeps 1xN images cheap.
  [[nodiscard]] int plan_dims(std::int64_t dims[2]) const {
    if (rows.n > 1 && cols.n > 1) {
      dims[0] = rows.n;
      dims[1] = cols.n;
      return 2;
    }
    dims[0] = rows.n > 1 ? rows.n : cols.n;
    return 1;
  }
};

/// Plans one axis: image extent, kernel extent, output length and start (geometry.hpp), boundary,
/// size rule, and a minimum transform length.
inline FftAxis plan_fft_axis(std::int64_t image, std::int64_t kernel, std::int64_t out_len,
                             std::int64_t out0, Boundary boundary, FftSizeRule rule,
                             std::int64_t min_n = 1) {
  FftAxis a;
  a.image = image;
  a.kernel = kernel;
  a.out0 = out0;
  a.full = image + kernel - 1;
  if (boundary == Boundary::Circular) {
    a.circular = true;
    a.period = image;
    a.kfold = std::min(kernel, image);
    if (is_fft_length(image, rule) && image >= min_n) {  // exact: the image grid itself
      a.n = image;
      a.ext = image;
      a.shift = 0;
    } else {  // extended: periodic image over image + kfold - 1 positions
      a.ext = image + a.kfold - 1;
      a.shift = a.kfold - 1;
      a.n = next_fft_length(std::max(a.ext, min_n), rule);
    }
    return a;
  }
  a.period = kernel;  // nothing folds
  a.kfold = kernel;
  a.ext = image;
  a.shift = 0;
  const std::int64_t lo = std::clamp<std::int64_t>(out0, 0, a.full);
  const std::int64_t hi = std::clamp<std::int64_t>(out0 + out_len, 0, a.full);
  const std::int64_t need = std::max({image, kernel, a.full - lo, hi, min_n});
  a.n = next_fft_length(need, rule);
  return a;
}

/// Plans the transform grid of a geometry.
inline FftLayout plan_fft_layout(const Geometry& g, FftSizeRule rule) {
  FftLayout l;
  l.rows = plan_fft_axis(g.rows, g.krows, g.out_rows, g.row0, g.boundary, rule);
  l.cols = plan_fft_axis(g.cols, g.kcols, g.out_cols, g.col0, g.boundary, rule);
  if (l.rows.n == 1 && l.cols.n == 1)  // a 1x1 grid: give the transform one real axis
    l.cols = plan_fft_axis(g.cols, g.kcols, g.out_cols, g.col0, g.boundary, rule, 2);
  if (g.boundary == Boundary::Zero) {
    const auto empty = [](const FftAxis& a, std::int64_t out_len) {
      return a.out0 + out_len <= 0 || a.out0 >= a.full;
    };
    l.all_zero = empty(l.rows, g.out_rows) || empty(l.cols, g.out_cols);
  }
  return l;
}

}  // namespace halfscope::conv

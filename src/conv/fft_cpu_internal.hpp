// Internal: how the CPU FFT convolution lays one convolution onto a transform grid, shared by the
// FFTW engine (fft_cpu.cpp) and the emulated FP16 engine (fft_half_cpu.cpp).
//
// Both engines compute the circular convolution C = A (*) B on an n_r x n_c grid, where A holds
// (a possibly periodically extended copy of) the image and B the kernel, folded onto the grid
// when it is larger than a circular image. Each output pixel then reads one grid position, or is
// an exact zero. The two axes are independent, so one Axis describes each.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "conv/cpu_common.hpp"
#include "conv/geometry.hpp"

namespace halfscope::conv::cpu {

/// Which transform lengths an engine can use.
enum class GridSizes {
  Smooth,  // FFTW: any length; zero-boundary padding rounds up to an even 2^a 3^b 5^c 7^d
  Pow2     // the radix-2 emulation: powers of two only
};

/// One axis of the layout.
struct Axis {
  std::int64_t n = 0;               // transform length
  std::vector<std::int64_t> a_src;  // A[t] = image[a_src[t]] for t < a_src.size(); zero beyond
  std::int64_t k_mod = 0;           // kernel index u adds into B[u % k_mod]
  std::int64_t k_len = 0;           // B is nonzero only in [0, k_len)
  std::vector<std::int64_t> out;    // output index i reads C[out[i]]; -1: an exact zero
};

/// Lays out an axis of image extent `extent`, kernel extent `k`, `nout` outputs starting at
/// full-convolution index `off` (geometry.hpp), for the given boundary and grid sizes:
///  zero:     A = image, B = kernel, n >= the extent that keeps every output window position free
///            of wrap-around (at most extent + k - 1; `valid` needs only the image extent);
///  circular: n = extent (the image's own period) with the kernel folded onto it, so that
///            C is the circular convolution and out[i] = (i + off) mod extent. For Pow2 grids an
///            extent that is not a power of two instead convolves a periodic extension of the
///            image (extent + k' - 1 samples, k' = min(k, extent)) with the folded kernel on a
///            power-of-two grid: the same values, no wrap-around reaches them.
Axis make_axis(std::int64_t extent, std::int64_t k, std::int64_t nout, std::int64_t off,
               Boundary boundary, GridSizes sizes);

/// Smallest even 2^a 3^b 5^c 7^d >= n (FFTW's fastest lengths; an odd one such as 525 took 1.6x
/// as long as 540 for a 2-D r2c), 1 for n <= 1; and the smallest 2^a >= n.
std::int64_t next_smooth(std::int64_t n);
std::int64_t next_pow2(std::int64_t n);

/// Writes out(i, j) = value(r, c) for the grid position (r, c) each pixel reads (0 where it reads
/// none), converted to the storage type S; for FP16 storage counts the overflow (|v| >= 65520 or
/// not finite). `value` returns double (or float) already scaled back.
template <class S, class Value>
OverflowStats write_output(const Axis& ar, const Axis& ac, S* out, Value value) {
  const auto rows = static_cast<std::int64_t>(ar.out.size());
  const auto cols = static_cast<std::int64_t>(ac.out.size());
  std::int64_t overflowed = 0, nonfinite = 0;
  double largest = 0;
#pragma omp parallel for schedule(static) reduction(+ : overflowed, nonfinite) \
    reduction(max : largest) if (static_cast<double>(rows * cols) >= kParallelWork)
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t r = ar.out[static_cast<std::size_t>(i)];
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t c = ac.out[static_cast<std::size_t>(j)];
      const double v = (r < 0 || c < 0) ? 0.0 : static_cast<double>(value(r, c));
      out[i * cols + j] = static_cast<S>(v);
      if constexpr (std::is_same_v<S, Half>) {
        const double m = std::fabs(v);
        if (!(m < 65520.0)) {
          ++overflowed;
          if (std::isfinite(m))
            largest = std::max(largest, m);
          else
            ++nonfinite;
        }
      }
    }
  }
  return {overflowed, nonfinite, largest};
}

/// FFTW plans kept per precision by fft_plan_cache.cpp; the oldest beyond this are dropped (a
/// benchmark sweeps many shapes). Declared here so tests can see the cache without fftw3.h.
inline constexpr std::size_t kMaxCachedPlans = 64;

/// Plans of precision T (double, float) currently cached (for tests).
template <class T>
std::size_t cached_plan_count();

/// The emulated FP16 FFT convolution (fft_half_cpu.cpp): image and kernel in FP16, C on Pow2
/// axes, every operation of the transforms and the spectrum product rounded to FP16.
void half_fft_conv(const Geometry& g, const Axis& ar, const Axis& ac, const Half* image,
                   const Half* kernel, Half* out);

}  // namespace halfscope::conv::cpu

// The r0 = 1 m von Karman structure function on the GPU in FP64 (host and device), from the table
// that vonkarman_table() (covariance_cuda_table.cpp) fits to the reference functions of
// turbulence.cpp. Device code and __host__ __device__ helpers only.
//
// D_1(r; L0) = k1 L0^(5/3) G(x), x = 2 pi r / L0, G(x) = Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x)
// (turbulence.hpp). The evaluation works on q = x^2 = (2 pi / L0)^2 (du^2 + dv^2): no sqrt, no
// pow, no log. q = 2^e m (m in [1, 2)); the top 4 mantissa bits pick one of 16 equal intervals of
// the octave (covariance_tuning.hpp), on which G is a degree-7 polynomial in s = 32 m' - 33 in
// [-1, 1) (m' the mantissa with those bits cleared; exact). So one evaluation is: a few integer
// ops for the index, 1 FP64 FMA for s, 7 FMA, 8 coefficient loads from a 71 KB table (layouts:
// VkLayout below). Above the table (x >= 45) G is its limit to the last
// bit; below it (x < 1e-9, nanometres) the two leading series terms c y^(5/6) / Gamma(11/6) -
// c y / Gamma(7/6), y = q / 4, whose neglected terms are y^(11/6) ~ 1e-18 relative (with
// y^(5/6) = sqrt(y) cbrt(y): the only root of the whole path, on a branch practically never
// taken; q = 0 gives 0 exactly).
//
// Accuracy (measured on the host and by tests/ao/gpu_covariance_vonkarman.cpp): D within 1e-15
// relative of vonkarman_structure_function at every separation (9.7e-16 worst over the tests'
// grid of interval edges and branch switches), against the 1e-14 target.
#pragma once

#include <cstdint>
#include <cstring>

#include "ao/covariance_tuning.hpp"

#if defined(__CUDACC__)
#define HS_VK_HD __host__ __device__
#else
#define HS_VK_HD
#endif
#if defined(__CUDA_ARCH__)
#define HS_VK_UNROLL _Pragma("unroll")
#else
#define HS_VK_UNROLL
#endif

namespace halfscope::ao::detail {

/// What the evaluation needs besides the table: G's limit and the two leading series factors.
struct VonKarmanScalars {
  double limit = 0;       // Gamma(5/6) 2^(-1/6) = G(+inf)
  double series_a = 0;    // c / Gamma(11/6), c = 2 pi 2^(-1/6): the y^(5/6) term
  double series_one = 0;  // c / Gamma(7/6): the y term
};

/// Bit pattern of a double, on the host or the device.
HS_VK_HD inline std::int64_t vk_bits(double v) {
#if defined(__CUDA_ARCH__)
  return __double_as_longlong(v);
#else
  std::int64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
#endif
}

HS_VK_HD inline double vk_from_bits(std::int64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(b);
#else
  double v = 0;
  std::memcpy(&v, &b, sizeof v);
  return v;
#endif
}

/// How the polynomial table is laid out in memory (both are built; the kernels take either, so the
/// benchmark can show the difference). interval_major: the kVkStride doubles of one interval
/// together (c_0..c_7), read as 16-byte loads; a warp whose lanes fall in different intervals
/// touches one 64-byte block per interval and load. degree_major: coefficient k of every interval
/// together (kVkIntervals doubles per degree), read as 8-byte loads; the 16 intervals of an
/// octave share one 128-byte line, so lanes in nearby intervals share lines.
enum class VkLayout : std::uint8_t { interval_major, degree_major };

/// G(x) at q = x^2 >= 0 (finite), from a table in layout L (16-byte aligned).
template <VkLayout L>
HS_VK_HD inline double vonkarman_bracket_q(double q, const double* __restrict__ table,
                                           const VonKarmanScalars& k) {
  constexpr std::int64_t kMantissa = (std::int64_t{1} << 52) - 1;
  constexpr int kJShift = 52 - kVkIntervalsPerOctaveLog2;
  constexpr std::int64_t kJBits = std::int64_t{kVkIntervalsPerOctave - 1} << kJShift;
  const std::int64_t bits = vk_bits(q);
  const int e = static_cast<int>(bits >> 52) - 1023;  // q >= 0: the sign bit is clear
  if (e > kVkMaxExponent) return k.limit;
  if (e < kVkMinExponent) {
    if (q == 0.0) return 0.0;
    const double y = 0.25 * q;
#if defined(__CUDA_ARCH__)
    const double ya = sqrt(y) * cbrt(y);
#else
    const double ya = __builtin_sqrt(y) * __builtin_cbrt(y);
#endif
    return k.series_a * ya - k.series_one * y;
  }
  const int j = static_cast<int>(bits >> kJShift) & (kVkIntervalsPerOctave - 1);
  const int index = (e - kVkMinExponent) * kVkIntervalsPerOctave + j;
  // The mantissa without the interval bits, in [1, 1 + 1/k): s = 2k (m - 1) - 1 in [-1, 1), exact
  // (2k m and 2k + 1 lie in one binade).
  const double m = vk_from_bits((bits & kMantissa & ~kJBits) | (std::int64_t{1023} << 52));
  constexpr double kTwoK = 2.0 * kVkIntervalsPerOctave;
  const double s = kTwoK * m - (kTwoK + 1.0);
  double c[kVkDegree + 1];
  if constexpr (L == VkLayout::interval_major) {
    const double* w = table + static_cast<std::int64_t>(index) * kVkStride;
#if defined(__CUDA_ARCH__)
    HS_VK_UNROLL
    for (int t = 0; t < kVkStride / 2; ++t) {
      const double2 v = __ldg(reinterpret_cast<const double2*>(w) + t);
      if (2 * t <= kVkDegree) c[2 * t] = v.x;
      if (2 * t + 1 <= kVkDegree) c[2 * t + 1] = v.y;
    }
#else
    for (int t = 0; t <= kVkDegree; ++t) c[t] = w[t];
#endif
  } else {
    HS_VK_UNROLL
    for (int t = 0; t <= kVkDegree; ++t) {
#if defined(__CUDA_ARCH__)
      c[t] = __ldg(table + t * kVkIntervals + index);
#else
      c[t] = table[t * kVkIntervals + index];
#endif
    }
  }
  double p = c[kVkDegree];
  HS_VK_UNROLL
  for (int t = kVkDegree - 1; t >= 0; --t) {
#if defined(__CUDA_ARCH__)
    p = fma(p, s, c[t]);
#else
    p = __builtin_fma(p, s, c[t]);  // the same rounding as the device
#endif
  }
  return p;
}

}  // namespace halfscope::ao::detail

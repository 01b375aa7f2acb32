// Internal: what the two CPU convolution backends (direct_cpu.cpp, fft_cpu.cpp) share: checking
// the arrays against the Geometry, FP16 rounding that vectorizes, and the FP16 overflow report.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "conv/geometry.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/half.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv::cpu {

/// Checks what backends.hpp promises: host, C-contiguous, 2-D arrays of the precision's storage
/// dtype whose shapes match `g`, and a geometry with positive extents. Throws InvalidInput (a
/// broken internal contract, named by `backend`) so a dispatch bug is loud, never a wild read.
void check_arrays(std::string_view backend, const Geometry& g, DType storage, const Array& image,
                  const Array& kernel, const Array& out);

/// Unsupported naming the method, the precision asked for and the ones it supports.
[[noreturn]] void throw_unsupported(std::string_view backend, Precision p,
                                    std::span<const Precision> supported);

/// `float(Half(x))` without leaving float: round to the nearest FP16 value, ties to even, +-inf
/// from |x| >= 65520, NaN kept (quiet). Bit for bit what `Half` gives (the tests check this over
/// every exponent), but branch-free integer and float operations only, so a loop of it
/// auto-vectorizes; `Half`'s own conversion is a libgcc call per value on baseline x86-64.
inline float round_to_half(float x) noexcept {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = b & 0x80000000u;
  const std::uint32_t a = b & 0x7fffffffu;
  // Normal FP16 range: keep 10 fraction bits, round to nearest even (a carry into the exponent
  // is the right answer, also to 65536 which becomes inf below).
  const std::uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
  // Subnormal FP16 range (|x| < 2^-14): the grid is 2^-24, the float ulp of [0.5, 1), so adding
  // and removing 0.5 rounds to it (round to nearest even, exact otherwise).
  const std::uint32_t sub = std::bit_cast<std::uint32_t>((std::bit_cast<float>(a) + 0.5f) - 0.5f);
  // Selects written as masks: GCC does not if-convert the ternaries and would not vectorize.
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(a < 0x38800000u);
  std::uint32_t r = (sub & is_sub) | (normal & ~is_sub);
  const std::uint32_t is_inf = 0u - static_cast<std::uint32_t>(r > 0x477fe000u);  // > 65504
  r = (0x7f800000u & is_inf) | (r & ~is_inf);
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(a > 0x7f800000u);  // quiet NaN
  r = (((a & ~0x1fffu) | 0x400000u) & is_nan) | (r & ~is_nan);
  return std::bit_cast<float>(r | sign);
}

/// An FP16 number held in a float: the same values and the same arithmetic as `Half` (every
/// result rounded to FP16 by round_to_half, which the tests check bit for bit against Half), at
/// float speed. Templates that run "in Half" use it where Half's libgcc conversions dominate.
struct HalfInFloat {
  float v = 0.0f;

  HalfInFloat() = default;
  explicit HalfInFloat(double d) noexcept : v(static_cast<float>(Half(d))) {}
  explicit HalfInFloat(Half h) noexcept : v(static_cast<float>(h)) {}
  static HalfInFloat rounded(float f) noexcept {
    HalfInFloat h;
    h.v = round_to_half(f);
    return h;
  }
  explicit operator double() const noexcept { return v; }
  explicit operator float() const noexcept { return v; }
  [[nodiscard]] Half to_half() const noexcept { return Half(v); }  // exact

  friend HalfInFloat operator+(HalfInFloat a, HalfInFloat b) noexcept { return rounded(a.v + b.v); }
  friend HalfInFloat operator-(HalfInFloat a, HalfInFloat b) noexcept { return rounded(a.v - b.v); }
  friend HalfInFloat operator*(HalfInFloat a, HalfInFloat b) noexcept { return rounded(a.v * b.v); }
  friend HalfInFloat operator-(HalfInFloat a) noexcept {
    HalfInFloat h;
    h.v = -a.v;
    return h;
  }
};

/// Work (multiply-adds, or elements touched) below which a loop runs on one thread: waking the
/// OpenMP team costs more than it saves on small images, and much more on a busy machine.
inline constexpr double kParallelWork = 1 << 16;

/// Converts a C-contiguous host array of storage type S to a vector of A (exact widening).
template <class A, class S>
std::vector<A> widen_all(const S* src, std::int64_t n) {
  std::vector<A> v(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
  for (std::int64_t t = 0; t < n; ++t) v[static_cast<std::size_t>(t)] = static_cast<A>(src[t]);
  return v;
}

/// True when every value is finite (NaN or inf inputs pass through without an overflow report).
template <class A>
bool all_finite(std::span<const A> v) noexcept {
  bool ok = true;
  for (A x : v) ok &= (x - x == x - x);  // false for inf and NaN, and vectorizes
  return ok;
}

/// What rounding the results to FP16 did: pixels that overflowed (or came out non-finite from
/// finite inputs) and the largest magnitude among the finite ones.
struct OverflowStats {
  std::int64_t overflowed = 0;  // |value| >= 65520, or not finite
  std::int64_t nonfinite = 0;   // of those, arithmetic that already overflowed inside (half)
  double largest = 0.0;         // largest finite |value| among the overflowed pixels
};

/// Throws NumericalError: "conv direct (half): 12 of 262144 output pixels overflow FP16 ...".
/// `exact_largest` (>= 0 when known) is the FP64 magnitude of the worst overflowed pixel.
[[noreturn]] void throw_fp16_overflow(std::string_view backend, Precision p, const OverflowStats& s,
                                      std::int64_t pixels, double exact_largest);

}  // namespace halfscope::conv::cpu

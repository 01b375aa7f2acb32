// Exact FP16 and BF16 on the CPU.
//
// `Half` is IEEE binary16 and `BFloat16` is the top half of binary32. Both convert from float by
// round-to-nearest-even (the rounding every CUDA `__float2half_rn` / `__float2bfloat16_rn` uses)
// and every arithmetic operation rounds its result back: a + b is computed in float, which holds
// the exact sum, product or quotient of two 11-bit (or 8-bit) significands closely enough that the
// second rounding is exact (24 >= 2 * 11 + 2), then rounded once to the storage type. So a chain of
// Half operations gives bit for bit what FP16 hardware gives with every operation in FP16.
//
// Under GCC and Clang on x86-64 the FP16 rounding uses the compiler's `_Float16`; elsewhere (nvcc's
// host pass, other targets) a bit-exact software rounding is used. The tests check both agree.
#pragma once

#include <bit>
#include <cstdint>

#if !defined(__CUDACC__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    (defined(__GNUC__) || defined(__clang__)) && defined(__FLT16_MAX__)
#define HALFSCOPE_HAVE_FLOAT16 1
#else
#define HALFSCOPE_HAVE_FLOAT16 0
#endif

namespace halfscope {

/// Float -> binary16 bits, round to nearest, ties to even; overflow gives +-inf, NaN stays NaN.
/// Software version, usable everywhere (also the reference the `_Float16` path is tested against).
constexpr std::uint16_t float_to_half_bits_rne_soft(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u)
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (absx < 0x38800000u) {  // below 2^-14: half subnormal or zero
    const std::uint32_t e = absx >> 23;
    const std::uint32_t shift = 126u - e;  // value in units of 2^-24 is mant24 >> shift
    if (e == 0 || shift >= 25u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    std::uint32_t r = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = ((absx >> 23) - 112u) << 10 | ((absx >> 13) & 0x3ffu);
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry into the exponent is right
  return static_cast<std::uint16_t>(sign | r);
}

/// Double -> float rounded to odd: truncate toward zero and set the last bit when inexact. A
/// second rounding of the result to any format at least two bits narrower than float is then the
/// correctly rounded value of the double (no double-rounding error).
constexpr float double_to_float_round_to_odd(double d) noexcept {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d) return f;
  std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  if ((f < 0 ? -static_cast<double>(f) : static_cast<double>(f)) > (d < 0 ? -d : d)) --b;
  return std::bit_cast<float>(b | 1u);
}

/// binary16 bits -> float, exact.
constexpr float half_bits_to_float_soft(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  // A NaN comes back quiet (IEEE 754 widening; what _Float16 and CUDA's __half2float give).
  if (exp == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  std::uint32_t e = 113u;  // normalise the subnormal
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

/// Float -> binary16 bits, round to nearest even (hardware `_Float16` where the compiler has it).
inline std::uint16_t float_to_half_bits_rne(float f) noexcept {
#if HALFSCOPE_HAVE_FLOAT16
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
#else
  return float_to_half_bits_rne_soft(f);
#endif
}

inline float half_bits_to_float(std::uint16_t h) noexcept {
#if HALFSCOPE_HAVE_FLOAT16
  return static_cast<float>(std::bit_cast<_Float16>(h));
#else
  return half_bits_to_float_soft(h);
#endif
}

/// Float -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN of the same sign.
constexpr std::uint16_t float_to_bf16_bits_rne(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// IEEE binary16 value stored as its bits; arithmetic rounds every result to binary16.
struct Half {
  std::uint16_t bits = 0;

  Half() = default;
  explicit Half(float f) noexcept : bits(float_to_half_bits_rne(f)) {}
  explicit Half(double d) noexcept : Half(double_to_float_round_to_odd(d)) {}
  static constexpr Half from_bits(std::uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
  explicit operator float() const noexcept { return half_bits_to_float(bits); }
  explicit operator double() const noexcept { return half_bits_to_float(bits); }
  [[nodiscard]] float to_float() const noexcept { return half_bits_to_float(bits); }

  friend Half operator+(Half a, Half b) noexcept { return Half(a.to_float() + b.to_float()); }
  friend Half operator-(Half a, Half b) noexcept { return Half(a.to_float() - b.to_float()); }
  friend Half operator*(Half a, Half b) noexcept { return Half(a.to_float() * b.to_float()); }
  friend Half operator/(Half a, Half b) noexcept { return Half(a.to_float() / b.to_float()); }
  friend Half operator-(Half a) noexcept {
    return from_bits(static_cast<std::uint16_t>(a.bits ^ 0x8000u));
  }
  Half& operator+=(Half o) noexcept { return *this = *this + o; }
  Half& operator-=(Half o) noexcept { return *this = *this - o; }
  Half& operator*=(Half o) noexcept { return *this = *this * o; }
  Half& operator/=(Half o) noexcept { return *this = *this / o; }
  friend bool operator==(Half a, Half b) noexcept { return a.to_float() == b.to_float(); }
  friend bool operator<(Half a, Half b) noexcept { return a.to_float() < b.to_float(); }

  static constexpr float max() noexcept { return 65504.0f; }
  static constexpr float min_normal() noexcept { return 6.103515625e-05f; }   // 2^-14
  static constexpr float min_subnormal() noexcept { return 5.9604645e-08f; }  // 2^-24
  static constexpr double unit_roundoff() noexcept { return 0x1p-11; }
};

/// bfloat16 value stored as its bits; arithmetic rounds every result to bfloat16.
struct BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;
  explicit constexpr BFloat16(float f) noexcept : bits(float_to_bf16_bits_rne(f)) {}
  explicit constexpr BFloat16(double d) noexcept : BFloat16(double_to_float_round_to_odd(d)) {}
  static constexpr BFloat16 from_bits(std::uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit constexpr operator float() const noexcept { return bf16_bits_to_float(bits); }
  explicit constexpr operator double() const noexcept { return bf16_bits_to_float(bits); }
  [[nodiscard]] constexpr float to_float() const noexcept { return bf16_bits_to_float(bits); }

  friend BFloat16 operator+(BFloat16 a, BFloat16 b) noexcept {
    return BFloat16(a.to_float() + b.to_float());
  }
  friend BFloat16 operator-(BFloat16 a, BFloat16 b) noexcept {
    return BFloat16(a.to_float() - b.to_float());
  }
  friend BFloat16 operator*(BFloat16 a, BFloat16 b) noexcept {
    return BFloat16(a.to_float() * b.to_float());
  }
  friend BFloat16 operator/(BFloat16 a, BFloat16 b) noexcept {
    return BFloat16(a.to_float() / b.to_float());
  }
  BFloat16& operator+=(BFloat16 o) noexcept { return *this = *this + o; }
  BFloat16& operator*=(BFloat16 o) noexcept { return *this = *this * o; }
  friend bool operator==(BFloat16 a, BFloat16 b) noexcept { return a.to_float() == b.to_float(); }

  static constexpr double unit_roundoff() noexcept { return 0x1p-8; }
};

}  // namespace halfscope

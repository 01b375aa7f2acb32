// FP16 / BF16 emulation: the software rounding, the compiler's _Float16 and an independent FP64
// model of round-to-nearest-even must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "halfscope/core/half.hpp"

namespace halfscope {
namespace {

// Independent reference: the binary16 value nearest to x (ties to even), computed in double from
// the definition of the format (not from any bit trick used by the code under test).
double nearest_half_value(double x) {
  if (std::isnan(x)) return x;
  const double a = std::abs(x);
  if (a >= 65520.0) return std::copysign(INFINITY, x);
  int e;
  std::frexp(a, &e);                     // a = m * 2^e, m in [0.5, 1)
  const int exp = std::max(e - 1, -14);  // binary16 exponent, subnormals share 2^-14
  const double ulp = std::ldexp(1.0, exp - 10);
  const double q = a / ulp;  // exact: a power-of-two scaling
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) == 1.0)) r += 1;
  return std::copysign(r * ulp, x);
}

TEST(Half, EveryHalfWidensExactlyAndRoundTrips) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float soft = half_bits_to_float_soft(h);
    const float fast = half_bits_to_float(h);
    if (std::isnan(soft)) {  // every NaN widens to the same quiet NaN on both paths
      ASSERT_EQ(std::bit_cast<std::uint32_t>(soft), std::bit_cast<std::uint32_t>(fast)) << b;
      ASSERT_TRUE(std::bit_cast<std::uint32_t>(soft) & 0x400000u) << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<std::uint32_t>(soft), std::bit_cast<std::uint32_t>(fast)) << b;
    ASSERT_EQ(float_to_half_bits_rne_soft(soft), h) << b;
    ASSERT_EQ(float_to_half_bits_rne(soft), h) << b;
  }
}

TEST(Half, NarrowingMatchesTheDefinitionOnEveryExponentAndTie) {
  // Every float exponent near the binary16 range, every top-12 mantissa pattern, and low bits
  // that make exact ties, just-below and just-above ties.
  const std::uint32_t lows[] = {0x0, 0x1, 0x3ff, 0x400, 0x401, 0x7fe, 0x7ff};
  for (std::uint32_t e = 90; e <= 150; ++e)
    for (std::uint32_t top = 0; top < 4096; ++top)
      for (std::uint32_t low : lows)
        for (std::uint32_t sign : {0u, 0x80000000u}) {
          const std::uint32_t bits = sign | (e << 23) | (top << 11) | low;
          const float f = std::bit_cast<float>(bits);
          const double want = nearest_half_value(f);
          const std::uint16_t soft = float_to_half_bits_rne_soft(f);
          ASSERT_EQ(static_cast<double>(half_bits_to_float_soft(soft)), want) << std::hexfloat << f;
          ASSERT_EQ(float_to_half_bits_rne(f), soft) << std::hexfloat << f;
        }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(float_to_half_bits_rne(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits_rne(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half_bits_rne(65520.0f), 0x7c00);  // tie rounds to even = infinity
  EXPECT_EQ(float_to_half_bits_rne(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half_bits_rne(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_half_bits_rne(0x1p-25f), 0x0000);         // tie to even: zero
  EXPECT_EQ(float_to_half_bits_rne(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_half_bits_rne(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(Half(NAN).to_float()));
}

TEST(Half, FromDoubleRoundsOnce) {
  // 1 + 2^-11 + 2^-40: nearest float is 1 + 2^-11 (a binary16 tie that would round to 1), but the
  // double is above the tie, so the correctly rounded binary16 is 1 + 2^-10.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(Half(d).to_float(), 1.0f + 0x1p-10f);
  EXPECT_EQ(Half(static_cast<float>(d)).to_float(), 1.0f);  // the double-rounding trap
  EXPECT_EQ(BFloat16(1.0 + 0x1p-8 + 0x1p-40).to_float(), 1.0f + 0x1p-7f);
}

TEST(Half, ArithmeticRoundsEveryOperation) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  for (int i = 0; i < 200000; ++i) {
    const Half a(dist(rng)), b(dist(rng));
    const double da = a.to_float(), db = b.to_float();
    ASSERT_EQ((a + b).to_float(), nearest_half_value(da + db));
    ASSERT_EQ((a - b).to_float(), nearest_half_value(da - db));
    ASSERT_EQ((a * b).to_float(), nearest_half_value(da * db));
    if (db != 0) {
      ASSERT_EQ((a / b).to_float(), nearest_half_value(da / db));
    }
  }
  // Accumulating 1 into 2048 in FP16 stalls: 2048 + 1 is a tie that rounds to even (2048).
  Half acc(2048.0f);
  acc += Half(1.0f);
  EXPECT_EQ(acc.to_float(), 2048.0f);
}

TEST(BFloat16, NarrowingMatchesTheDefinition) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    const std::uint32_t bits = rng();
    const float f = std::bit_cast<float>(bits);
    const BFloat16 b(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(b.to_float()));
      continue;
    }
    // Reference: the two bf16 neighbours of f and a tie-to-even choice, in double.
    const std::uint32_t down = bits & 0xffff0000u;
    const double lo = std::bit_cast<float>(down);
    // The next bf16 away from zero; past the largest finite one it is 2^128, which rounds to inf.
    const bool top = (down & 0x7fffffffu) == 0x7f7f0000u;
    const double hi =
        top ? std::copysign(std::ldexp(1.0, 128), f) : std::bit_cast<float>(down + 0x10000u);
    const double dlo = std::abs(f - lo), dhi = std::abs(hi - f);
    double want = dlo < dhi ? lo : dhi < dlo ? hi : (((down >> 16) & 1u) ? hi : lo);
    if (std::abs(want) == std::ldexp(1.0, 128)) want = std::copysign(INFINITY, f);
    ASSERT_EQ(static_cast<double>(b.to_float()), want) << std::hexfloat << f;
  }
}

}  // namespace
}  // namespace halfscope

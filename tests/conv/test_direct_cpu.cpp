// direct_cpu against the FP64 reference of cpu_backend_testing.hpp, every precision.
//
// Tolerance (per output pixel): the recursive sum of K = krows*kcols rounded products has
// |computed - exact| <= gamma_K * sum|k||x| with gamma_K = K u / (1 - K u) (Higham, Accuracy and
// Stability, eq. 3.5, products and sums in arithmetic of unit roundoff u), so C = 1; the inputs
// are exactly representable in storage (the reference uses the stored values), the final rounding
// to storage adds u_s * |value|, and in FP16 arithmetic each of the 2K operations can also lose
// up to 2^-25 absolutely to the subnormal range. Half is also compared bit for bit with a plain
// loop of Half operators in the documented order (taps row-major).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "conv/backends.hpp"
#include "conv/cpu_common.hpp"
#include "cpu_backend_testing.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {
namespace {

using testing::Reference;

double gamma(std::int64_t k, double u) {
  const double ku = static_cast<double>(k) * u;
  return ku / (1 - ku);
}

/// Runs direct_cpu on every shape x geometry with S storage, checks every pixel was written and
/// lies within the bound; sets `worst` to the largest error relative to sum|k||x|.
template <class S>
void check_all(double& worst, Precision p, double u_compute, double u_storage, double abs_per_op,
               float lo = 0.5f, float hi = 1.5f) {
  worst = 0;
  std::uint64_t seed = 100;
  for (const testing::Shape4& s : testing::shapes()) {
    std::vector<double> img, ker;
    const Array image = testing::storage_array<S>(
        test::random_floats(s.rows * s.cols, lo, hi, ++seed), s.rows, s.cols, img);
    const Array kernel = testing::storage_array<S>(
        test::random_floats(s.krows * s.kcols, 0.1f, 1.0f, ++seed), s.krows, s.kcols, ker);
    for (const Geometry& g : testing::geometries(s)) {
      Array out = testing::poisoned<S>(g.out_rows, g.out_cols);
      direct_cpu(g, p, image, kernel, out);
      const Reference ref = testing::reference(g, img, ker);
      const std::vector<double> got = testing::values_of<S>(out);
      const std::int64_t taps = g.krows * g.kcols;
      for (std::size_t t = 0; t < got.size(); ++t) {
        ASSERT_TRUE(std::isfinite(got[t]))
            << "pixel " << t << " not written: " << testing::describe(g);
        const double bound = gamma(taps, u_compute) * ref.abs[t] * (1 + u_storage) +
                             u_storage * std::fabs(ref.value[t]) + 2.0 * taps * abs_per_op;
        const double err = std::fabs(got[t] - ref.value[t]);
        ASSERT_LE(err, bound) << "pixel " << t << ": got " << got[t] << ", FP64 " << ref.value[t]
                              << "; " << testing::describe(g);
        if (ref.abs[t] > 0) worst = std::max(worst, err / ref.abs[t]);
      }
    }
  }
  std::printf("    worst relative error %.3g\n", worst);
}

TEST(DirectCpu, RoundToHalf_Float_MatchesHalfOperatorsBitForBit) {
  const auto same = [](float x) {
    const float want = static_cast<float>(Half(x));
    const float got = conv::cpu::round_to_half(x);
    if (std::isnan(want)) return std::isnan(got);
    return std::bit_cast<std::uint32_t>(want) == std::bit_cast<std::uint32_t>(got);
  };
  // Every FP16 value, the midpoints to its neighbour (ties) and one float ulp either side.
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = half_bits_to_float_soft(static_cast<std::uint16_t>(h));
    const float next = half_bits_to_float_soft(static_cast<std::uint16_t>(h + 1));
    ASSERT_TRUE(same(f)) << "half bits " << h;
    if (!std::isfinite(f) || !std::isfinite(next) || (h & 0x7fffu) == 0x7bffu) continue;
    const float mid = f + (next - f) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid)})
      ASSERT_TRUE(same(x)) << std::hexfloat << x;
  }
  for (float x : {65504.0f, 65519.996f, 65520.0f, 1e6f, -65520.0f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f})
    ASSERT_TRUE(same(x)) << std::hexfloat << x;
  std::mt19937 rng(7);
  for (int t = 0; t < (1 << 20); ++t) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    ASSERT_TRUE(same(x)) << std::hexfloat << x;
  }
}

TEST(DirectCpu, Double_F64_EqualsFp64ReferenceTo1e15Relative) {
  double worst = 0;
  check_all<double>(worst, Precision::Double, 0x1p-53, 0, 0, -1.0f, 1.0f);
  EXPECT_LE(worst, 1e-15);
}

TEST(DirectCpu, Single_F32_WithinGammaKBound) {
  double worst = 0;
  check_all<float>(worst, Precision::Single, 0x1p-24, 0x1p-24, 0);
  EXPECT_GT(worst, 0.0);  // really computed in float, not in double
}

TEST(DirectCpu, Single_F32_SignedData_WithinGammaKBound) {
  double worst = 0;
  check_all<float>(worst, Precision::Single, 0x1p-24, 0x1p-24, 0, -1.0f, 1.0f);
}

TEST(DirectCpu, Mixed_F16StorageF32Arithmetic_WithinBound) {
  double worst = 0;
  check_all<Half>(worst, Precision::Mixed, 0x1p-24, 0x1p-11, 0);
}

TEST(DirectCpu, BF16_BF16StorageF32Arithmetic_WithinBound) {
  double worst = 0;
  check_all<BFloat16>(worst, Precision::BF16, 0x1p-24, 0x1p-8, 0);
}

TEST(DirectCpu, Half_F16Arithmetic_WithinBound) {
  double worst = 0;
  check_all<Half>(worst, Precision::Half, 0x1p-11, 0x1p-11, 0x1p-25);
  EXPECT_GT(worst, 1e-5);  // really rounded to FP16 along the way
}

/// The documented FP16 order, written with Half operators only.
std::vector<Half> scalar_half(const Geometry& g, const Half* img, const Half* ker) {
  std::vector<Half> out(static_cast<std::size_t>(g.out_rows * g.out_cols));
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 0; j < g.out_cols; ++j) {
      Half acc{};
      for (std::int64_t u = 0; u < g.krows; ++u)
        for (std::int64_t v = 0; v < g.kcols; ++v) {
          std::int64_t y = i + g.row0 - u, x = j + g.col0 - v;
          if (g.boundary == Boundary::Zero) {
            if (y < 0 || y >= g.rows || x < 0 || x >= g.cols) continue;
          } else {
            y = testing::periodic(y, g.rows);
            x = testing::periodic(x, g.cols);
          }
          acc = acc + ker[u * g.kcols + v] * img[y * g.cols + x];
        }
      out[static_cast<std::size_t>(i * g.out_cols + j)] = acc;
    }
  return out;
}

TEST(DirectCpu, Half_F16Arithmetic_BitIdenticalToHalfOperatorsInRowMajorTapOrder) {
  std::uint64_t seed = 500;
  for (const testing::Shape4& s : {testing::Shape4{20, 13, 5, 4}, testing::Shape4{6, 9, 8, 11},
                                   testing::Shape4{1, 50, 1, 31}}) {
    std::vector<double> unused;
    const Array image = testing::storage_array<Half>(
        test::random_floats(s.rows * s.cols, -2.0f, 3.0f, ++seed), s.rows, s.cols, unused);
    const Array kernel = testing::storage_array<Half>(
        test::random_floats(s.krows * s.kcols, -0.3f, 1.0f, ++seed), s.krows, s.kcols, unused);
    for (const Geometry& g : testing::geometries(s)) {
      Array out = testing::poisoned<Half>(g.out_rows, g.out_cols);
      direct_cpu(g, Precision::Half, image, kernel, out);
      const std::vector<Half> want = scalar_half(g, image.data_as<Half>(), kernel.data_as<Half>());
      for (std::size_t t = 0; t < want.size(); ++t)
        ASSERT_EQ(out.data_as<Half>()[t].bits, want[t].bits)
            << "pixel " << t << ": " << testing::describe(g);
    }
  }
}

/// 250 everywhere convolved with a 16x16 kernel of 2s: 128000 in the interior, above FP16's range.
struct OverflowCase {
  Geometry g{40, 40, 16, 16, 55, 55, 0, 0, Boundary::Zero};
  std::vector<double> img, ker;
  Array image = testing::storage_array<Half>(std::vector<float>(1600, 250.0f), 40, 40, img);
  Array kernel = testing::storage_array<Half>(std::vector<float>(256, 2.0f), 16, 16, ker);
};

TEST(DirectCpu, Mixed_F16Storage_OverflowIsNumericalErrorWithCountAndMagnitude) {
  OverflowCase c;
  const Reference ref = testing::reference(c.g, c.img, c.ker);
  std::int64_t count = 0;
  for (double v : ref.value) count += std::fabs(v) >= 65520;
  ASSERT_GT(count, 0);
  Array out = testing::poisoned<Half>(c.g.out_rows, c.g.out_cols);
  try {
    direct_cpu(c.g, Precision::Mixed, c.image, c.kernel, out);
    FAIL() << "no NumericalError";
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(count) + " of 3025 output pixels overflow FP16"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("largest magnitude 128000"), std::string::npos) << msg;
  }
}

TEST(DirectCpu, Half_F16Arithmetic_OverflowIsNumericalErrorWithExactMagnitude) {
  OverflowCase c;
  const std::vector<Half> want =
      scalar_half(c.g, c.image.data_as<Half>(), c.kernel.data_as<Half>());
  std::int64_t count = 0;
  for (Half h : want) count += !std::isfinite(static_cast<float>(h));
  ASSERT_GT(count, 0);
  Array out = testing::poisoned<Half>(c.g.out_rows, c.g.out_cols);
  try {
    direct_cpu(c.g, Precision::Half, c.image, c.kernel, out);
    FAIL() << "no NumericalError";
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(count) + " of 3025 output pixels"), std::string::npos) << msg;
    EXPECT_NE(msg.find("largest magnitude 128000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("inside the FP16 arithmetic"), std::string::npos) << msg;
  }
}

TEST(DirectCpu, Mixed_F16Storage_NaNInputPassesThroughWithoutOverflowError) {
  std::vector<double> img, ker;
  std::vector<float> v = test::random_floats(64, 0.5f, 1.5f, 3);
  v[27] = std::numeric_limits<float>::quiet_NaN();
  const Array image = testing::storage_array<Half>(v, 8, 8, img);
  const Array kernel =
      testing::storage_array<Half>(test::random_floats(9, 0.1f, 1.0f, 4), 3, 3, ker);
  const Geometry g{8, 8, 3, 3, 8, 8, 1, 1, Boundary::Zero};
  Array out = testing::poisoned<Half>(8, 8);
  EXPECT_NO_THROW(direct_cpu(g, Precision::Mixed, image, kernel, out));
  EXPECT_TRUE(std::isnan(static_cast<float>(out.data_as<Half>()[27])));
  EXPECT_TRUE(std::isfinite(static_cast<float>(out.data_as<Half>()[0])));
}

TEST(DirectCpu, Tf32AndSplit_AreUnsupportedListingWhatIs) {
  const Geometry g{4, 4, 3, 3, 4, 4, 1, 1, Boundary::Zero};
  Array image(DType::f32, Shape{4, 4}), kernel(DType::f32, Shape{3, 3}),
      out(DType::f32, Shape{4, 4});
  for (Precision p : {Precision::TF32, Precision::Split}) {
    try {
      direct_cpu(g, p, image, kernel, out);
      FAIL() << "no Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("double, single, half, mixed, bf16"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DirectCpu, Single_F32_WrongDtypeOrShapeIsInvalidInput) {
  const Geometry g{4, 4, 3, 3, 4, 4, 1, 1, Boundary::Zero};
  Array image(DType::f32, Shape{4, 4}), kernel(DType::f32, Shape{3, 3});
  Array out64(DType::f64, Shape{4, 4}), out_small(DType::f32, Shape{4, 3});
  EXPECT_THROW(direct_cpu(g, Precision::Single, image, kernel, out64), InvalidInput);
  EXPECT_THROW(direct_cpu(g, Precision::Single, image, kernel, out_small), InvalidInput);
  EXPECT_THROW(direct_cpu(g, Precision::Double, image, kernel, out64), InvalidInput);
}

}  // namespace
}  // namespace halfscope::conv

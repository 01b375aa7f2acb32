// The per-channel facts of matched-filtering data (src/mfilter/data_factors.hpp) that ranks
// combine: scans of pieces merged in any order equal the scan of the whole channel (first bad
// sample included), the power-of-two scaling from the range equals the one from every converted
// sample, and the blocked FP64 mean is within its error bound of a long-double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "mfilter/data_factors.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mfilter {
namespace {

std::vector<double> noise(std::int64_t n, double scale, double offset, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = offset + scale * normal(rng);
  return v;
}

TEST(DataFactors, MergedScansOfPiecesEqualTheWholeScan) {
  std::vector<double> x = noise(10000, 3.0, 0.5, 1);
  x[7001] = std::numeric_limits<double>::infinity();
  x[4242] = std::nan("");
  x[9000] = -std::numeric_limits<double>::infinity();
  const RangeScan whole = scan_range(x.data(), std::ssize(x), 0);
  EXPECT_EQ(whole.first_bad, 4242);
  EXPECT_TRUE(std::isnan(whole.bad_value));
  for (const std::int64_t cut : {1, 4242, 4243, 7001, 9999}) {
    const RangeScan a = scan_range(x.data(), cut, 0);
    const RangeScan b = scan_range(x.data() + cut, std::ssize(x) - cut, cut);
    for (bool reversed : {false, true}) {
      RangeScan m = reversed ? b : a;
      m.merge(reversed ? a : b);
      EXPECT_EQ(m.min, whole.min) << cut;
      EXPECT_EQ(m.max, whole.max) << cut;
      EXPECT_EQ(m.first_bad, whole.first_bad) << cut;
    }
  }
  // Finite data: the range of the finite values, no bad sample.
  const std::vector<float> f{2.0f, -7.5f, 0.25f};
  const RangeScan s = scan_range(f.data(), 3, 100);
  EXPECT_EQ(s.min, -7.5);
  EXPECT_EQ(s.max, 2.0);
  EXPECT_EQ(s.first_bad, -1);
}

TEST(DataFactors, ScalingFromTheRangeEqualsScalingFromEverySample) {
  for (const double scale : {1.0, 0x1p-40, 0x1p+40, 1e-300, 1e300})
    for (const double offset : {0.0, 1e3}) {
      const std::vector<double> x = noise(5000, scale, offset * scale, 2);
      const RangeScan r = scan_range(x.data(), std::ssize(x), 0);
      const double pre = pre_factor(r);
      double sum = 0;
      for (const double v : x) sum += v * pre;
      const double mean = sum / static_cast<double>(x.size());
      const ChannelFactors f = channel_factors(r, pre, mean);
      double largest = 0;  // max |x pre - mean| over every sample
      for (const double v : x) largest = std::max(largest, std::fabs(v * pre - mean));
      EXPECT_EQ(f.post, power_of_two_outside(largest, kDataBandLow, kDataBandHigh))
          << scale << " " << offset;
      Array out(DType::f32, {1, std::ssize(x)});
      convert_rows(Array::from_values(std::span<const double>(x), {1, std::ssize(x)}), {f}, out);
      for (std::size_t k = 0; k < x.size(); ++k)
        ASSERT_EQ(out.data_as<float>()[k], static_cast<float>((x[k] * pre - mean) * f.post)) << k;
    }
}

TEST(DataFactors, BlockedMeanOfFullNormalizationIsAccurate) {
  // Three channels over 4.5 sum blocks with offsets far above the noise: prepare's removed mean
  // against a long-double sum, within the bound of its order of additions (a block's four chains
  // of kSumBlock / 4 terms, their two levels, then one term per block).
  const std::int64_t C = 3, L = 4 * kSumBlock + kSumBlock / 2;
  std::vector<double> all;
  for (std::int64_t c = 0; c < C; ++c) {
    const std::vector<double> v = noise(L, 1.0, std::pow(10.0, 2 * static_cast<double>(c)), 3 + c);
    all.insert(all.end(), v.begin(), v.end());
  }
  Array templates(DType::f64, {1, C, 16});
  for (std::int64_t i = 0; i < templates.size(); ++i)
    templates.data_as<double>()[i] = std::sin(static_cast<double>(i));
  const Array data = Array::from_values(std::span<const double>(all), {C, L});
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.precision = Precision::Double;
  o.normalize = MfNormalize::Full;
  const Prepared p = prepare(templates, data, o, {});
  for (std::int64_t c = 0; c < C; ++c) {
    long double exact = 0, magnitude = 0;
    for (std::int64_t k = 0; k < L; ++k) {
      exact += all[static_cast<std::size_t>(c * L + k)];
      magnitude += std::fabs(all[static_cast<std::size_t>(c * L + k)]);
    }
    const double terms = static_cast<double>(kSumBlock / 4 + 2 + (L + kSumBlock - 1) / kSumBlock);
    const double bound = 1.01 * terms * 0x1p-53 * static_cast<double>(magnitude / L);
    EXPECT_NEAR(p.channel_offsets[static_cast<std::size_t>(c)],
                static_cast<double>(exact / static_cast<long double>(L)), bound)
        << "channel " << c;
  }
}

}  // namespace
}  // namespace halfscope::mfilter

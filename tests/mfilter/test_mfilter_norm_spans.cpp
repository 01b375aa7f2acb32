// The CPU backends hold the FP64 inverse window norms of one span of correlation times at a time
// (direct_cpu_common.hpp): window_inv_norms over any restart-aligned range equals the same
// windows of the whole channel bit for bit (zeros, runs of equal samples longer than a window
// across the range's start, a large offset, float and double, short and full normalization),
// and every CPU precision gives the same result bits with many short spans as with one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/direct_cpu_common.hpp"
#include "mfilter/level_check.hpp"
#include "mfilter/window_stats.hpp"

namespace halfscope::mfilter {
namespace {

constexpr std::int64_t R = kRecomputeEvery;

// Noise with a stretch of zeros and a run of equal samples that both cross restarts, and a
// loud burst.
template <class T>
std::vector<T> channel(std::int64_t L, std::uint64_t seed, double offset) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<T> x(static_cast<std::size_t>(L));
  for (auto& v : x) v = static_cast<T>(offset + normal(rng));
  const auto set = [&](std::int64_t from, std::int64_t to, auto&& f) {
    for (std::int64_t s = from; s < std::min(to, L); ++s) {
      T& v = x[static_cast<std::size_t>(s)];
      v = f(v);
    }
  };
  set(R - 40, R + 90, [](T) { return T(0); });
  set(2 * R - 70, 2 * R + 30, [&](T) { return static_cast<T>(offset + 0.25); });
  set(3 * R + 5, 3 * R + 25, [](T v) { return v * T(1e6); });
  return x;
}

template <class T>
void expect_ranges_equal_whole(double offset) {
  const std::int64_t L = 4 * R + 300;
  const std::vector<T> x = channel<T>(L, 3, offset);
  for (const std::int64_t K : {1, 24, 64}) {
    for (const MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
      const std::int64_t windows = L - K + 1;
      std::vector<double> whole(static_cast<std::size_t>(windows));
      window_inv_norms(x.data(), L, K, normalize, whole.data(), offset);
      for (std::int64_t first = 0; first < windows; first += R)
        for (const std::int64_t count : {std::int64_t{1}, R - 1, R + 77, windows - first}) {
          if (first + count > windows) continue;
          std::vector<double> part(static_cast<std::size_t>(count));
          window_inv_norms(x.data(), L, K, normalize, offset, first, count, part.data());
          EXPECT_EQ(std::memcmp(part.data(), whole.data() + first,
                                static_cast<std::size_t>(count) * sizeof(double)),
                    0)
              << "K " << K << ", " << mf_normalize_name(normalize) << ", windows [" << first << ", "
              << first + count << ")";
        }
    }
  }
}

TEST(NormSpans, RangesOfWindowsEqualTheWholeChannel) {
  expect_ranges_equal_whole<float>(0.0);
  expect_ranges_equal_whole<double>(0.0);
  expect_ranges_equal_whole<double>(1e3);
}

TEST(NormSpans, RangesMustStartOnARestart) {
  const std::vector<float> x = channel<float>(2 * R, 5, 0.0);
  std::vector<double> out(10);
  EXPECT_THROW(window_inv_norms(x.data(), 2 * R, 8, MfNormalize::Full, 0.0, 1, 10, out.data()),
               Error);
  EXPECT_THROW(window_inv_norms(x.data(), 2 * R, 8, MfNormalize::Full, 0.0, R, R + 1, out.data()),
               Error);
}

// Restores the default span when a test ends, however it ends.
struct ForcedSpan {
  explicit ForcedSpan(std::int64_t corr) { cpu::set_norm_span_for_testing(corr); }
  ~ForcedSpan() { cpu::set_norm_span_for_testing(0); }
  ForcedSpan(const ForcedSpan&) = delete;
  ForcedSpan& operator=(const ForcedSpan&) = delete;
};

TEST(NormSpans, ShortSpansGiveTheSameResultBits) {
  // 3 templates x 3 channels x 40 samples against 5 restarts of data; moveouts spread over 900
  // samples, some windows off either end of the data.
  const std::int64_t T = 3, C = 3, K = 40, L = 5 * R + 123;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  Array templates(DType::f64, {T, C, K}), data(DType::f64, {C, L});
  for (std::int64_t i = 0; i < templates.size(); ++i) templates.data_as<double>()[i] = normal(rng);
  for (std::int64_t c = 0; c < C; ++c) {
    const std::vector<double> x = channel<double>(L, 20 + static_cast<std::uint64_t>(c), 50.0);
    std::copy(x.begin(), x.end(), data.data_as<double>() + c * L);
  }
  MfNetwork network;
  network.moveouts = Array(DType::i64, {T, C});
  network.weights = Array(DType::f64, {T, C});
  for (std::int64_t j = 0; j < T * C; ++j) {
    network.moveouts.data_as<std::int64_t>()[j] = (j * 337) % 900 - 150;
    network.weights.data_as<double>()[j] = 0.5 + 0.1 * static_cast<double>(j % 4);
  }
  for (const Precision precision : {Precision::Double, Precision::Single, Precision::Mixed,
                                    Precision::Split, Precision::BF16, Precision::Half})
    for (const MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full})
      for (const bool stack : {true, false})
        for (const std::int64_t step : {1, 3}) {
          SCOPED_TRACE(std::string(precision_name(precision)) + " " +
                       std::string(mf_normalize_name(normalize)) + (stack ? " stack" : "") +
                       " step " + std::to_string(step));
          MfOptions o;
          o.device = DeviceKind::Cpu;
          o.precision = precision;
          o.normalize = normalize;
          o.network_sum = stack;
          o.step = step;
          // The 1e6 burst moves each channel's mean ~5e4 times the noise from every window's
          // level: 16-bit operands of full normalization would round to that level, which the
          // level check reports (in every span alike) rather than returning garbage.
          if (normalize == MfNormalize::Full && level_rounding_unit(precision) > 0) {
            EXPECT_THROW((void)matched_filter(templates, data, o, network), NumericalError);
            const ForcedSpan forced(700);
            EXPECT_THROW((void)matched_filter(templates, data, o, network), NumericalError);
            continue;
          }
          const Array one = matched_filter(templates, data, o, network);
          for (const std::int64_t span : {cpu::kTimeBlock, std::int64_t{700}}) {
            const ForcedSpan forced(span);
            const Array spans = matched_filter(templates, data, o, network);
            ASSERT_EQ(spans.shape(), one.shape());
            EXPECT_EQ(std::memcmp(spans.data(), one.data(), static_cast<std::size_t>(one.nbytes())),
                      0)
                << "span " << span;
          }
        }
  // The default span covers the spread: about 900 + R samples.
  Dims d;
  d.step = 1;
  EXPECT_EQ(cpu::norm_span(d, 900), cpu::kNormSpan);
  EXPECT_EQ(cpu::norm_span(d, 100 * cpu::kNormSpan), 100 * cpu::kNormSpan + cpu::kTimeBlock * 8);
}

}  // namespace
}  // namespace halfscope::mfilter

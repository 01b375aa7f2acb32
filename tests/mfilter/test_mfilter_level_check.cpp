// The level check of full normalization (mfilter/level_check.hpp): 16-bit data operands round
// relative to each channel's mean level, so a window whose own level sits far from it (a step, a
// zero-filled gap in offset data, the mean moved by a huge burst) has a CC error of up to
// u * sqrt(raw / demeaned energy). Each case here is judged against that bound computed
// independently in FP64 over every window, and calls the check accepts are held to the derived
// CC error bound of mfilter_testing.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/level_check.hpp"
#include "mfilter_testing.hpp"

namespace halfscope {
namespace {

using mftest::Case;

// Noise N(0, 1) with a step of `step` from sample `at` on (channel `ch`).
Case step_case(std::int64_t C, std::int64_t K, std::int64_t L, std::int64_t ch, std::int64_t at,
               double step, std::uint64_t seed) {
  Case c = mftest::random_case(2, C, K, L, seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> normal;
  for (auto& v : c.data) v = normal(rng);
  for (std::int64_t s = at; s < L; ++s) c.data[static_cast<std::size_t>(ch * L + s)] += step;
  return mftest::rounded_to_float(c);  // the reference sees the float32 input the call sees
}

// The first window of the lowest channel whose bound u * kappa exceeds kLevelErrorBound, by
// direct sums in long double over every window of the channel minus its mean (flat windows
// skipped by the backends' rule: K equal samples, or an energy <= kFlatRelative times the sum
// of squares of the caller's samples).
struct Expected {
  std::int64_t channel = -1, window = -1;
  double bound = 0;  // u * kappa there
};
Expected first_over_bound(const Case& c, double u) {
  for (std::int64_t ch = 0; ch < c.C; ++ch) {
    const double* x = c.data.data() + ch * c.L;
    long double mean = 0;
    for (std::int64_t k = 0; k < c.L; ++k) mean += x[k];
    mean /= static_cast<long double>(c.L);
    for (std::int64_t s = 0; s + c.K <= c.L; ++s) {
      long double raw = 0, sum = 0, caller = 0;
      bool equal = true;
      for (std::int64_t k = 0; k < c.K; ++k) {
        equal = equal && x[s + k] == x[s];
        const long double y = x[s + k] - mean;
        raw += y * y;
        sum += y;
        caller += static_cast<long double>(x[s + k]) * x[s + k];
      }
      long double demeaned = 0;
      for (std::int64_t k = 0; k < c.K; ++k) {
        const long double d = x[s + k] - mean - sum / c.K;
        demeaned += d * d;
      }
      if (equal || demeaned <= mfilter::kFlatRelative * caller) continue;
      const double bound = u * std::sqrt(static_cast<double>(raw / demeaned));
      if (bound > mfilter::kLevelErrorBound) return {ch, s, bound};
    }
  }
  return {};
}

MfOptions cpu_options(Precision p, bool network_sum = false) {
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.precision = p;
  o.normalize = MfNormalize::Full;
  o.network_sum = network_sum;
  return o;
}

Array run(const Case& c, const MfOptions& o) {
  return matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                        mftest::to_array(c.data, {c.C, c.L}), o, mftest::network_of(c));
}

// The call's NumericalError message, or nothing when it returns.
std::optional<std::string> error_of(const Case& c, const MfOptions& o) {
  try {
    (void)run(c, o);
  } catch (const NumericalError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

const Precision kChecked[] = {Precision::Half, Precision::Mixed, Precision::BF16};

TEST(MfLevelCheck, AStepOfManyNoiseLevelsIsANumericalErrorNamingTheFirstWindow) {
  // Channel 1 steps by 3e4 noise levels at sample 2000: its windows sit ~1.5e4 noise levels
  // from the channel's mean, bounds of 7 (FP16) and 59 (BF16); channel 0 is clean.
  const Case c = step_case(2, 100, 4000, 1, 2000, 3e4, 5);
  for (const Precision p : kChecked) {
    SCOPED_TRACE(precision_name(p));
    const Expected want = first_over_bound(c, mfilter::level_rounding_unit(p));
    ASSERT_EQ(want.channel, 1);
    const auto message = error_of(c, cpu_options(p));
    ASSERT_TRUE(message.has_value());
    EXPECT_NE(message->find("channel 1, the window of 100 samples at sample " +
                            std::to_string(want.window) + " "),
              std::string::npos)
        << *message;
    for (const char* word : {"full normalization", "split or single", "high-pass"})
      EXPECT_NE(message->find(word), std::string::npos) << *message;
  }
  // The precisions whose operands keep 22 bits and more run, within their derived bounds.
  for (const Precision p : {Precision::Single, Precision::Split, Precision::Double}) {
    const Array got = run(c, cpu_options(p));
    EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Full, 1, false)),
              mftest::dispatched_cc_error_bound(p, c, MfNormalize::Full))
        << precision_name(p);
  }
  // Short normalization divides by the raw norms: its operands' rounding is relative to them.
  MfOptions short_norm = cpu_options(Precision::Mixed);
  short_norm.normalize = MfNormalize::Short;
  EXPECT_NO_THROW((void)run(c, short_norm));
}

TEST(MfLevelCheck, TheReportedWindowIsTheFirstOverTheBoundAcrossRestartSpans) {
  // A plateau of 500 noise levels, K + 20 samples long, starting before, on and past the check's
  // restarts of its running sums (every kLevelCheckSpan windows), for short and long templates.
  // It moves the channel's mean by < 10 noise levels (bounds < 0.04 elsewhere), while windows on
  // it have bounds of 0.24 (FP16) and 1.9 (BF16): the first window over the bound is not window 0.
  constexpr std::int64_t S = mfilter::kLevelCheckSpan;
  for (const std::int64_t K : {7, 64, 300})
    for (const std::int64_t at : {S / 2, S + K - 1, 3 * S + 11}) {
      Case c = step_case(1, K, 16 * S + 500, 0, at, 500.0, 17 + static_cast<std::uint64_t>(K));
      for (std::int64_t s = at + K + 20; s < c.L; ++s) c.data[static_cast<std::size_t>(s)] -= 500.0;
      for (const Precision p : kChecked) {
        SCOPED_TRACE("K " + std::to_string(K) + " step at " + std::to_string(at) + " " +
                     std::string(precision_name(p)));
        const Expected want = first_over_bound(c, mfilter::level_rounding_unit(p));
        const auto message = error_of(c, cpu_options(p));
        if (want.channel < 0) {
          EXPECT_FALSE(message.has_value()) << *message;
          continue;
        }
        ASSERT_GT(want.window, 0);
        ASSERT_TRUE(message.has_value()) << "expected a window over the bound at " << want.window;
        EXPECT_NE(message->find("at sample " + std::to_string(want.window) + " "),
                  std::string::npos)
            << *message << " (expected window " << want.window << ", bound " << want.bound << ")";
      }
    }
}

TEST(MfLevelCheck, StepsBelowTheBoundRunWithinTheDerivedCcErrorBound) {
  // A step of 30 noise levels: bounds ~0.01 (FP16) and ~0.08 (BF16), under kLevelErrorBound.
  const Case c = step_case(2, 100, 4000, 0, 2000, 30.0, 23);
  for (const Precision p : kChecked) {
    SCOPED_TRACE(precision_name(p));
    ASSERT_LT(first_over_bound(c, mfilter::level_rounding_unit(p)).channel, 0);
    const Array got = run(c, cpu_options(p));
    EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Full, 1, false)),
              mftest::dispatched_cc_error_bound(p, c, MfNormalize::Full));
  }
}

TEST(MfLevelCheck, AChannelWeightedZeroEverywhereIsNotChecked) {
  // The stack never reads channel 1 (weight 0 for both templates); per channel it is returned.
  Case c = step_case(2, 50, 3000, 1, 1500, 3e4, 29);
  for (std::int64_t t = 0; t < c.T; ++t) c.weights[static_cast<std::size_t>(t * c.C + 1)] = 0.0;
  const Array stack = run(c, cpu_options(Precision::Mixed, true));
  EXPECT_LE(mftest::max_abs_error(stack, mftest::reference_cc(c, MfNormalize::Full, 1, true)),
            mftest::stack_error_bound(
                c, mftest::dispatched_cc_error_bound(Precision::Mixed, c, MfNormalize::Full)));
  EXPECT_THROW((void)run(c, cpu_options(Precision::Mixed, false)), NumericalError);
  // Weighted by one template only: checked.
  c.weights[1] = 0.5;
  EXPECT_THROW((void)run(c, cpu_options(Precision::Mixed, true)), NumericalError);
}

TEST(MfLevelCheck, ZeroFilledGapsAreFineInDemeanedDataNotInOffsetData) {
  // A gap of zeros (the documented way to mask bad samples) in data around 0 makes flat windows
  // and small bounds at its edges; the same gap in data on a level of 1e4 noise levels makes a
  // step of 1e4 at each edge.
  for (const double level : {0.0, 1e4}) {
    Case c = step_case(1, 64, 5000, 0, 0, level, 31);
    for (std::int64_t s = 2000; s < 2600; ++s) c.data[static_cast<std::size_t>(s)] = 0.0;
    const bool over = first_over_bound(c, 0x1p-11).channel >= 0;
    EXPECT_EQ(over, level != 0.0);
    EXPECT_EQ(error_of(c, cpu_options(Precision::Half)).has_value(), over) << "level " << level;
  }
}

TEST(MfLevelCheck, DetectionIsCheckedLikeTheStack) {
  const Case c = step_case(2, 100, 4000, 1, 2000, 3e4, 37);
  DetectOptions detect;
  detect.threshold = 0.5;
  detect.type = ThresholdType::Absolute;
  EXPECT_THROW((void)matched_filter_detect(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                           mftest::to_array(c.data, {c.C, c.L}),
                                           cpu_options(Precision::BF16, true),
                                           mftest::network_of(c), detect),
               NumericalError);
}

TEST(MfLevelCheck, UnitRoundoffsOfThePrecisions) {
  EXPECT_EQ(mfilter::level_rounding_unit(Precision::Half), 0x1p-11);
  EXPECT_EQ(mfilter::level_rounding_unit(Precision::Mixed), 0x1p-11);
  EXPECT_EQ(mfilter::level_rounding_unit(Precision::BF16), 0x1p-8);
  for (const Precision p : {Precision::Single, Precision::Split, Precision::Double})
    EXPECT_EQ(mfilter::level_rounding_unit(p), 0.0) << precision_name(p);
}

}  // namespace
}  // namespace halfscope

// Detection with EQcorrscan's semantics: the MAD threshold against a direct median, local
// maxima strictly above it, strongest-first declustering with the separation in samples, and the
// end-to-end check on synthetic data: every planted event found at CC > 0.7, none on noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter_testing.hpp"

namespace halfscope {
namespace {

Array stack_of(const std::vector<float>& v, std::int64_t T) {
  return Array::from_values<float>(std::span<const float>(v),
                                   {T, static_cast<std::int64_t>(v.size()) / T});
}

TEST(MfDetect, MadThresholdIsThresholdTimesMedianOfAbsoluteRow) {
  // |row| sorted: 0.1 0.2 0.3 0.4 0.5 0.6 (even count: median (0.3 + 0.4) / 2, as NumPy).
  const std::vector<float> row{-0.3f, 0.1f, 0.6f, -0.2f, 0.5f, 0.4f};
  DetectOptions o;
  o.threshold = 2.0;
  EXPECT_NEAR(mfilter::row_threshold(row.data(), 6, o), 2.0 * 0.35, 1e-7);
  EXPECT_NEAR(mfilter::row_threshold(row.data(), 5, o), 2.0 * 0.3, 1e-7);  // odd: the middle
  o.type = ThresholdType::Absolute;
  EXPECT_EQ(mfilter::row_threshold(row.data(), 6, o), 2.0);
  // On a detection the stored threshold is that value.
  o.type = ThresholdType::Mad;
  o.threshold = 1.5;
  const auto d = detect_peaks(stack_of(row, 1), o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].correlation_index, 2);
  EXPECT_NEAR(d[0].threshold, 1.5 * 0.35, 1e-7);
}

TEST(MfDetect, PeaksAreLocalMaximaOfAbsoluteValueStrictlyAboveThreshold) {
  //                           0     1     2    3     4     5     6    7     8
  const std::vector<float> row{0.0f, 0.9f, 0.5f, 0.0f, -2.0f, 0.0f, 1.0f, 0.2f, 1.0f};
  DetectOptions o;
  o.type = ThresholdType::Absolute;
  o.threshold = 1.0;  // 1.0 itself is not above it
  o.min_separation = 0;
  auto d = detect_peaks(stack_of(row, 1), o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].correlation_index, 4);
  EXPECT_EQ(d[0].value, -2.0);  // signed value kept, found on |x|
  o.threshold = 0.4;
  d = detect_peaks(stack_of(row, 1), o);
  std::vector<std::int64_t> at;
  for (const auto& x : d) at.push_back(x.correlation_index);
  EXPECT_EQ(at, (std::vector<std::int64_t>{1, 4, 6, 8}));  // 2 is above but not a local maximum
}

TEST(MfDetect, DeclusterKeepsStrongestFirstAndDropsWithinSeparation) {
  // Peaks at 10 (0.8), 14 (0.9), 19 (0.85), 30 (0.7); separation 5 samples, step 1:
  // keep 14; drop 10 (distance 4) and 19 (distance 5, within: <=); keep 30.
  std::vector<float> row(40, 0.0f);
  row[10] = 0.8f, row[14] = 0.9f, row[19] = 0.85f, row[30] = 0.7f;
  DetectOptions o;
  o.type = ThresholdType::Absolute;
  o.threshold = 0.5;
  o.min_separation = 5;
  auto d = detect_peaks(stack_of(row, 1), o);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].correlation_index, 14);
  EXPECT_EQ(d[1].correlation_index, 30);
  // With step 2 the separation of 5 samples is 2 correlation times: 10, 14 and 19 all survive
  // (distances 4 and 5 > 2).
  d = detect_peaks(stack_of(row, 1), o, 2);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[2].sample, 19 * 2);
  // Equal values: the earlier one wins.
  std::vector<float> tie(20, 0.0f);
  tie[5] = 0.9f, tie[8] = 0.9f;
  d = detect_peaks(stack_of(tie, 1), o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].correlation_index, 5);
}

TEST(MfDetect, RejectsBadOptionsAndStacks) {
  DetectOptions o;
  o.threshold = -1;
  EXPECT_THROW(detect_peaks(stack_of({1, 2}, 1), o), InvalidInput);
  o.threshold = 1;
  o.min_separation = -3;
  EXPECT_THROW(detect_peaks(stack_of({1, 2}, 1), o), InvalidInput);
  o.min_separation = 1;
  EXPECT_THROW(detect_peaks(Array(DType::f64, {1, 4}), o), InvalidInput);
  EXPECT_THROW(detect_peaks(stack_of({1, 2}, 1), o, 0), InvalidInput);
}

// Three channels, moveouts, noise at 5% of the template amplitude: the stack reaches about
// sum w = 3 at each event; on noise alone |stack| stays near sqrt(3 / K) per channel.
mftest::Case planted_case(bool with_events, std::vector<mftest::PlantedEvent>& events) {
  mftest::Case c = mftest::random_case(2, 3, 64, 6000, 101);
  mftest::randomize_network(c, 0, 40, 5);
  for (auto& w : c.weights) w = 1.0;
  events = {{0, 700, 1.0}, {1, 1500, -0.8}, {0, 3100, 2.0}, {1, 4800, 1.2}};
  mftest::plant_events(c, with_events ? events : std::vector<mftest::PlantedEvent>{}, 0.05, 9);
  return mftest::rounded_to_float(c);
}

TEST(MfDetect, FindsEveryPlantedEventAndNothingOnNoise) {
  for (Precision p : {Precision::Single, Precision::Mixed, Precision::Split}) {
    std::vector<mftest::PlantedEvent> events;
    const mftest::Case c = planted_case(true, events);
    MfOptions o;
    o.device = DeviceKind::Cpu;
    o.method = MfMethod::Direct;
    o.precision = p;
    DetectOptions det;
    det.threshold = 8.0;  // x MAD
    det.min_separation = 64;
    const auto d =
        matched_filter_detect(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                              mftest::to_array(c.data, {c.C, c.L}), o, mftest::network_of(c), det);
    ASSERT_EQ(d.size(), events.size()) << precision_name(p);
    for (std::size_t j = 0; j < events.size(); ++j) {
      const auto it = std::find_if(d.begin(), d.end(), [&](const Detection& x) {
        return x.template_index == events[j].t && x.sample == events[j].sample;
      });
      ASSERT_NE(it, d.end()) << "event " << j << " of template " << events[j].t << " at "
                             << events[j].sample << " not found in " << precision_name(p);
      const Detection& e = *it;
      EXPECT_GT(std::fabs(e.value) / c.C, 0.7);  // mean channel CC above 0.7
      EXPECT_EQ(e.value > 0, events[j].scale > 0);
      EXPECT_EQ(e.channels_used, c.C);
    }
    std::vector<mftest::PlantedEvent> none;
    const mftest::Case noise = planted_case(false, none);
    const auto quiet = matched_filter_detect(mftest::to_array(noise.templates, {c.T, c.C, c.K}),
                                             mftest::to_array(noise.data, {c.C, c.L}), o,
                                             mftest::network_of(noise), det);
    EXPECT_TRUE(quiet.empty()) << quiet.size() << " detections on noise in " << precision_name(p);
  }
}

TEST(MfDetect, ChannelsUsedSkipsZeroWeightsOutsideWindowsAndFlatData) {
  std::vector<mftest::PlantedEvent> events;
  mftest::Case c = planted_case(true, events);
  c.weights[0 * c.C + 1] = 0.0;                             // template 0, channel 1 skipped
  c.moveouts[0 * c.C + 2] = c.L;                            // template 0, channel 2 always outside
  const std::int64_t gap = 1500 + c.moveouts[1 * c.C + 0];  // template 1's window on channel 0
  for (std::int64_t k = 0; k < c.K; ++k) c.data[static_cast<std::size_t>(gap + k)] = 0.0;
  std::vector<Detection> d{{0, 700, 700, 0, 0, 0}, {1, 1500, 1500, 0, 0, 0}};
  MfOptions o;
  o.device = DeviceKind::Cpu;
  mf_count_channels_used(d, mftest::to_array(c.templates, {c.T, c.C, c.K}),
                         mftest::to_array(c.data, {c.C, c.L}), o, mftest::network_of(c));
  EXPECT_EQ(d[0].channels_used, 1);
  EXPECT_EQ(d[1].channels_used, 2);  // channel 0's window is a zero-filled gap
}

}  // namespace
}  // namespace halfscope

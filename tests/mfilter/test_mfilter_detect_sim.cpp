// Detection near the CC 0.7 limit on simulated data (sim::simulate_seismic plants
// events at exact CC 0.72-0.75), the MAD threshold's refusal of a zero median, and the time
// chunk plan detection relies on (equal chunk sizes, a one-correlation halo).
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "detect_testing.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/chunking.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

TEST(MfDetectSim, FindsEveryEventPlantedAtCcJustAboveSevenTenths) {
  for (MfNormalize n : {MfNormalize::Short, MfNormalize::Full}) {
    const sim::SeismicSimulation s = mftest::near_threshold_events(n);
    const mftest::Case c = mftest::case_of(s);
    for (Precision p : {Precision::Double, Precision::Single, Precision::Mixed, Precision::BF16,
                        Precision::Split}) {
      MfOptions o;
      o.device = DeviceKind::Cpu;
      o.method = MfMethod::Direct;
      o.precision = p;
      o.normalize = n;
      DetectOptions det;
      det.threshold = 8.0;  // x median |stack|
      det.min_separation = c.K;
      const auto got = matched_filter_detect(s.templates, s.data, o, mftest::network_of(s), det);
      // The stack is a weighted sum (sum |w| = 1) of per-channel CCs, each within the
      // precision's bound of the planted value (the data are float32-rounded for every
      // precision but double: 2 u_32 relative, inside the FP32 terms of the bound).
      const double bound = mftest::stack_error_bound(
          c, mftest::dispatched_cc_error_bound(p, mftest::rounded_to_float(c), n));
      mftest::expect_planted_events(
          got, s, bound, std::string(precision_name(p)) + " " + std::string(mf_normalize_name(n)));
    }
  }
}

TEST(MfDetectSim, ZeroMadMedianIsANumericalErrorNamingTheTemplate) {
  // Template 1's row is 0 on more than half of its values (a zero-filled day): a MAD threshold
  // of 0 would turn every local maximum into a detection.
  std::vector<float> rows(2 * 9, 0.0f);
  for (int i = 0; i < 9; ++i) rows[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i + 1);
  rows[9 + 2] = 0.5f;
  rows[9 + 6] = -0.4f;
  const Array stack = Array::from_values<float>(std::span<const float>(rows), {2, 9});
  DetectOptions o;
  o.threshold = 3.0;
  try {
    (void)detect_peaks(stack, o);
    ADD_FAILURE() << "no NumericalError for a zero median";
  } catch (const NumericalError& e) {
    const std::string m = e.what();
    for (const char* frag : {"template 1", "median |cc_sum| is 0", "absolute threshold"})
      EXPECT_NE(m.find(frag), std::string::npos) << m;
  }
  // An absolute threshold, or a MAD multiplier of 0 (the caller's explicit choice), is fine.
  o.type = ThresholdType::Absolute;
  o.threshold = 0.45;
  EXPECT_EQ(detect_peaks(stack, o).size(), 2u);  // 0.5 of row 1 and 0.9 of row 0
  o.type = ThresholdType::Mad;
  o.threshold = 0.0;
  EXPECT_NO_THROW((void)detect_peaks(stack, o));
}

TEST(MfDetectSim, TimeChunksAreEqualAndCarryTheirHalo) {
  // n = 19937 with at most 6645 per chunk: 4 chunks of 4985 (4984 for the last), not 3 x 6645
  // and a last chunk of 2 values (whose MAD median would be meaningless).
  const std::int64_t L = 20000, K = 64, n = L - K + 1;
  for (std::int64_t halo : {0, 1}) {
    const auto chunks = mfilter::plan_time_chunks(L, K, 1, n, 0, 30, 6645, halo);
    ASSERT_EQ(chunks.size(), 4u);
    std::int64_t next = 0;
    for (std::size_t j = 0; j < chunks.size(); ++j) {
      const auto& ch = chunks[j];
      EXPECT_EQ(ch.own_begin(), next);
      EXPECT_EQ(ch.own_n_corr(), j + 1 < chunks.size() ? 4985 : n - 3 * 4985);
      EXPECT_EQ(ch.halo_before, j > 0 ? halo : 0);
      EXPECT_EQ(ch.halo_after, j + 1 < chunks.size() ? halo : 0);
      EXPECT_LE(ch.n_corr(), (ch.samples() - K) + 1);  // the backend's window count holds
      next = ch.own_begin() + ch.own_n_corr();
    }
    EXPECT_EQ(next, n);
  }
  // One chunk when everything fits: no halo, the whole row.
  const auto one = mfilter::plan_time_chunks(L, K, 1, n, 0, 30, n, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].n_corr(), n);
}

}  // namespace
}  // namespace halfscope

// CPU direct matched filtering in every precision against the FP64 reference of
// mfilter_testing.hpp, with the error bound derived there from each precision's unit roundoff:
// short / full normalization x per-channel / network x step 1 / 3 x moveouts (negative, beyond
// the end) and weights; the one-channel shapes; flat and zero windows; zero template channels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "halfscope/mfilter.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using mftest::Case;

Array run(const Case& c, Precision p, MfNormalize n, std::int64_t step, bool network,
          bool with_network = true) {
  MfOptions o;
  o.method = MfMethod::Direct;
  o.device = DeviceKind::Cpu;
  o.precision = p;
  o.normalize = n;
  o.step = step;
  o.network_sum = network;
  const DType dt = p == Precision::Double ? DType::f64 : DType::f32;
  return matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}, dt),
                        mftest::to_array(c.data, {c.C, c.L}, dt), o,
                        with_network ? mftest::network_of(c) : MfNetwork{});
}

// The bound a case is held to: the per-channel bound of the precision on the case as dispatch
// hands it to the backend (data demeaned in full normalization), times sum |w| for a stack.
double bound_for(const Case& c, Precision p, MfNormalize n, bool network) {
  const double channel = mftest::dispatched_cc_error_bound(p, c, n);
  return network ? mftest::stack_error_bound(c, channel) : channel;
}

using Param =
    std::tuple<Precision, MfNormalize, bool /*network*/, std::int64_t /*step*/, bool /*moveouts*/>;

class DirectSweep : public ::testing::TestWithParam<Param> {};

TEST_P(DirectSweep, MatchesFp64ReferenceWithinDerivedBound) {
  const auto [p, n, network, step, moveouts] = GetParam();
  // K = 40: two full 16-sample slices and a tail of 8 (the emulation's partial slice).
  Case c = mftest::random_case(3, 3, 40, 400, 1234 + static_cast<std::uint64_t>(step));
  if (moveouts) {
    mftest::randomize_network(c, -30, 60, 99);
    c.moveouts[0] = -1000;    // every window before the data
    c.moveouts[4] = c.L + 5;  // every window after the data
    c.moveouts[5] = -7;       // the first windows before the data, the rest inside
  }
  if (p != Precision::Double) c = mftest::rounded_to_float(c);
  const auto want = mftest::reference_cc(c, n, step, network);
  const Array got = run(c, p, n, step, network);
  const std::int64_t n_corr = mftest::n_corr_of(c.L, c.K, step);
  ASSERT_EQ(got.shape(), network ? Shape({c.T, n_corr}) : Shape({c.T, c.C, n_corr}));
  const double err = mftest::max_abs_error(got, want), bound = bound_for(c, p, n, network);
  EXPECT_LE(err, bound) << precision_name(p) << " " << mf_normalize_name(n);
  RecordProperty("max_error", std::to_string(err));
  RecordProperty("bound", std::to_string(bound));
  // The bound must not be vacuous: the exact answer has |CC| up to 1 (or sum |w| for a stack).
  EXPECT_LT(bound, 0.2);
}

std::string sweep_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [p, n, network, step, moveouts] = info.param;
  return std::string(precision_name(p)) + "_" + std::string(mf_normalize_name(n)) +
         (network ? "_stack" : "_perchannel") + "_step" + std::to_string(step) +
         (moveouts ? "_moveouts" : "_aligned");
}

INSTANTIATE_TEST_SUITE_P(
    EveryCpuPrecision, DirectSweep,
    ::testing::Combine(::testing::Values(Precision::Double, Precision::Single, Precision::Half,
                                         Precision::Mixed, Precision::BF16, Precision::Split),
                       ::testing::Values(MfNormalize::Short, MfNormalize::Full), ::testing::Bool(),
                       ::testing::Values<std::int64_t>(1, 3), ::testing::Bool()),
    sweep_name);

TEST(MfDirect, SplitReachesFp32GradeAccuracy) {
  // The target for split is <= 1e-5 at K = 256 on uniform [-50, 50] data (study 001).
  const Case c = mftest::rounded_to_float(mftest::random_case(2, 1, 256, 2000, 7, 50.0));
  const Array got = run(c, Precision::Split, MfNormalize::Short, 1, true);
  EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Short, 1, true)), 1e-5);
}

TEST(MfDirect, RunningEnergiesSurviveLoudTransientsAcrossRestarts) {
  // 10000 samples (restarts of the running sums at 0, 4096, 8192) with a burst 1e9 times louder
  // than the rest in the middle of the first span: plain running sums would lose the quiet
  // windows after it entirely (2^-53 * 1e12 * K against energies of 1e-6 * K); the compensated
  // sums keep every window to the float32 output's rounding in both normalizations.
  mftest::Case c = mftest::random_case(2, 1, 16, 10000, 61, 1e-3);
  for (std::int64_t s = 1000; s < 1300; ++s) c.data[static_cast<std::size_t>(s)] *= 1e9;
  for (MfNormalize n : {MfNormalize::Short, MfNormalize::Full}) {
    const Array got = run(c, Precision::Double, n, 1, false, false);
    EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, n, 1, false)),
              mftest::cc_error_bound(Precision::Double, c.K))
        << mf_normalize_name(n);
  }
}

TEST(MfDirect, OneChannelShapesMatchThreeDimensionalForm) {
  const Case c = mftest::rounded_to_float(mftest::random_case(4, 1, 24, 300, 5));
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.method = MfMethod::Direct;
  const Array flat =
      matched_filter(mftest::to_array(c.templates, {c.T, c.K}), mftest::to_array(c.data, {c.L}), o);
  ASSERT_EQ(flat.shape(), Shape({c.T, c.L - c.K + 1}));
  const auto want = mftest::reference_cc(c, MfNormalize::Short, 1, true);
  EXPECT_LE(mftest::max_abs_error(flat, want),
            bound_for(c, Precision::Single, MfNormalize::Short, true));
  // Per channel with one channel: (T, 1, n_corr), equal to the stack with weight 1.
  o.network_sum = false;
  const Array per =
      matched_filter(mftest::to_array(c.templates, {c.T, c.K}), mftest::to_array(c.data, {c.L}), o);
  ASSERT_EQ(per.shape(), Shape({c.T, 1, c.L - c.K + 1}));
  EXPECT_EQ(mftest::max_abs_error(per, std::vector<double>(flat.data_as<float>(),
                                                           flat.data_as<float>() + flat.size())),
            0.0);
}

TEST(MfDirect, AutoOnTheCpuRunsDirectSingle) {
  MfOptions o;
  o.device = DeviceKind::Cpu;
  EXPECT_EQ(mf_resolve_method(o, 256), MfMethod::Direct);
  const Case c = mftest::rounded_to_float(mftest::random_case(2, 2, 16, 100, 3));
  const Array got = matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                   mftest::to_array(c.data, {c.C, c.L}), o);
  EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Short, 1, true)),
            bound_for(c, Precision::Single, MfNormalize::Short, true));
}

class FlatWindows : public ::testing::TestWithParam<std::tuple<Precision, MfNormalize>> {};

TEST_P(FlatWindows, ZeroAndConstantWindowsAndZeroTemplatesGiveExactlyZero) {
  const auto [p, n] = GetParam();
  Case c = mftest::random_case(2, 2, 20, 200, 11);
  // Channel 0: samples 50..119 zero (gap filled with zeros); channel 1: 60..139 constant 3.5,
  // which is flat only in full normalization. Template 1, channel 1 is all zeros.
  for (std::int64_t s = 50; s < 120; ++s) c.data[static_cast<std::size_t>(s)] = 0.0;
  for (std::int64_t s = 60; s < 140; ++s) c.data[static_cast<std::size_t>(c.L + s)] = 3.5;
  for (std::int64_t k = 0; k < c.K; ++k) c.templates[static_cast<std::size_t>(3 * c.K + k)] = 0.0;
  if (p != Precision::Double) c = mftest::rounded_to_float(c);
  const Array got = run(c, p, n, 1, false);
  const float* v = got.data_as<float>();
  const std::int64_t nc = c.L - c.K + 1;
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t s = 50; s + c.K <= 120; ++s)
      EXPECT_EQ(v[(t * c.C + 0) * nc + s], 0.0f) << "zero window t=" << t << " s=" << s;
  for (std::int64_t s = 0; s < nc; ++s) EXPECT_EQ(v[(1 * c.C + 1) * nc + s], 0.0f);
  for (std::int64_t s = 60; s + c.K <= 140; ++s) {
    const float got_const = v[(0 * c.C + 1) * nc + s];
    if (n == MfNormalize::Full)
      EXPECT_EQ(got_const, 0.0f) << "constant window s=" << s;
    else  // a constant window correlates with the template's mean: not flat in short mode
      EXPECT_NEAR(got_const, mftest::reference_cc(c, n, 1, false)[static_cast<std::size_t>(nc + s)],
                  bound_for(c, p, n, false));
  }
  for (std::int64_t i = 0; i < got.size(); ++i) ASSERT_TRUE(std::isfinite(v[i]));
}

INSTANTIATE_TEST_SUITE_P(
    EveryCpuPrecision, FlatWindows,
    ::testing::Combine(::testing::Values(Precision::Double, Precision::Single, Precision::Half,
                                         Precision::Mixed, Precision::BF16, Precision::Split),
                       ::testing::Values(MfNormalize::Short, MfNormalize::Full)));

TEST(MfDirect, NetworkStackIsTheWeightedSumOfPerChannelResults) {
  Case c = mftest::rounded_to_float(mftest::random_case(3, 4, 32, 300, 21));
  mftest::randomize_network(c, -20, 40, 8);
  c.weights[2] = 0.0;  // a zero weight skips the channel
  const Array stack = run(c, Precision::Single, MfNormalize::Full, 2, true);
  const Array per = run(c, Precision::Single, MfNormalize::Full, 2, false);
  const std::int64_t n = stack.dim(1);
  std::vector<double> sum(static_cast<std::size_t>(c.T * n), 0.0);
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t ch = 0; ch < c.C; ++ch)
      for (std::int64_t i = 0; i < n; ++i)
        sum[static_cast<std::size_t>(t * n + i)] +=
            c.weights[static_cast<std::size_t>(t * c.C + ch)] *
            per.data_as<float>()[(t * c.C + ch) * n + i];
  // Both sides use the same per-channel values; only the float32 rounding of the stored
  // per-channel CC (u_32 each) and of the stack differ: (sum |w| + 1) u_32 per element.
  EXPECT_LE(mftest::max_abs_error(stack, sum), (mftest::stack_error_bound(c, 1.0) + 1) * 0x1p-24);
}

}  // namespace
}  // namespace halfscope

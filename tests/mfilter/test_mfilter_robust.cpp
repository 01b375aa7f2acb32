// Inputs that stress the bookkeeping and the ranges of the CPU paths, every CPU precision against
// the FP64 reference of mfilter_testing.hpp with the bound derived there:
//  * gaps and constant stretches whose edges sit at the restarts of the running window sums
//    (window_stats.hpp, every kRecomputeEvery = 4096 windows): the exact flatness trackers must
//    slide across a restart like any other window;
//  * data and templates near 1e-21 (FP32 products would be subnormal) and near 1e30 / 1e10
//    (FP32 products would overflow): dispatch scales them, CC must not change;
//  * a DC offset 1e3 times the noise in full normalization: dispatch removes each channel's mean
//    before rounding, so the low precisions err relative to the noise, not to the offset;
//  * an overflowing numerator handed straight to the CPU backend is a NumericalError.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/window_stats.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using mftest::Case;

Array run_direct(const Case& c, Precision p, MfNormalize n) {
  MfOptions o;
  o.method = MfMethod::Direct;
  o.device = DeviceKind::Cpu;
  o.precision = p;
  o.normalize = n;
  o.network_sum = false;
  const DType dt = p == Precision::Double ? DType::f64 : DType::f32;
  return matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}, dt),
                        mftest::to_array(c.data, {c.C, c.L}, dt), o, mftest::network_of(c));
}

bool all_finite(const Array& a) {
  const float* v = a.data_as<float>();
  for (std::int64_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

using Param = std::tuple<Precision, MfNormalize>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(precision_name(std::get<0>(info.param))) + "_" +
         std::string(mf_normalize_name(std::get<1>(info.param)));
}

const auto kEveryCpuPrecision =
    ::testing::Combine(::testing::Values(Precision::Double, Precision::Single, Precision::Half,
                                         Precision::Mixed, Precision::BF16, Precision::Split),
                       ::testing::Values(MfNormalize::Short, MfNormalize::Full));

class RestartEdges : public ::testing::TestWithParam<Param> {};

TEST_P(RestartEdges, GapsAndConstantStretchesAtRestartsMatchTheReference) {
  const auto [p, n] = GetParam();
  constexpr std::int64_t R = mfilter::kRecomputeEvery, K = 16;
  static_assert(R == 4096, "the layout below places its edges at the restarts 4096 and 8192");
  // L = 8800: windows 0 .. 8784, restarts at 0, 4096 and 8192.
  Case c = mftest::random_case(2, 1, K, 2 * R + 608, 77);
  auto x = [&](std::int64_t s) -> double& { return c.data[static_cast<std::size_t>(s)]; };
  // (a) A zero gap that ends at sample R - 1, the last sample of window R - 1 is zero and the
  //     first window of the second span takes in the nonzero sample R + K - 1: the short-mode
  //     count of nonzero samples must grow by one there.
  for (std::int64_t s = R - 60; s < R; ++s) x(s) = 0.0;
  x(R) = 0.6;  // the one sample of window R - K + 1: not tiny, so q stays small
  // (b) A later gap in the same span: its edge windows hold exactly one nonzero sample, which a
  //     count left one too low by (a) would call flat (CC = 0 instead of +-t[k] / |t|).
  for (std::int64_t s = 6000; s < 6100; ++s) x(s) = 0.0;
  x(5999) = -0.7;
  x(6100) = 0.8;
  // (c) A constant stretch covering window 2R - 1 and ending at sample 2R + K - 2: the first
  //     window of the third span ends on a different sample, so it is not flat in full mode
  //     (the run of equal samples must restart at the restart).
  for (std::int64_t s = 2 * R - 30; s <= 2 * R + K - 2; ++s) x(s) = 0.375;
  x(2 * R + K - 1) = -0.5;
  // (d) A zero gap later in the third span, whose edge windows again hold one nonzero sample.
  for (std::int64_t s = 2 * R + 200; s < 2 * R + 300; ++s) x(s) = 0.0;
  x(2 * R + 300) = 0.9;
  if (p != Precision::Double) c = mftest::rounded_to_float(c);

  const auto want = mftest::reference_cc(c, n, 1, false);
  const std::int64_t nc = c.L - c.K + 1;
  // The windows the layout is about are not flat in the reference (else the test could not see
  // a wrong flat decision): one nonzero sample after gap (b) and (d), window 2R in full mode.
  EXPECT_NE(want[static_cast<std::size_t>(6100 - K + 1)], 0.0);
  EXPECT_NE(want[static_cast<std::size_t>(2 * R + 300 - K + 1)], 0.0);
  EXPECT_NE(want[static_cast<std::size_t>(2 * R)], 0.0);
  EXPECT_EQ(want[static_cast<std::size_t>(6010)], 0.0);  // inside gap (b): flat in both modes

  const Array got = run_direct(c, p, n);
  ASSERT_EQ(got.shape(), Shape({c.T, c.C, nc}));
  ASSERT_TRUE(all_finite(got));
  const double bound = mftest::dispatched_cc_error_bound(p, c, n);
  EXPECT_LT(bound, 0.1);  // not vacuous: the wrong answers differ from the right ones by ~0.2-1
  const float* v = got.data_as<float>();
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(static_cast<double>(v[i]) - want[static_cast<std::size_t>(i)]);
    if (!(e <= bound) && wrong++ < 5)
      ADD_FAILURE() << "template " << i / nc << " window " << i % nc << ": got " << v[i]
                    << ", reference " << want[static_cast<std::size_t>(i)] << ", bound " << bound;
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryCpuPrecision, RestartEdges, kEveryCpuPrecision, param_name);

class ExtremeScales : public ::testing::TestWithParam<Param> {};

// A random case with templates times `ts` and data times `xs`.
Case scaled_case(double ts, double xs, std::uint64_t seed, bool to_float) {
  Case c = mftest::random_case(2, 2, 40, 600, seed);
  for (auto& v : c.templates) v *= ts;
  for (auto& v : c.data) v *= xs;
  return to_float ? mftest::rounded_to_float(c) : c;
}

TEST_P(ExtremeScales, TinyAndHugeInputsGiveTheFp64Answer) {
  const auto [p, n] = GetParam();
  // 1e-21 x 1e-21: FP32 products ~1e-42 are subnormal (2^-149 ~ 1.4e-45 absolute, so ~3 digits
  // left). 1e10 x 1e30: products ~1e40 overflow FP32 (3.4e38). Both are float32 inputs. For the
  // FP64 path also 1e150 x 1e200: energies ~1e400 would overflow FP64.
  std::vector<std::pair<double, double>> scales{{1e-21, 1e-21}, {1e10, 1e30}};
  if (p == Precision::Double) scales.emplace_back(1e150, 1e200);
  for (const auto& [ts, xs] : scales) {
    const Case c = scaled_case(ts, xs, 5, p != Precision::Double);
    const Array got = run_direct(c, p, n);
    ASSERT_TRUE(all_finite(got)) << "scales " << ts << " " << xs;
    // q and the full-normalization factor are ratios: the bound does not depend on the scales.
    const double bound = mftest::dispatched_cc_error_bound(p, c, n);
    EXPECT_LT(bound, 0.1);
    EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, n, 1, false)), bound)
        << "scales " << ts << " " << xs;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCpuPrecision, ExtremeScales, kEveryCpuPrecision, param_name);

TEST(MfRobust, NonFiniteNumeratorBypassingDispatchIsANumericalError) {
  // A backend handed unscaled operands (dispatch's scaling bypassed): float32 products
  // 1e30 x 1e30 overflow to inf. The CPU loop must report it, not clamp inf to 1 (or pass NaN).
  mfilter::Dims d;
  d.templates = 1;
  d.channels = 1;
  d.length = 16;
  d.samples = 64;
  d.n_corr = d.samples - d.length + 1;
  d.network_sum = false;
  Array t(DType::f32, {d.length}), x(DType::f32, {d.samples});
  Array out(DType::f32, {1, 1, d.n_corr});
  for (std::int64_t k = 0; k < d.length; ++k) t.data_as<float>()[k] = 1e30f;
  for (std::int64_t k = 0; k < d.samples; ++k) x.data_as<float>()[k] = k % 3 ? 1e30f : -1e30f;
  const std::int64_t moveout = 0;
  const float weight = 1.0f;
  mfilter::HostProblem hp;
  hp.dims = d;
  hp.templates = &t;
  hp.data = &x;
  hp.moveouts = &moveout;
  hp.weights = &weight;
  hp.out = out.data_as<float>();
  for (Precision p : {Precision::Single, Precision::BF16})
    EXPECT_THROW(mfilter::direct_cpu(hp, p), NumericalError) << precision_name(p);
}

class DcOffset : public ::testing::TestWithParam<Precision> {};

TEST_P(DcOffset, FullNormalizationErrsRelativeToTheNoiseNotTheOffset) {
  const Precision p = GetParam();
  // Noise uniform in [-1, 1] on an offset of 1000. Rounded relative to |S| the FP16 and BF16
  // operands would err by ~1000 u (0.5 for FP16, 4 for BF16) in units of the noise, i.e. CC
  // errors ~1e-2..1e-1 against bounds ~1e-3 (mixed) and ~1e-2 (bf16).
  Case c = mftest::random_case(2, 2, 64, 700, 31);
  for (auto& v : c.data) v += 1000.0;
  if (p != Precision::Double) c = mftest::rounded_to_float(c);
  // The raw-window factor a bound without demeaning would need: the offset over the noise.
  EXPECT_GT(mftest::full_normalization_factor(c, MfNormalize::Full), 500.0);
  const double bound = mftest::dispatched_cc_error_bound(p, c, MfNormalize::Full);
  EXPECT_LT(bound, 0.05);
  const Array got = run_direct(c, p, MfNormalize::Full);
  EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Full, 1, false)), bound)
      << precision_name(p);
}

INSTANTIATE_TEST_SUITE_P(EveryCpuPrecision, DcOffset,
                         ::testing::Values(Precision::Double, Precision::Single, Precision::Half,
                                           Precision::Mixed, Precision::BF16, Precision::Split),
                         [](const ::testing::TestParamInfo<Precision>& param_info) {
                           return std::string(precision_name(param_info.param));
                         });

}  // namespace
}  // namespace halfscope

// The CPU emulations follow src/mfilter/emulation.hpp's contract exactly: each numerator equals
// the independent implementation of contract_testing.hpp bit for bit, so the CPU result equals
// contract numerator x FP64 inverse norms up to the float32 rounding of the output and the
// last-bit differences of the two FP64 energy computations (running vs direct sums): 2 u_32 in
// CC units (|CC| <= 1). A wrong scale, rounding or summation order errs by 1e-4 or more (mixed,
// half) or 1e-7 relative with a far larger spread (split), so the comparison can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "contract_testing.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/emulation.hpp"
#include "mfilter_testing.hpp"

namespace halfscope {
namespace {

class Contract : public ::testing::TestWithParam<Precision> {};

// 2^-e with m 2^-e in [0.5, 1) (1 for m == 0), as frexp gives it.
double unit_power_of_two(double m) {
  if (!(m > 0)) return 1.0;
  int e = 0;
  (void)std::frexp(m, &e);
  return std::ldexp(1.0, -e);
}

// What dispatch (src/mfilter/prepare.cpp, short normalization) hands the backends, restated
// from docs/mfilter.md with the same FP64 operations in the same order: each template channel
// times the power of two bringing its maximum into [0.5, 1), then times 1 / sqrt(its energy);
// each data channel whose maximum lies outside [2^-32, 2^32] times the power of two bringing it
// into [0.5, 1) (exact); then rounded to float32.
mftest::Case prepared(mftest::Case c) {
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    double* x = c.templates.data() + j * c.K;
    double m = 0;
    for (std::int64_t k = 0; k < c.K; ++k) m = std::max(m, std::fabs(x[k]));
    const double pre = unit_power_of_two(m);
    double e = 0;
    for (std::int64_t k = 0; k < c.K; ++k) {
      x[k] *= pre;
      e += x[k] * x[k];
    }
    const double unit = 1.0 / std::sqrt(e);
    for (std::int64_t k = 0; k < c.K; ++k) x[k] *= unit;
  }
  for (std::int64_t ch = 0; ch < c.C; ++ch) {
    double* x = c.data.data() + ch * c.L;
    double m = 0;
    for (std::int64_t k = 0; k < c.L; ++k) m = std::max(m, std::fabs(x[k]));
    // Scaled only outside [2^-32, 2^32] (prepare.cpp's kDataBandLow / kDataBandHigh).
    const double scale = m >= 0x1p-32 && m <= 0x1p+32 ? 1.0 : unit_power_of_two(m);
    for (std::int64_t k = 0; k < c.L; ++k) x[k] *= scale;
  }
  return mftest::rounded_to_float(c);
}

TEST_P(Contract, CpuEmulationEqualsIndependentContractImplementation) {
  const Precision p = GetParam();
  // Amplitudes spanning 2^-20 .. 2^20 across the data, so the per-slice scaling matters; every
  // 7th sample 2^-34 below its neighbours, so after scaling it is an FP16 subnormal (the
  // emulation's direct-rounding path); zeros; K = 37 (two slices and a tail of 5).
  mftest::Case c = mftest::random_case(2, 2, 37, 260, 77);
  for (std::int64_t i = 0; i < c.C * c.L; ++i) {
    double& v = c.data[static_cast<std::size_t>(i)];
    v *= std::ldexp(1.0, static_cast<int>((i / 13) % 41) - 20);
    if (i % 7 == 3) v *= 0x1p-34;
    if (i % 53 == 0) v = 0.0;
  }
  c = mftest::rounded_to_float(c);
  // The contract applies to the operands as dispatch hands them to the backend: prepared(c).
  const mftest::Case pc = prepared(c);
  MfOptions o;
  o.method = MfMethod::Direct;
  o.device = DeviceKind::Cpu;
  o.precision = p;
  o.network_sum = false;
  const Array got = matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                   mftest::to_array(c.data, {c.C, c.L}), o);
  std::vector<float> tf(pc.templates.begin(), pc.templates.end());
  std::vector<float> xf(pc.data.begin(), pc.data.end());
  float mt = 0, ms = 0;
  for (float v : tf) mt = std::fmax(mt, std::fabs(v));
  for (float v : xf) ms = std::fmax(ms, std::fabs(v));
  const std::int64_t n = c.L - c.K + 1;
  double worst = 0;
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t ch = 0; ch < c.C; ++ch)
      for (std::int64_t s = 0; s < n; ++s) {
        const float* tp = tf.data() + (t * c.C + ch) * c.K;
        const float* w = xf.data() + ch * c.L + s;
        double et = 0, ex = 0;
        for (std::int64_t k = 0; k < c.K; ++k) {
          et += static_cast<double>(tp[k]) * tp[k];
          ex += static_cast<double>(w[k]) * w[k];
        }
        const double want = mftest::contract_numerator(p, tp, w, c.K, mt, ms) / std::sqrt(et * ex);
        worst = std::fmax(worst, std::fabs(got.data_as<float>()[(t * c.C + ch) * n + s] - want));
      }
  EXPECT_LE(worst, 2 * 0x1p-24) << precision_name(p);
}

INSTANTIATE_TEST_SUITE_P(LowPrecisions, Contract,
                         ::testing::Values(Precision::Half, Precision::Mixed, Precision::BF16,
                                           Precision::Split),
                         [](const auto& param_info) {
                           return std::string(precision_name(param_info.param));
                         });

TEST(MfEmulation, ScaleShiftPutsTheMaximumInTheTopBinadeBelowTwoToFifteen) {
  for (float m : {1e-30f, 3e-8f, 0.75f, 1.0f, 1.5f, 1024.0f, 65504.0f, 3e30f}) {
    const float scaled = std::ldexp(m, mfilter::scale_shift(m));
    EXPECT_GE(scaled, 16384.0f) << m;
    EXPECT_LT(scaled, 32768.0f) << m;
    // Rounded to FP16 it stays finite: one binade of headroom below FP16's maximum.
    EXPECT_TRUE(std::isfinite(static_cast<float>(Half(scaled))));
  }
  EXPECT_EQ(mfilter::scale_shift(0.0f), 0);
  EXPECT_EQ(mfilter::slice_count(16), 1);
  EXPECT_EQ(mfilter::slice_count(17), 2);
}

TEST(MfEmulation, DataShiftsAreSlidingMaximaOfTheRun) {
  const std::vector<float> x{1.0f, -8.0f, 0.5f, 0.25f, 3.0f};
  std::vector<std::int16_t> sh(x.size());
  mfilter::data_shifts(x.data(), 5, 2, sh.data());
  EXPECT_EQ(sh[0], mfilter::scale_shift(8.0f));  // max(|1|, |-8|)
  EXPECT_EQ(sh[1], mfilter::scale_shift(8.0f));  // max(|-8|, 0.5)
  EXPECT_EQ(sh[2], mfilter::scale_shift(0.5f));  // max(0.5, 0.25)
  EXPECT_EQ(sh[3], mfilter::scale_shift(3.0f));  // max(0.25, 3)
  EXPECT_EQ(sh[4], mfilter::scale_shift(3.0f));  // clipped at the end
}

}  // namespace
}  // namespace halfscope

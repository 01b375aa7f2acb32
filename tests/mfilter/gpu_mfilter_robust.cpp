// The GPU methods through the dispatch on the inputs of test_mfilter_robust.cpp: gaps and
// constant stretches at the window statistics' restarts, data and templates near 1e-21 and
// 1e30 / 1e10 (dispatch's scaling keeps FP32 products finite and normal), a DC offset 1e3 times
// the noise in full normalization (dispatch's demeaning), and the streaming of per-channel
// output, full normalization and float64 device data in forced small chunks. Each method is held
// to mfilter_testing.hpp's method_error_bound. Skips without a GPU.
// Built only with CUDA: a build without it has no GPU backends to test.
#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpu_testing.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter/fft_cuda.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using mftest::ForcedChunks;
using mftest::MethodCase;

using mftest::Case;

MfOptions gpu_options(const MethodCase& m, MfNormalize n, bool network) {
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.method = m.method;
  o.precision = m.precision;
  o.normalize = n;
  o.network_sum = network;
  return o;
}

// Per-channel bound of the method on the case (as dispatch hands it over), times sum |w| for a
// stack.
double bound_of(const MethodCase& m, const Case& c, MfNormalize n, bool network) {
  const double channel =
      mftest::method_error_bound(m.method, m.precision, c, n, mfilter::fft_transform_length(c.K));
  return network ? mftest::stack_error_bound(c, channel) : channel;
}

class GpuRobust : public ::testing::TestWithParam<MethodCase> {};

TEST_P(GpuRobust, GapsAndConstantStretchesAtRestartEdges) {
  HS_REQUIRE_GPU();
  // The layout of test_mfilter_robust.cpp's RestartEdges (gap edges at s0 - 1 and s0 + K - 1 of
  // the CPU's restarts 4096 and 8192), which also crosses the GPU statistics' block restarts.
  Case c = mftest::random_case(2, 1, 16, 8800, 77);
  auto x = [&](std::int64_t s) -> double& { return c.data[static_cast<std::size_t>(s)]; };
  for (std::int64_t s = 4096 - 60; s < 4096; ++s) x(s) = 0.0;
  x(4096) = 0.6;
  for (std::int64_t s = 6000; s < 6100; ++s) x(s) = 0.0;
  x(5999) = -0.7;
  x(6100) = 0.8;
  for (std::int64_t s = 8192 - 30; s <= 8192 + 14; ++s) x(s) = 0.375;
  x(8192 + 15) = -0.5;
  c = mftest::rounded_to_float(c);
  for (MfNormalize n : {MfNormalize::Short, MfNormalize::Full}) {
    const MfOptions o = gpu_options(GetParam(), n, false);
    const Array got = matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                     mftest::to_array(c.data, {c.C, c.L}), o);
    EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, n, 1, false)),
              bound_of(GetParam(), c, n, false))
        << mf_normalize_name(n);
  }
}

TEST_P(GpuRobust, TinyAndHugeInputsGiveTheFp64Answer) {
  HS_REQUIRE_GPU();
  // 1e-21 x 1e-21 (FP32 products subnormal) and 1e10 x 1e30 (FP32 products beyond 3.4e38),
  // float32 inputs; the bounds are ratios and do not depend on the scales.
  for (const auto& [ts, xs] : {std::pair{1e-21, 1e-21}, std::pair{1e10, 1e30}}) {
    Case c = mftest::random_case(2, 2, 40, 600, 5);
    for (auto& v : c.templates) v *= ts;
    for (auto& v : c.data) v *= xs;
    c = mftest::rounded_to_float(c);
    for (MfNormalize n : {MfNormalize::Short, MfNormalize::Full}) {
      const Array got =
          matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                         mftest::to_array(c.data, {c.C, c.L}), gpu_options(GetParam(), n, false));
      EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, n, 1, false)),
                bound_of(GetParam(), c, n, false))
          << "scales " << ts << " " << xs << " " << mf_normalize_name(n);
    }
  }
}

TEST_P(GpuRobust, FullNormalizationWithLargeOffsetErrsRelativeToTheNoise) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(2, 2, 64, 700, 31);
  for (auto& v : c.data) v += 1000.0;
  c = mftest::rounded_to_float(c);
  EXPECT_GT(mftest::full_normalization_factor(c, MfNormalize::Full), 500.0);
  const double bound = bound_of(GetParam(), c, MfNormalize::Full, false);
  EXPECT_LT(bound, 0.2);
  const Array got = matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                   mftest::to_array(c.data, {c.C, c.L}),
                                   gpu_options(GetParam(), MfNormalize::Full, false));
  EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, MfNormalize::Full, 1, false)),
            bound);
}

TEST_P(GpuRobust, StreamsPerChannelFullNormalizationAndDoubleDeviceData) {
  HS_REQUIRE_GPU();
  Case c = mftest::rounded_to_float(mftest::random_case(3, 4, 48, 3000, 19));
  mftest::randomize_network(c, -40, 70, 6);
  c.weights[3] = 0.0;  // per-channel output still computes a weight-0 channel
  const MfNetwork net = mftest::network_of(c);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  for (MfNormalize n : {MfNormalize::Short, MfNormalize::Full})
    for (bool network : {false, true}) {
      MfOptions o = gpu_options(GetParam(), n, network);
      o.step = 2;
      const auto want = mftest::reference_cc(c, n, o.step, network);
      const double bound = bound_of(GetParam(), c, n, network);
      const std::string what = std::string(mf_normalize_name(n)) + (network ? " stack" : " per");
      // Host data in one chunk, in chunks of 97 and of 1 correlation time (the T x C rows of
      // the per-channel output scattered chunk by chunk).
      for (std::int64_t forced : {std::int64_t{0}, std::int64_t{97}, std::int64_t{1}}) {
        const ForcedChunks chunks(forced);
        const Array got = matched_filter(t, x, o, net);
        EXPECT_LE(mftest::max_abs_error(got, want), bound) << what << " chunk " << forced;
      }
      // float64 device data: converted (and demeaned / scaled) on the way, result on the device.
      const Array got = matched_filter(
          t, mftest::to_array(c.data, {c.C, c.L}, DType::f64).to(Memory::device), o, net);
      EXPECT_TRUE(got.on_device());
      EXPECT_LE(mftest::max_abs_error(got, want), bound) << what << " f64 device data";
    }
}

INSTANTIATE_TEST_SUITE_P(EveryGpuMethod, GpuRobust, ::testing::ValuesIn(mftest::kEveryGpuMethod),
                         mftest::method_case_name);

}  // namespace
}  // namespace halfscope

#endif  // HALFSCOPE_WITH_CUDA

// The GPU path of the dispatch (src/mfilter/dispatch_cuda.cpp): host data streamed in forced
// small time chunks equals the FP64 reference like one whole chunk does; device data are computed
// in place with the result on the device; detection on the device (MAD per chunk, candidates on
// the GPU, exact declustering on the host) finds the planted events. Each method is held to
// mfilter_testing.hpp's method_error_bound. Skips without a GPU.
// Built only with CUDA: a build without it has no GPU backends to test.
#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <gtest/gtest.h>

#include <algorithm>
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

class GpuDispatch : public ::testing::TestWithParam<MethodCase> {};

TEST_P(GpuDispatch, ChunkedHostDataMatchesReference) {
  HS_REQUIRE_GPU();
  const auto [method, precision] = GetParam();
  mftest::Case c = mftest::rounded_to_float(mftest::random_case(3, 4, 48, 3000, 17));
  mftest::randomize_network(c, -40, 70, 4);
  c.moveouts[1] = c.L + 1;  // a channel always after the data
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.method = method;
  o.precision = precision;
  o.step = 3;
  const double bound =
      mftest::stack_error_bound(c, mftest::method_error_bound(method, precision, c, o.normalize,
                                                              mfilter::fft_transform_length(c.K)));
  const auto want = mftest::reference_cc(c, o.normalize, o.step, true);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  for (std::int64_t forced : {std::int64_t{0}, std::int64_t{97}, std::int64_t{1}}) {
    ForcedChunks chunks(forced);
    const Array got = matched_filter(t, x, o, mftest::network_of(c));
    EXPECT_FALSE(got.on_device());
    EXPECT_LE(mftest::max_abs_error(got, want), bound)
        << mf_method_name(method) << " chunk " << forced;
  }
}

TEST_P(GpuDispatch, DeviceDataStaysOnTheDevice) {
  HS_REQUIRE_GPU();
  const auto [method, precision] = GetParam();
  const mftest::Case c = mftest::rounded_to_float(mftest::random_case(2, 2, 32, 900, 23));
  MfOptions o;
  o.method = method;
  o.precision = precision;
  o.network_sum = false;
  const Array got = matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                   mftest::to_array(c.data, {c.C, c.L}).to(Memory::device), o);
  EXPECT_TRUE(got.on_device());
  EXPECT_LE(mftest::max_abs_error(got, mftest::reference_cc(c, o.normalize, 1, false)),
            mftest::method_error_bound(method, precision, c, o.normalize,
                                       mfilter::fft_transform_length(c.K)));
}

INSTANTIATE_TEST_SUITE_P(EveryGpuMethod, GpuDispatch, ::testing::ValuesIn(mftest::kEveryGpuMethod),
                         mftest::method_case_name);

TEST(GpuDetect, FindsPlantedEventsInChunksLikeTheCpu) {
  HS_REQUIRE_GPU();
  mftest::Case c = mftest::random_case(2, 3, 64, 20000, 31);
  mftest::randomize_network(c, 0, 30, 2);
  for (auto& w : c.weights) w = 1.0;
  const std::vector<mftest::PlantedEvent> events{
      {0, 1000, 1.0}, {1, 4000, -1.5}, {0, 9000, 0.7}, {1, 15000, 1.0}};
  mftest::plant_events(c, events, 0.05, 3);
  c = mftest::rounded_to_float(c);
  MfOptions o;
  o.precision = Precision::Split;
  DetectOptions det;
  det.threshold = 8.0;
  det.min_separation = 64;
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  for (std::int64_t forced : {std::int64_t{0}, std::int64_t{5000}}) {
    ForcedChunks chunks(forced);
    o.device = DeviceKind::Cuda;
    const auto got = matched_filter_detect(t, x, o, mftest::network_of(c), det);
    ASSERT_EQ(got.size(), events.size()) << "chunk " << forced;
    for (const auto& e : events)
      EXPECT_TRUE(std::any_of(got.begin(), got.end(),
                              [&](const Detection& d) {
                                return d.template_index == e.t && d.sample == e.sample &&
                                       d.channels_used == c.C && std::fabs(d.value) / c.C > 0.7;
                              }))
          << "event of template " << e.t << " at " << e.sample;
  }
  // The device stack's detection equals the host's on the same stack.
  o.device = DeviceKind::Cuda;
  const Array stack = matched_filter(t, x.to(Memory::device), o, mftest::network_of(c));
  const auto on_device = detect_peaks(stack, det);
  const auto on_host = detect_peaks(stack.to(Memory::host), det);
  ASSERT_EQ(on_device.size(), on_host.size());
  for (std::size_t j = 0; j < on_host.size(); ++j) {
    EXPECT_EQ(on_device[j].template_index, on_host[j].template_index);
    EXPECT_EQ(on_device[j].correlation_index, on_host[j].correlation_index);
    EXPECT_NEAR(on_device[j].threshold, on_host[j].threshold, 1e-12 * on_host[j].threshold);
  }
}

}  // namespace
}  // namespace halfscope

#endif  // HALFSCOPE_WITH_CUDA

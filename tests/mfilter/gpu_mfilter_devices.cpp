// Matched filtering spread over several CUDA devices (MfOptions::devices): the merged result is
// the one-device result bit for bit (templates are independent and every group runs the same
// kernels on the same data), per channel and stacked, for the tensor and FFT methods, and so are
// the detections of matched_filter_detect. On a one-GPU machine the device is listed twice, which
// runs the same threads, groups and merge; with several GPUs every device of the host is used.
// Bad device lists are InvalidInput naming the index.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter_testing.hpp"

namespace halfscope {
namespace {

#if HALFSCOPE_WITH_CUDA

/// Every device of the host, or device 0 twice on a one-GPU host.
std::vector<int> all_devices() {
  int count = 0;
  HS_CUDA_CHECK(cudaGetDeviceCount(&count));
  std::vector<int> d;
  for (int i = 0; i < count; ++i) d.push_back(i);
  if (count == 1) d.push_back(0);
  return d;
}

bool bitwise_equal(const Array& a, const Array& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.nbytes())) == 0;
}

struct DevicesCase {
  MfMethod method;
  Precision precision;
  bool network;
};

class MfilterDevicesGpu : public ::testing::TestWithParam<DevicesCase> {};

TEST_P(MfilterDevicesGpu, MergedRowsEqualTheOneDeviceResultBitForBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  // 7 templates: groups of unequal size (4 + 3 on two devices).
  mftest::Case c = mftest::random_case(7, 3, 48, 6000, 21);
  mftest::randomize_network(c, -20, 60, 22);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.method = GetParam().method;
  o.precision = GetParam().precision;
  o.network_sum = GetParam().network;
  o.step = 2;
  const Array one = matched_filter(t, x, o, mftest::network_of(c));
  o.devices = all_devices();
  const Array many = matched_filter(t, x, o, mftest::network_of(c));
  EXPECT_TRUE(bitwise_equal(one, many)) << o.devices.size() << " devices";
}

INSTANTIATE_TEST_SUITE_P(Methods, MfilterDevicesGpu,
                         ::testing::Values(DevicesCase{MfMethod::Tensor, Precision::Split, true},
                                           DevicesCase{MfMethod::Tensor, Precision::Mixed, false},
                                           DevicesCase{MfMethod::FFT, Precision::Single, true},
                                           DevicesCase{MfMethod::Naive, Precision::Single, false}),
                         [](const auto& test) {
                           return std::string(mf_method_name(test.param.method)) + "_" +
                                  std::string(precision_name(test.param.precision)) +
                                  (test.param.network ? "_network" : "_per_channel");
                         });

TEST(MfilterDevicesGpu, DetectionsEqualTheOneDeviceDetections) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  mftest::Case c = mftest::random_case(5, 4, 64, 20000, 31);
  mftest::randomize_network(c, 0, 40, 32);
  mftest::plant_events(c, {{0, 1000, 1.0}, {2, 7000, 1.0}, {4, 15000, 1.0}, {1, 9000, 1.0}}, 0.05,
                       33);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.precision = Precision::Split;
  DetectOptions d;
  d.threshold = 10;
  d.min_separation = 200;
  const auto one = matched_filter_detect(t, x, o, mftest::network_of(c), d);
  o.devices = all_devices();
  const auto many = matched_filter_detect(t, x, o, mftest::network_of(c), d);
  ASSERT_GE(one.size(), 4u);  // every planted event is found
  ASSERT_EQ(one.size(), many.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].template_index, many[i].template_index);
    EXPECT_EQ(one[i].correlation_index, many[i].correlation_index);
    EXPECT_EQ(one[i].value, many[i].value);
    EXPECT_EQ(one[i].channels_used, many[i].channels_used);
  }
}

TEST(MfilterDevicesGpu, BadDeviceListsNameTheIndex) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const mftest::Case c = mftest::random_case(2, 2, 16, 400, 41);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o;
  o.device = DeviceKind::Cuda;
  int count = 0;
  HS_CUDA_CHECK(cudaGetDeviceCount(&count));
  o.devices = {0, count};
  try {
    (void)matched_filter(t, x, o);
    FAIL() << "a device beyond the host's must be rejected";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device " + std::to_string(count)), std::string::npos)
        << e.what();
  }
  if (count > 1) {  // device data cannot be spread over other devices
    o.devices = {0, 1};
    EXPECT_THROW((void)matched_filter(t, x.to(Memory::device), o), InvalidInput);
  }
}

#endif

}  // namespace
}  // namespace halfscope

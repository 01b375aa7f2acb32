// Matched filtering spread over several CUDA devices (MfOptions::devices). With the data placed
// on the devices (the default when they fit) the merged result and the detections equal the same
// call on one listed device bit for bit for the direct methods (templates are independent,
// groups are aligned to the tensor kernel's 16-template tiles and tile time by the whole call's
// moveout spread, every group sees the whole data; FFT within its bound); with host data streamed
// in forced time chunks each group plans its own chunks, so the rows agree with a call without
// devices within the method's error bound. On a one-GPU machine the device is listed twice (the
// same threads, groups and merge); with several GPUs every device of the host is used. Bad device
// lists are InvalidInput naming the index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter_testing.hpp"
#if HALFSCOPE_WITH_CUDA
#include "mfilter/fft_cuda.hpp"
#endif

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

/// 40 templates (groups of 16, 16, 8 or 32, 8: unequal, aligned to the tensor kernel's tiles)
/// over data whose amplitude jumps by powers of two every 64 samples (so the FP16 staging scale
/// of the tensor kernel's tiles varies along the data), with moveouts and weights.
mftest::Case varied_case(std::uint64_t seed, std::int64_t templates = 40) {
  mftest::Case c = mftest::random_case(templates, 3, 48, 6000, seed);
  mftest::randomize_network(c, -20, 60, seed + 1);
  std::mt19937_64 rng(seed + 2);
  std::uniform_int_distribution<int> e(-6, 6);
  for (std::int64_t b = 0; b < c.C * c.L; b += 64) {
    const double scale = std::ldexp(1.0, e(rng));
    for (std::int64_t k = b; k < std::min(b + 64, c.C * c.L); ++k)
      c.data[static_cast<std::size_t>(k)] *= scale;
  }
  return c;
}

struct DevicesCase {
  MfMethod method;
  Precision precision;
  bool network;
};

std::string devices_case_name(const ::testing::TestParamInfo<DevicesCase>& test) {
  return std::string(mf_method_name(test.param.method)) + "_" +
         std::string(precision_name(test.param.precision)) +
         (test.param.network ? "_network" : "_per_channel");
}

class MfilterDevicesGpu : public ::testing::TestWithParam<DevicesCase> {
 protected:
  MfOptions options() const {
    MfOptions o;
    o.device = DeviceKind::Cuda;
    o.method = GetParam().method;
    o.precision = GetParam().precision;
    o.network_sum = GetParam().network;
    o.step = 2;
    return o;
  }
};

// The error bound of a devices call against another call of the same method: twice the bound of
// one result against the exact stack (each is within it).
double pair_bound(const mftest::Case& c, const MfOptions& o) {
  const double per_channel =
      mftest::method_error_bound(o.method, *o.precision, mftest::rounded_to_float(c),
                                 MfNormalize::Short, mfilter::fft_transform_length(c.K));
  return 2 * (o.network_sum ? mftest::stack_error_bound(c, per_channel) : per_channel);
}

double worst_difference(const Array& a, const Array& b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.size(); ++i)
    worst = std::max(worst,
                     std::fabs(static_cast<double>(a.data_as<float>()[i]) - b.data_as<float>()[i]));
  return worst;
}

// The data placed on the devices (the default whenever they fit): the merged rows are those of
// the same call on one listed device, bit for bit, for the direct methods (each group computes
// its templates' rows with the one-device call's tiles: the tensor kernel's tiling follows the
// whole call's moveout spread); FFT's batched cuFFT transforms round differently with the batch
// (the group's template count), so its rows agree within the method's bound.
TEST_P(MfilterDevicesGpu, MergedRowsEqualOneListedDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const mftest::Case c = varied_case(21);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o = options();
  o.devices = {0};
  const Array one = matched_filter(t, x, o, mftest::network_of(c));
  o.devices = all_devices();
  const Array many = matched_filter(t, x, o, mftest::network_of(c));
  ASSERT_EQ(one.shape(), many.shape());
  if (o.method == MfMethod::FFT)
    EXPECT_LE(worst_difference(one, many), pair_bound(c, o)) << o.devices.size() << " devices";
  else
    EXPECT_TRUE(bitwise_equal(one, many)) << o.devices.size() << " devices";
}

INSTANTIATE_TEST_SUITE_P(Methods, MfilterDevicesGpu,
                         ::testing::Values(DevicesCase{MfMethod::Tensor, Precision::Split, true},
                                           DevicesCase{MfMethod::Tensor, Precision::Mixed, false},
                                           DevicesCase{MfMethod::Tensor, Precision::Mixed, true},
                                           DevicesCase{MfMethod::FFT, Precision::Single, true},
                                           DevicesCase{MfMethod::Naive, Precision::Single, false}),
                         devices_case_name);

// Host data streamed by every device in forced time chunks (the path of data too large to place
// on the devices): each group plans its own chunks, so the rows equal a call without devices to
// within the method's error bound (twice the bound of one result against the exact stack).
class MfilterDevicesStreamingGpu : public MfilterDevicesGpu {};

TEST_P(MfilterDevicesStreamingGpu, AgreesWithNoDevicesWithinTheMethodsBound) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const mftest::Case c = varied_case(51);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  const mftest::ForcedChunks chunks(700);
  MfOptions o = options();
  const Array one = matched_filter(t, x, o, mftest::network_of(c));
  o.devices = all_devices();
  const Array many = matched_filter(t, x, o, mftest::network_of(c));
  ASSERT_EQ(one.shape(), many.shape());
  EXPECT_LE(worst_difference(one, many), pair_bound(c, o));
}

INSTANTIATE_TEST_SUITE_P(Methods, MfilterDevicesStreamingGpu,
                         ::testing::Values(DevicesCase{MfMethod::Tensor, Precision::Split, true},
                                           DevicesCase{MfMethod::Naive, Precision::Single, false}),
                         devices_case_name);

TEST(MfilterDevicesGpu, DetectionsEqualOneListedDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  mftest::Case c = mftest::random_case(40, 4, 64, 20000, 31);
  mftest::randomize_network(c, 0, 40, 32);
  mftest::plant_events(c, {{0, 1000, 1.0}, {21, 7000, 1.0}, {39, 15000, 1.0}, {17, 9000, 1.0}},
                       0.05, 33);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.precision = Precision::Split;
  o.devices = {0};
  DetectOptions d;
  d.type = ThresholdType::Absolute;
  // A planted copy (noise 0.05 against unit-amplitude templates) stacks to ~sum_c w[t, c]: the
  // threshold sits below the weakest planted template's sum, so every event is found.
  double weakest = 1e300;
  for (const std::int64_t tp : {0, 21, 39, 17}) {
    double sum = 0;
    for (std::int64_t ch = 0; ch < c.C; ++ch)
      sum += c.weights[static_cast<std::size_t>(tp * c.C + ch)];
    weakest = std::min(weakest, sum);
  }
  d.threshold = 0.9 * weakest;
  d.min_separation = 200;
  // Whole stacks (one chunk), then time cut into chunks of 2849 correlation times as a day of
  // data is (kDetectChunkCorrelations): every group cuts time as the whole call does.
  for (const std::int64_t per : {std::int64_t{0}, std::int64_t{3000}}) {
    const mftest::ForcedDetectChunks chunks(per);
    o.devices = {0};
    const auto one = matched_filter_detect(t, x, o, mftest::network_of(c), d);
    o.devices = all_devices();
    const auto many = matched_filter_detect(t, x, o, mftest::network_of(c), d);
    ASSERT_GE(one.size(), 4u) << per;  // every planted event is found
    ASSERT_EQ(one.size(), many.size()) << per;
    for (std::size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(one[i].template_index, many[i].template_index) << per;
      EXPECT_EQ(one[i].correlation_index, many[i].correlation_index) << per;
      EXPECT_EQ(one[i].value, many[i].value) << per;
      EXPECT_EQ(one[i].channels_used, many[i].channels_used) << per;
    }
  }
}

// The mixed / bf16 network stack at step 1 runs the wgmma kernel on compute capability 9.0, whose
// moveout spans and data scales are per 64 templates: such calls split their templates over
// devices in multiples of 64, so each group runs that kernel on the whole call's groups. 150
// templates: groups of 128 and 22 on two devices, one of 150 on one; on compute capability 9.0
// both equal the call without devices (the kernel over all 150) bit for bit.
TEST(MfilterDevicesGpu, WgmmaGroupsEqualOneListedDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const mftest::Case c = varied_case(61, 150);
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array x = mftest::to_array(c.data, {c.C, c.L});
  cudaDeviceProp prop{};
  HS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const bool sm90 = prop.major == 9 && prop.minor == 0;
  for (const Precision precision : {Precision::Mixed, Precision::BF16}) {
    MfOptions o;
    o.device = DeviceKind::Cuda;
    o.method = MfMethod::Tensor;
    o.precision = precision;
    o.network_sum = true;
    const Array none = matched_filter(t, x, o, mftest::network_of(c));
    o.devices = {0};
    const Array one = matched_filter(t, x, o, mftest::network_of(c));
    o.devices = all_devices();
    const Array many = matched_filter(t, x, o, mftest::network_of(c));
    const std::string what(precision_name(precision));
    EXPECT_TRUE(bitwise_equal(one, many)) << what;
    EXPECT_LE(worst_difference(one, none), pair_bound(c, o)) << what;
    if (sm90) {
      EXPECT_TRUE(bitwise_equal(none, many)) << what << ": the wgmma kernel in every group";
    }
  }
  // A moveout spread of 1000 in the last 64-template group (templates 128..149, channel 0) is too
  // long for the wgmma kernel's shared memory: the call without devices falls back to the mma.sync
  // kernel, and so must the group of templates 0..127, whose own spreads would fit.
  mftest::Case wide = c;
  for (std::int64_t tp = 128; tp < wide.T; ++tp)
    wide.moveouts[static_cast<std::size_t>(tp * wide.C)] = tp % 2 == 0 ? 0 : 1000;
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.method = MfMethod::Tensor;
  o.precision = Precision::Mixed;
  o.network_sum = true;
  o.devices = {0};
  const Array one = matched_filter(t, x, o, mftest::network_of(wide));
  o.devices = all_devices();
  const Array many = matched_filter(t, x, o, mftest::network_of(wide));
  EXPECT_TRUE(bitwise_equal(one, many)) << "a spread beyond the wgmma kernel in one group";
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

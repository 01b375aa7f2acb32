// Dispatch's preparation of device data (src/mfilter/prepare.cpp, prepare_cuda.cu): statistics
// and the shift and power-of-two scaling computed on the device must give what the host path
// gives for the same values on the host. Channels at different scales (in band, 1e-21, 1e30 and,
// for float64, 1e300, which needs the second, pre-scaled pass), short and full normalization,
// float32 and float64 data; non-finite device data must fail with the host's exact message.
// Skips without a GPU.
//
// Tolerances. Short normalization: no mean, and pre/post are powers of two, so every prepared
// value is the same single rounding of x * 2^e on both paths: bitwise equality. Full
// normalization: the host sums the L scaled samples recursively (error <= gamma_L sum |x|, i.e.
// <= L u_64 max |x| to first order), the device with compensated sums (error <= 2 u_64 |sum| +
// O(L u_64^2) sum |x|), so the two means differ by at most (L + 2) u_64 max |x| (times 1.01 for
// the second-order terms); a prepared value (x pre - mean) post then differs by that difference
// times post plus one rounding of the storage type on each side: 2 u_store max |prepared| (as
// the host's storage rounding of a value within the mean bound can differ by one unit). CC then
// agree within the method's bound (mfilter_testing.hpp's method_error_bound) against the FP64
// reference on both paths, and tensor and naive give bitwise equal results on both paths.
// Built only with CUDA: a build without it has no GPU backends to test.
#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/mfilter.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter/fft_cuda.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using mftest::Case;

constexpr double kU64 = 0x1p-53;

MfOptions gpu_options(MfMethod m, MfNormalize n) {
  MfOptions o;
  o.device = DeviceKind::Cuda;
  o.method = m;
  o.normalize = n;
  o.network_sum = false;
  return o;
}

// Three channels, 2 templates x K = 32, L = 3000, channel c scaled by scales[c].
Case scaled_case(const std::vector<double>& scales, std::uint64_t seed) {
  const auto C = static_cast<std::int64_t>(scales.size());
  Case c = mftest::random_case(2, C, 32, 3000, seed);
  for (std::int64_t ch = 0; ch < C; ++ch)
    for (std::int64_t k = 0; k < c.L; ++k)
      c.data[static_cast<std::size_t>(ch * c.L + k)] =
          (c.data[static_cast<std::size_t>(ch * c.L + k)] + 0.25) *
          scales[static_cast<std::size_t>(ch)];  // + 0.25: a mean for full normalization
  return c;
}

std::vector<double> host_values(const Array& a) {
  const Array h = a.to(Memory::host).astype(DType::f64);
  return {h.data_as<double>(), h.data_as<double>() + h.size()};
}

struct PrepCase {
  DType dtype;
  MfNormalize normalize;
};

class GpuPrepare : public ::testing::TestWithParam<PrepCase> {};

// prepare() on device data against prepare() on the same host data: offsets and prepared values.
TEST_P(GpuPrepare, DeviceStatisticsMatchTheHostPath) {
  HS_REQUIRE_GPU();
  const PrepCase pc = GetParam();
  std::vector<double> scales{1.0, 1e-21, 1e30};
  if (pc.dtype == DType::f64) scales.push_back(1e300);
  const Case c = scaled_case(scales, 11);
  const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array host = mftest::to_array(c.data, {c.C, c.L}, pc.dtype);
  const Array device = host.to(Memory::device);
  for (MfMethod m : {MfMethod::Tensor, MfMethod::Naive}) {
    const MfOptions o = gpu_options(m, pc.normalize);
    const mfilter::Prepared ph = mfilter::prepare(templates, host, o, {});
    const mfilter::Prepared pd = mfilter::prepare(templates, device, o, {});
    ASSERT_TRUE(pd.data.on_device());
    ASSERT_EQ(pd.data.dtype(), ph.data.dtype());
    ASSERT_EQ(pd.data.shape(), ph.data.shape());
    const std::vector<double> a = host_values(ph.data), b = host_values(pd.data);
    const double u_store = ph.data.dtype() == DType::f32 ? 0x1p-24 : kU64;
    for (std::int64_t ch = 0; ch < c.C; ++ch) {
      const auto ci = static_cast<std::size_t>(ch);
      // Largest |x| and |prepared| of the channel, and the smallest and largest x.
      double max_in = 0, max_out = 0;
      std::int64_t lo = 0, hi = 0;
      for (std::int64_t k = 0; k < c.L; ++k) {
        const double x = host.at_as_double(ch * c.L + k);
        max_in = std::max(max_in, std::fabs(x));
        max_out = std::max(max_out, std::fabs(a[static_cast<std::size_t>(ch * c.L + k)]));
        if (x < host.at_as_double(ch * c.L + lo)) lo = k;
        if (x > host.at_as_double(ch * c.L + hi)) hi = k;
      }
      // pre * post, a power of two: the slope of prepared against x between the extremes
      // (accurate to a few roundings, so its nearest power of two is exact).
      const double slope = (a[static_cast<std::size_t>(ch * c.L + hi)] -
                            a[static_cast<std::size_t>(ch * c.L + lo)]) /
                           (host.at_as_double(ch * c.L + hi) - host.at_as_double(ch * c.L + lo));
      const double scale = std::exp2(std::round(std::log2(slope)));
      const double mean_tol = 1.01 * static_cast<double>(c.L + 2) * kU64 * max_in * scale;
      if (pc.normalize == MfNormalize::Short) {
        EXPECT_EQ(pd.channel_offsets[ci], 0.0);
        EXPECT_EQ(ph.channel_offsets[ci], 0.0);
      } else {
        EXPECT_NE(pd.channel_offsets[ci], 0.0) << "channel " << ch;
        EXPECT_NEAR(pd.channel_offsets[ci], ph.channel_offsets[ci], mean_tol) << "channel " << ch;
      }
      const double tol =
          pc.normalize == MfNormalize::Short ? 0.0 : mean_tol + 2 * u_store * max_out;
      double worst = 0;
      for (std::int64_t k = 0; k < c.L; ++k) {
        const auto i = static_cast<std::size_t>(ch * c.L + k);
        worst = std::max(worst, std::fabs(a[i] - b[i]));
      }
      EXPECT_LE(worst, tol) << mf_method_name(m) << ", channel " << ch;
    }
  }
}

// matched_filter on device data against the same call on host data and the FP64 reference.
TEST_P(GpuPrepare, MatchedFilterOnDeviceDataEqualsHostData) {
  HS_REQUIRE_GPU();
  const PrepCase pc = GetParam();
  const Case c = scaled_case({1.0, 1e-21, 1e30}, 23);
  const Case seen = pc.dtype == DType::f32 ? mftest::rounded_to_float(c) : c;
  const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array host = mftest::to_array(c.data, {c.C, c.L}, pc.dtype);
  const Array device = host.to(Memory::device);
  const std::vector<double> ref = mftest::reference_cc(seen, pc.normalize, 1, false);
  for (MfMethod m : {MfMethod::Tensor, MfMethod::Naive}) {
    const MfOptions o = gpu_options(m, pc.normalize);
    const Array from_host = matched_filter(templates, host, o).to(Memory::host);
    const Array from_device = matched_filter(templates, device, o);
    ASSERT_TRUE(from_device.on_device());
    const Array got = from_device.to(Memory::host);
    const Precision p = mf_default_precision(m);
    const double bound =
        mftest::method_error_bound(m, p, seen, pc.normalize, mfilter::fft_transform_length(c.K));
    EXPECT_LE(mftest::max_abs_error(got, ref), bound) << mf_method_name(m);
    EXPECT_LE(mftest::max_abs_error(from_host, ref), bound) << mf_method_name(m);
    ASSERT_EQ(got.size(), from_host.size());
    const float* x = got.data_as<float>();
    const float* y = from_host.data_as<float>();
    double worst = 0;
    for (std::int64_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
    // The same prepared operands (full normalization: up to the last bits of the FP64 mean,
    // far below the FP32 operands' rounding) and the same kernels: bitwise the same CC (as in
    // all eight cases on an H200).
    EXPECT_EQ(worst, 0.0) << mf_method_name(m);
  }
}

std::string prep_case_name(const ::testing::TestParamInfo<PrepCase>& param_info) {
  return std::string(dtype_name(param_info.param.dtype)) + "_" +
         std::string(mf_normalize_name(param_info.param.normalize));
}

INSTANTIATE_TEST_SUITE_P(Inputs, GpuPrepare,
                         ::testing::Values(PrepCase{DType::f32, MfNormalize::Short},
                                           PrepCase{DType::f32, MfNormalize::Full},
                                           PrepCase{DType::f64, MfNormalize::Short},
                                           PrepCase{DType::f64, MfNormalize::Full}),
                         prep_case_name);

// In-band float32 device data in short normalization need nothing: computed in place, no copy.
TEST(GpuPrepareInPlace, InBandFloat32ShortIsNotCopied) {
  HS_REQUIRE_GPU();
  const Case c = scaled_case({1.0, 3.0}, 5);
  const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array device = mftest::to_array(c.data, {c.C, c.L}).to(Memory::device);
  const mfilter::Prepared p =
      mfilter::prepare(templates, device, gpu_options(MfMethod::Tensor, MfNormalize::Short), {});
  EXPECT_EQ(p.data.buffer(), device.buffer());
  // Out of band (channel 1 at 1e-21): a new, scaled array.
  const Case s = scaled_case({1.0, 1e-21}, 5);
  const Array scaled = mftest::to_array(s.data, {s.C, s.L}).to(Memory::device);
  const mfilter::Prepared q =
      mfilter::prepare(templates, scaled, gpu_options(MfMethod::Tensor, MfNormalize::Short), {});
  EXPECT_NE(q.data.buffer(), scaled.buffer());
}

// The message of InvalidInput for `data`, or "" when the call does not throw it.
std::string invalid_message(const Array& templates, const Array& data) {
  try {
    (void)matched_filter(templates, data, gpu_options(MfMethod::Tensor, MfNormalize::Short));
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

// NaN and infinity in a device channel: the host path's message (channel and sample).
TEST(GpuPrepareNonFinite, DeviceDataGiveTheHostMessage) {
  HS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f64})
    for (double bad :
         {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
      Case c = scaled_case({1.0, 2.0, 4.0}, 7);
      c.data[static_cast<std::size_t>(2 * c.L + 1234)] = bad;
      const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
      const Array host = mftest::to_array(c.data, {c.C, c.L}, dt);
      const std::string want = invalid_message(templates, host);
      ASSERT_NE(want.find("channel 2, sample 1234"), std::string::npos) << want;
      EXPECT_EQ(invalid_message(templates, host.to(Memory::device)), want);
    }
}

}  // namespace
}  // namespace halfscope

#endif  // HALFSCOPE_WITH_CUDA

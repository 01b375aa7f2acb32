// Detection on a device stack (src/mfilter/detect_cuda.cu): exact medians of |x| per row against
// std::nth_element (odd and even lengths, ties, zeros, signs, one-element rows), and candidate
// peaks against a host scan of the same definition (|x| strictly above the row's threshold, no
// larger |x| within +/- min_separation, ties kept), including more candidates than the first
// buffer holds. Both are exact, so the comparisons are exact. DetectBench (run only when
// HALFSCOPE_MF_DETECT_BENCH is set) times the searches and the phases of a public call on case
// (b) of the benchmark.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter/kernels/baseline_tuning.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#endif

namespace halfscope::mfilter {
namespace {

#if HALFSCOPE_WITH_CUDA

using mftest::DeviceVector;

/// numpy.median(|row|) by selection on the host.
double host_abs_median(const float* row, std::int64_t n) {
  std::vector<float> a(row, row + n);
  for (float& v : a) v = std::fabs(v);
  auto mid = a.begin() + n / 2;
  std::nth_element(a.begin(), mid, a.end());
  double m = *mid;
  if (n % 2 == 0) m = 0.5 * (m + *std::max_element(a.begin(), mid));
  return m;
}

/// Rows of random values with ties (a coarse grid), zeros and both signs.
std::vector<float> random_stack(std::int64_t rows, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> grid(-40, 40);
  std::uniform_real_distribution<float> fine(-3.0f, 3.0f);
  std::vector<float> s(static_cast<std::size_t>(rows * n));
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = (i % 3 == 0) ? 0.125f * static_cast<float>(grid(rng)) : fine(rng);
  return s;
}

void expect_medians(std::int64_t rows, std::int64_t n, std::uint64_t seed) {
  const std::vector<float> s = random_stack(rows, n, seed);
  DeviceVector<float> dev(s);
  std::vector<double> got(static_cast<std::size_t>(rows), -1.0);
  stack_abs_medians_cuda(dev.get(), rows, n, got.data(), nullptr);
  for (std::int64_t t = 0; t < rows; ++t)
    EXPECT_EQ(got[static_cast<std::size_t>(t)], host_abs_median(s.data() + t * n, n))
        << "row " << t << " of " << n;
}

TEST(GpuDetect, Medians_OddEvenTiesAndSingletons_EqualNthElement) {
  HS_REQUIRE_GPU();
  expect_medians(7, 1001, 1);
  expect_medians(5, 1000, 2);
  expect_medians(3, 1, 3);
  expect_medians(2, 2, 4);
  expect_medians(3, 300001, 5);  // many blocks per row
  // A constant row and a row of zeros.
  std::vector<float> s(200, -2.5f);
  s.resize(400, 0.0f);
  DeviceVector<float> dev(s);
  std::vector<double> got(2);
  stack_abs_medians_cuda(dev.get(), 2, 200, got.data(), nullptr);
  EXPECT_EQ(got[0], 2.5);
  EXPECT_EQ(got[1], 0.0);
}

TEST(GpuDetect, Medians_ValuesOverTheWholeFloatRange_EqualNthElement) {
  // Magnitudes from subnormals to 1e38 with both signs, and a value repeated near the median
  // (10^-3 for exponents uniform in [-44, 38]), so every digit of the selection decides
  // something and ties straddle the middle ranks.
  HS_REQUIRE_GPU();
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> exponent(-44.0, 38.0);
  for (const std::int64_t n : {std::int64_t{4097}, std::int64_t{65536}}) {
    std::vector<float> s(static_cast<std::size_t>(3 * n));
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto v = static_cast<float>(std::pow(10.0, exponent(rng)));
      s[i] = (i % 7 == 0 ? 1.2e-3f : v) * (i % 2 ? -1.0f : 1.0f);
    }
    DeviceVector<float> dev(s);
    std::vector<double> got(3, -1.0);
    stack_abs_medians_cuda(dev.get(), 3, n, got.data(), nullptr);
    for (std::int64_t t = 0; t < 3; ++t)
      EXPECT_EQ(got[static_cast<std::size_t>(t)], host_abs_median(s.data() + t * n, n))
          << "row " << t << " of " << n;
  }
}

/// The host scan of the candidate definition, in (template, index) order.
std::vector<Detection> host_candidates(const std::vector<float>& s, std::int64_t rows,
                                       std::int64_t n, const std::vector<double>& thr,
                                       std::int64_t sep) {
  std::vector<Detection> out;
  for (std::int64_t t = 0; t < rows; ++t)
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = std::fabs(s[static_cast<std::size_t>(t * n + i)]);
      if (!(v > thr[static_cast<std::size_t>(t)])) continue;
      bool peak = true;
      for (std::int64_t j = std::max<std::int64_t>(0, i - sep); j <= std::min(n - 1, i + sep); ++j)
        peak = peak && !(std::fabs(s[static_cast<std::size_t>(t * n + j)]) > v);
      if (peak) {
        Detection d;
        d.template_index = t;
        d.correlation_index = i;
        d.value = s[static_cast<std::size_t>(t * n + i)];
        d.threshold = thr[static_cast<std::size_t>(t)];
        out.push_back(d);
      }
    }
  return out;
}

void expect_candidates(const std::vector<float>& s, std::int64_t rows, std::int64_t n,
                       const std::vector<double>& thr, std::int64_t sep) {
  DeviceVector<float> dev(s);
  DeviceVector<double> dthr(thr);
  const auto got = stack_candidates_cuda(dev.get(), rows, n, dthr.get(), sep, nullptr);
  const auto want = host_candidates(s, rows, n, thr, sep);
  ASSERT_EQ(got.size(), want.size()) << "separation " << sep;
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].template_index, want[k].template_index);
    EXPECT_EQ(got[k].correlation_index, want[k].correlation_index);
    EXPECT_EQ(got[k].value, want[k].value);
    EXPECT_EQ(got[k].threshold, want[k].threshold);
  }
}

TEST(GpuDetect, Candidates_SeveralSeparations_EqualHostScan) {
  HS_REQUIRE_GPU();
  const std::int64_t rows = 4, n = 5000;
  const std::vector<float> s = random_stack(rows, n, 9);
  const std::vector<double> thr = {2.0, 2.5, 0.0, 4.9};  // the last row: only the 5.0 ties
  for (std::int64_t sep : {0, 1, 5, 60}) expect_candidates(s, rows, n, thr, sep);
}

TEST(GpuDetect, Candidates_MoreThanTheFirstBuffer_AllReturned) {
  HS_REQUIRE_GPU();
  // Alternating 0, 1 (with varying signs): every other sample is a local maximum above 0.5.
  const std::int64_t n = 2 * tuning::kCandidateCapacity + 10;
  std::vector<float> s(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    s[static_cast<std::size_t>(i)] = i % 2 ? (i % 4 == 1 ? 1.0f : -1.0f) : 0.0f;
  expect_candidates(s, 1, n, {0.5}, 1);
}

TEST(GpuDetect, ChannelsUsed_DeviceData_EqualsHostCount) {
  // Device data: only the detections' windows are gathered to the host, and the count must be
  // the one the host data gives: zero weight, window outside the data, zero-filled gap (flat in
  // both normalizations) and a constant window (flat in full normalization only).
  HS_REQUIRE_GPU();
  mftest::Case c = mftest::random_case(3, 4, 32, 3000, 21, 2.0);
  c.weights[0 * c.C + 1] = 0.0;   // template 0, channel 1: weight 0
  c.moveouts[0 * c.C + 2] = c.L;  // template 0, channel 2: always outside
  c.moveouts[1 * c.C + 3] = 9;
  for (std::int64_t k = 0; k < c.K; ++k) {
    c.data[static_cast<std::size_t>(1500 + k)] = 0.0;             // channel 0 at 1500
    c.data[static_cast<std::size_t>(3 * c.L + 1509 + k)] = 0.75;  // channel 3 at 1500 + 9
  }
  std::vector<Detection> want;
  for (std::int64_t t = 0; t < c.T; ++t)
    for (const std::int64_t i :
         {std::int64_t{0}, std::int64_t{700}, std::int64_t{1500}, c.L - c.K - 5, c.L - c.K})
      want.push_back({t, i, i, 1.0, 0.5, -1});
  for (const MfNormalize norm : {MfNormalize::Short, MfNormalize::Full}) {
    MfOptions o;
    o.method = MfMethod::Tensor;
    o.precision = Precision::Split;
    o.device = DeviceKind::Cuda;
    o.network_sum = true;
    o.normalize = norm;
    const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
    const Array data = mftest::to_array(c.data, {c.C, c.L});
    std::vector<Detection> host = want, device = want;
    count_channels_used(host, prepare(templates, data, o, mftest::network_of(c)));
    count_channels_used(device,
                        prepare(templates, data.to(Memory::device), o, mftest::network_of(c)));
    const bool full = norm == MfNormalize::Full;
    for (std::size_t j = 0; j < want.size(); ++j) {
      EXPECT_EQ(device[j].channels_used, host[j].channels_used) << j;
      const std::int64_t t = want[j].template_index, i = want[j].correlation_index;
      std::int64_t expected = t == 0 ? 2 : c.C;        // template 0: channels 0, 3
      if (i == 1500) expected -= 1;                    // the zero gap on channel 0
      if (i == 1500 && t == 1 && full) expected -= 1;  // constant on channel 3
      if (t == 1 && i + 9 + c.K > c.L) expected -= 1;  // moveout 9 runs off the data
      EXPECT_EQ(host[j].channels_used, expected) << "template " << t << ", time " << i;
    }
  }
}

TEST(GpuDetect, ZeroMadMedian_NumericalErrorNamingTheTemplate) {
  // Template 1 has weight 0 on every channel, so its stack row is 0 and a MAD threshold would
  // be 0. The medians are computed on the device behind each chunk's stack and checked when the
  // chunk is collected: device data, host data in one chunk and host data in several.
  HS_REQUIRE_GPU();
  mftest::Case c = mftest::random_case(2, 2, 16, 3000, 31, 1.0);
  c.weights[1 * c.C + 0] = c.weights[1 * c.C + 1] = 0.0;
  MfOptions o;
  o.method = MfMethod::Tensor;
  o.precision = Precision::Mixed;
  o.device = DeviceKind::Cuda;
  DetectOptions det;
  det.threshold = 8.0;
  det.type = ThresholdType::Mad;
  const Array templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array data = mftest::to_array(c.data, {c.C, c.L});
  for (const int way : {0, 1, 2}) {
    const mftest::ForcedChunks chunks(way == 2 ? 700 : 0);
    try {
      (void)matched_filter_detect(templates, way == 0 ? data.to(Memory::device) : data, o,
                                  mftest::network_of(c), det);
      ADD_FAILURE() << "no NumericalError for a zero median, way " << way;
    } catch (const NumericalError& e) {
      const std::string m = e.what();
      for (const char* frag : {"template 1", "median |cc_sum| is 0", "absolute threshold"})
        EXPECT_NE(m.find(frag), std::string::npos) << m;
    }
  }
  // With template 1 back on one channel, both rows have a median, and the detections carry the
  // device's thresholds: 2 x the median of |stack| of their row.
  c.weights[1 * c.C + 0] = 1.0;
  det.threshold = 2.0;
  const auto found = matched_filter_detect(templates, data, o, mftest::network_of(c), det);
  MfOptions so = o;
  so.network_sum = true;
  const Array stack = matched_filter(templates, data, so, mftest::network_of(c));
  ASSERT_FALSE(found.empty());
  for (const Detection& d : found) {
    const double median =
        host_abs_median(stack.data_as<float>() + d.template_index * stack.dim(1), stack.dim(1));
    EXPECT_NEAR(d.threshold, 2.0 * median, 1e-5 * median) << "template " << d.template_index;
  }
}

TEST(GpuDetect, BadArguments_ThrowInvalidInput) {
  HS_REQUIRE_GPU();
  const std::vector<float> s(10, 1.0f);
  DeviceVector<float> dev(s);
  DeviceVector<double> thr(std::vector<double>{0.5});
  double m = 0;
  EXPECT_THROW(stack_abs_medians_cuda(dev.get(), 1, 0, &m, nullptr), InvalidInput);
  EXPECT_THROW(stack_candidates_cuda(dev.get(), 1, 10, thr.get(), -1, nullptr), InvalidInput);
}

/// Host milliseconds of f() (the functions timed here synchronise before they return).
template <class F>
double ms_of(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(DetectBench, NetworkStack) {
  HS_REQUIRE_GPU();
  // "1": case (b)'s stack, 1000 rows of 4319745 correlation times (17.3 GB); "R,N": R rows of N.
  const char* on = std::getenv("HALFSCOPE_MF_DETECT_BENCH");
  if (on == nullptr) GTEST_SKIP() << "HALFSCOPE_MF_DETECT_BENCH unset";
  std::int64_t rows = 1000, n = 4319745;
  if (std::string(on) != "1") {
    ASSERT_EQ(std::sscanf(on, "%ld,%ld", &rows, &n), 2) << on;
  }
  // Rows like a 30-channel stack of noise: normal, sd 0.26, one peak of 20 per 10^5 times. Each
  // row is a rotation of one host row, so rows differ but are filled by device copies.
  std::mt19937_64 rng(11);
  std::normal_distribution<float> noise(0.0f, 0.26f);
  std::vector<float> row(static_cast<std::size_t>(2 * n));
  for (std::int64_t i = 0; i < n; ++i)
    row[static_cast<std::size_t>(i)] = i % 100000 == 7 ? 20.0f : noise(rng);
  std::copy_n(row.begin(), n, row.begin() + n);
  DeviceVector<float> twice(row);
  DeviceVector<float> stack(rows * n);
  for (std::int64_t t = 0; t < rows; ++t)
    HS_CUDA_CHECK(cudaMemcpy(stack.get() + t * n, twice.get() + (t * 7919) % n, n * 4,
                             cudaMemcpyDeviceToDevice));
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> med(static_cast<std::size_t>(rows));
  for (int rep = 0; rep < 3; ++rep) {
    const double m_ms =
        ms_of([&] { stack_abs_medians_cuda(stack.get(), rows, n, med.data(), nullptr); });
    std::vector<double> thr(med.size());
    for (std::size_t t = 0; t < thr.size(); ++t) thr[t] = 8.0 * med[t];
    DeviceVector<double> dthr(thr);
    std::size_t found = 0;
    const double c_ms = ms_of([&] {
      found = stack_candidates_cuda(stack.get(), rows, n, dthr.get(), 1, nullptr).size();
    });
    if (rep == 0) {
      EXPECT_EQ(med[0], host_abs_median(row.data(), n));
    }
    std::printf("detect bench %ld x %ld: medians %.2f ms, candidates %.2f ms (%zu)\n",
                static_cast<long>(rows), static_cast<long>(n), m_ms, c_ms, found);
  }
}

TEST(DetectBench, PublicCallPhases) {
  HS_REQUIRE_GPU();
  // "1": case (b) (1000 x 30 x 256, 4.32e6 samples), on device and on host inputs.
  const char* on = std::getenv("HALFSCOPE_MF_DETECT_BENCH");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "HALFSCOPE_MF_DETECT_BENCH != 1";
  mftest::Case c = mftest::random_case(1000, 30, 256, 4320000, 4, 1.0);
  mftest::randomize_network(c, 0, 100, 5);
  const Array host_templates = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array host_data = mftest::to_array(c.data, {c.C, c.L});
  const MfNetwork net = mftest::network_of(c);
  MfOptions o;
  o.method = MfMethod::Tensor;
  o.precision = Precision::Mixed;
  o.device = DeviceKind::Cuda;
  o.network_sum = true;
  DetectOptions det;
  det.threshold = 8.0;
  det.type = ThresholdType::Mad;
  det.min_separation = 100;
  for (const bool device : {true, false}) {
    const Array templates = device ? host_templates.to(Memory::device) : host_templates;
    const Array data = device ? host_data.to(Memory::device) : host_data;
    for (int rep = 0; rep < 3; ++rep) {
      Prepared p;
      std::vector<Detection> found;
      const double all =
          ms_of([&] { found = matched_filter_detect(templates, data, o, net, det); });
      const double prep = ms_of([&] { p = prepare(templates, data, o, net); });
      const double run = ms_of([&] { found = detect_cuda(p, det); });
      const double count = ms_of([&] { count_channels_used(found, p); });
      // The stack alone stays on the device only for device inputs.
      const double stack = device ? ms_of([&] { (void)run_cuda(p); }) : 0.0;
      std::printf(
          "detect phases, %s inputs: public call %.1f ms = prepare %.1f + detect_cuda %.1f + "
          "count_channels_used %.1f (%zu detections); run_cuda (the stack) %.1f\n",
          device ? "device" : "host", all, prep, run, count, found.size(), stack);
    }
  }
}

#endif

}  // namespace
}  // namespace halfscope::mfilter

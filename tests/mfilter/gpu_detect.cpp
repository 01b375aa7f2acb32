// Detection on a device stack (src/mfilter/detect_cuda.cu): exact medians of |x| per row against
// std::nth_element (odd and even lengths, ties, zeros, signs, one-element rows), and candidate
// peaks against a host scan of the same definition (|x| strictly above the row's threshold, no
// larger |x| within +/- min_separation, ties kept), including more candidates than the first
// buffer holds. Both are exact, so the comparisons are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/baseline_tuning.hpp"
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

TEST(GpuDetect, BadArguments_ThrowInvalidInput) {
  HS_REQUIRE_GPU();
  const std::vector<float> s(10, 1.0f);
  DeviceVector<float> dev(s);
  DeviceVector<double> thr(std::vector<double>{0.5});
  double m = 0;
  EXPECT_THROW(stack_abs_medians_cuda(dev.get(), 1, 0, &m, nullptr), InvalidInput);
  EXPECT_THROW(stack_candidates_cuda(dev.get(), 1, 10, thr.get(), -1, nullptr), InvalidInput);
}

#endif

}  // namespace
}  // namespace halfscope::mfilter

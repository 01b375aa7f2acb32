// Names, parsers, the method x precision table, Auto's choices, input validation (each error
// names the argument, what was expected and what was found) and the 64-bit index arithmetic of
// the time chunks (checked on shapes far beyond what CI can allocate).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/chunking.hpp"
#include "mfilter_testing.hpp"

namespace halfscope {
namespace {

// Runs `f`, expects an exception of type E whose message contains every fragment.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string m = e.what();
    for (const auto& frag : fragments) EXPECT_NE(m.find(frag), std::string::npos) << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

MfOptions cpu_options() {
  MfOptions o;
  o.device = DeviceKind::Cpu;
  return o;
}

TEST(MfNames, RoundTripAndRejectUnknown) {
  for (auto m :
       {MfMethod::Auto, MfMethod::Direct, MfMethod::Naive, MfMethod::Cublas1, MfMethod::Cublas2,
        MfMethod::Cublas3, MfMethod::Cublas4, MfMethod::Tensor, MfMethod::FFT})
    EXPECT_EQ(parse_mf_method(mf_method_name(m)), m);
  EXPECT_EQ(parse_mf_normalize("full"), MfNormalize::Full);
  EXPECT_EQ(mf_normalize_name(MfNormalize::Short), "short");
  EXPECT_EQ(parse_threshold_type("mad"), ThresholdType::Mad);
  EXPECT_EQ(parse_threshold_type("MAD"), ThresholdType::Mad);
  EXPECT_EQ(threshold_type_name(ThresholdType::Absolute), "abs");
  expect_error<InvalidInput>([] { parse_mf_method("cublas5"); }, {"cublas5", "tensor", "fft"});
  expect_error<InvalidInput>([] { parse_mf_normalize("long"); }, {"long", "short, full"});
}

TEST(MfTable, SupportedPrecisionsAndDefaults) {
  using P = Precision;
  const auto cpu = DeviceKind::Cpu, gpu = DeviceKind::Cuda;
  EXPECT_EQ(mf_supported_precisions(MfMethod::Direct, cpu),
            (std::vector<P>{P::Double, P::Single, P::Half, P::Mixed, P::BF16, P::Split}));
  EXPECT_EQ(mf_supported_precisions(MfMethod::Naive, gpu), std::vector<P>{P::Single});
  EXPECT_TRUE(mf_supported_precisions(MfMethod::Naive, cpu).empty());
  EXPECT_EQ(mf_supported_precisions(MfMethod::Cublas1, gpu), std::vector<P>{P::Single});
  EXPECT_EQ(mf_supported_precisions(MfMethod::Cublas2, gpu), std::vector<P>{P::Mixed});
  EXPECT_EQ(mf_supported_precisions(MfMethod::Cublas3, gpu), std::vector<P>{P::Mixed});
  EXPECT_EQ(mf_supported_precisions(MfMethod::Cublas4, gpu), std::vector<P>{P::Half});
  EXPECT_EQ(mf_supported_precisions(MfMethod::Tensor, gpu),
            (std::vector<P>{P::Mixed, P::BF16, P::Split}));
  EXPECT_EQ(mf_supported_precisions(MfMethod::FFT, gpu), std::vector<P>{P::Single});
  EXPECT_EQ(mf_default_precision(MfMethod::Tensor), P::Split);
  EXPECT_EQ(mf_default_precision(MfMethod::Naive), P::Single);
  EXPECT_EQ(mf_default_precision(MfMethod::Direct), P::Single);
  EXPECT_EQ(mf_default_precision(MfMethod::Cublas1), P::Single);
  EXPECT_EQ(mf_default_precision(MfMethod::Cublas2), P::Mixed);
  EXPECT_EQ(mf_default_precision(MfMethod::Cublas3), P::Mixed);
  EXPECT_EQ(mf_default_precision(MfMethod::Cublas4), P::Half);
}

TEST(MfTable, AutoResolution) {
  MfOptions o = cpu_options();
  EXPECT_EQ(mf_resolve_method(o, 4096), MfMethod::Direct);
  o.method = MfMethod::Tensor;  // an explicit method is kept as asked
  EXPECT_EQ(mf_resolve_method(o, 16), MfMethod::Tensor);
  if (!cuda_available()) return;  // the GPU choices need a device to resolve Auto to
  MfOptions g;
  g.device = DeviceKind::Cuda;
  for (auto [p, m] : {std::pair{Precision::Split, MfMethod::Tensor},
                      {Precision::Mixed, MfMethod::Tensor},
                      {Precision::BF16, MfMethod::Tensor},
                      {Precision::Half, MfMethod::Cublas4},
                      {Precision::Double, MfMethod::Direct}}) {
    g.precision = p;
    EXPECT_EQ(mf_resolve_method(g, 256), m);
  }
  g.precision = Precision::Single;
  EXPECT_EQ(mf_resolve_method(g, 256), MfMethod::Naive);
  EXPECT_EQ(mf_resolve_method(g, 1024), MfMethod::FFT);
}

TEST(MfValidation, ShapesAndLengths) {
  const Array t3 = mftest::to_array(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8});
  const Array x3 = mftest::to_array(std::vector<double>(3 * 50, 0.25), {3, 50});
  const Array x2 = mftest::to_array(std::vector<double>(2 * 50, 0.25), {2, 50});
  const auto o = cpu_options();
  expect_error<InvalidInput>([&] { matched_filter(t3, x2, o); },
                             {"templates have 3 channel(s)", "data have 2"});
  const Array long_t = mftest::to_array(std::vector<double>(3 * 60, 0.5), {1, 3, 60});
  expect_error<InvalidInput>([&] { matched_filter(long_t, x3, o); },
                             {"templates (60 samples)", "data (50 samples)"});
  expect_error<InvalidInput>([&] { matched_filter(Array(), x3, o); }, {"templates", "empty"});
  expect_error<InvalidInput>(
      [&] {
        matched_filter(t3, Array(DType::f32, {3, 0}), o);
      },
      {"data", "empty"});
  expect_error<InvalidInput>(
      [&] {
        matched_filter(Array(DType::f32, {2, 3, 4, 8}), x3, o);
      },
      {"templates", "(templates, channels, samples)", "[2, 3, 4, 8]"});
  MfOptions bad_step = o;
  bad_step.step = 0;
  expect_error<InvalidInput>([&] { matched_filter(t3, x3, bad_step); }, {"step", ">= 1", "0"});
}

// The in-place check of short-normalized data (float32 data in single, float64 in double: one
// integer maximum of the sign-cleared bits per channel) sees NaN and infinities of either sign,
// and scales a channel whose largest magnitude lies outside [2^-32, 2^32] (CC is scale invariant,
// so the result equals that of the data brought into the band by a power of two), negative
// values as their magnitudes.
TEST(MfValidation, InPlaceDataCheckSeesEverySignAndScale) {
  const Array t3 = mftest::to_array(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8});
  for (const auto& [dtype, precision] :
       {std::pair{DType::f32, Precision::Single}, std::pair{DType::f64, Precision::Double}}) {
    SCOPED_TRACE(std::string(precision_name(precision)));
    MfOptions o = cpu_options();
    o.precision = precision;
    o.normalize = MfNormalize::Short;
    for (const double bad :
         {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
          -std::numeric_limits<double>::infinity()}) {
      std::vector<double> x(3 * 50, 0.25);
      x[1 * 50 + 33] = bad;
      expect_error<InvalidInput>(
          [&] {
            matched_filter(t3, mftest::to_array(x, {3, 50}, dtype), o);
          },
          {"data", std::isnan(bad) ? "NaN" : "infinite", "channel 1, sample 33"});
    }
    // Channel 0 peaks at -2^40 (beyond the band), channel 2 at 2^-40 (below it).
    std::vector<double> x(3 * 50), in_band(3 * 50);
    for (std::int64_t i = 0; i < 150; ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) + 0.1;
    in_band = x;
    for (std::int64_t k = 0; k < 50; ++k) {
      x[k] *= 0x1p40;
      x[100 + k] *= 0x1p-40;
    }
    x[7] = -0x1p41;  // the largest magnitude, negative
    in_band[7] = -2.0;
    const Array scaled = matched_filter(t3, mftest::to_array(x, {3, 50}, dtype), o);
    const Array reference = matched_filter(t3, mftest::to_array(in_band, {3, 50}, dtype), o);
    ASSERT_EQ(scaled.shape(), reference.shape());
    const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
    for (std::int64_t i = 0; i < scaled.size(); ++i)
      EXPECT_NEAR(scaled.data_as<float>()[i], reference.data_as<float>()[i], tolerance) << i;
  }
}

TEST(MfValidation, NonFiniteDataNamesChannelAndSample) {
  std::vector<double> x(3 * 50, 0.25);
  x[2 * 50 + 17] = std::numeric_limits<double>::quiet_NaN();
  const Array t3 = mftest::to_array(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8});
  expect_error<InvalidInput>(
      [&] {
        matched_filter(t3, mftest::to_array(x, {3, 50}), cpu_options());
      },
      {"data", "NaN", "channel 2, sample 17"});
  x[2 * 50 + 17] = std::numeric_limits<double>::infinity();
  expect_error<InvalidInput>(
      [&] {
        matched_filter(t3, mftest::to_array(x, {3, 50}, DType::f64), cpu_options());
      },
      {"data", "infinite", "channel 2, sample 17"});
  std::vector<double> t(2 * 3 * 8, 0.5);
  t[(1 * 3 + 2) * 8 + 5] = std::numeric_limits<double>::quiet_NaN();
  expect_error<InvalidInput>(
      [&] {
        matched_filter(mftest::to_array(t, {2, 3, 8}), mftest::to_array(x, {3, 50}), cpu_options());
      },
      {"templates", "template 1, channel 2, sample 5"});
}

TEST(MfValidation, NetworkShapesAndTypes) {
  const Array t3 = mftest::to_array(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8});
  const Array x3 = mftest::to_array(std::vector<double>(3 * 50, 0.25), {3, 50});
  MfNetwork net;
  net.moveouts = Array::zeros(DType::i32, {3, 2});
  expect_error<InvalidInput>([&] { matched_filter(t3, x3, cpu_options(), net); },
                             {"moveouts", "[2, 3]", "int32[3, 2]"});
  net.moveouts = Array::zeros(DType::f32, {2, 3});
  expect_error<InvalidInput>([&] { matched_filter(t3, x3, cpu_options(), net); },
                             {"moveouts", "integers", "float32"});
  net.moveouts = Array();
  net.weights = mftest::to_array({1, 1, 1, 1, std::nan(""), 1}, {2, 3});
  expect_error<InvalidInput>([&] { matched_filter(t3, x3, cpu_options(), net); },
                             {"weights", "NaN", "template 1, channel 1"});
}

TEST(MfValidation, MethodPrecisionTable) {
  const Array t3 = mftest::to_array(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8});
  const Array x3 = mftest::to_array(std::vector<double>(3 * 50, 0.25), {3, 50});
  MfOptions o = cpu_options();
  o.method = MfMethod::Direct;
  o.precision = Precision::TF32;
  expect_error<Unsupported>([&] { matched_filter(t3, x3, o); },
                            {"direct", "tf32", "double, single, half, mixed, bf16, split"});
  o.method = MfMethod::Tensor;
  o.precision = Precision::Split;
  expect_error<Unsupported>([&] { matched_filter(t3, x3, o); }, {"tensor", "GPU"});
}

TEST(MfIndexing, CorrelationCountAndCheckedSizes) {
  EXPECT_EQ(mf_correlation_count(100, 10, 1), 91);
  EXPECT_EQ(mf_correlation_count(100, 10, 3), 31);  // starts 0, 3, ..., 90
  EXPECT_EQ(mf_correlation_count(10, 10, 7), 1);
  // A day of 100 Hz data, 1000 templates, 30 channels: T * C * n_corr > 2^31 without overflow.
  const std::int64_t n = mf_correlation_count(8'640'000, 256, 1);
  EXPECT_EQ(mfilter::output_elements(1000, 30, n, false), 1000LL * 30 * n);
  EXPECT_GT(mfilter::output_elements(1000, 30, n, false), std::int64_t{1} << 31);
  expect_error<InvalidInput>(
      [] { mfilter::output_elements(std::int64_t{1} << 40, 1 << 20, 1 << 20, false); },
      {"overflows 64-bit"});
}

TEST(MfIndexing, TimeChunksCoverEveryCorrelationAndKeepTheWindowRule) {
  // Beyond 2^31 samples, with negative and positive moveouts and step 3; then moveouts all
  // negative or all beyond the end (ranges that have to be widened). With a halo (detection),
  // the halo's correlation times keep the window rule too: they are the true neighbours of a
  // chunk's edge values.
  const std::int64_t L = (std::int64_t{1} << 33) + 12345, K = 256, step = 3;
  const std::int64_t n = mf_correlation_count(L, K, step);
  const std::int64_t max_corr = (std::int64_t{1} << 30) + 7;
  for (const std::int64_t halo : {0, 1})
    for (auto [mo_min, mo_max] :
         {std::pair<std::int64_t, std::int64_t>{-500, 900}, {-5000, -4000}, {L - 10, L + 1}}) {
      const auto chunks = mfilter::plan_time_chunks(L, K, step, n, mo_min, mo_max, max_corr, halo);
      ASSERT_FALSE(chunks.empty());
      EXPECT_EQ(chunks.front().corr_begin, 0);
      EXPECT_EQ(chunks.back().corr_end, n);
      for (std::size_t j = 0; j < chunks.size(); ++j) {
        const auto& ch = chunks[j];
        if (j > 0) {
          const auto& prev = chunks[j - 1];
          EXPECT_EQ(ch.own_begin(), prev.own_begin() + prev.own_n_corr());
          EXPECT_EQ(ch.halo_before, halo);
        }
        EXPECT_LE(ch.own_n_corr(), max_corr);
        EXPECT_LE(ch.n_corr(), (ch.samples() - K) / step + 1);  // what a backend may assume
        EXPECT_GE(ch.sample_begin, 0);
        EXPECT_LE(ch.sample_end, L);
        // For the extreme moveouts at the chunk's first and last times (halo included), a
        // window is inside the chunk's samples exactly when it is inside the whole data.
        for (std::int64_t mo : {mo_min, (mo_min + mo_max) / 2, mo_max})
          for (std::int64_t i : {ch.corr_begin, ch.own_begin(), ch.corr_end - 1}) {
            const std::int64_t s = i * step + mo;
            const bool inside = s >= 0 && s + K <= L;
            const std::int64_t s_local =
                (i - ch.corr_begin) * step + mfilter::chunk_moveout(mo, ch, step);
            const bool inside_chunk = s_local >= 0 && s_local + K <= ch.samples();
            EXPECT_EQ(inside, inside_chunk)
                << "halo " << halo << " chunk " << j << " i " << i << " mo " << mo;
            if (inside) {
              EXPECT_EQ(s_local + ch.sample_begin, s);
            }
          }
      }
    }
}

TEST(MfIndexing, ChunkedCpuRunEqualsTheWholeRun) {
  // The chunk plan applied by hand: the FP64 reference of every chunk (its data slice and its
  // shifted moveouts) matches the whole run's columns within the FP32 bound, so the chunks see
  // exactly the whole problem's windows, which is what the GPU streaming relies on.
  mftest::Case c = mftest::rounded_to_float(mftest::random_case(2, 3, 20, 300, 41));
  mftest::randomize_network(c, -25, 35, 3);
  MfOptions o = cpu_options();
  o.method = MfMethod::Direct;
  o.step = 2;
  const Array whole =
      matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                     mftest::to_array(c.data, {c.C, c.L}), o, mftest::network_of(c));
  const std::int64_t n = whole.dim(1);
  const auto chunks = mfilter::plan_time_chunks(c.L, c.K, o.step, n, -25, 35, 37);
  for (const auto& ch : chunks) {
    // plan_time_chunks widens every chunk to (n_corr - 1) * step + K samples.
    ASSERT_GE(ch.samples(), c.K);
    mftest::Case sub = c;
    sub.L = ch.samples();
    sub.data.clear();
    for (std::int64_t k = 0; k < c.C; ++k)
      sub.data.insert(sub.data.end(), c.data.begin() + k * c.L + ch.sample_begin,
                      c.data.begin() + k * c.L + ch.sample_end);
    for (auto& m : sub.moveouts) m = mfilter::chunk_moveout(m, ch, o.step);
    // The chunk's own n_corr may exceed the chunk's count: compare the first ch.n_corr() columns.
    const auto ref = mftest::reference_cc(sub, MfNormalize::Short, o.step, true);
    const std::int64_t sub_n = mftest::n_corr_of(sub.L, sub.K, o.step);
    for (std::int64_t t = 0; t < c.T; ++t)
      for (std::int64_t i = 0; i < std::min(ch.n_corr(), sub_n); ++i)
        EXPECT_NEAR(whole.data_as<float>()[t * n + ch.corr_begin + i],
                    ref[static_cast<std::size_t>(t * sub_n + i)],
                    mftest::stack_error_bound(c, mftest::cc_error_bound(Precision::Single, c.K)));
  }
}

}  // namespace
}  // namespace halfscope

namespace halfscope {
namespace {

TEST(MfValidation, IntegerAndNonContiguousInputsAreConverted) {
  // Seismic counts often arrive as int32: the result equals the float32 run on the same values.
  mftest::Case c = mftest::random_case(2, 2, 12, 120, 8, 1000.0);
  for (auto& v : c.data) v = std::round(v);
  MfOptions o = cpu_options();
  o.method = MfMethod::Direct;
  const Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  const Array as_float = matched_filter(t, mftest::to_array(c.data, {c.C, c.L}), o);
  const Array as_int = matched_filter(t, mftest::to_array(c.data, {c.C, c.L}, DType::i32), o);
  ASSERT_EQ(as_int.shape(), as_float.shape());
  EXPECT_TRUE(std::equal(as_int.data_as<float>(), as_int.data_as<float>() + as_int.size(),
                         as_float.data_as<float>()));
  // A strided view (every other channel of a (4, L) array) is read through its strides.
  std::vector<double> wide(static_cast<std::size_t>(4 * c.L));
  for (std::int64_t ch = 0; ch < 2; ++ch)
    std::copy_n(c.data.begin() + ch * c.L, c.L, wide.begin() + 2 * ch * c.L);
  const Array strided = mftest::to_array(wide, {2, 2, c.L}).select(1, 0);
  const Array from_view = matched_filter(t, strided, o);
  EXPECT_TRUE(std::equal(from_view.data_as<float>(), from_view.data_as<float>() + from_view.size(),
                         as_float.data_as<float>()));
}

}  // namespace
}  // namespace halfscope

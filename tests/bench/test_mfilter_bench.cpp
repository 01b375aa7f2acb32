// `halfscope bench mfilter` without a GPU: case sizes and their flop / byte counts, the Table I
// rows, the reference coverage, the real-trace loader and tiling, the templates cut from the
// loudest segments, the planted network inputs, and the JSON cases the peers and tables read.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "bench/mfilter_bench_util.hpp"
#include "halfscope/bench/mfilter_bench.hpp"
#include "halfscope/bench/report.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "test_support.hpp"

namespace halfscope::bench {
namespace {

TEST(MfBenchSizes, StudyCaseMatchesStudy001) {
  const MfBenchSize s = study_case_size();
  EXPECT_EQ(s.templates, 16);
  EXPECT_EQ(s.channels, 1);
  EXPECT_EQ(s.length, 256);
  EXPECT_EQ(s.samples, 4'320'000);
  EXPECT_EQ(s.correlation_count(), 4'320'000 - 256 + 1);
  // 2 T K n_corr, the study's 35.4 GFLOP (exact in double: every factor is an integer < 2^53).
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 16 * 256 * 4'319'745.0);
  EXPECT_NEAR(s.flops() / 1e9, 35.4, 0.05);
  // FP32 floor: data 4.32e6 + templates 16 x 256 + output 16 x n_corr, 4 bytes each.
  EXPECT_DOUBLE_EQ(s.min_bytes(false), 4.0 * (4'320'000.0 + 16 * 256 + 16 * 4'319'745.0));
}

TEST(MfBenchSizes, NetworkCaseAndItsQuickVariant) {
  const MfBenchSize full = network_case_size(false);
  EXPECT_EQ(full.templates, 1000);
  EXPECT_EQ(full.channels, 30);
  EXPECT_EQ(full.length, 256);
  EXPECT_EQ(full.samples, 4'320'000);
  const double n = 4'319'745.0;
  EXPECT_DOUBLE_EQ(full.flops(), 2.0 * 1000 * 30 * 256 * n);
  // Network stack (T x n_corr) against per-channel output (T x C x n_corr).
  EXPECT_DOUBLE_EQ(full.min_bytes(true), 4.0 * (30 * 4'320'000.0 + 1000.0 * 30 * 256 + 1000 * n));
  EXPECT_DOUBLE_EQ(full.min_bytes(false),
                   4.0 * (30 * 4'320'000.0 + 1000.0 * 30 * 256 + 1000 * 30 * n));
  const MfBenchSize quick = network_case_size(true);
  EXPECT_EQ(quick.templates, 64);
  EXPECT_EQ(quick.channels, 8);
  EXPECT_EQ(quick.samples, std::int64_t{1} << 22);
  EXPECT_EQ(quick.correlation_count(), (std::int64_t{1} << 22) - 255);
}

TEST(MfBenchSizes, CorrelationCountWithStepAndBadSizes) {
  MfBenchSize s{2, 1, 10, 100, 3};
  EXPECT_EQ(s.correlation_count(), (100 - 10) / 3 + 1);
  s.length = 101;
  EXPECT_THROW((void)s.correlation_count(), InvalidInput);
  s = {2, 1, 0, 100, 1};
  EXPECT_THROW((void)s.correlation_count(), InvalidInput);
  s = {2, 1, 10, 100, 0};
  EXPECT_THROW((void)s.correlation_count(), InvalidInput);
  // 64-bit: a day of 100 Hz data on 30 channels is far past 2^31 samples in total.
  const MfBenchSize big{1000, 30, 256, std::int64_t{3} << 31, 1};
  EXPECT_EQ(big.correlation_count(), (std::int64_t{3} << 31) - 255);
}

TEST(MfBenchMethods, TableOneRows) {
  const auto rows = study_methods();
  std::set<std::string> keys;
  int gemm_rows = 0;
  for (const auto& r : rows) {
    keys.insert(r.name + ":" + std::string(precision_name(r.precision)) + ":" +
                (r.gemm_only ? "gemm" : "call"));
    gemm_rows += r.gemm_only;
  }
  EXPECT_EQ(keys.size(), rows.size()) << "a row appears twice";
  EXPECT_EQ(rows.size(), 1u + 8u + 3u + 1u);
  EXPECT_EQ(gemm_rows, 4);
  // The study's types: ver.1 FP32, ver.2 and 3 FP16 storage with FP32 arithmetic, ver.4 FP16.
  for (const char* k :
       {"cublas1:single:gemm", "cublas1:single:call", "cublas2:mixed:gemm", "cublas2:mixed:call",
        "cublas3:mixed:call", "cublas4:half:gemm", "cublas4:half:call", "naive:single:call",
        "tensor:mixed:call", "tensor:bf16:call", "tensor:split:call", "fft:single:call"})
    EXPECT_TRUE(keys.count(k)) << k;
}

TEST(MfBenchMethods, ReferenceCoverage) {
  EXPECT_EQ(study_reference_times(4'319'745, 0, false), 4'319'745);
  EXPECT_EQ(study_reference_times(4'319'745, 0, true), std::int64_t{1} << 20);
  EXPECT_EQ(study_reference_times(4'319'745, 1000, false), 1000);
  EXPECT_EQ(study_reference_times(5000, 0, false), 5000);
  // 2^30 multiply-adds: the full network case gets the floor of 256, the quick one 2^30 / 2^17.
  EXPECT_EQ(network_reference_times(network_case_size(false)), 256);
  EXPECT_EQ(network_reference_times(network_case_size(true)), 8192);
  EXPECT_EQ(network_reference_times({1, 1, 4, 20, 1}), 17);  // capped at n_corr
}

TEST(MfBenchInputs, RealTraceLoaderChecksItsFile) {
  test::TempDir dir;
  const std::vector<double> v = {3, -7, 11, 2, 5};
  io::write_npy(dir / "row.npy", Array::from_values<double>(v, {1, 5}));
  const Array t = load_real_trace(dir / "row.npy", 4);
  ASSERT_EQ(t.shape(), Shape({5}));
  EXPECT_EQ(t.dtype(), DType::f32);
  for (std::int64_t i = 0; i < 5; ++i) EXPECT_EQ(t.data_as<float>()[i], v[i]);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { (void)load_real_trace(dir / "none.npy", 1); }).find("none.npy"),
            std::string::npos);
  EXPECT_NE(message([&] { (void)load_real_trace(dir / "row.npy", 6); }).find("at least 6"),
            std::string::npos);
  io::write_npy(dir / "square.npy",
                Array::from_values<double>(std::vector<double>(4, 1.0), {2, 2}));
  EXPECT_NE(message([&] { (void)load_real_trace(dir / "square.npy", 1); }).find("1-D"),
            std::string::npos);
  const std::vector<float> bad = {1.0f, NAN, 2.0f};
  io::write_npy(dir / "nan.npy", Array::from_values<float>(bad, {3}));
  EXPECT_NE(message([&] { (void)load_real_trace(dir / "nan.npy", 1); }).find("sample 1"),
            std::string::npos);
}

TEST(MfBenchInputs, TilingRepeatsTheTrace) {
  const std::vector<float> v = test::random_floats(7, -5, 5, 11);
  const Array tiled = tile_trace(Array::from_values<float>(v, {7}), 30);
  ASSERT_EQ(tiled.shape(), Shape({30}));
  for (std::int64_t i = 0; i < 30; ++i)
    EXPECT_EQ(tiled.data_as<float>()[i], v[static_cast<std::size_t>(i % 7)]) << i;
}

TEST(MfBenchInputs, WindowsAroundTheLoudestSamples) {
  std::vector<float> v = test::random_floats(200, -1, 1, 3);
  v[100] = 50;   // loudest: window [92, 108)
  v[103] = -40;  // inside it: does not start a window
  v[2] = 30;     // at the edge: clamped to [0, 16)
  v[150] = 20;   // [142, 158)
  v[60] = 10;    // [52, 68)
  const Array trace = Array::from_values<float>(v, {200});
  const auto starts = loudest_window_starts(trace, 4, 16);
  EXPECT_EQ(starts, (std::vector<std::int64_t>{0, 52, 92, 142}));
  const Array w = cut_windows(trace, starts, 16);
  ASSERT_EQ(w.shape(), Shape({4, 16}));
  for (std::size_t j = 0; j < starts.size(); ++j)
    for (std::int64_t k = 0; k < 16; ++k)
      EXPECT_EQ(w.data_as<float>()[static_cast<std::int64_t>(j) * 16 + k], v[starts[j] + k]);
  // Disjointness, checked independently of the greedy order for a realistic case.
  const Array noise = uniform_array({16384}, -1, 1, 9);
  const auto many = loudest_window_starts(noise, 16, 256);
  for (std::size_t j = 1; j < many.size(); ++j) EXPECT_GE(many[j], many[j - 1] + 256);
  EXPECT_THROW((void)loudest_window_starts(trace, 13, 16), InvalidInput);  // 12 fit at most
}

TEST(MfBenchInputs, UniformArrayRangeAndReproducibility) {
  const Array a = uniform_array({4, 50'000}, -50, 50, 7);
  const Array b = uniform_array({4, 50'000}, -50, 50, 7);
  const float* x = a.data_as<float>();
  double sum = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    ASSERT_GE(x[i], -50.0f);
    ASSERT_LT(x[i], 50.0f);
    ASSERT_EQ(x[i], b.data_as<float>()[i]);
    sum += x[i];
  }
  // Mean of n uniform [-50, 50) draws: standard deviation 100 / sqrt(12 n); allow 5 sigma.
  const double n = static_cast<double>(a.size());
  EXPECT_LT(std::fabs(sum / n), 5 * 100 / std::sqrt(12 * n));
  // Rows come from distinct streams.
  EXPECT_NE(x[0], x[50'000]);
}

TEST(MfBenchInputs, PlantedNetworkTemplatesCorrelateToOne) {
  const MfBenchSize s{6, 3, 32, 5000, 1};
  const MfNetworkInputs in = make_network_inputs(s, 40, 5);
  ASSERT_EQ(in.templates.shape(), Shape({6, 3, 32}));
  ASSERT_EQ(in.data.shape(), Shape({3, 5000}));
  ASSERT_EQ(in.origins.size(), 6u);
  const auto* m = in.moveouts.data_as<std::int64_t>();
  const auto* w = in.weights.data_as<float>();
  const float* d = in.data.data_as<float>();
  const float* t = in.templates.data_as<float>();
  for (std::int64_t j = 0; j < 6; ++j) {
    double cc_sum = 0, weight_sum = 0;
    for (std::int64_t c = 0; c < 3; ++c) {
      ASSERT_GE(m[j * 3 + c], 0);
      ASSERT_LE(m[j * 3 + c], 40);
      ASSERT_GE(w[j * 3 + c], 0.5f);
      ASSERT_LT(w[j * 3 + c], 1.0f);
      const std::int64_t s0 = in.origins[static_cast<std::size_t>(j)] + m[j * 3 + c];
      ASSERT_LE(s0 + 32, 5000);
      double num = 0, et = 0, es = 0;  // FP64 normalized correlation at the origin
      for (std::int64_t k = 0; k < 32; ++k) {
        const double a = t[(j * 3 + c) * 32 + k], b = d[c * 5000 + s0 + k];
        num += a * b;
        et += a * a;
        es += b * b;
      }
      cc_sum += w[j * 3 + c] * num / std::sqrt(et * es);
      weight_sum += w[j * 3 + c];
    }
    // Identical windows: CC = 1 up to FP64 rounding of 32-term sums (a few 1e-16).
    EXPECT_NEAR(cc_sum, weight_sum, 1e-12) << "template " << j;
  }
  EXPECT_THROW((void)make_network_inputs(s, 5000, 5), InvalidInput);
}

TEST(MfBenchInputs, PlantedFoundFraction) {
  const std::vector<std::int64_t> origins = {100, 200, 300, 400};
  std::vector<Detection> d(3);
  d[0].template_index = 0, d[0].correlation_index = 101;  // within 1
  d[1].template_index = 1, d[1].correlation_index = 203;  // too far
  d[2].template_index = 3, d[2].correlation_index = 300;  // wrong template's origin: no match
  EXPECT_DOUBLE_EQ(planted_found_fraction(d, origins, 1), 0.25);
  EXPECT_DOUBLE_EQ(planted_found_fraction(d, origins, 3), 0.5);
  EXPECT_TRUE(std::isnan(planted_found_fraction(d, {}, 1)));
}

// Independent FP64 normalized correlation of one channel window (short normalization).
double direct_cc(const float* t, const float* x, std::int64_t K) {
  double num = 0, et = 0, es = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    num += static_cast<double>(t[k]) * x[k];
    et += static_cast<double>(t[k]) * t[k];
    es += static_cast<double>(x[k]) * x[k];
  }
  return et > 0 && es > 0 ? num / std::sqrt(et * es) : 0.0;
}

TEST(MfBenchReference, MatchesADirectFp64SumOnTheLeadingTimes) {
  // Moveouts up to 9 and a reference on 50 of 143 times: the prefix the reference reads must
  // still hold every window those times use.
  const MfBenchSize s{4, 3, 24, 166, 1};
  const MfNetworkInputs in = make_network_inputs(s, 9, 17);
  const std::int64_t T = 4, C = 3, K = 24, L = 166, n_ref = 50;
  const Array stack =
      detail::fp64_reference(in.templates, in.data, in.moveouts, in.weights, n_ref, true);
  const Array per = detail::fp64_reference(in.templates, in.data, {}, {}, n_ref, false);
  ASSERT_EQ(stack.shape(), Shape({T, n_ref}));
  ASSERT_EQ(per.shape(), Shape({T, C, n_ref}));
  const float* tp = in.templates.data_as<float>();
  const float* d = in.data.data_as<float>();
  const auto* m = in.moveouts.data_as<std::int64_t>();
  const float* w = in.weights.data_as<float>();
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < n_ref; ++i) {
      double sum = 0;
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t start = i + m[t * C + c];
        ASSERT_LE(start + K, L);
        sum += w[t * C + c] * direct_cc(tp + (t * C + c) * K, d + c * L + start, K);
        // Per channel: no moveout, unweighted.
        const double cc = direct_cc(tp + (t * C + c) * K, d + c * L + i, K);
        // The reference is written as float32: half an ulp, 2^-24 relative, plus the FP64
        // sums' own error (K u64 ~ 1e-14), far below; one float32 ulp allows for both.
        EXPECT_NEAR(per.data_as<float>()[(t * C + c) * n_ref + i], cc,
                    std::ldexp(1.0, -23) * std::max(1.0, std::fabs(cc)));
      }
      EXPECT_NEAR(stack.data_as<float>()[t * n_ref + i], sum,
                  std::ldexp(1.0, -23) * std::max(1.0, std::fabs(sum)))
          << "template " << t << ", time " << i;
    }
}

TEST(MfBenchReport, CasesRoundTripThroughTheSchema) {
  BenchReport r = BenchReport::start("mfilter", DeviceSummary{"cuda", "Test GPU", "1.0", "9.0"});
  const MfBenchSize a = study_case_size();
  for (const auto& m : study_methods()) {
    BenchCase c = study_case_template(m, a, 1 << 20, "trace.npy tiled");
    c.stats = compute_stats(std::vector<double>{1.0, 2.0, 3.0});
    c.TFLOPs = tflops(a.flops(), c.stats.median_ms);
    c.error = {{"real_max_abs", 1e-4}, {"uniform_max_abs", 2e-5}};
    r.cases.push_back(std::move(c));
  }
  const MfBenchSize b = network_case_size(true);
  r.cases.push_back(network_case_template(b, "tensor+detect", Precision::Split, 8192));
  r.cases.back().params["failed"] = std::string("Unsupported: not built yet");
  const std::string json = r.to_json();
  const auto bytes = std::as_bytes(std::span(json.data(), json.size()));
  const BenchReport back = parse_bench_report(bytes, "mfilter.json");
  ASSERT_EQ(back.cases.size(), r.cases.size());
  EXPECT_EQ(back.benchmark, "mfilter");
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const BenchCase& c = back.cases[i];
    EXPECT_EQ(c.params, r.cases[i].params) << i;
    EXPECT_EQ(c.method, r.cases[i].method);
    EXPECT_EQ(c.precision, r.cases[i].precision);
    // The keys bench/peers/mfilter_peers.py and tools/perf_tables.py read, with their types.
    for (const char* k :
         {"templates", "channels", "length", "samples", "n_corr", "reference_times"})
      EXPECT_TRUE(std::holds_alternative<std::int64_t>(c.params.at(k))) << k;
    EXPECT_TRUE(std::holds_alternative<std::string>(c.params.at("case")));
  }
  EXPECT_EQ(std::get<std::string>(back.cases.front().params.at("timing")), "call");  // naive
  EXPECT_EQ(std::get<std::string>(back.cases[1].params.at("timing")), "gemm");  // cublas1, GemmEx
  EXPECT_EQ(std::get<std::string>(back.cases.back().params.at("case")), "b");
  EXPECT_EQ(std::get<std::string>(back.cases.back().params.at("failed")),
            "Unsupported: not built yet");
  EXPECT_DOUBLE_EQ(back.cases.front().error.at("real_max_abs"), 1e-4);
}

}  // namespace
}  // namespace halfscope::bench

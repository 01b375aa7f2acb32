// `bench deconv` on the CPU at 32 x 32 (include/halfscope/bench/deconv_bench.hpp): the cases, the
// curves and the headline in the JSON, each checked against what the JSON itself or an
// independent computation says (per-iteration times from the stored elapsed_ms, the time to
// target from the stored distances, Fig. 8's mixed error against the FP16 rounding bound, the
// dumped exact solution against tikhonov_exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "halfscope/bench/deconv_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"
#include "halfscope/io/npy.hpp"
#include "test_support.hpp"

namespace halfscope::bench {
namespace {

namespace fs = std::filesystem;
using deconv::Solver;

// With the PSF divided by max |h^| (the bench's default), kappa(Q) <= 1 + 1 / lambda = 11 for
// lambda = 0.1: CG reaches the target within the run and the headline's "reached" path is
// exercised; tf32 is not a deconvolution precision, so its cases must be recorded as failed, not
// thrown.
DeconvBenchOptions tiny() {
  DeconvBenchOptions o;
  o.size = 32;
  o.snr_db = {37};
  o.solvers = {Solver::Fixed, Solver::CG};
  o.precisions = {Precision::Single, Precision::Mixed, Precision::TF32};
  o.iterations = 40;
  o.lambda = 0.1;
  o.device = DeviceKind::Cpu;
  o.target = 1e-2;
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

TEST(DeconvBench, IterationTimesSpreadGapsOverTheirIterations) {
  std::vector<deconv::TraceRow> t(4);
  const double iteration[] = {0, 1, 2, 4}, elapsed[] = {0.5, 1.5, 3.5, 9.0};
  for (std::size_t k = 0; k < 4; ++k) {
    t[k].iteration = static_cast<std::int64_t>(iteration[k]);
    t[k].elapsed_ms = elapsed[k];
  }
  EXPECT_EQ(deconv_iteration_ms(t), (std::vector<double>{1.0, 2.0, 2.75}));  // 2 -> 4: 5.5 / 2
  EXPECT_TRUE(deconv_iteration_ms({t[0]}).empty());
}

TEST(DeconvBench, RejectsBadOptions) {
  DeconvBenchOptions o = tiny();
  o.iterations = 0;
  EXPECT_THROW(run_deconv_bench(o), InvalidInput);
  o = tiny();
  o.size = 8;
  EXPECT_THROW(deconv_bench_inputs(o), InvalidInput);
  o = tiny();
  o.target = 0;
  EXPECT_THROW(run_deconv_bench(o), InvalidInput);
}

TEST(DeconvBench, TinyRunJsonIsConsistent) {
  DeconvBenchOptions o = tiny();
  const test::TempDir tmp;
  const fs::path dump = tmp / "inputs";
  o.dump_dir = dump;
  const DeconvBenchResult r = run_deconv_bench(o);
  // 1 Wiener + 2 solvers x 3 precisions + 2 Fig. 8 rows.
  ASSERT_EQ(r.report.cases.size(), 9u);
  ASSERT_EQ(r.series.size(), r.report.cases.size());
  EXPECT_EQ(r.report.benchmark, "deconv");
  EXPECT_EQ(r.report.device.kind, "cpu");

  const std::string text = r.to_json();
  const nlohmann::json j = nlohmann::json::parse(text);
  const BenchReport back =
      parse_bench_report(std::as_bytes(std::span(text.data(), text.size())), "deconv.json");
  EXPECT_EQ(back.cases.size(), r.report.cases.size());
  ASSERT_EQ(j["cases"].size(), 9u);
  for (const nlohmann::json& c : j["cases"]) {
    const std::string method = c["method"];
    if (method == "wiener" || method.rfind("fig8", 0) == 0) {
      EXPECT_FALSE(c.contains("series")) << method;
      continue;
    }
    const std::string precision = c["precision"];
    if (precision == "tf32") {  // refused by deconvolve, recorded with its message
      ASSERT_TRUE(c["params"].contains("failed")) << method;
      EXPECT_NE(c["params"]["failed"].get<std::string>().find("tf32"), std::string::npos);
      EXPECT_FALSE(c.contains("series"));
      continue;
    }
    // FP16 storage may overflow: the one failure a mixed run may record, and it must say so;
    // single must run.
    if (precision == "mixed" && c["params"].contains("failed")) {
      EXPECT_NE(c["params"]["failed"].get<std::string>().find("overflow"), std::string::npos);
      continue;
    }
    ASSERT_FALSE(c["params"].contains("failed")) << c["params"]["failed"];
    const nlohmann::json& s = c["series"];
    const std::size_t rows = s["iteration"].size();
    // Traced at every iteration, the initial image included (a run may stop early: converged).
    ASSERT_EQ(rows, c["params"]["iterations_done"].get<std::size_t>() + 1) << method;
    for (const char* key : {"criterion", "distance", "elapsed_ms"}) EXPECT_EQ(s[key].size(), rows);
    // median_ms is the median of the stored per-iteration times.
    std::vector<double> steps;
    for (std::size_t k = 1; k < rows; ++k)
      steps.push_back(
          std::max(0.0, s["elapsed_ms"][k].get<double>() - s["elapsed_ms"][k - 1].get<double>()));
    EXPECT_DOUBLE_EQ(c["median_ms"].get<double>(), median(steps)) << method;
    // The time to target is the elapsed time of the first stored distance <= target.
    std::size_t hit = rows;
    for (std::size_t k = 0; k < rows && hit == rows; ++k)
      if (s["distance"][k].is_number() && s["distance"][k].get<double>() <= o.target) hit = k;
    EXPECT_EQ(c["params"]["reached_target"].get<bool>(), hit < rows) << method;
    if (hit < rows) {
      EXPECT_EQ(c["params"]["iterations_to_target"].get<double>(),
                s["iteration"][hit].get<double>());
      EXPECT_EQ(c["params"]["solver_ms_to_target"].get<double>(),
                s["elapsed_ms"][hit].get<double>());
    }
    EXPECT_EQ(c["error"]["final_distance"].get<double>(), s["distance"][rows - 1].get<double>());
  }
  // CG in single on kappa <= 11 reaches 1e-2 within sqrt(11) ln(2 / 1e-2) / 2 = 9 iterations
  // (the A-norm bound; the 2-norm adds a factor sqrt(kappa) = 3.3, one or two more), far within
  // the 40 run, so the time-to-target path is exercised.
  const auto find = [&j](const char* method, const char* precision) {
    for (const nlohmann::json& c : j["cases"])
      if (c["method"] == method && c["precision"] == precision) return c;
    return nlohmann::json();
  };
  EXPECT_TRUE(find("cg", "single")["params"]["reached_target"].get<bool>());
  // The headline: CG in mixed is the only candidate here; its ratio is fixed / single's time
  // (to target, or its whole run) over CG's time to target.
  const nlohmann::json cg_mixed = find("cg", "mixed");
  ASSERT_FALSE(cg_mixed.is_null());
  ASSERT_EQ(j["headline"].size(), 1u);
  const nlohmann::json& h = j["headline"][0];
  const nlohmann::json fixed = find("fixed", "single")["params"];
  EXPECT_EQ(h["fixed_single_reached"].get<bool>(), fixed["reached_target"].get<bool>());
  EXPECT_DOUBLE_EQ(h["fixed_single_ms"].get<double>(),
                   fixed[fixed["reached_target"].get<bool>() ? "solver_ms_to_target" : "solver_ms"]
                       .get<double>());
  if (!cg_mixed["params"].contains("failed") && cg_mixed["params"]["reached_target"].get<bool>()) {
    EXPECT_EQ(h["best_cg_precision"], "mixed");
    EXPECT_DOUBLE_EQ(h["best_cg_ms"].get<double>(),
                     cg_mixed["params"]["solver_ms_to_target"].get<double>());
    EXPECT_NEAR(h["ratio"].get<double>(),
                h["fixed_single_ms"].get<double>() / h["best_cg_ms"].get<double>(), 1e-12);
    EXPECT_EQ(h["ratio_is_lower_bound"].get<bool>(), !h["fixed_single_reached"].get<bool>());
  } else {
    EXPECT_TRUE(h["best_cg_ms"].is_null());
    EXPECT_TRUE(h["ratio"].is_null());
  }

  // Fig. 8, mixed: sky and PSF stored in FP16 (each value within u16 = 2^-11 relative), FP32
  // FFTs, the result rounded once to FP16. To first order pixel i is off by at most
  // u16 |y_i| + 2 u16 (|h| * |f|)_i (the circular convolution of the magnitudes, whose maximum
  // does not depend on where the PSF's origin is), plus the FP32 FFT's error (~1e-6 relative at
  // this size, covered by the 1 % slack).
  const Array sky = io::read_npy(dump / "sky.npy");
  const Array psf_peak = io::read_npy(dump / "psf_peak.npy");
  const std::int64_t n = o.size;
  double magnitude_conv = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t jj = 0; jj < n; ++jj) {
      double acc = 0;
      for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t l = 0; l < n; ++l)
          acc += std::fabs(psf_peak.at_as_double(k * n + l)) *
                 std::fabs(sky.at_as_double(((i - k + n) % n) * n + (jj - l + n) % n));
      magnitude_conv = std::max(magnitude_conv, acc);
    }
  for (const nlohmann::json& c : j["cases"]) {
    if (c["method"] != "fig8-psf-convolution") continue;
    ASSERT_FALSE(c["params"].contains("failed")) << c["params"]["failed"];
    const double rel = c["error"]["max_relative_difference"].get<double>();
    EXPECT_TRUE(std::isfinite(rel));
    if (c["precision"] == "mixed") {
      const double ymax = c["error"]["reference_max"].get<double>();
      EXPECT_LE(rel, 1.01 * std::ldexp(1.0, -11) * (1 + 2 * magnitude_conv / ymax));
    }
    EXPECT_GT(c["error"]["mse"].get<double>(), 0);  // FP16 really rounded something
  }

  // The dump: the inputs and the exact solution the peers compare against.
  const Array psf = io::read_npy(dump / "psf.npy");
  const Array dirty = io::read_npy(dump / "dirty_37db.npy");
  const Array exact = io::read_npy(dump / "exact_37db.npy");
  ASSERT_EQ(psf.shape(), (Shape{32, 32}));
  const Array reference = deconv::tikhonov_exact(dirty, psf, o.lambda, o.boundary, DeviceKind::Cpu);
  double worst = 0, top = 0;
  for (std::int64_t i = 0; i < exact.size(); ++i) {
    worst = std::max(worst, std::fabs(exact.at_as_double(i) - reference.at_as_double(i)));
    top = std::max(top, std::fabs(reference.at_as_double(i)));
  }
  EXPECT_LE(worst, 1e-12 * top);  // the same FP64 computation
  EXPECT_TRUE(fs::exists(dump / "meta.json"));
}

}  // namespace
}  // namespace halfscope::bench

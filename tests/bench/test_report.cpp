// Benchmark statistics, the JSON report schema (DESIGN.md section 5) and the ceilings loader.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "halfscope/bench/ceilings.hpp"
#include "halfscope/bench/report.hpp"
#include "halfscope/bench/stats.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

namespace halfscope::bench {
namespace {

TEST(BenchStats, MedianOfOddAndEvenCounts) {
  const std::vector<double> odd = {3.0, 1.0, 2.0, 10.0, 0.5};
  const Stats a = compute_stats(odd);
  EXPECT_DOUBLE_EQ(a.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(a.min_ms, 0.5);
  EXPECT_DOUBLE_EQ(a.max_ms, 10.0);
  EXPECT_EQ(a.repeats, 5);
  const std::vector<double> even = {4.0, 1.0, 3.0, 2.0};
  const Stats b = compute_stats(even);
  EXPECT_DOUBLE_EQ(b.median_ms, 2.5);
  EXPECT_EQ(b.repeats, 4);
  const std::vector<double> one = {7.0};
  EXPECT_DOUBLE_EQ(compute_stats(one).median_ms, 7.0);
  EXPECT_THROW((void)compute_stats(std::vector<double>{}), InvalidInput);
  EXPECT_THROW((void)compute_stats(std::vector<double>{1.0, NAN}), InvalidInput);
  EXPECT_THROW((void)compute_stats(std::vector<double>{-1.0}), InvalidInput);
}

TEST(BenchStats, RatesAndHostTiming) {
  EXPECT_DOUBLE_EQ(gbps(2e9, 1000.0), 2.0);
  EXPECT_DOUBLE_EQ(tflops(3e12, 500.0), 6.0);
  EXPECT_TRUE(std::isnan(gbps(1.0, 0.0)));
  int calls = 0;
  const Stats s = time_host([&] { ++calls; }, 2, 5);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(s.repeats, 5);
  EXPECT_LE(s.min_ms, s.median_ms);
  EXPECT_LE(s.median_ms, s.max_ms);
}

BenchReport sample_report() {
  BenchReport r = BenchReport::start("conv", {"cuda", "NVIDIA H200", "580.159", "9.0"});
  r.ceilings.copy_GBps = 4190;
  r.ceilings.fp32_TFLOPs = 51;
  r.ceilings.fp16_TFLOPs = 764;
  BenchCase c;
  c.implementation = "halfscope";
  c.method = "register";
  c.precision = "mixed";
  c.params = {{"rows", std::int64_t{4096}},
              {"scale", 0.25},
              {"mode", std::string("same")},
              {"check", true}};
  c.stats = {0.21, 0.20, 0.23, 50};
  c.GBps = 1290;
  c.TFLOPs = 12.1;
  c.error = {{"mre", 3.1e-4}, {"max_abs", 2e-3}};
  r.cases.push_back(c);
  BenchCase d;
  d.implementation = "cudnn-via-pytorch";
  d.method = "conv2d";
  d.precision = "single";
  d.stats = {1.5, 1.0, 2.0, 10};
  r.cases.push_back(d);  // no rates, no error: written as null / {}
  return r;
}

TEST(BenchReport, WritesTheSchemaAndReadsItBack) {
  test::TempDir dir;
  const BenchReport r = sample_report();
  EXPECT_TRUE(std::regex_match(r.date, std::regex("20[0-9]{2}-[01][0-9]-[0-3][0-9]"))) << r.date;
  EXPECT_FALSE(r.commit.empty());
  const auto path = dir / "report.json";
  r.write(path);

  // The text has the schema's keys; unmeasured values are null (rates) or absent (ceilings).
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* key :
       {"\"benchmark\": \"conv\"", "\"date\"", "\"commit\"", "\"device\"",
        "\"driver\": \"580.159\"", "\"cc\": \"9.0\"", "\"ceilings\"", "\"copy_GBps\": 4190",
        "\"cases\"", "\"implementation\"", "\"params\"", "\"median_ms\": 0.21", "\"repeats\": 50",
        "\"GBps\": null", "\"TFLOPs\": 12.1", "\"error\": {}", "\"rows\": 4096", "\"check\": true"})
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
  EXPECT_EQ(text.find("tf32_TFLOPs"), std::string::npos) << text;

  const BenchReport b = read_bench_report(path);
  EXPECT_EQ(b.benchmark, "conv");
  EXPECT_EQ(b.date, r.date);
  EXPECT_EQ(b.commit, r.commit);
  EXPECT_EQ(b.device.kind, "cuda");
  EXPECT_EQ(b.device.name, "NVIDIA H200");
  EXPECT_EQ(b.device.driver, "580.159");
  EXPECT_EQ(b.device.cc, "9.0");
  EXPECT_EQ(b.ceilings.device, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(b.ceilings.copy_GBps, 4190);
  EXPECT_DOUBLE_EQ(b.ceilings.fp16_TFLOPs, 764);
  EXPECT_TRUE(std::isnan(b.ceilings.tf32_TFLOPs));
  EXPECT_FALSE(b.host_ceilings.has_value());
  ASSERT_EQ(b.cases.size(), 2u);
  const BenchCase& c = b.cases[0];
  EXPECT_EQ(c.implementation, "halfscope");
  EXPECT_EQ(c.method, "register");
  EXPECT_EQ(c.precision, "mixed");
  EXPECT_EQ(std::get<std::int64_t>(c.params.at("rows")), 4096);
  EXPECT_DOUBLE_EQ(std::get<double>(c.params.at("scale")), 0.25);
  EXPECT_EQ(std::get<std::string>(c.params.at("mode")), "same");
  EXPECT_TRUE(std::get<bool>(c.params.at("check")));
  EXPECT_DOUBLE_EQ(c.stats.median_ms, 0.21);
  EXPECT_DOUBLE_EQ(c.stats.min_ms, 0.20);
  EXPECT_DOUBLE_EQ(c.stats.max_ms, 0.23);
  EXPECT_EQ(c.stats.repeats, 50);
  EXPECT_DOUBLE_EQ(c.GBps, 1290);
  EXPECT_DOUBLE_EQ(c.error.at("mre"), 3.1e-4);
  EXPECT_TRUE(std::isnan(b.cases[1].GBps));
  EXPECT_TRUE(std::isnan(b.cases[1].TFLOPs));
  EXPECT_TRUE(b.cases[1].error.empty());
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(BenchReport, MalformedInputIsAnIoErrorNamingFileAndField) {
  const auto expect_error = [](const std::string& text, const std::string& fragment) {
    try {
      (void)parse_bench_report(bytes_of(text), "r.json");
      ADD_FAILURE() << "expected IoError for " << text;
    } catch (const IoError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("r.json: ", 0), 0u) << m;
      EXPECT_NE(m.find(fragment), std::string::npos) << m;
    }
  };
  expect_error("{\"benchmark\": \"conv\", ", "not valid JSON");
  expect_error("[1, 2]", "expected an object");
  expect_error("{\"date\": \"2026-01-01\"}", "'benchmark'");
  expect_error("{\"benchmark\": 3}", "'benchmark': expected a string, found number");
  expect_error("{\"benchmark\": \"x\", \"cases\": {}}", "'cases'");
  expect_error("{\"benchmark\": \"x\", \"cases\": [{\"median_ms\": \"fast\"}]}",
               "'cases[0].median_ms'");
  expect_error("{\"benchmark\": \"x\", \"cases\": [{\"params\": {\"a\": [1]}}]}",
               "'cases[0].params.a'");
  expect_error("{\"benchmark\": \"x\", \"ceilings\": {\"copy_GBps\": \"many\"}}",
               "'ceilings.copy_GBps'");
  EXPECT_THROW((void)read_bench_report("/nonexistent/halfscope/r.json"), IoError);
}

TEST(BenchReport, SlugAndResultPath) {
  EXPECT_EQ(device_slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
  EXPECT_EQ(device_slug("  Intel(R) Xeon(R) @ 2.20GHz (2 threads) "),
            "intel-r-xeon-r-2-20ghz-2-threads");
  EXPECT_EQ(device_slug("???"), "device");
  BenchReport r = sample_report();
  r.date = "2026-11-21";
  EXPECT_EQ(result_path("bench/results", r),
            std::filesystem::path("bench/results/2026-11-21-nvidia-h200-conv.json"));
}

TEST(BenchReport, CommitComesFromTheEnvironmentFirst) {
  const char* old = std::getenv("HALFSCOPE_COMMIT");
  const std::string saved = old ? old : "";
  ::setenv("HALFSCOPE_COMMIT", "abc1234", 1);
  EXPECT_EQ(source_commit(), "abc1234");
  if (old)
    ::setenv("HALFSCOPE_COMMIT", saved.c_str(), 1);
  else
    ::unsetenv("HALFSCOPE_COMMIT");
  const std::string c = source_commit();
  if (old)  // the caller's own setting wins again once restored (gpu-check.sh passes one)
    EXPECT_EQ(c, saved);
  else
    EXPECT_TRUE(c == "unknown" || std::regex_match(c, std::regex("[0-9a-f]{4,40}"))) << c;
}

void write_ceilings(const std::filesystem::path& path, const std::string& date,
                    const std::string& device, double copy,
                    std::optional<Ceilings> host = std::nullopt) {
  BenchReport r = BenchReport::start("ceilings", {"cuda", device, "580", "9.0"});
  r.date = date;
  r.ceilings.copy_GBps = copy;
  r.ceilings.fp64_TFLOPs = 60;
  r.host_ceilings = std::move(host);
  r.write(path);
}

TEST(BenchReport, LoadsTheLatestCeilingsOfADevice) {
  test::TempDir dir;
  EXPECT_FALSE(load_latest_ceilings(dir / "missing", "NVIDIA H100").has_value());
  write_ceilings(dir / "2026-02-01-nvidia-h100-ceilings.json", "2026-02-01", "NVIDIA H100", 3100);
  write_ceilings(dir / "2026-01-01-nvidia-h100-ceilings.json", "2026-01-01", "NVIDIA H100", 3000);
  Ceilings cpu;
  cpu.device = "CPU X (2 threads)";
  cpu.copy_GBps = 12;
  write_ceilings(dir / "2026-03-01-nvidia-h200-ceilings.json", "2026-03-01", "NVIDIA H200", 4200,
                 cpu);
  // Not a ceilings file: ignored even though it names the device.
  write_ceilings(dir / "2026-04-01-nvidia-h100-conv.json", "2026-04-01", "NVIDIA H100", 1);

  const auto h100 = load_latest_ceilings(dir.path(), "NVIDIA H100");
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->copy_GBps, 3100);
  EXPECT_DOUBLE_EQ(h100->fp64_TFLOPs, 60);
  EXPECT_EQ(h100->device, "NVIDIA H100");
  const auto host = load_latest_ceilings(dir.path(), "CPU X (2 threads)");
  ASSERT_TRUE(host.has_value());
  EXPECT_DOUBLE_EQ(host->copy_GBps, 12);
  EXPECT_TRUE(std::isnan(host->fp64_TFLOPs));
  EXPECT_FALSE(load_latest_ceilings(dir.path(), "NVIDIA A100").has_value());

  std::ofstream(dir / "2026-05-01-broken-ceilings.json") << "{not json";
  EXPECT_THROW((void)load_latest_ceilings(dir.path(), "NVIDIA H100"), IoError);
}

TEST(BenchCeilings, CpuMeasurementGivesPlausibleNumbers) {
  CeilingsOptions o;
  o.copy_bytes = 16 << 20;
  o.gemm_n = 128;
  o.cpu_seconds_per_measurement = 0.2;
  std::vector<std::string> messages;
  o.progress = [&](const std::string& m) { messages.push_back(m); };
  const BenchReport r = measure_cpu_ceilings(o);
  EXPECT_EQ(r.benchmark, "ceilings");
  EXPECT_EQ(r.device.kind, "cpu");
  EXPECT_EQ(r.ceilings.device, r.device.name);
  EXPECT_GT(r.ceilings.copy_GBps, 0.05);  // anything that runs moves more than 50 MB/s
  EXPECT_LT(r.ceilings.copy_GBps, 1e5);
  EXPECT_FALSE(messages.empty());
  ASSERT_FALSE(r.cases.empty());
  EXPECT_EQ(r.cases[0].method, "memcpy");
  EXPECT_GE(r.cases[0].stats.repeats, 3);
#if HALFSCOPE_HAS_BLAS
  EXPECT_GT(r.ceilings.fp32_TFLOPs, 1e-4);
  EXPECT_GT(r.ceilings.fp64_TFLOPs, 1e-4);
  EXPECT_LT(r.ceilings.fp32_TFLOPs, 1e3);
  EXPECT_EQ(r.cases.size(), 3u);
#endif
  EXPECT_TRUE(std::isnan(r.ceilings.tf32_TFLOPs));
#if !HALFSCOPE_WITH_CUDA
  EXPECT_THROW((void)measure_gpu_ceilings(0, o), Unsupported);
#endif
}

}  // namespace
}  // namespace halfscope::bench

// `halfscope bench conv`: study 000's convolution benchmark (Figures 2-4) on this GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "halfscope/bench/conv_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

struct ConvBenchArgs {
  std::string json, export_dir, image512 = "data/camera.npy", results = "bench/results";
  std::vector<std::int64_t> sizes, widths;
  std::vector<std::string> methods;
  int repeats = 20;
  int calls_per_sample = 1;
};

std::pair<ConvMethod, Precision> parse_case(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos)
    throw InvalidInput(
        "bench conv: --methods takes METHOD:PRECISION items (register:mixed), found '" + text +
        "'");
  return {parse_conv_method(text.substr(0, colon)), parse_precision(text.substr(colon + 1))};
}

double param_int(const bench::BenchCase& c, const char* key) {
  const auto it = c.params.find(key);
  return it == c.params.end() ? NAN : static_cast<double>(std::get<std::int64_t>(it->second));
}

void print_conv_report(const bench::BenchReport& r, const std::optional<bench::Ceilings>& ceil) {
  std::printf("%-6s %-5s %-9s %-7s %10s %8s %8s %10s\n", "size", "width", "method", "prec",
              "median ms", "GB/s", "TFLOP/s", "MRE");
  for (const auto& c : r.cases) {
    if (c.params.count("failed")) {
      std::printf("%-6.0f %-5.0f %-9s %-7s   %s\n", param_int(c, "rows"), param_int(c, "kernel"),
                  c.method.c_str(), c.precision.c_str(),
                  std::get<std::string>(c.params.at("failed")).c_str());
      continue;
    }
    const auto mre = c.error.count("mre") ? c.error.at("mre") : NAN;
    std::printf("%-6.0f %-5.0f %-9s %-7s %10.4f %8.0f %8.2f %10.2e\n", param_int(c, "rows"),
                param_int(c, "kernel"), c.method.c_str(), c.precision.c_str(), c.stats.median_ms,
                c.GBps, c.TFLOPs, mre);
  }
  if (ceil)
    std::printf("ceilings (%s): copy %.0f GB/s, FP32 %.1f, FP16 %.1f TFLOP/s\n",
                ceil->device.c_str(), ceil->copy_GBps, ceil->fp32_TFLOPs, ceil->fp16_TFLOPs);
  // The study's crossover: the first width at which FFT beats the best direct method, per size.
  std::map<std::pair<double, double>, std::map<std::string, double>>
      best;  // (size, width) -> method -> ms
  for (const auto& c : r.cases)
    if (c.precision == "single" && !c.params.count("failed"))
      best[{param_int(c, "rows"), param_int(c, "kernel")}][c.method] = c.stats.median_ms;
  std::map<double, double> crossover;
  for (const auto& [key, m] : best) {
    if (!m.count("fft") || crossover.count(key.first)) continue;
    double direct = INFINITY;
    for (const char* d : {"naive", "register"})
      if (m.count(d)) direct = std::min(direct, m.at(d));
    if (m.at("fft") < direct) crossover[key.first] = key.second;
  }
  for (const auto& [size, width] : crossover)
    std::printf("crossover (single): FFT overtakes the direct methods at width %.0f on %.0f^2\n",
                width, size);
}

void run_bench_conv(const ConvBenchArgs& a, const Globals& g) {
  if (!a.json.empty()) io::check_output_path(a.json);
  bench::ConvBenchOptions o;
  if (!a.sizes.empty()) o.sizes = a.sizes;
  if (!a.widths.empty()) o.widths = a.widths;
  const std::int64_t smallest = *std::min_element(o.sizes.begin(), o.sizes.end());
  const std::int64_t widest = *std::max_element(o.widths.begin(), o.widths.end());
  if (widest > smallest)
    throw InvalidInput(
        "bench conv: --widths: expected kernel widths up to the smallest image size " +
        std::to_string(smallest) + ", found " + std::to_string(widest));
  for (const auto& m : a.methods) o.cases.push_back(parse_case(m));
  o.repeats = a.repeats;
  o.calls_per_sample = a.calls_per_sample;
  o.image_512 = a.image512;
  o.export_dir = a.export_dir;
  o.progress = [&g](const std::string& m) { info(g, m); };
  // A GPU benchmark (its CPU peers run beside the GPU methods): a CPU device is a mistake about
  // the run, said as such rather than as a missing CUDA device.
  if (g.device == "cpu")
    throw InvalidInput(
        "bench conv measures the GPU methods: expected --device auto or cuda, found "
        "--device cpu");
  (void)resolve_device(DeviceKind::Cuda);
  bench::BenchReport r = bench::run_conv_bench(o);
  const auto ceil = bench::load_latest_ceilings(a.results, r.device.name);
  if (ceil) r.ceilings = *ceil;
  print_conv_report(r, ceil);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

}  // namespace

void register_bench_conv(CLI::App& bench, Globals& g) {
  auto a = std::make_shared<ConvBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "conv", "study 000: convolution time and error against kernel width (GPU)");
  cmd->add_option("-o,--json", a->json, "write the results to this JSON file");
  // Each value is range-checked before any GPU work (a 0 or a negative size would otherwise
  // reach the image simulation, a width beyond the image a meaningless case).
  cmd->add_option("--sizes", a->sizes, "square image sizes (default 512 4096 8192)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  cmd->add_option("--widths", a->widths, "kernel widths (default 3..115, 16 values)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 12));
  cmd->add_option("--methods", a->methods, "METHOD:PRECISION pairs (default: every GPU pair)")
      ->delimiter(',');
  cmd->add_option("--repeats", a->repeats, "timed samples per case")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--calls-per-sample", a->calls_per_sample,
                  "back-to-back calls per timed sample (1: each call timed on its own)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--image512", a->image512, "the 512x512 test image (.npy)")
      ->capture_default_str();
  cmd->add_option("--export-inputs", a->export_dir,
                  "write the inputs for bench/peers/conv_peers.py here");
  cmd->add_option("--results", a->results, "recorded ceilings to compare with")
      ->capture_default_str();
  cmd->callback([a, &g] { run_bench_conv(*a, g); });
}

}  // namespace halfscope::cli

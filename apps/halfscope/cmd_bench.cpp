// `halfscope bench ...`: benchmarks recorded in the JSON schema of bench/README.md. First
// sub-subcommand: `ceilings`, the machine's measured copy bandwidth and GEMM rate per precision.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli.hpp"
#include "deconv_cli.hpp"
#include "halfscope/bench/ceilings.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

struct CeilingsArgs {
  std::string json;
  bool quick = false;
  bool cpu_only = false;
  std::int64_t gemm_n = 0;
};

std::string cell(double x, int width) {
  char buf[32];
  if (!std::isfinite(x))
    std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else if (x < 10)
    std::snprintf(buf, sizeof buf, "%*.3f", width, x);
  else if (x < 1000)
    std::snprintf(buf, sizeof buf, "%*.1f", width, x);
  else
    std::snprintf(buf, sizeof buf, "%*.0f", width, x);
  return buf;
}

std::string padded(std::string s, std::size_t width) {
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s + std::string(width - s.size(), ' ');
}

void print_ceilings_row(const bench::Ceilings& c) {
  std::cout << padded(c.device, 44) << cell(c.copy_GBps, 10) << cell(c.fp64_TFLOPs, 8)
            << cell(c.fp32_TFLOPs, 8) << cell(c.tf32_TFLOPs, 8) << cell(c.fp16_TFLOPs, 8)
            << cell(c.bf16_TFLOPs, 8) << "\n";
}

void print_report(const bench::BenchReport& r) {
  std::cout << padded("device", 44)
            << "  copy GB/s    FP64    FP32    TF32    FP16    BF16 (TFLOP/s)\n";
  print_ceilings_row(r.ceilings);
  if (r.host_ceilings) print_ceilings_row(*r.host_ceilings);
  std::cout << "\n"
            << padded("implementation / method", 40) << padded("precision", 10)
            << "  median ms     GB/s  TFLOP/s\n";
  for (const bench::BenchCase& c : r.cases)
    std::cout << padded(c.implementation + " / " + c.method, 40) << padded(c.precision, 10)
              << cell(c.stats.median_ms, 11) << cell(c.GBps, 9) << cell(c.TFLOPs, 9) << "\n";
  std::cout << "(copy GB/s counts bytes read + written; FP16 and BF16 GEMMs accumulate in FP32; "
               "FP32 excludes TF32)\n";
}

void run_ceilings(const CeilingsArgs& args, const Globals& g) {
  if (!args.json.empty()) io::check_output_path(args.json);
  const DeviceKind requested = g.device_kind();
  if (args.cpu_only && requested == DeviceKind::Cuda)
    throw InvalidInput("bench ceilings: --cpu-only contradicts --device cuda");
  const DeviceKind kind = args.cpu_only ? DeviceKind::Cpu : resolve_device(requested);

  bench::CeilingsOptions options;
  options.quick = args.quick;
  options.gemm_n = args.gemm_n;
  options.progress = [&g](const std::string& m) { info(g, m); };

  // --gemm-n sizes the measured device's GEMM; the host CPU of a GPU run keeps its own default.
  bench::CeilingsOptions cpu_options = options;
  if (kind == DeviceKind::Cuda) cpu_options.gemm_n = 0;
  bench::BenchReport cpu = bench::measure_cpu_ceilings(cpu_options);
  bench::BenchReport report;
  if (kind == DeviceKind::Cuda) {
    report = bench::measure_gpu_ceilings(0, options);
    report.host_ceilings = cpu.ceilings;
    for (bench::BenchCase& c : cpu.cases) {
      c.params["device"] = std::string("host");
      report.cases.push_back(std::move(c));
    }
  } else {
    report = std::move(cpu);
  }
  print_report(report);
  if (!args.json.empty()) {
    report.write(args.json);
    info(g, "wrote " + args.json);
  }
}

}  // namespace

void register_bench(CLI::App& app, Globals& g) {
  auto* bench = app.add_subcommand(
      "bench", "measure performance next to the machine's ceilings (JSON schema: bench/README.md)");
  bench->require_subcommand(1);

  auto args = std::make_shared<CeilingsArgs>();
  auto* ceilings = bench->add_subcommand(
      "ceilings", "measure copy bandwidth and GEMM TFLOP/s per precision on the CPU and the GPU");
  ceilings->add_option("--json", args->json, "also write the results to this JSON file");
  ceilings->add_flag("--quick", args->quick, "smaller problems: done in a few seconds");
  ceilings->add_flag("--cpu-only", args->cpu_only, "measure the CPU only, even with a GPU present");
  ceilings
      ->add_option(
          "--gemm-n", args->gemm_n,
          "GEMM order n of the measured device (default 8192 on a GPU, 2048 with --cpu-only)")
      ->check(CLI::Range(std::int64_t{64}, std::int64_t{32768}));
  ceilings->callback([args, &g] { run_ceilings(*args, g); });
  register_bench_conv(*bench, g);
  register_bench_mfilter(*bench, g);
  register_bench_covariance(*bench, g);
  register_bench_cholesky(*bench, g);
  register_bench_deconv(*bench, g);
}

}  // namespace halfscope::cli

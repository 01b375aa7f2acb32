// `halfscope bench mfilter`: study 001's matched-filtering benchmark (Table I) and a network case
// with detection, on this GPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "halfscope/bench/mfilter_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

// The real trace that tools/stage-deps.sh stages (relative to the repository root).
constexpr const char* kStagedReal = ".deps/root/share/halfscope/mfilter-real.npy";

// The staged trace of this checkout, wherever the command runs from: under HALFSCOPE_SOURCE_DIR
// when set, else under the nearest folder above the executable that holds it (the binary lives
// in build/<preset>/apps/halfscope of the checkout), else under the current directory.
std::optional<std::filesystem::path> find_staged_real() {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* src = std::getenv("HALFSCOPE_SOURCE_DIR"); src && *src) roots.emplace_back(src);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      roots.push_back(d);
  roots.push_back(fs::current_path(ec));
  for (const fs::path& root : roots)
    if (fs::is_regular_file(root / kStagedReal, ec)) return root / kStagedReal;
  return std::nullopt;
}

struct MfBenchArgs {
  std::string json, export_dir, real_data, results = "bench/results", which = "all";
  bool quick = false;
  int repeats = 20;
  std::int64_t reference_times = 0;
};

std::string text_param(const bench::BenchCase& c, const char* key) {
  const auto it = c.params.find(key);
  if (it == c.params.end()) return "";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return "";
}

// The arithmetic ceiling a precision's tensor or CUDA cores run against.
double ceiling_for(const std::string& precision, const bench::Ceilings& c) {
  if (precision == "single") return c.fp32_TFLOPs;
  if (precision == "bf16") return c.bf16_TFLOPs;
  if (precision == "tf32") return c.tf32_TFLOPs;
  return c.fp16_TFLOPs;  // half, mixed, split: FP16 tensor cores
}

std::string num(double x, const char* fmt) {
  if (std::isinf(x)) return "inf";
  if (!std::isfinite(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

bool flag_param(const bench::BenchCase& c, const char* key) {
  const auto it = c.params.find(key);
  if (it == c.params.end()) return false;
  const auto* b = std::get_if<bool>(&it->second);
  return b && *b;
}

// An error, +inf when the row has non-finite outputs (printed as "inf", never as a small number).
double err(const bench::BenchCase& c, const char* key, const char* nonfinite) {
  const auto it = c.error.find(key);
  if (it == c.error.end()) return NAN;
  const auto bad = c.error.find(nonfinite);
  if (bad != c.error.end() && bad->second > 0) return INFINITY;
  return it->second;
}

void print_mfilter_report(const bench::BenchReport& r, const std::optional<bench::Ceilings>& ceil) {
  std::printf("%-4s %-14s %-7s %-6s %10s %8s %8s %7s %7s %10s %10s\n", "case", "method", "prec",
              "time", "median ms", "GB/s", "TFLOP/s", "%arith", "%copy", "err real", "err unif");
  for (const auto& c : r.cases) {
    const std::string timing = text_param(c, "timing");
    const std::string failed = text_param(c, "failed");
    std::printf("%-4s %-14s %-7s %-6s ", text_param(c, "case").c_str(), c.method.c_str(),
                c.precision.c_str(), timing.empty() ? "call" : timing.c_str());
    if (!failed.empty()) {
      std::printf("  failed: %s\n", failed.c_str());
      continue;
    }
    // Split runs three FP16 products per multiply-add (hi hi, hi lo, lo hi): its share of the
    // FP16 ceiling counts those executed products, not the direct-equivalent flops.
    const double executed = c.precision == "split" ? 3.0 : 1.0;
    const double arith = ceil ? 100.0 * executed * c.TFLOPs / ceiling_for(c.precision, *ceil) : NAN;
    const double copy = ceil ? 100.0 * c.GBps / ceil->copy_GBps : NAN;
    // Case (b): the stack's error on the leading times (noise) and around planted origins.
    const bool b = text_param(c, "case") == "b";
    const double e1 = b ? err(c, "max_abs", "nonfinite") : err(c, "real_max_abs", "real_nonfinite");
    const double e2 = b ? err(c, "origins_max_abs", "origins_nonfinite")
                        : err(c, "uniform_max_abs", "uniform_nonfinite");
    std::printf("%10.4f %8s %8s %7s %7s %10s %10s%s\n", c.stats.median_ms,
                num(c.GBps, "%.0f").c_str(), num(c.TFLOPs, "%.2f").c_str(),
                num(arith, "%.1f").c_str(), num(copy, "%.1f").c_str(), num(e1, "%.2e").c_str(),
                num(e2, "%.2e").c_str(), flag_param(c, "target") ? "  <- target" : "");
  }
  if (ceil)
    std::printf("ceilings (%s): copy %.0f GB/s, FP32 %.1f, BF16 %.1f, FP16 %.1f TFLOP/s\n",
                ceil->device.c_str(), ceil->copy_GBps, ceil->fp32_TFLOPs, ceil->bf16_TFLOPs,
                ceil->fp16_TFLOPs);
  else
    std::printf("(no recorded ceilings for this device: run `halfscope bench ceilings` first)\n");
  std::printf(
      "TFLOP/s count 2 T C K n_corr (direct-equivalent); %%arith of split counts its 3 FP16 "
      "products per multiply-add; GB/s the row's traffic floor (bytes_model: detect rows never "
      "write the stack); err = max |CC - CC_fp64|, inf when any output is not finite (case b: "
      "of the stack, on the leading times / around planted origins)\n");
}

void run_bench_mfilter(const MfBenchArgs& a, const Globals& g) {
  if (!a.json.empty()) io::check_output_path(a.json);
  if (a.which != "a" && a.which != "b" && a.which != "all")
    throw InvalidInput("bench mfilter: --case takes a, b or all, found '" + a.which + "'");
  // A GPU benchmark (its CPU peers run beside the GPU methods): a CPU device is a mistake about
  // the run, said as such rather than as a missing CUDA device.
  if (g.device == "cpu")
    throw InvalidInput(
        "bench mfilter measures the GPU methods: expected --device auto or cuda, found "
        "--device cpu");
  bench::MfBenchOptions o;
  o.study = a.which != "b";
  o.network = a.which != "a";
  o.quick = a.quick;
  o.repeats = a.repeats;
  o.reference_times = a.reference_times;
  o.export_dir = a.export_dir;
  if (!a.real_data.empty()) {
    if (!std::filesystem::is_regular_file(a.real_data))  // before any GPU work
      throw InvalidInput("bench mfilter: --real-data " + a.real_data +
                         ": no such file (expected a .npy trace; tools/stage-deps.sh stages one)");
    o.real_data = a.real_data;  // named explicitly: a missing file is an error
  } else if (const auto staged = find_staged_real()) {
    o.real_data = *staged;
  }
  o.progress = [&g](const std::string& m) { info(g, m); };
  (void)resolve_device(DeviceKind::Cuda);
  // Warned only once the run will happen: a refused run prints its one error line alone.
  if (o.study && o.real_data.empty())
    warn("bench mfilter: no real trace (" + std::string(kStagedReal) +
         " is not staged; tools/stage-deps.sh stages it): case (a) records uniform-data errors "
         "only");
  bench::BenchReport r = bench::run_mfilter_bench(o);
  const auto ceil = bench::load_latest_ceilings(a.results, r.device.name);
  if (ceil) r.ceilings = *ceil;
  print_mfilter_report(r, ceil);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

}  // namespace

void register_bench_mfilter(CLI::App& bench, Globals& g) {
  auto a = std::make_shared<MfBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "mfilter", "study 001: matched-filtering time and error per method (Table I), network case");
  cmd->add_option("-o,--json", a->json, "write the results to this JSON file");
  cmd->add_option("--case", a->which, "a (study, 16 x 256 x 4.32e6), b (network) or all")
      ->capture_default_str();
  cmd->add_flag("--quick", a->quick,
                "reduced network case (64 x 8 x 2^22), fewer repeats, smaller references");
  auto* repeats =
      cmd->add_option("--repeats", a->repeats, "timed calls per case (case b: at most 5)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000));
  cmd->add_option("--reference-times", a->reference_times,
                  "case (a): leading correlation times of the FP64 reference (default all; "
                  "quick 2^20)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--export-inputs", a->export_dir,
                  "write case (a)'s inputs and references for bench/peers/mfilter_peers.py here");
  cmd->add_option("--real-data", a->real_data,
                  std::string("real trace (.npy) tiled to 4.32e6 samples (default ") + kStagedReal +
                      " when staged)");
  cmd->add_option("--results", a->results, "recorded ceilings to compare with")
      ->capture_default_str();
  cmd->callback([a, repeats, &g] {
    if (a->quick && repeats->count() == 0) a->repeats = 10;  // an explicit --repeats stays
    run_bench_mfilter(*a, g);
  });
}

}  // namespace halfscope::cli

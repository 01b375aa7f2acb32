// `halfscope bench covariance`: generation time and sampled accuracy of the AO covariance
// matrices per built-in system, layer count, kind, device and dtype
// (src/bench/covariance_bench.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/bench/covariance_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {
namespace {

struct CovBenchArgs {
  std::string json, systems = "check,mid,eelt", layers = "10,60", kinds = "cmm", devices = "cuda",
                    dtypes = "f32,f64", layouts = "degree-major", warps = "default",
                    directs = "edge";
  std::int64_t tile = 1024;
  int repeats = 5, samples = 2000;
  bool cpu_eelt = false;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string num(const bench::BenchCase& c, const char* key, const char* fmt) {
  const double* d = bench_param<double>(c, key);
  if (!d || !std::isfinite(*d)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, *d);
  return buf;
}

std::string err(const bench::BenchCase& c, const char* key) {
  const auto it = c.error.find(key);
  if (it == c.error.end()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", it->second);
  return buf;
}

const char* met_text(const bench::BenchCase& c) {
  const auto* met = bench_param<bool>(c, "met_1s");
  return met && *met ? "  <- target met (<= 1000 ms, scaled error <= 1e-12)"
                     : "  <- target NOT met (<= 1000 ms, scaled error <= 1e-12)";
}

void print_covariance_report(const bench::BenchReport& r) {
  std::printf("%-6s %-4s %-4s %-5s %-6s %-12s %9s %10s %10s %9s %7s %6s %10s %10s\n", "system", "L",
              "kind", "dev", "dtype", "kernel", "n", "first ms", "median ms", "elem ms", "GB/s",
              "TF/s", "max rel", "max scaled");
  for (const auto& c : r.cases) {
    const auto* system = bench_param<std::string>(c, "system");
    const auto* layers = bench_param<std::int64_t>(c, "layers");
    const auto* kind = bench_param<std::string>(c, "kind");
    const auto* rows = bench_param<std::int64_t>(c, "rows");
    const auto* layout = bench_param<std::string>(c, "table_layout");
    const auto* warp = bench_param<std::string>(c, "warp_shape");
    const auto* direct = bench_param<std::string>(c, "direct_path");
    const std::string tab = layout ? layout->substr(0, 3) + "/" + (warp ? *warp : "") + "/" +
                                         (direct ? direct->substr(0, 4) : "")
                                   : "-";
    std::printf("%-6s %-4lld %-4s %-5s %-6s %-12s %9lld ", system ? system->c_str() : "?",
                static_cast<long long>(layers ? *layers : 0), kind ? kind->c_str() : "?",
                c.method.c_str(), c.precision.c_str(), tab.c_str(),
                static_cast<long long>(rows ? *rows : 0));
    if (const auto* skipped = bench_param<std::string>(c, "skipped")) {
      std::printf("skipped: %s\n", skipped->c_str());
      continue;
    }
    char gb[32], tf[32];
    std::snprintf(gb, sizeof gb, "%.0f", c.GBps);
    std::snprintf(tf, sizeof tf, "%.2f", c.TFLOPs);
    const auto* target = bench_param<bool>(c, "target");
    std::printf("%10s %10.2f %9s %7s %6s %10s %10s%s\n", num(c, "first_call_ms", "%.1f").c_str(),
                c.stats.median_ms, num(c, "elements_ms", "%.1f").c_str(), gb, tf,
                err(c, "max_rel").c_str(), err(c, "max_scaled").c_str(),
                target && *target ? met_text(c) : "");
  }
  std::printf(
      "median ms: whole backend call into preallocated storage (plan made beforehand); elem ms: "
      "CUDA-event time of the element kernel; GB/s: stored bytes / median; TF/s: MOAO's flop "
      "model (30 + 115 L per computed Cmm element); errors against covariance_entry (direct "
      "FP64) on sampled entries, 'scaled' by sqrt(C_ii C_jj)\n");
}

void run(const CovBenchArgs& a, const Globals& g) {
  if (!a.json.empty()) io::check_output_path(a.json);
  bench::CovBenchOptions o;
  o.systems = split_list(a.systems);
  const auto names = ao::ao_preset_names();
  for (const auto& s : o.systems)
    if (std::find(names.begin(), names.end(), s) == names.end())
      throw InvalidInput("bench covariance: --systems: unknown system '" + s +
                         "' (expected check, mid or eelt)");
  o.layers.clear();
  for (const auto& l : split_list(a.layers)) {
    if (l != "10" && l != "60")
      throw InvalidInput("bench covariance: --layers takes 10 and / or 60, found '" + l + "'");
    o.layers.push_back(std::stoi(l));
  }
  o.kinds.clear();
  for (const auto& k : split_list(a.kinds))
    o.kinds.push_back(ao::parse_covariance_kind(k, "bench covariance: --kinds"));
  o.devices.clear();
  for (const auto& d : split_list(a.devices)) {
    if (d != "cpu" && d != "cuda")
      throw InvalidInput("bench covariance: --device takes cpu and / or cuda, found '" + d + "'");
    o.devices.push_back(d == "cpu" ? DeviceKind::Cpu : DeviceKind::Cuda);
  }
  o.dtypes.clear();
  for (const auto& t : split_list(a.dtypes)) {
    if (t != "f32" && t != "f64")
      throw InvalidInput("bench covariance: --dtype takes f32 and / or f64, found '" + t + "'");
    o.dtypes.push_back(t == "f32" ? DType::f32 : DType::f64);
  }
  for (const auto& [option, empty] : {std::pair<const char*, bool>{"--systems", o.systems.empty()},
                                      {"--layers", o.layers.empty()},
                                      {"--kinds", o.kinds.empty()},
                                      {"--device", o.devices.empty()},
                                      {"--dtype", o.dtypes.empty()}})
    if (empty)
      throw InvalidInput(std::string("bench covariance: ") + option +
                         ": expected at least one value, found none");
  o.table_layouts = split_list(a.layouts);
  o.warp_fast_lanes.clear();
  for (const auto& w : split_list(a.warps)) {
    if (w != "default" && w != "8x4" && w != "32x1")
      throw InvalidInput(
          "bench covariance: --warp-shape takes default, 8x4 and / or 32x1, found '" + w + "'");
    o.warp_fast_lanes.push_back(w == "default" ? 0 : w == "8x4" ? 8 : 32);
  }
  o.direct_paths = split_list(a.directs);
  o.tile = a.tile;
  o.repeats = a.repeats;
  o.samples = a.samples;
  o.cpu_eelt = a.cpu_eelt;
  o.progress = [&g](const std::string& m) { info(g, m); };
  for (const DeviceKind d : o.devices)
    if (d == DeviceKind::Cuda) (void)resolve_device(DeviceKind::Cuda);
  const bench::BenchReport r = bench::run_covariance_bench(o);
  print_covariance_report(r);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

}  // namespace

void register_bench_covariance(CLI::App& bench, Globals& g) {
  auto a = std::make_shared<CovBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "covariance", "issue 5: AO covariance generation time and sampled FP64 accuracy");
  cmd->add_option("--json", a->json, "write the results to this JSON file");
  cmd->add_option("--systems", a->systems, "built-in systems, comma-separated")
      ->capture_default_str();
  cmd->add_option("--layers", a->layers, "layer profiles (10, 60), comma-separated")
      ->capture_default_str();
  cmd->add_option("--kinds", a->kinds, "cmm, ctm, ctt, comma-separated")->capture_default_str();
  cmd->add_option("--device", a->devices, "cpu and / or cuda, comma-separated")
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtypes, "stored dtype: f32 and / or f64 (always computed in FP64)")
      ->capture_default_str();
  cmd->add_option("--table-layout", a->layouts,
                  "GPU structure-function table: degree-major and / or interval-major")
      ->capture_default_str();
  cmd->add_option("--warp-shape", a->warps,
                  "GPU element kernel warp shape: default, 8x4 and / or 32x1")
      ->capture_default_str();
  cmd->add_option("--direct-path", a->directs,
                  "GPU path of the pairs without an offset table: edge and / or element")
      ->capture_default_str();
  cmd->add_option("--tile", a->tile, "tile size of the tiled target (0: dense matrix)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  cmd->add_option("--repeats", a->repeats, "timed calls after the first")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--samples", a->samples, "entries checked against covariance_entry")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--cpu-eelt", a->cpu_eelt,
                "also run the CPU backend on the E-ELT system (very slow; skipped otherwise)");
  cmd->callback([a, &g] { run(*a, g); });
}

}  // namespace halfscope::cli

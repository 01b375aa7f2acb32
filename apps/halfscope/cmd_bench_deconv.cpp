// `halfscope bench deconv` (issue 7): every Tikhonov solver x precision on a simulated MeerKAT
// observation, study 000 Figs. 7 and 8 and the time-to-target headline
// (include/halfscope/bench/deconv_bench.hpp, src/bench/deconv_bench*.cpp).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "deconv_cli.hpp"
#include "halfscope/bench/deconv_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {
namespace {

struct DeconvBenchArgs {
  std::string json, snr = "37,16", solvers = "fixed,optimal,backtracking,half-then-float,cg",
                    precisions = "single,half,mixed,split", device, boundary = "circular", dump,
                    fig8_png, results = "bench/results", psf_norm = "unit";
  std::int64_t size = 0, iterations = 0,
               trace_every = 0;  // 0: 2048 and 500, or 256 and 400 with --quick
  double target = 1e-3, lambda = 0.01;
  std::uint64_t seed = 1;
  bool quick = false;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double parse_number(const std::string& s, const char* option) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v))
    throw InvalidInput(std::string("bench deconv: ") + option + ": expected numbers, found '" + s +
                       "'");
  return v;
}

std::string param(const bench::BenchCase& c, const char* key, const char* fmt = "%.3g") {
  const auto it = c.params.find(key);
  if (it == c.params.end()) return "-";
  char buf[64];
  if (const auto* d = std::get_if<double>(&it->second)) {
    std::snprintf(buf, sizeof buf, fmt, *d);
    return buf;
  }
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* b = std::get_if<bool>(&it->second)) return *b ? "yes" : "no";
  return "-";
}

std::string error(const bench::BenchCase& c, const char* key) {
  const auto it = c.error.find(key);
  if (it == c.error.end() || !std::isfinite(it->second)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", it->second);
  return buf;
}

void print_report(const bench::DeconvBenchResult& r, double target) {
  std::printf("%-7s %-16s %-7s %10s %9s %12s %11s %11s  %s\n", "SNR dB", "solver", "prec",
              "ms / iter", "iter", "it->target", "ms->target", "distance", "stop");
  for (const bench::BenchCase& c : r.report.cases) {
    if (c.method.rfind("fig8", 0) == 0) continue;
    std::printf("%-7s %-16s %-7s ", param(c, "snr_db", "%g").c_str(), c.method.c_str(),
                c.precision.c_str());
    if (c.params.count("failed")) {
      std::printf("failed: %s\n", param(c, "failed").c_str());
      continue;
    }
    std::printf("%10.4f %9s %12s %11s %11s  %s\n", c.stats.median_ms,
                param(c, "iterations_done").c_str(), param(c, "iterations_to_target").c_str(),
                param(c, "solver_ms_to_target", "%.2f").c_str(), error(c, "final_distance").c_str(),
                param(c, "stop").c_str());
  }
  std::printf(
      "ms / iter: median solver time per iteration (wiener: the whole solve); it->target, "
      "ms->target: first iteration and solver time at relative distance <= %g to the exact "
      "solution\n\nFig. 8, H f of the sky against FP32:\n",
      target);
  for (const bench::BenchCase& c : r.report.cases) {
    if (c.method.rfind("fig8", 0) != 0) continue;
    if (c.params.count("failed")) {
      std::printf("  %-6s failed: %s\n", c.precision.c_str(), param(c, "failed").c_str());
      continue;
    }
    std::printf("  %-6s MSE %s, max |difference| / max |H f| %s\n", c.precision.c_str(),
                error(c, "mse").c_str(), error(c, "max_relative_difference").c_str());
  }
  std::printf("\nHeadline (time to distance %g): fixed-step single / best CG in mixed or split\n",
              target);
  for (const bench::DeconvHeadline& h : r.headline) {
    if (!std::isfinite(h.ratio)) {
      std::printf("  %g dB: not available (%s)\n", h.snr_db,
                  std::isfinite(h.best_cg_ms) ? "fixed / single did not run"
                                              : "CG in mixed / split did not reach the target");
      continue;
    }
    std::printf("  %g dB: fixed single %.2f ms%s, CG %s %.2f ms: %s%.1fx (target >= 10x)\n",
                h.snr_db, h.fixed_single_ms, h.fixed_single_reached ? "" : " (did not reach it)",
                h.best_cg_precision.c_str(), h.best_cg_ms, h.ratio_is_lower_bound ? ">= " : "",
                h.ratio);
  }
}

void run_bench_deconv(const DeconvBenchArgs& a, const Globals& g) {
  // The dump is a folder of inputs: neither file may be it or lie under its name.
  check_distinct_paths({}, {{"--dump", a.dump}, {"--json", a.json}, {"--fig8-png", a.fig8_png}});
  check_text_output({"--json", a.json}, "JSON");
  if (!a.json.empty()) io::check_output_path(a.json);
  if (!a.fig8_png.empty()) io::check_output_path(a.fig8_png);
  bench::DeconvBenchOptions o;
  o.size = a.size > 0 ? a.size : a.quick ? 256 : 2048;
  o.iterations = a.iterations > 0 ? a.iterations : a.quick ? 400 : 500;
  o.unit_norm_psf = a.psf_norm == "unit";
  // A 2048 x 2048 trace row costs more than an iteration (FP64 J and distance): every 10th.
  o.trace_every = a.trace_every > 0 ? a.trace_every : o.size >= 1024 ? 10 : 1;
  o.snr_db.clear();
  for (const std::string& s : split(a.snr)) o.snr_db.push_back(parse_number(s, "--snr-db"));
  o.solvers.clear();
  for (const std::string& s : split(a.solvers)) o.solvers.push_back(deconv::parse_solver(s));
  o.precisions.clear();
  for (const std::string& s : split(a.precisions)) o.precisions.push_back(parse_precision(s));
  o.target = a.target;
  o.lambda = a.lambda;
  o.boundary = parse_boundary(a.boundary);
  o.device = parse_device_kind(a.device.empty() ? g.device : a.device);
  o.seed = a.seed;
  o.dump_dir = a.dump;
  o.fig8_png = a.fig8_png;
  o.progress = [&g](const std::string& m) { info(g, m); };
  bench::DeconvBenchResult r = bench::run_deconv_bench(o);
  if (const auto ceil = bench::load_latest_ceilings(a.results, r.report.device.name))
    r.report.ceilings = *ceil;
  print_report(r, o.target);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

}  // namespace

void register_bench_deconv(CLI::App& bench, Globals& g) {
  auto a = std::make_shared<DeconvBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "deconv", "issue 7: Tikhonov solvers x precisions on a simulated MeerKAT observation");
  cmd->add_option("-o,--json", a->json, "write the results (with the curves) to this JSON file");
  cmd->add_option("--size", a->size, "image rows = cols (default 2048; 256 with --quick)")
      ->check(CLI::Range(std::int64_t{16}, std::int64_t{1} << 15));
  cmd->add_option("--snr-db", a->snr, "observations' SNR in dB, comma-separated")
      ->capture_default_str();
  cmd->add_option("--solvers", a->solvers, "comma-separated solver names")->capture_default_str();
  cmd->add_option("--precisions", a->precisions, "comma-separated precisions")
      ->capture_default_str();
  cmd->add_option("--iterations", a->iterations, "iterations per run (default 500; 400 --quick)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  cmd->add_option("--device", a->device, "auto, cpu or cuda (default: the global --device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--target", a->target, "relative distance to the exact solution (headline)")
      ->capture_default_str();
  cmd->add_option("--lambda", a->lambda, "Tikhonov weight")->capture_default_str();
  cmd->add_option("--boundary", a->boundary, "circular or zero")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the sky and the noise")->capture_default_str();
  cmd->add_option("--trace-every", a->trace_every,
                  "trace every k-th iteration (default 10 from 1024 x 1024, else 1)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  cmd->add_flag("--quick", a->quick, "256 x 256, 400 iterations");
  cmd->add_option("--psf-norm", a->psf_norm,
                  "unit: the PSF divided by max |h^| (||H|| = 1, lambda relative to it); peak: the "
                  "peak-1 PSF as simulated")
      ->check(CLI::IsMember({"unit", "peak"}))
      ->capture_default_str();
  cmd->add_option("--dump", a->dump,
                  "write the inputs and exact solutions (.npy) for bench/peers/deconv_peers.py");
  cmd->add_option("--fig8-png", a->fig8_png, "write Fig. 8's squared FP16 - FP32 difference");
  cmd->add_option("--results", a->results, "folder of recorded ceilings")->capture_default_str();
  cmd->callback([a, &g] { run_bench_deconv(*a, g); });
}

}  // namespace halfscope::cli

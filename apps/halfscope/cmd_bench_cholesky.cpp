// `halfscope bench cholesky` and `halfscope bench tor` (issue 6): the tile Cholesky and the
// tomographic reconstructor per precision policy against cuSOLVER
// (include/halfscope/bench/cholesky_bench.hpp, src/bench/cholesky_bench*.cpp).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {
namespace {

// The MOAO system sizes: the E-ELT Cmm of its first k = 1, 2, 4, 6, 7, 9 sensors.
constexpr const char* kDefaultSizes = "11152,22304,44608,66912,78064,100368";
constexpr const char* kDefaultPolicies =
    "uniform:SP;uniform:TF32;uniform:HP1;uniform:HP3;band:SP=1,HP1=rest;adaptive:tol=1e-6";

struct CholBenchArgs {
  std::string json, sizes, systems, policies = kDefaultPolicies, device, device_memory;
  std::int64_t tile = 0, error_tiles = 64;
  int repeats = 3, warmup = 1, layers = 10;
  bool no_cusolver = false;
  std::vector<int> devices;
  bool device_memory_given = false;  // from the option's count: "" is a bad size, not none
};

struct TorBenchArgs {
  std::string json, systems = "check,mid", policies = kDefaultPolicies, solve_policy = "uniform:SP",
                    device, tiptilt = "woodbury";
  std::int64_t tile = 0, max_fp64_n = 50000;
  int repeats = 3, warmup = 1, layers = 10;
  bool no_cusolver = false;
  std::vector<int> devices;
  std::string device_memory;  // sizes, comma-separated
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The subcommand's --device, or the global one when it is not given.
DeviceKind device_of(const std::string& own, const Globals& g, const char* command) {
  const std::string& text = own.empty() ? g.device : own;
  if (text != "auto" && text != "cpu" && text != "cuda")
    throw InvalidInput(std::string(command) + ": --device takes auto, cpu or cuda, found '" + text +
                       "'");
  return resolve_device(parse_device_kind(text));
}

std::string param_text(const bench::BenchCase& c, const char* key) {
  const auto it = c.params.find(key);
  if (it == c.params.end()) return "-";
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&it->second)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", *d);
    return buf;
  }
  return "-";
}

std::string sci(const std::map<std::string, double>& m, const char* key, const char* fmt) {
  const auto it = m.find(key);
  if (it == m.end() || !std::isfinite(it->second)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, it->second);
  return buf;
}

// Non-zero tile counts, "SP 12 HP1 30".
std::string tile_counts(const bench::BenchCase& c) {
  std::string out;
  for (const char* v : {"DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16"}) {
    const std::string t = param_text(c, ("tiles_" + std::string(v)).c_str());
    if (t != "-" && t != "0") out += (out.empty() ? "" : " ") + std::string(v) + " " + t;
  }
  return out.empty() ? "-" : out;
}

// The one-line outcome of a case that did not run: skipped or failed, with the reason.
bool print_not_run(const bench::BenchCase& c) {
  for (const char* key : {"skipped", "failed"})
    if (c.params.count(key)) {
      std::printf("%s: %s\n", key, param_text(c, key).c_str());
      return true;
    }
  return false;
}

void print_cholesky(const bench::BenchReport& r) {
  std::printf("%-8s %7s %-10s %-26s %10s %8s %10s %8s  %s\n", "system", "n", "impl", "policy",
              "median ms", "TFLOP/s", "backward", "x spotrf", "tiles");
  for (const bench::BenchCase& c : r.cases) {
    std::printf("%-8s %7s %-10s %-26s ", param_text(c, "system").c_str(),
                param_text(c, "n").c_str(), c.implementation.c_str(),
                (c.implementation == "cusolver" ? c.method : c.precision).c_str());
    if (print_not_run(c)) continue;
    std::printf("%10.2f %8.2f %10s %8s  %s\n", c.stats.median_ms, c.TFLOPs,
                sci(c.error, "backward", "%.2e").c_str(),
                param_text(c, "speedup_vs_spotrf").c_str(), tile_counts(c).c_str());
  }
  std::printf(
      "TFLOP/s: n^3/3 over the median; backward: ||A - L L^T||_F / ||A||_F in FP64 "
      "(sampled tiles when the case says so); x spotrf: cuSOLVER spotrf time / this time\n");
}

void print_tor(const bench::BenchReport& r) {
  std::printf("%-6s %7s %-10s %-26s %10s %10s %10s %9s %11s\n", "system", "n", "impl", "policy",
              "fact+solve", "factor ms", "solve ms", "Strehl", "dStrehl");
  for (const bench::BenchCase& c : r.cases) {
    const std::string budget = param_text(c, "device_memory");
    const std::string label = c.implementation == "cusolver"    ? c.method
                              : budget.empty() || budget == "0" ? c.precision
                                                                : c.precision + " @" + budget;
    std::printf("%-6s %7s %-10s %-26s ", param_text(c, "system").c_str(),
                param_text(c, "n").c_str(), c.implementation.c_str(), label.c_str());
    if (print_not_run(c)) continue;
    std::printf("%10.2f %10s %10s %9s %11s\n", c.stats.median_ms,
                param_text(c, "factor_ms").c_str(), param_text(c, "solve_ms").c_str(),
                sci(c.error, "strehl_otf", "%.5f").c_str(),
                sci(c.error, "strehl_otf_diff_vs_fp64", "%+.2e").c_str());
  }
  std::printf(
      "fact+solve: POTRF + two TRSM, median ms; Strehl: OTF path at the bench wavelength; "
      "dStrehl: against the FP64 reconstructor\n");
}

void run_cholesky_bench(const CholBenchArgs& a, const Globals& g) {
  if (!a.json.empty()) io::check_output_path(a.json);
  bench::CholBenchOptions o;
  const std::string sizes = a.sizes.empty() && a.systems.empty() ? kDefaultSizes : a.sizes;
  for (const std::string& s : split(sizes, ',')) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc{} || end != s.data() + s.size())
      throw InvalidInput("bench cholesky: --sizes: expected integers, found '" + s + "'");
    o.sizes.push_back(n);
  }
  o.systems = split(a.systems, ',');
  o.policies = split(a.policies, ';');
  o.tile = a.tile;
  o.repeats = a.repeats;
  o.warmup = a.warmup;
  o.layers = a.layers;
  o.error_tiles = a.error_tiles;
  o.cusolver = !a.no_cusolver;
  o.device = device_of(a.device, g, "bench cholesky");
  o.devices = a.devices;
  if (a.device_memory_given) {
    o.device_memory = parse_size(a.device_memory, "bench cholesky: --device-memory");
    if (o.device != DeviceKind::Cuda)
      throw InvalidInput("bench cholesky: --device-memory " + a.device_memory +
                         ": expected a GPU run (--device cuda or auto with a CUDA device), found " +
                         (a.device == "cpu" ? "--device cpu" : "no CUDA device"));
  }
  o.progress = [&g](const std::string& m) { info(g, m); };
  const bench::BenchReport r = bench::run_cholesky_bench(o);
  print_cholesky(r);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

void run_tor_bench(const TorBenchArgs& a, const Globals& g) {
  if (!a.json.empty()) io::check_output_path(a.json);
  bench::TorBenchOptions o;
  o.systems = split(a.systems, ',');
  o.policies = split(a.policies, ';');
  o.solve_policy = a.solve_policy;
  o.tile = a.tile;
  o.repeats = a.repeats;
  o.warmup = a.warmup;
  o.layers = a.layers;
  o.max_fp64_n = a.max_fp64_n;
  o.tiptilt = ao::parse_tiptilt_method(a.tiptilt, "--tiptilt");
  o.devices = a.devices;
  if (!a.device_memory.empty()) {
    o.device_memories.clear();
    for (const std::string& size : split(a.device_memory, ','))
      o.device_memories.push_back(size == "0" ? 0 : parse_size(size, "bench tor: --device-memory"));
  }
  o.cusolver = !a.no_cusolver;
  o.device = device_of(a.device, g, "bench tor");
  o.progress = [&g](const std::string& m) { info(g, m); };
  const bench::BenchReport r = bench::run_tor_bench(o);
  print_tor(r);
  if (!a.json.empty()) {
    r.write(a.json);
    info(g, "wrote " + a.json);
  }
}

template <class Args>
void add_common(CLI::App* cmd, Args& a) {
  cmd->add_option("-o,--json", a.json, "write the results to this JSON file");
  cmd->add_option("--policies", a.policies, "precision policies, separated by ';'")
      ->capture_default_str();
  cmd->add_option("--tile", a.tile, "tile size nb (0: 1024 on the GPU, 512 on the CPU)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 16));
  cmd->add_option("--repeats", a.repeats, "timed runs per case, each on a fresh input")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--warmup", a.warmup, "untimed runs per case before the timed ones")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  cmd->add_option("--device", a.device, "auto, cpu or cuda (default: the global --device)");
  cmd->add_option("--layers", a.layers, "atmosphere profile of the presets: 10 or 60")
      ->capture_default_str()
      ->check(CLI::IsMember({10, 60}));
  cmd->add_flag("--no-cusolver", a.no_cusolver, "leave out the cuSOLVER peers (GPU)");
}

}  // namespace

void register_bench_cholesky(CLI::App& bench, Globals& g) {
  auto a = std::make_shared<CholBenchArgs>();
  auto* cmd = bench.add_subcommand(
      "cholesky", "issue 6: tile Cholesky per precision policy vs cuSOLVER spotrf / dpotrf");
  add_common(cmd, *a);
  cmd->add_option("--sizes", a->sizes,
                  std::string("n = 11152 k (E-ELT Cmm of its first k sensors), comma-separated; "
                              "default ") +
                      kDefaultSizes + " unless --systems is given");
  cmd->add_option("--systems", a->systems, "presets whose whole Cmm is factored (check: n = 912)");
  cmd->add_option("--devices", a->devices,
                  "CUDA devices to factor on, comma-separated (tile columns dealt round-robin; "
                  "the input is generated on the current device, device 0 unless "
                  "CUDA_VISIBLE_DEVICES says otherwise)")
      ->delimiter(',');
  auto* budget = cmd->add_option(
      "--device-memory", a->device_memory,
      "device memory the policies' factorizations may use per device, in bytes or with a "
      "suffix K, M, G, T (powers of 1024, e.g. 16G; default: what is free less 5%)");
  cmd->add_option("--error-tiles", a->error_tiles,
                  "tiles checked for the FP64 backward error (0: all, exact)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  cmd->callback([a, &g, budget, cmd] {
    a->device_memory_given = budget->count() > 0;
    // A list typed empty is a mistake, not a request for the default sizes (the E-ELT's).
    for (const char* name : {"--sizes", "--systems", "--policies", "--json"})
      if (cmd->count(name) > 0 && cmd->get_option(name)->as<std::string>().empty())
        throw InvalidInput(std::string("bench cholesky: ") + name +
                           ": expected a value, found an empty one");
    run_cholesky_bench(*a, g);
  });

  auto t = std::make_shared<TorBenchArgs>();
  auto* tor = bench.add_subcommand(
      "tor", "issue 6: tomographic reconstructor per policy: time and Strehl vs FP64, cuSOLVER");
  add_common(tor, *t);
  tor->add_option("--systems", t->systems, "presets (check, mid, eelt), comma-separated")
      ->capture_default_str();
  tor->add_option("--solve-policy", t->solve_policy, "policy of the triangular solves' GEMMs")
      ->capture_default_str();
  tor->add_option("--max-fp64-n", t->max_fp64_n,
                  "largest n scored against the FP64 reconstructor (dense FP64 n x n)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));
  tor->add_option("--devices", t->devices,
                  "CUDA devices of the reconstructor, comma-separated (factorization columns and "
                  "solve rows spread over them; covariances generated on the first)")
      ->delimiter(',');
  tor->add_option("--device-memory", t->device_memory,
                  "device memory budgets, comma-separated (e.g. 0,16G): each policy once per "
                  "budget, 0 in device memory, a size with Cmm in host memory streamed through "
                  "the device");
  tor->add_option("--tiptilt", t->tiptilt,
                  "LGS tip-tilt constants: woodbury or direct (ao reconstructor --help)")
      ->capture_default_str();
  tor->callback([t, &g] { run_tor_bench(*t, g); });
}

}  // namespace halfscope::cli

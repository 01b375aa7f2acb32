// The demo's "Reconstructor precision policies" section (issue 6, study 002 Figs. 5-7): the
// mixed-precision reconstructor per policy on the check system (and mid on a GPU), its Strehl
// difference to the FP64 reconstructor and its time, measured now through `bench tor`'s code
// (src/bench/cholesky_bench_tor.cpp) with one repeat: the order of magnitude, not a benchmark.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "demo_ao.hpp"
#include "demo_html.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/core/error.hpp"
#include "svg_chart.hpp"

namespace halfscope::cli {
namespace {

// From the FP32 reference to the all-FP16 one, through the study's mixed policies.
const std::vector<std::string> kPolicies = {
    "uniform:SP",         "uniform:TF32",      "uniform:BF16",      "uniform:HP1",
    "band:SP=1,HP1=rest", "adaptive:tol=1e-6", "adaptive:tol=1e-3", "uniform:HP3"};

std::string cell(const std::map<std::string, double>& m, const char* key, const char* fmt) {
  const auto it = m.find(key);
  if (it == m.end() || !std::isfinite(it->second)) return "-";
  char b[48];
  std::snprintf(b, sizeof b, fmt, it->second);
  return b;
}

}  // namespace

std::string demo_ao_policies_section(const Globals& g, bool measure) {
  std::ostringstream h;
  h << "<section id=\"ao-policies\"><h2>Reconstructor precision policies (issue 6"
    << (measure ? ", measured now" : "") << ")</h2>\n";
  const char* commands =
      "Commands: <code>halfscope ao reconstructor preset:check -o R.npy --policy P "
      "--evaluate</code>, <code>halfscope bench tor</code>, <code>halfscope cholesky</code>.";
  if (!measure) {
    h << "<p>Not run (<code>--no-measure</code>). " << commands << "</p></section>\n";
    return h.str();
  }
  bench::TorBenchOptions o;
  o.device = resolve_device(g.device_kind());
  const bool gpu = o.device == DeviceKind::Cuda;
  o.systems = gpu ? std::vector<std::string>{"check", "mid"} : std::vector<std::string>{"check"};
  o.policies = kPolicies;
  o.repeats = 1;
  // check (n = 912) needs small tiles for a policy to choose anything (one tile row has no GEMM);
  // 256 keeps mid (n = 10,240) at 40 tile rows on the GPU.
  o.tile = gpu ? 256 : 128;
  o.progress = [&g](const std::string& m) { detail(g, "demo: " + m); };
  info(g, "demo: reconstructor precision policies on " + std::string(gpu ? "check, mid" : "check"));
  bench::BenchReport r;
  try {
    r = bench::run_tor_bench(o);
  } catch (const Unsupported& e) {  // a build without LAPACKE has no FP64 reference
    warn("demo: reconstructor policies not measured: " + std::string(e.what()));
    h << "<p><strong>Not available in this build:</strong> " << html_escape(e.what())
      << "</p></section>\n";
    return h.str();
  }
  h << "<p>R = C<sub>tm</sub> C<sub>mm</sub><sup>-1</sup> by the tile Cholesky (tile " << o.tile
    << ") with the factorization's GEMMs in the precision each policy chooses (solves "
    << o.solve_policy << "), scored by the Strehl ratio (OTF path, " << o.wavelength_m * 1e6
    << " &micro;m) against the FP64 reconstructor, on the " << (gpu ? "GPU" : "CPU")
    << " (one run each; a failed policy is shown as such). " << commands
    << "</p>\n<table><tr><th>#</th><th>system</th><th>policy</th><th>POTRF + 2 TRSM (ms)</th>"
       "<th>Strehl</th><th>&Delta; Strehl vs FP64</th><th>tiles</th></tr>\n";
  std::vector<Series> strehl, time;
  for (const std::string& system : o.systems) {
    Series ds{system, {}}, ts{system, {}};
    int index = 0;
    for (const bench::BenchCase& c : r.cases) {
      const auto* s = bench_param<std::string>(c, "system");
      if (!s || *s != system || c.implementation != "halfscope" || c.precision == "double")
        continue;
      ++index;
      h << "<tr><td>" << index << "</td><td>" << system << "</td><td>" << html_escape(c.precision)
        << "</td>";
      if (const auto* failed = bench_param<std::string>(c, "failed")) {
        h << "<td colspan=\"4\">failed: " << html_escape(*failed) << "</td></tr>\n";
        continue;
      }
      const auto it = c.error.find("strehl_otf_diff_vs_fp64");
      if (it != c.error.end()) ds.points.emplace_back(index, std::fabs(it->second));
      ts.points.emplace_back(index, c.stats.median_ms);
      std::string tiles;
      for (const char* v : {"DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16"}) {
        const auto* n = bench_param<std::int64_t>(c, ("tiles_" + std::string(v)).c_str());
        if (n && *n > 0)
          tiles += (tiles.empty() ? "" : ", ") + std::string(v) + " " + std::to_string(*n);
      }
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.2f", c.stats.median_ms);
      h << "<td>" << ms << "</td><td>" << cell(c.error, "strehl_otf", "%.5f") << "</td><td>"
        << cell(c.error, "strehl_otf_diff_vs_fp64", "%+.2e") << "</td><td>" << tiles
        << "</td></tr>\n";
    }
    strehl.push_back(std::move(ds));
    time.push_back(std::move(ts));
  }
  h << "</table>\n"
    << svg_line_chart(strehl, {"|Strehl - Strehl(FP64)| per policy", "policy (# in the table)",
                               "|difference|", true})
    << svg_line_chart(time, {"POTRF + 2 TRSM per policy", "policy (# in the table)", "ms", true})
    << "</section>\n";
  return h.str();
}

}  // namespace halfscope::cli

// `bench deconv`: every solver x precision on the simulated MeerKAT observations, the headline
// ratio and the JSON with the curves. See include/halfscope/bench/deconv_bench.hpp.
#include "halfscope/bench/deconv_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "deconv_bench_util.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::bench {

namespace {

using ordered = nlohmann::ordered_json;

void say(const DeconvBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

void validate(const DeconvBenchOptions& o) {
  if (o.trace_every < 1)
    throw InvalidInput("bench deconv: --trace-every must be >= 1, found " +
                       std::to_string(o.trace_every));
  if (o.iterations < 1)
    throw InvalidInput("bench deconv: --iterations must be >= 1, found " +
                       std::to_string(o.iterations));
  if (!(o.target > 0 && o.target < 1))
    throw InvalidInput("bench deconv: --target must be in (0, 1), found " +
                       std::to_string(o.target));
  if (o.solvers.empty() || o.precisions.empty())
    throw InvalidInput("bench deconv: --solvers and --precisions need at least one name each");
}

// The parameters every case of one observation shares.
BenchCase base_case(const DeconvBenchOptions& o, const DeconvBenchInputs& in, std::size_t k,
                    DeviceKind device, deconv::Solver solver, Precision precision) {
  BenchCase c;
  c.implementation = "halfscope";
  c.method = std::string(deconv::solver_name(solver));
  c.precision = std::string(precision_name(precision));
  c.params["size"] = o.size;
  c.params["snr_db"] = o.snr_db[k];
  c.params["sigma"] = in.sigma[k];
  c.params["psf_scale"] = in.psf_scale;
  c.params["lambda"] = o.lambda;
  c.params["boundary"] = std::string(boundary_name(o.boundary));
  c.params["device"] = std::string(device == DeviceKind::Cuda ? "cuda" : "cpu");
  return c;
}

// One solver run: its case (see the header for the fields) and its curve.
void run_case(const DeconvBenchOptions& o, const Array& dirty, const Array& psf, double j_star,
              BenchCase& c, DeconvSeries& series, deconv::Solver solver, Precision precision,
              DeviceKind device) {
  deconv::DeconvOptions d;
  d.solver = solver;
  d.precision = precision;
  d.lambda = o.lambda;
  d.iterations = o.iterations;
  d.boundary = o.boundary;
  d.device = device;
  d.trace_every = o.trace_every;
  d.trace_distance = true;
  const deconv::DeconvResult r = deconv::deconvolve(dirty, psf, d);
  c.params["iterations"] = o.iterations;
  c.params["iterations_done"] = r.iterations;
  c.params["stop"] = std::string(deconv::stop_reason_name(r.stop));
  c.params["condition"] = r.condition;
  if (!r.stop_detail.empty()) c.params["stop_detail"] = r.stop_detail;
  c.params["solver_ms"] = r.solver_ms;
  c.params["target"] = o.target;
  c.params["trace_every"] = o.trace_every;
  if (std::isfinite(r.step)) c.params["step"] = r.step;
  const auto hit = std::find_if(r.trace.begin(), r.trace.end(), [&](const deconv::TraceRow& t) {
    return std::isfinite(t.distance) && t.distance <= o.target;
  });
  c.params["reached_target"] = hit != r.trace.end();
  if (hit != r.trace.end()) {
    c.params["iterations_to_target"] = hit->iteration;
    c.params["solver_ms_to_target"] = hit->elapsed_ms;
  }
  const std::vector<double> per_iteration = deconv_iteration_ms(r.trace);
  c.stats = per_iteration.empty() ? compute_stats(std::span(&r.solver_ms, 1))
                                  : compute_stats(per_iteration);
  if (!r.trace.empty()) {
    c.error["final_distance"] = r.trace.back().distance;
    c.error["final_criterion"] = r.trace.back().criterion;
    c.error["criterion_excess"] = (r.trace.back().criterion - j_star) / j_star;
  }
  series = deconv_series(r.trace);
}

// Time to target of a case, or NaN; `whole` gets the whole run's time.
double time_to_target(const BenchCase& c, double* whole = nullptr) {
  const auto get = [&c](const char* key) {
    const auto it = c.params.find(key);
    return it == c.params.end() ? NAN : std::get<double>(it->second);
  };
  if (whole) *whole = get("solver_ms");
  return get("solver_ms_to_target");
}

DeconvHeadline headline_of(double snr_db, std::span<const BenchCase> cases) {
  DeconvHeadline h;
  h.snr_db = snr_db;
  for (const BenchCase& c : cases) {
    if (c.params.count("failed")) continue;
    if (c.method == "fixed" && c.precision == "single") {
      double whole = NAN;
      const double t = time_to_target(c, &whole);
      h.fixed_single_reached = std::isfinite(t);
      h.fixed_single_ms = h.fixed_single_reached ? t : whole;
    }
    if (c.method == "cg" && (c.precision == "mixed" || c.precision == "split")) {
      const double t = time_to_target(c);
      if (std::isfinite(t) && !(t >= h.best_cg_ms)) {
        h.best_cg_ms = t;
        h.best_cg_precision = c.precision;
      }
    }
  }
  h.ratio = h.fixed_single_ms / h.best_cg_ms;
  h.ratio_is_lower_bound = std::isfinite(h.ratio) && !h.fixed_single_reached;
  return h;
}

ordered number_or_null(double x) {
  return std::isfinite(x) ? ordered(x) : ordered(nullptr);
}

ordered numbers(const std::vector<double>& v) {
  ordered a = ordered::array();
  for (const double x : v) a.push_back(number_or_null(x));
  return a;
}

}  // namespace

DeconvSeries deconv_series(const std::vector<deconv::TraceRow>& trace) {
  DeconvSeries s;
  for (const deconv::TraceRow& r : trace) {
    s.iteration.push_back(static_cast<double>(r.iteration));
    s.criterion.push_back(r.criterion);
    s.distance.push_back(r.distance);
    s.elapsed_ms.push_back(r.elapsed_ms);
  }
  return s;
}

std::vector<double> deconv_iteration_ms(const std::vector<deconv::TraceRow>& trace) {
  std::vector<double> out;
  for (std::size_t k = 1; k < trace.size(); ++k)
    if (const std::int64_t gap = trace[k].iteration - trace[k - 1].iteration; gap > 0)
      out.push_back(std::max(0.0, trace[k].elapsed_ms - trace[k - 1].elapsed_ms) /
                    static_cast<double>(gap));
  return out;
}

DeconvBenchResult run_deconv_bench(const DeconvBenchOptions& o) {
  validate(o);
  const DeviceKind device = resolve_device(o.device);
  const bool gpu = device == DeviceKind::Cuda;
  DeconvBenchResult out;
  out.report = BenchReport::start("deconv", gpu ? describe_cuda_device(0) : describe_cpu());
  say(o, "bench deconv: simulating the MeerKAT observation, " + std::to_string(o.size) + " x " +
             std::to_string(o.size));
  const auto t_sim = std::chrono::steady_clock::now();
  const DeconvBenchInputs in = deconv_bench_inputs(o);
  say(o, "bench deconv: simulated in " +
             std::to_string(
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t_sim).count()) +
             " s (PSF divided by " + std::to_string(in.psf_scale) + ")");
  std::vector<Array> exact;
  for (std::size_t k = 0; k < o.snr_db.size(); ++k) {
    const double snr = o.snr_db[k];
    const Array& dirty = in.dirty[k];
    // The reference: the exact minimiser, timed once, and its criterion J(f*).
    deconv::DeconvOptions w;
    w.solver = deconv::Solver::Wiener;
    w.precision = Precision::Double;
    w.lambda = o.lambda;
    w.boundary = o.boundary;
    w.device = device;
    w.trace_every = 0;
    w.trace_distance = false;
    const deconv::DeconvResult wr = deconv::deconvolve(dirty, in.psf, w);
    exact.push_back(wr.image);
    const double j_star = deconv::tikhonov_criterion(dirty, in.psf, wr.image, o.lambda, o.boundary);
    BenchCase wc = base_case(o, in, k, device, deconv::Solver::Wiener, Precision::Double);
    wc.stats = compute_stats(std::span(&wr.solver_ms, 1));
    wc.error["final_criterion"] = j_star;
    out.report.cases.push_back(std::move(wc));
    out.series.emplace_back();

    const std::size_t first = out.report.cases.size();
    const std::string tag = detail::snr_tag(snr);
    for (const deconv::Solver s : o.solvers)
      for (const Precision swept : o.precisions) {
        // half-then-float runs half then single whatever the precision: one case, labelled half,
        // not one identical copy per swept precision.
        const bool htf = s == deconv::Solver::HalfThenFloat;
        if (htf && swept != o.precisions.front()) continue;
        const Precision p = htf ? Precision::Half : swept;
        const std::string label =
            std::string(deconv::solver_name(s)) + " in " + std::string(precision_name(p));
        BenchCase c = base_case(o, in, k, device, s, p);
        DeconvSeries series;
        const auto t0 = std::chrono::steady_clock::now();
        try {
          run_case(o, dirty, in.psf, j_star, c, series, s, p, device);
        } catch (const Error& e) {
          c.params["failed"] = std::string(e.what());
        }
        // Wall time of the whole case: the exact solution and the trace evaluations included.
        const double wall_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        c.params["wall_s"] = wall_s;
        say(o, "bench deconv: " + tag + ", " + label + ": " + std::to_string(wall_s) + " s" +
                   (c.params.count("failed") ? " (failed)" : ""));
        out.report.cases.push_back(std::move(c));
        out.series.push_back(std::move(series));
      }
    out.headline.push_back(headline_of(snr, std::span(out.report.cases).subspan(first)));
  }
  if (!o.dump_dir.empty()) detail::dump_inputs(o, in, exact);
  say(o, "bench deconv: Fig. 8, H f in FP16 and mixed against FP32");
  for (BenchCase& c : detail::fig8_cases(o, in, device)) {
    out.report.cases.push_back(std::move(c));
    out.series.emplace_back();
  }
  return out;
}

std::string DeconvBenchResult::to_json() const {
  ordered j = ordered::parse(report.to_json());
  ordered& cases = j["cases"];
  for (std::size_t i = 0; i < series.size() && i < cases.size(); ++i) {
    const DeconvSeries& s = series[i];
    if (s.iteration.empty()) continue;
    cases[i]["series"] = {{"iteration", numbers(s.iteration)},
                          {"criterion", numbers(s.criterion)},
                          {"distance", numbers(s.distance)},
                          {"elapsed_ms", numbers(s.elapsed_ms)}};
  }
  ordered h = ordered::array();
  for (const DeconvHeadline& x : headline)
    h.push_back({{"snr_db", x.snr_db},
                 {"fixed_single_ms", number_or_null(x.fixed_single_ms)},
                 {"fixed_single_reached", x.fixed_single_reached},
                 {"best_cg_ms", number_or_null(x.best_cg_ms)},
                 {"best_cg_precision", x.best_cg_precision},
                 {"ratio", number_or_null(x.ratio)},
                 {"ratio_is_lower_bound", x.ratio_is_lower_bound},
                 {"target_ratio", 10}});
  j["headline"] = h;
  return j.dump(2) + "\n";
}

void DeconvBenchResult::write(const std::filesystem::path& path) const {
  const std::string text = to_json();
  io::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace halfscope::bench

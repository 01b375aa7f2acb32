// The demo's matched-filtering section (study 001): Table I at demo size on the CPU (every CPU
// precision, time and max |CC - CC_fp64| on real and on uniform [-50, 50] data), the GPU results
// recorded in bench/results/*-mfilter.json when present, and a detection on synthetic data with
// planted events (simulate_seismic), plotted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>

#include "cli.hpp"
#include "demo_html.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/mfilter.hpp"
#include "halfscope/sim/seismic.hpp"
#include "svg_chart.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

namespace {

// Study 001's case shrunk to demo size: 16 templates of 256 samples, one channel; the data
// length keeps the exactly emulated FP16 precisions (slow on a CPU) within a second or two.
constexpr std::int64_t kTemplates = 16, kLength = 256, kSamples = 2048;

struct TableInput {
  std::string label;
  Array templates, data;
};

// "Real" data: the last channel of a (channels, samples) .npy trace -- by default ObsPy's example
// earthquake in tests/data/seismic, whose last row is the vertical channel -- with the 16
// templates cut from it at evenly spaced offsets, as templates are cut from past events. When
// the file is missing or unusable, a simulated trace with planted events stands in, and the
// label says why.
TableInput real_input(const fs::path& example) {
  TableInput in;
  std::error_code ec;
  Array trace;
  std::string why;
  if (!fs::exists(example, ec)) {
    why = example.string() + " not found";
  } else {
    const Array a = io::read_npy(example);
    if (a.ndim() != 2)
      why =
          example.string() + " is " + std::to_string(a.ndim()) + "-D: expected (channels, samples)";
    else if (a.dim(1) < kSamples)
      why = example.string() + " has " + std::to_string(a.dim(1)) +
            " samples: expected >= " + std::to_string(kSamples);
    else
      trace = a.select(0, a.dim(0) - 1).slice(0, 0, kSamples).astype(DType::f64).contiguous();
    if (trace.empty())
      warn("demo: --seismic " + why + "; a simulated trace stands in");
    else
      in.label = example.filename().string() + ", channel " + std::to_string(a.dim(0) - 1) +
                 " (the last of " + std::to_string(a.dim(0)) + ")";
  }
  if (trace.empty()) {
    sim::SeismicSimOptions o;
    o.channels = 1;
    o.samples = kSamples;
    o.templates = 1;
    o.template_length = kLength;
    o.events_per_template = 2;
    o.max_moveout = 0;
    trace = sim::simulate_seismic(o).data.reshape({kSamples});
    in.label = "simulated seismic trace (" + why + ")";
  }
  in.data = trace;
  in.templates = Array(DType::f64, {kTemplates, kLength});
  for (std::int64_t t = 0; t < kTemplates; ++t) {
    const std::int64_t start = t * (kSamples - kLength) / kTemplates;
    std::copy_n(trace.data_as<double>() + start, kLength,
                in.templates.data_as<double>() + t * kLength);
  }
  return in;
}

TableInput uniform_input() {
  TableInput in{"uniform [-50, 50]", Array(DType::f64, {kTemplates, kLength}),
                Array(DType::f64, {kSamples})};
  std::mt19937_64 rng(2019);
  std::uniform_real_distribution<double> u(-50.0, 50.0);
  for (Array* a : {&in.templates, &in.data})
    for (std::int64_t i = 0; i < a->size(); ++i) a->data_as<double>()[i] = u(rng);
  return in;
}

// max |a - b|, +inf when any difference is not finite (std::max would drop a NaN).
double max_abs_diff(const Array& a, const Array& b) {
  double m = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a.data_as<float>()[i]) -
                              static_cast<double>(b.data_as<float>()[i]));
    if (!std::isfinite(d)) return INFINITY;
    if (!(d <= m)) m = d;
  }
  return m;
}

std::string cpu_table(const Globals& g, const fs::path& example) {
  const std::vector<TableInput> inputs{real_input(example), uniform_input()};
  const std::vector<Precision> precisions =
      mf_supported_precisions(MfMethod::Direct, DeviceKind::Cpu);
  std::ostringstream h;
  h << "<h3>Table I at demo size, measured now on the CPU</h3>\n<p>" << kTemplates
    << " templates x " << kLength << " samples against " << kSamples
    << " samples of one channel, method <code>direct</code>, short normalization. FP16 and "
       "BF16 are emulated exactly on the CPU (every operation rounded), so their times here say "
       "nothing about a GPU; their errors are what a GPU running the same arithmetic shows. The "
       "error is max |CC - CC<sub>fp64</sub>| (the study's metric; study 001 reports 1.8e-4 on "
       "real and 9.2e-5 on uniform data for its tensor-core kernel on a V100).</p>\n<table><tr>"
       "<th>precision</th>";
  for (const auto& in : inputs)
    h << "<th>time (ms), " << html_escape(in.label) << "</th><th>max error</th>";
  h << "</tr>\n";
  std::vector<Array> refs;
  MfOptions ref;
  ref.method = MfMethod::Direct;
  ref.device = DeviceKind::Cpu;
  ref.precision = Precision::Double;
  for (const auto& in : inputs) refs.push_back(matched_filter(in.templates, in.data, ref));
  Progress bar(g, "demo: matched filtering on the CPU",
               static_cast<long long>(precisions.size() * inputs.size()));
  long long done = 0;
  for (Precision p : precisions) {
    h << "<tr><td>" << precision_name(p) << "</td>";
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      MfOptions o = ref;
      o.precision = p;
      const auto t0 = std::chrono::steady_clock::now();
      const Array cc = matched_filter(inputs[i].templates, inputs[i].data, o);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      char cell[96];
      std::snprintf(cell, sizeof cell, "<td>%.1f</td><td>%.2e</td>", ms, max_abs_diff(cc, refs[i]));
      h << cell;
      bar.update(++done);
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

std::string mfilter_gpu_recorded(const fs::path& results) {
  const auto files = bench::recorded_report_files(results, "-mfilter");
  if (files.empty())
    return "<p>No GPU matched-filtering benchmark is recorded in <code>bench/results/</code> "
           "yet (<code>halfscope bench mfilter</code> on a GPU machine writes one).</p>\n";
  const fs::path& newest = files.back();  // sorted by name: the newest date last
  const bench::BenchReport r = bench::read_bench_report(newest);
  std::ostringstream h;
  h << "<h3>Recorded on " << html_escape(r.device.name) << " (" << r.date << ", commit "
    << html_escape(r.commit) << ", <code>" << html_escape(newest.filename().string())
    << "</code>)</h3>\n<table><tr><th>implementation</th><th>method</th><th>precision</th>"
       "<th>parameters</th><th>median ms</th><th>TFLOP/s</th><th>GB/s</th><th>errors</th></tr>\n";
  char num[64];
  const auto fmt = [&num](const char* f, double v) -> std::string {
    if (!std::isfinite(v)) return "-";
    std::snprintf(num, sizeof num, f, v);
    return num;
  };
  for (const auto& c : r.cases) {
    std::ostringstream params, errors;
    for (const auto& [k, v] : c.params) {
      params << html_escape(k) << "=";
      std::visit([&params](const auto& x) { params << x; }, v);
      params << " ";
    }
    for (const auto& [k, v] : c.error) errors << html_escape(k) << " " << fmt("%.2e", v) << " ";
    h << "<tr><td>" << html_escape(c.implementation) << "</td><td>" << html_escape(c.method)
      << "</td><td>" << html_escape(c.precision) << "</td><td>" << html_escape(params.str())
      << "</td><td>" << fmt("%.4g", c.stats.median_ms) << "</td><td>" << fmt("%.3g", c.TFLOPs)
      << "</td><td>" << fmt("%.4g", c.GBps) << "</td><td>" << errors.str() << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// Detection on simulated data: the stack of one template over time, the MAD threshold, and the
// detections next to the planted truth.
std::string detection_demo() {
  sim::SeismicSimOptions o;
  o.channels = 3;
  o.samples = 30'000;
  o.templates = 2;
  o.template_length = 200;
  o.events_per_template = 3;
  o.event_cc = {0.5, 0.75, 0.9};
  o.seed = 7;
  const sim::SeismicSimulation s = sim::simulate_seismic(o);
  MfOptions mo;
  mo.device = DeviceKind::Cpu;
  const MfNetwork net{s.moveouts, s.weights};
  const Array stack = matched_filter(s.templates, s.data, mo, net);
  DetectOptions d;
  d.threshold = 10;
  d.type = ThresholdType::Mad;
  d.min_separation = o.template_length + o.max_moveout;
  std::vector<Detection> found = detect_peaks(stack, d);
  mf_count_channels_used(found, s.templates, s.data, mo, net);

  // Decimated for the picture: the largest |value| of every bin, with its sign.
  const std::int64_t n = stack.dim(1), bin = 20;
  const float* row = stack.data_as<float>();
  Series trace{"cc_sum, template 0", {}};
  for (std::int64_t b = 0; b < n; b += bin) {
    float best = 0;
    for (std::int64_t i = b; i < std::min(n, b + bin); ++i)
      if (std::abs(row[i]) > std::abs(best)) best = row[i];
    trace.points.emplace_back(static_cast<double>(b) / o.sample_rate, best);
  }
  double thr = 0;
  for (const auto& x : found)
    if (x.template_index == 0) thr = x.threshold;
  std::vector<Series> series{trace};
  if (thr > 0) {
    const double end = static_cast<double>(n) / o.sample_rate;
    series.push_back({"threshold (10 x MAD)", {{0.0, thr}, {end, thr}}});
    series.push_back({"-threshold", {{0.0, -thr}, {end, -thr}}});
  }
  std::ostringstream h;
  h << "<h3>Detection on synthetic data</h3>\n<p><code>simulate_seismic</code>: 3 channels of "
       "white noise, 30 000 samples at 100 Hz, 2 templates of 200 samples, each planted 3 times "
       "with per-channel moveouts and exact CC 0.5, 0.75 and 0.9; network stack with weights "
       "1/3, 10 x MAD threshold, peaks declustered over 250 samples.</p>\n";
  h << svg_line_chart(series,
                      {"network stack of template 0", "time (s)", "cc_sum", false, 760, 320});
  h << "<table><tr><th>template</th><th>planted at</th><th>planted CC</th><th>detected at</th>"
       "<th>cc_sum</th><th>channels</th></tr>\n";
  for (const auto& e : s.events) {
    const auto hit = std::find_if(found.begin(), found.end(), [&e](const Detection& x) {
      return x.template_index == e.template_index && std::abs(x.sample - e.sample) <= 2;
    });
    h << "<tr><td>" << e.template_index << "</td><td>" << e.sample << "</td><td>" << e.cc
      << "</td>";
    if (hit == found.end())
      h << "<td colspan=\"3\">missed</td></tr>\n";
    else
      h << "<td>" << hit->sample << "</td><td>" << hit->value << "</td><td>" << hit->channels_used
        << "</td></tr>\n";
  }
  // Detections that match no planted event of their own template: with damped-sinusoid
  // templates a strong event of one template correlates with another (EQcorrscan users see the
  // same); anything far from every planted event would be a false detection on noise.
  std::int64_t cross = 0, on_noise = 0;
  for (const auto& x : found) {
    const auto near = [&x, &o](const sim::PlantedEvent& e) {
      return std::abs(x.sample - e.sample) <= o.template_length + o.max_moveout;
    };
    const bool own = std::any_of(s.events.begin(), s.events.end(), [&](const auto& e) {
      return e.template_index == x.template_index && std::abs(x.sample - e.sample) <= 2;
    });
    if (own) continue;
    const bool other = std::any_of(s.events.begin(), s.events.end(), near);
    (other ? cross : on_noise) += 1;
    h << "<tr><td>" << x.template_index << "</td><td colspan=\"2\">"
      << (other ? "(another template's event)" : "(noise)") << "</td><td>" << x.sample
      << "</td><td>" << x.value << "</td><td>" << x.channels_used << "</td></tr>\n";
  }
  h << "</table><p>" << found.size() << " detections for " << s.events.size()
    << " planted events: " << cross << " on another template's event, " << on_noise
    << " on noise.</p>\n";
  return h.str();
}

}  // namespace

std::string demo_mfilter_section(const Globals& g, const fs::path& example, const fs::path& results,
                                 bool measure) {
  std::ostringstream h;
  h << "<section id=\"mfilter\"><h2>Matched filtering (study 001)</h2><p class=\"paper\">"
       "Yamaguchi, Ichimura, Fujita, Kato, Nakagawa, IEEE SPL 2019</p><p>Normalized "
       "cross-correlation of seismic templates against continuous data, network stacking with "
       "moveouts and weights (Fast Matched Filter's semantics) and detection (EQcorrscan's). "
       "Details in docs/mfilter.md.</p>\n";
  if (measure) h << cpu_table(g, example);
  h << mfilter_gpu_recorded(results) << detection_demo() << "</section>\n";
  return h.str();
}

}  // namespace halfscope::cli

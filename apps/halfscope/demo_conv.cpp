// The demo's convolution section (study 000, Figures 2-4): a CPU sweep at demo size measured now,
// and the GPU figures recorded in bench/results/*-conv*.json when present.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "cli.hpp"
#include "demo_html.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/metrics.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/sim/kernels.hpp"
#include "svg_chart.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

namespace {

// The demo image: the centre 256x256 of the camera image (the study's picture), else random.
Array demo_image(const fs::path& camera) {
  std::error_code ec;
  if (fs::exists(camera, ec)) {
    const Array a = io::read_npy(camera);
    if (a.ndim() == 2 && a.dim(0) >= 384 && a.dim(1) >= 384)
      return a.slice(0, 128, 384).slice(1, 128, 384).astype(DType::f64);
  }
  return sim::random_image(256, 256, 7);
}

double median_ms(const std::function<void()>& f, int repeats) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string cpu_sweep(const Globals& g, const fs::path& camera) {
  const Array image = demo_image(camera);
  const std::vector<std::int64_t> widths{3, 5, 7, 9, 15, 21, 31};
  const std::vector<std::pair<ConvMethod, Precision>> cases{
      {ConvMethod::Direct, Precision::Single}, {ConvMethod::Direct, Precision::Half},
      {ConvMethod::Direct, Precision::Mixed},  {ConvMethod::Direct, Precision::BF16},
      {ConvMethod::FFT, Precision::Single},    {ConvMethod::FFT, Precision::Half},
      {ConvMethod::FFT, Precision::Mixed}};
  std::map<std::string, Series> time, error;
  std::map<ConvMethod, Series> speedup;
  Progress bar(g, "demo: convolution on the CPU",
               static_cast<long long>(widths.size() * cases.size()));
  long long done = 0;
  for (std::int64_t w : widths) {
    detail(g, "demo: convolution on the CPU, width " + std::to_string(w));
    const Array kernel = sim::gaussian_kernel(w);
    ConvOptions ref;
    ref.mode = ConvMode::Same;
    ref.device = DeviceKind::Cpu;
    ref.method = ConvMethod::Direct;
    ref.precision = Precision::Double;
    const Array reference = convolve2d(image, kernel, ref);
    std::map<std::pair<ConvMethod, Precision>, double> ms;
    for (const auto& [m, p] : cases) {
      ConvOptions o = ref;
      o.method = m;
      o.precision = p;
      const std::string label =
          std::string(conv_method_name(m)) + " " + std::string(precision_name(p));
      Array out;
      ms[{m, p}] = median_ms([&] { out = convolve2d(image, kernel, o); }, 3);
      time[label].label = error[label].label = label;
      time[label].points.emplace_back(w, ms[{m, p}]);
      error[label].points.emplace_back(w, compare(reference, out).mre);
      bar.update(++done);
    }
    for (ConvMethod m : {ConvMethod::Direct, ConvMethod::FFT}) {
      speedup[m].label = std::string(conv_method_name(m));
      speedup[m].points.emplace_back(w, ms[{m, Precision::Single}] / ms[{m, Precision::Half}]);
    }
  }
  auto values = [](const auto& map) {
    std::vector<Series> v;
    for (const auto& [k, s] : map) v.push_back(s);
    return v;
  };
  std::ostringstream h;
  h << "<h3>Measured now on the CPU (" << image.dim(0) << "x" << image.dim(1)
    << " centre of the camera image, Gaussian kernels, mode same)</h3>\n<p>FP16 on the CPU is "
       "emulated exactly (every operation rounded), so <em>half</em> is slower than single here: "
       "the point of these curves is the error, which the GPU reproduces bit for bit in storage "
       "and within rounding in arithmetic.</p>\n";
  h << svg_line_chart(values(time), {"Fig. 2: time per convolution", "kernel width", "ms", true});
  h << svg_line_chart(values(speedup), {"Fig. 3: speed-up of half over single", "kernel width",
                                        "t_single / t_half", false});
  h << svg_line_chart(values(error), {"Fig. 4: MRE against FP64", "kernel width", "MRE", true});
  return h.str();
}

std::string conv_gpu_recorded(const fs::path& results) {
  const auto files = bench::recorded_report_files(results, "-conv");
  if (files.empty())
    return "<p>No GPU convolution benchmark is recorded in <code>bench/results/</code> yet.</p>\n";
  const fs::path& newest = files.back();  // sorted by name: the newest date last
  const bench::BenchReport r = bench::read_bench_report(newest);
  std::ostringstream h;
  h << "<h3>Recorded on " << html_escape(r.device.name) << " (" << r.date << ", commit " << r.commit
    << ", <code>" << html_escape(newest.filename().string()) << "</code>)</h3>\n";
  std::map<std::int64_t, std::map<std::string, Series>> time, error;
  for (const auto& c : r.cases) {
    if (c.params.count("failed") || !c.params.count("rows")) continue;
    const auto n = std::get<std::int64_t>(c.params.at("rows"));
    const auto w = std::get<std::int64_t>(c.params.at("kernel"));
    const std::string label = (c.implementation == "halfscope" ? "" : c.implementation + " ") +
                              c.method + " " + c.precision;
    time[n][label].label = error[n][label].label = label;
    time[n][label].points.emplace_back(static_cast<double>(w), c.stats.median_ms);
    if (c.error.count("mre"))
      error[n][label].points.emplace_back(static_cast<double>(w), c.error.at("mre"));
  }
  for (const auto& [n, series] : time) {
    std::vector<Series> t, e;
    for (const auto& [k, s] : series) t.push_back(s);
    for (const auto& [k, s] : error[n]) e.push_back(s);
    const std::string size = std::to_string(n) + "x" + std::to_string(n);
    h << svg_line_chart(t, {"GPU time, " + size, "kernel width", "ms", true, 760, 420});
    h << svg_line_chart(e,
                        {"GPU MRE against FP64, " + size, "kernel width", "MRE", true, 760, 420});
  }
  return h.str();
}

}  // namespace

std::string demo_conv_section(const Globals& g, const fs::path& camera, const fs::path& results,
                              bool measure) {
  std::ostringstream h;
  h << "<section id=\"conv\"><h2>Convolution (study 000)</h2><p class=\"paper\">Seznec, Gac, "
       "Ferrari, "
       "Orieux, SiPS 2018</p><p>Single-channel 2D convolution by every method and precision, timed "
       "and "
       "checked against FP64 (MRE, eq. 5 of the study). Deconvolution arrives with its own "
       "issue.</p>\n";
  if (measure) h << cpu_sweep(g, camera);
  h << conv_gpu_recorded(results) << "</section>\n";
  return h.str();
}

}  // namespace halfscope::cli

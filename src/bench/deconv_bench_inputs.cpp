// `bench deconv`: the simulated MeerKAT inputs, their export for the peers, and study 000 Fig. 8
// (the FP16 / FP32 difference of H f). See include/halfscope/bench/deconv_bench.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "deconv/backend.hpp"
#include "deconv_bench_util.hpp"
#include "halfscope/bench/deconv_bench.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/png.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope::bench {

namespace fs = std::filesystem;

DeconvBenchInputs deconv_bench_inputs(const DeconvBenchOptions& o) {
  // Below 16 pixels the default quarter-beam pixel leaves too few uv cells for a useful PSF.
  if (o.size < 16)
    throw InvalidInput("bench deconv: --size must be at least 16, found " + std::to_string(o.size));
  if (o.snr_db.empty()) throw InvalidInput("bench deconv: --snr-db needs at least one value");
  DeconvBenchInputs in;
  sim::PsfOptions p;
  p.rows = p.cols = o.size;
  in.psf = sim::simulate_psf(sim::meerkat_antennas(), p).gridded.psf;
  in.psf_peak = in.psf;
  sim::SkyOptions s;
  s.rows = s.cols = o.size;
  s.seed = o.seed;
  in.sky = sim::simulate_sky(s).sky;
  for (std::size_t k = 0; k < o.snr_db.size(); ++k) {
    sim::ObservationOptions ob;
    ob.snr_db = o.snr_db[k];
    ob.boundary = o.boundary;
    ob.seed = o.seed + 1 + k;  // independent noise per SNR, reproducible
    const sim::ObservationResult r = sim::simulate_observation(in.sky, in.psf, ob);
    in.dirty.push_back(r.dirty);
    in.sigma.push_back(r.sigma);
  }
  if (o.unit_norm_psf) {
    // max |h^| on the grid the solvers use for this boundary (the L of DeconvResult::lipschitz).
    deconv::detail::Problem problem;
    problem.dirty = in.dirty.front();
    problem.psf = in.psf;
    problem.boundary = o.boundary;
    in.psf_scale = deconv::detail::max_abs_spectrum(problem, false);
    Array scaled = in.psf.clone();
    double* h = scaled.data_as<double>();
    for (std::int64_t i = 0; i < scaled.size(); ++i) h[i] /= in.psf_scale;
    in.psf = scaled;
  }
  return in;
}

namespace detail {

std::string snr_tag(double snr_db) {
  char text[32];
  std::snprintf(text, sizeof text, "%gdb", snr_db);
  return text;
}

void dump_inputs(const DeconvBenchOptions& o, const DeconvBenchInputs& in,
                 const std::vector<Array>& exact) {
  const fs::path& dir = o.dump_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(dir.string() + ": cannot create the dump folder: " + ec.message());
  io::write_npy(dir / "psf.npy", in.psf);
  io::write_npy(dir / "sky.npy", in.sky);
  io::write_npy(dir / "psf_peak.npy", in.psf_peak);
  nlohmann::json meta;
  meta["size"] = o.size;
  meta["lambda"] = o.lambda;
  meta["boundary"] = std::string(boundary_name(o.boundary));
  meta["target"] = o.target;
  meta["iterations"] = o.iterations;
  meta["psf_scale"] = in.psf_scale;
  meta["snr_db"] = o.snr_db;
  nlohmann::json files = nlohmann::json::array();
  for (std::size_t k = 0; k < in.dirty.size(); ++k) {
    const std::string tag = snr_tag(o.snr_db[k]);
    io::write_npy(dir / ("dirty_" + tag + ".npy"), in.dirty[k]);
    io::write_npy(dir / ("exact_" + tag + ".npy"), exact[k]);
    files.push_back({{"snr_db", o.snr_db[k]},
                     {"dirty", "dirty_" + tag + ".npy"},
                     {"exact", "exact_" + tag + ".npy"},
                     {"sigma", in.sigma[k]}});
  }
  meta["observations"] = files;
  const std::string text = meta.dump(2) + "\n";
  io::write_file_atomic(dir / "meta.json", std::as_bytes(std::span(text.data(), text.size())));
}

std::vector<BenchCase> fig8_cases(const DeconvBenchOptions& o, const DeconvBenchInputs& in,
                                  DeviceKind device) {
  ConvOptions c;
  c.mode = ConvMode::Same;
  c.boundary = Boundary::Circular;
  c.method = ConvMethod::FFT;
  c.device = device;
  c.precision = Precision::Single;
  const Array ref = convolve2d(in.sky, in.psf_peak, c).astype(DType::f64);
  const double* r = ref.data_as<double>();
  double ref_max = 0;
  for (std::int64_t i = 0; i < ref.size(); ++i) ref_max = std::max(ref_max, std::fabs(r[i]));

  std::vector<BenchCase> cases;
  for (const Precision p : {Precision::Half, Precision::Mixed}) {
    BenchCase bc;
    bc.implementation = "halfscope";
    bc.method = "fig8-psf-convolution";
    bc.precision = std::string(precision_name(p));
    bc.params["size"] = o.size;
    bc.params["operation"] = std::string("H f (sky, peak-1 PSF), FFT, circular, against single");
    bc.params["device"] = std::string(device == DeviceKind::Cuda ? "cuda" : "cpu");
    try {
      c.precision = p;
      Array h;
      const auto t0 = std::chrono::steady_clock::now();
      h = convolve2d(in.sky, in.psf_peak, c);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      bc.stats = compute_stats(std::span(&ms, 1));
      const Array d = h.astype(DType::f64);
      const double* x = d.data_as<double>();
      Array squared(DType::f64, ref.shape());
      double* s = squared.data_as<double>();
      double sum = 0, worst = 0;
      for (std::int64_t i = 0; i < d.size(); ++i) {
        const double e = x[i] - r[i];
        s[i] = e * e;
        sum += s[i];
        worst = std::max(worst, std::fabs(e));
      }
      bc.error["mse"] = sum / static_cast<double>(d.size());
      bc.error["max_abs_difference"] = worst;
      bc.error["max_relative_difference"] = ref_max > 0 ? worst / ref_max : NAN;
      bc.error["reference_max"] = ref_max;
      if (p == Precision::Half && !o.fig8_png.empty()) {
        io::PngOptions png;
        png.scale = io::Scale::log;
        png.colormap = io::Colormap::perceptual;
        io::write_png(o.fig8_png, squared, png);
      }
    } catch (const Error& e) {
      bc.params["failed"] = std::string(e.what());
    }
    cases.push_back(std::move(bc));
  }
  return cases;
}

}  // namespace detail

}  // namespace halfscope::bench

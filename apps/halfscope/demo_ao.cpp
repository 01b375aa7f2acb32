// The demo's adaptive-optics section (study 002): the check system end to end, measured now. It
// must run anywhere in seconds, so it uses the small built-in system (n = 912, m = 152) on the
// device the global --device names (auto: the GPU when one is present, else the CPU).
#include "demo_ao.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "demo_html.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/png.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

namespace {

// Runs f once and returns its wall time in ms (each step runs once: the point is the order of
// magnitude of a whole pipeline, not a benchmark; `halfscope bench covariance` measures properly).
double time_ms(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// |a| elementwise, float64 (the picture of a covariance is of its magnitude on a log scale: the
// entries span several decades and change sign, and the block structure shows in |C|).
Array magnitude(const Array& a) {
  Array out(DType::f64, a.shape());
  const double* in = a.data_as<double>();
  double* o = out.data_as<double>();
  for (std::int64_t i = 0; i < a.size(); ++i) o[i] = std::fabs(in[i]);
  return out;
}

// The largest |C| outside the LGS sensors' own blocks. Those blocks carry the LGS tip-tilt
// constant (~1 arcsec^2 in the check system, 100x the turbulence), which would otherwise take the
// top of the colour scale and leave the turbulence structure in a few dark levels.
double max_outside_lgs_blocks(const ao::AoSystem& system, const Array& cmm) {
  std::vector<std::pair<std::int64_t, std::int64_t>> lgs;  // [begin, end) slopes of each LGS
  std::int64_t offset = 0;
  for (const ao::Sensor& s : system.sensors) {
    const std::int64_t slopes = 2 * ao::valid_subaperture_count(system, s);
    if (s.guide_star == ao::GuideStar::lgs) lgs.emplace_back(offset, offset + slopes);
    offset += slopes;
  }
  auto block_of = [&lgs](std::int64_t i) {
    for (std::size_t k = 0; k < lgs.size(); ++k)
      if (i >= lgs[k].first && i < lgs[k].second) return static_cast<std::int64_t>(k);
    return std::int64_t{-1};
  };
  const std::int64_t n = cmm.dim(0);
  const double* c = cmm.data_as<double>();
  double top = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      if (block_of(i) < 0 || block_of(i) != block_of(j))
        top = std::max(top, std::fabs(c[i * n + j]));
  return top;
}

// The scores of one reconstructor, for the table.
struct Row {
  std::string label;
  ao::Evaluation evaluation;
};

}  // namespace

static std::string ao_overview_section(const Globals& g, const fs::path& dir, bool measure) {
  std::ostringstream h;
  h << "<section id=\"ao\"><h2>Adaptive-optics tomography (study 002"
    << (measure ? ", measured now" : "")
    << ")</h2><p class=\"paper\">Doucet, Ltaief, Gratadour, Keyes, IA3 / SC19</p>\n";
  const char* commands =
      "Commands: <code>halfscope ao covariance preset:check -o DIR</code>, "
      "<code>halfscope ao evaluate</code>.";
  if (!measure) {
    h << "<p>Not run (<code>--no-measure</code>): the section generates and scores the built-in "
         "<em>check</em> system. "
      << commands << "</p></section>\n";
    return h.str();
  }
  info(g, "demo: adaptive optics, the check system end to end");
  const ao::AoSystem system = ao::ao_preset("check");
  // The global --device decides (auto: the GPU when one is usable); an explicit cuda without a
  // GPU fails here as it does in every other command.
  const DeviceKind device = resolve_device(g.device_kind());
  const char* where = device == DeviceKind::Cuda ? "GPU" : "CPU";
  ao::CovarianceOptions co;
  co.device = device;
  co.dtype = DType::f64;
  Array cmm, ctm, ctt, reconstructor, cee;
  const double t_cmm = time_ms([&] { cmm = ao::covariance(system, ao::CovarianceKind::cmm, co); });
  const double t_ctm = time_ms([&] { ctm = ao::covariance(system, ao::CovarianceKind::ctm, co); });
  const double t_ctt = time_ms([&] { ctt = ao::covariance(system, ao::CovarianceKind::ctt, co); });

  io::PngOptions picture;
  picture.scale = io::Scale::log;
  picture.colormap = io::Colormap::perceptual;
  io::PngOptions cmm_picture = picture;
  cmm_picture.vmax = max_outside_lgs_blocks(system, cmm);
  cmm_picture.vmin = *cmm_picture.vmax * 1e-3;  // three decades of turbulence structure
  io::write_png(dir / "ao-cmm.png", magnitude(cmm), cmm_picture);

  // The reconstructor (Cholesky) and the phase projection need LAPACKE on the CPU, which the build
  // treats as optional: without it the section still shows the covariances and says what is
  // missing rather than failing the whole demo.
  ao::EvaluationOptions eo;
  eo.device = device;
  std::vector<Row> rows;
  double t_r = 0, t_eval = 0;
  std::string unsupported;
  try {
    t_r = time_ms([&] { reconstructor = ao::reconstructor_fp64(cmm, ctm, device); });
    // Cee from the matrices already generated (evaluate_reconstructor would generate them again),
    // then the same scoring evaluate_reconstructor applies.
    t_eval = time_ms([&] {
      cee = ao::error_covariance(ctt, ctm, cmm, reconstructor, device);
      rows.push_back(
          {"R = Ctm Cmm<sup>-1</sup> (FP64)", ao::evaluate_error_covariance(system, cee, eo)});
    });
    // Without tomography (R = 0) the error covariance is Ctt itself: the uncorrected turbulence
    // seen by the truth sensor, the scale against which the reconstructor's gain shows.
    rows.push_back({"no correction (R = 0)", ao::evaluate_error_covariance(system, ctt, eo)});
    io::write_png(dir / "ao-psf.png", rows.front().evaluation.psf, picture);
    io::write_png(dir / "ao-psf-diffraction.png", rows.front().evaluation.psf_diffraction, picture);
  } catch (const Unsupported& e) {
    unsupported = e.what();
    warn("demo: adaptive optics without the reconstructor and the Strehl ratios: " + unsupported);
  }
  detail(g, "demo: ao Cmm " + fixed(t_cmm, 1) + " ms, R " + fixed(t_r, 1) + " ms");

  h << "<p>The built-in <em>check</em> system (D = " << fixed(system.diameter_m, 0) << " m, "
    << system.sensors.size() << " wavefront sensors, " << system.atmosphere.layers.size()
    << " layers, r<sub>0</sub> = " << fixed(system.atmosphere.r0_m, 3)
    << " m): n = " << ao::measurement_count(system)
    << " measurement slopes, m = " << ao::truth_count(system) << " truth slopes, on the " << where
    << ". The slope covariances follow the von Karman model of MOAO (arcsec<sup>2</sup>), the "
       "reconstructor is the FP64 Cholesky solve, and the error covariance C<sub>ee</sub> is "
       "projected to phase on the truth sensor's geometry; Strehl ratios are at "
    << fixed(eo.wavelength_m * 1e6, 2) << " &micro;m. " << commands << "</p>\n";
  h << "<table><tr><th>step</th><th>size</th><th>time (ms, " << where << ")</th></tr>\n";
  auto step = [&h](const std::string& name, const Array& a, double ms) {
    h << "<tr><td>" << name << "</td><td>" << a.dim(0) << " x " << a.dim(1) << "</td><td>"
      << fixed(ms, 1) << "</td></tr>\n";
  };
  step("C<sub>mm</sub> (FP64)", cmm, t_cmm);
  step("C<sub>tm</sub>", ctm, t_ctm);
  step("C<sub>tt</sub>", ctt, t_ctt);
  const char* cmm_caption =
      "log<sub>10</sub> |C<sub>mm</sub>| (6 sensors: 3 LGS then 3 NGS; within each, x then y "
      "slopes; three decades below the largest entry outside the LGS blocks, which carry the LGS "
      "tip-tilt constant and saturate)";
  if (!unsupported.empty()) {
    h << "</table>\n<p><strong>Not available in this build:</strong> the reconstructor, the "
         "tomographic error and the Strehl ratios need LAPACKE (" +
             html_escape(unsupported) +
             ").</p>\n<p><img src=\"ao-cmm.png\" width=\"456\" alt=\"log10 |Cmm| of the check "
             "system\"></p>\n<p>"
      << cmm_caption << ".</p></section>\n";
    return h.str();
  }
  step("R = C<sub>tm</sub> C<sub>mm</sub><sup>-1</sup>", reconstructor, t_r);
  step("C<sub>ee</sub>, projection, Strehl, PSF", cee, t_eval);
  h << "</table>\n<table><tr><th>reconstructor</th><th>tomographic error (nm rms)</th>"
       "<th>Strehl, Mar&eacute;chal</th><th>Strehl, OTF</th></tr>\n";
  for (const Row& r : rows)
    h << "<tr><td>" << r.label << "</td><td>" << fixed(r.evaluation.tomographic_error_nm, 1)
      << "</td><td>" << fixed(r.evaluation.strehl_marechal, 3) << "</td><td>"
      << fixed(r.evaluation.strehl_otf, 3) << "</td></tr>\n";
  h << "</table>\n<p><img src=\"ao-cmm.png\" width=\"456\" alt=\"log10 |Cmm| of the check "
       "system\"> <img src=\"ao-psf.png\" width=\"256\" alt=\"PSF after tomography, log scale\"> "
       "<img src=\"ao-psf-diffraction.png\" width=\"256\" alt=\"diffraction-limited PSF, log "
       "scale\"></p>\n<p>Left: "
    << cmm_caption
    << ". Middle: the PSF with the tomographic error only, right: the telescope alone (both log "
       "scale, peak of the diffraction PSF = 1).</p></section>\n";
  return h.str();
}

// The issue-5 overview, then the issue-6 reconstructor precision policies (demo_ao_policies.cpp).
std::string demo_ao_section(const Globals& g, const fs::path& dir, bool measure) {
  std::string html = ao_overview_section(g, dir, measure);  // first: the messages keep the order
  return html + demo_ao_policies_section(g, measure);
}

}  // namespace halfscope::cli

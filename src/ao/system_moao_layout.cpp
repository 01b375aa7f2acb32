// The two layouts of MOAO's sys-params.txt and their translation into an AoSystem (docs/ao.md,
// "MOAO files"). MOAO's conventions that the translation makes explicit:
//   * nW counts the truth sensor, which is the last; in the full layout its pointing is replaced by
//     the target's (targetX_as, targetY_as), as MOAO's matcov_init_tomo_tiled does;
//   * the first nLgs sensors are the LGS (MOAO's noise and elongation code index them that way), so
//     `type` must read 2 for them and 1 for the others; gsAlt is 1 / LGS altitude, 0 for an NGS;
//   * mrNGS holds the magnitudes of the nW - nLgs NGS, the truth sensor's last;
//   * the model has one LGS altitude: lgsAlt must equal 1 / gsAlt of every LGS;
//   * thetaCam, sensibilite, tracking, pasDPHI and ncpu are read and checked as numbers but do not
//     enter MOAO's covariance model, nor ours;
//   * MOAO drops 4 useful central subapertures when Nssp = 7 and obs = 0.286 (CANARY) through a
//     floating-point tie, and special-cases it by using 0.285; the reader reproduces that by
//     setting the obstruction to 0.285 for Nssp = 7 and 0.285 < obs < 0.29, so that a MOAO file
//     gives MOAO's subapertures while our rule (subaperture_is_valid) stays exact and general.
// The short layout (2014 benchmark files) has no photometry: the reader takes the values of MOAO's
// check files (below) and ignores its noise_var (0.01 in every MOAO benchmark file), a constant
// variance our noise model has no counterpart for; is_moao_short_layout lets the CLI say so in a
// one-line warning (`ao covariance`, `ao evaluate`). In the short layout the per-sensor arrays may
// omit the truth sensor's entry (MOAO's nx50184 file does: its old reader filled missing values
// with 0); the truth sensor is then an NGS on axis without pupil shift or rotation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ao/system_detail.hpp"
#include "ao/system_moao_file.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {

namespace {

// Photometry of MOAO's check files (datafile/check/*/sys-params.txt), for the short layout.
constexpr double kCheckFrameTime = 0.004, kCheckMagnitude = 13, kCheckLgsFlux = 6e7;
constexpr double kCheckNgsPixel = 0.3, kCheckLgsPixel = 1, kCheckNgsLambda = 650e-9;
constexpr double kCheckLgsLambda = 589e-9, kCheckBandwidth = 330e-9, kCheckNgsThroughput = 0.425;
constexpr double kCheckLgsThroughput = 0.382, kCheckAtmThroughput = 0.84, kCheckRon = 3;

// Entries of each layout (read_full, read_short) and of an appended atmosphere.
constexpr std::int64_t kFullEntries = 36, kShortEntries = 22, kAtmosEntries = 5;

struct Raw {
  bool short_layout = false;
  double diam = 0, obs = 0, frame_time = kCheckFrameTime;
  std::int64_t nw = 0, nlgs = 0, nssp = 0;
  std::vector<double> gs_alt, type, alpha_x, alpha_y, xpup, ypup, theta_ml, magnitudes;
  double lgs_flux = kCheckLgsFlux, ngs_pixel = kCheckNgsPixel, lgs_pixel = kCheckLgsPixel;
  double ngs_lambda = kCheckNgsLambda, lgs_lambda = kCheckLgsLambda, bandwidth = kCheckBandwidth;
  double ngs_throughput = kCheckNgsThroughput, lgs_throughput = kCheckLgsThroughput;
  double atm_throughput = kCheckAtmThroughput, ron = kCheckRon;
  double lgs_cst = 0, spot = 0, lgs_alt = 0, lgs_depth = 0;
  bool has_target = false;
  double target_x = 0, target_y = 0;
};

void check_nw(MoaoFile& f, const Raw& r) {
  if (r.nw < 2)
    f.fail("nW", "at least 2 sensors (the measuring sensors, then the truth sensor)",
           std::to_string(r.nw));
  if (r.nw > 1000) f.fail("nW", "at most 1000 sensors", std::to_string(r.nw));
}
void check_nlgs(MoaoFile& f, const Raw& r) {
  if (r.nlgs < 0 || r.nlgs > r.nw - 1)
    f.fail("nLgs", "0 to nW - 1 = " + std::to_string(r.nw - 1) + " LGS", std::to_string(r.nlgs));
}
void check_nssp(MoaoFile& f, const Raw& r) {
  if (r.nssp < 1 || r.nssp > max_subapertures)
    f.fail("Nssp", "1 to " + std::to_string(max_subapertures) + " subapertures across",
           std::to_string(r.nssp));
}

// One value per sensor; the short layout may omit the truth sensor's (filled with `fallback`).
std::vector<double> per_sensor(MoaoFile& f, const Raw& r, std::string_view name, double fallback) {
  std::vector<double> v = f.numbers(name, r.nw, "nW = " + std::to_string(r.nw), r.short_layout);
  if (static_cast<std::int64_t>(v.size()) < r.nw) v.push_back(fallback);
  return v;
}

void read_sensor_arrays(MoaoFile& f, Raw& r) {
  r.alpha_x = per_sensor(f, r, "alphaX_as", 0);
  r.alpha_y = per_sensor(f, r, "alphaY_as", 0);
  r.xpup = per_sensor(f, r, "XPup", 0);
  r.ypup = per_sensor(f, r, "YPup", 0);
  r.theta_ml = per_sensor(f, r, "thetaML", 0);
  (void)per_sensor(f, r, "thetaCam", 0);
  (void)per_sensor(f, r, "sensibilite", 1);
  (void)f.numbers("tracking", 3, "x^2, y^2, xy");
  (void)f.number("pasDPHI");
  (void)f.integer("ncpu");
}

Raw read_full(MoaoFile& f) {
  Raw r;
  r.diam = f.number("diam");
  r.obs = f.number("obs");
  r.frame_time = f.number("tFrame");
  r.nw = f.integer("nW");
  check_nw(f, r);
  r.nlgs = f.integer("nLgs");
  check_nlgs(f, r);
  const std::int64_t targets = f.integer("nTarget");
  if (targets != 1)
    f.fail("nTarget", "1 target (a halfscope system has one truth sensor)",
           std::to_string(targets));
  r.nssp = f.integer("Nssp");
  check_nssp(f, r);
  r.gs_alt = per_sensor(f, r, "gsAlt", 0);
  r.type = per_sensor(f, r, "type", 1);
  read_sensor_arrays(f, r);
  r.magnitudes = f.numbers("mrNGS", r.nw - r.nlgs, "nW - nLgs = " + std::to_string(r.nw - r.nlgs));
  r.lgs_flux = f.number("lgsFlux");
  r.ngs_pixel = f.number("ngsPixSize");
  r.lgs_pixel = f.number("lgsPixSize");
  r.ngs_lambda = f.number("lambdaNGS");
  r.lgs_lambda = f.number("lambdaLGS");
  r.bandwidth = f.number("bdw_m");
  r.ngs_throughput = f.number("throughNGS");
  r.lgs_throughput = f.number("throughLGS");
  r.atm_throughput = f.number("throughAtm");
  r.ron = f.number("RON");
  r.lgs_cst = f.number("lgsCst");
  r.spot = f.number("spotWidth");
  r.lgs_alt = f.number("lgsAlt");
  r.lgs_depth = f.number("lgsDepth");
  r.target_x = f.numbers("targetX_as", 1, "nTarget = 1")[0];
  r.target_y = f.numbers("targetY_as", 1, "nTarget = 1")[0];
  r.has_target = true;
  return r;
}

Raw read_short(MoaoFile& f) {
  Raw r;
  r.short_layout = true;
  r.diam = f.number("diam");
  r.obs = f.number("obs");
  r.nw = f.integer("nW");
  check_nw(f, r);
  r.nssp = f.integer("Nssp");
  check_nssp(f, r);
  r.gs_alt = per_sensor(f, r, "gsAlt", 0);
  r.type = per_sensor(f, r, "type", 1);
  r.nlgs = f.integer("nLgs");
  check_nlgs(f, r);
  read_sensor_arrays(f, r);
  r.lgs_cst = f.number("lgs_cst");
  const double noise_var = f.number("noise_var");
  if (noise_var < 0) f.fail("noise_var", "a variance >= 0", format_number(noise_var));
  r.spot = f.number("spot_width");
  r.lgs_alt = f.number("lgs_alt");
  r.lgs_depth = f.number("lgs_depth");
  r.magnitudes.assign(static_cast<std::size_t>(r.nw - r.nlgs), kCheckMagnitude);
  return r;
}

// MOAO files have no field: the smallest whole number of arcminutes (at least one) that holds
// every pointing, so that the pointing check stays meaningful for the systems built from them.
double field_radius_for(const AoSystem& s) {
  double largest = std::hypot(s.truth.x_arcsec, s.truth.y_arcsec);
  for (const Sensor& w : s.sensors) largest = std::max(largest, std::hypot(w.x_arcsec, w.y_arcsec));
  return std::max(60.0, 60.0 * std::ceil(largest / 60.0));
}

}  // namespace

bool is_short_layout(const MoaoFile& f) {
  // The entry count tells the layouts apart whatever their values (full: 36 entries, short: 22,
  // each + 5 with an atmosphere appended). The fifth entry alone cannot: it is nLgs (one value) in
  // the full layout and gsAlt in the short one, which has a single value too when nW = 2 and the
  // truth sensor's entry is omitted. For any other count (a truncated or overlong file) the fifth
  // entry decides, so that the error names the entry where the file goes wrong.
  const std::int64_t entries = f.entry_count();
  const bool short_layout = entries == kShortEntries || entries == kShortEntries + kAtmosEntries ||
                            (entries != kFullEntries && entries != kFullEntries + kAtmosEntries &&
                             f.tokens_on_value_line(4) > 1);
  return short_layout;
}

AoSystem read_moao_system_entries(MoaoFile& f) {
  const bool short_layout = is_short_layout(f);
  const Raw r = short_layout ? read_short(f) : read_full(f);
  const std::string type_entry = "type", alt_entry = short_layout ? "lgs_alt" : "lgsAlt";

  AoSystem s;
  const std::filesystem::path p(f.path());
  s.name = (p.parent_path().filename() / p.filename()).generic_string();
  s.diameter_m = r.diam;
  s.obstruction = (r.nssp == 7 && r.obs > 0.285 && r.obs < 0.29) ? 0.285 : r.obs;
  std::int64_t lgs = 0, ngs = 0;
  for (std::int64_t w = 0; w < r.nw; ++w) {
    const auto i = static_cast<std::size_t>(w);
    const bool truth = w == r.nw - 1, is_lgs = w < r.nlgs;
    const std::string which = "sensor " + std::to_string(w + 1);
    if (r.type[i] != (is_lgs ? 2 : 1))
      f.fail(type_entry,
             "2 (LGS) for the first nLgs = " + std::to_string(r.nlgs) +
                 " sensors and 1 (NGS) for the others, the truth sensor last",
             format_number(r.type[i]) + " for " + which);
    if (is_lgs ? !(r.gs_alt[i] > 0) : r.gs_alt[i] != 0)
      f.fail("gsAlt", is_lgs ? "1 / altitude > 0 for an LGS" : "0 for an NGS",
             format_number(r.gs_alt[i]) + " for " + which);
    Sensor x;
    x.name =
        truth ? "truth" : (is_lgs ? "LGS" + std::to_string(++lgs) : "NGS" + std::to_string(++ngs));
    x.guide_star = is_lgs ? GuideStar::lgs : GuideStar::ngs;
    x.x_arcsec = truth && r.has_target ? r.target_x : r.alpha_x[i];
    x.y_arcsec = truth && r.has_target ? r.target_y : r.alpha_y[i];
    x.subapertures = static_cast<int>(r.nssp);
    x.pupil_shift_x_m = r.xpup[i];
    x.pupil_shift_y_m = r.ypup[i];
    x.rotation_deg = r.theta_ml[i];
    x.readout_noise_e = r.ron;
    if (is_lgs) {
      x.wavelength_m = r.lgs_lambda;
      x.pixel_arcsec = r.lgs_pixel;
      x.throughput = r.lgs_throughput;
      x.lgs_altitude_m = 1 / r.gs_alt[i];
      if (!(std::abs(r.lgs_alt - x.lgs_altitude_m) <= 1e-6 * x.lgs_altitude_m))
        f.fail(alt_entry,
               "the LGS altitude 1 / gsAlt = " + format_number(x.lgs_altitude_m) + " m of " +
                   which + " (the model has one LGS altitude)",
               format_number(r.lgs_alt));
      x.lgs_depth_m = r.lgs_depth;
      x.lgs_flux = r.lgs_flux;
      x.spot_fwhm_arcsec = r.spot;
      x.lgs_tiptilt_arcsec2 = r.lgs_cst;
    } else {
      x.wavelength_m = r.ngs_lambda;
      x.pixel_arcsec = r.ngs_pixel;
      x.throughput = r.ngs_throughput;
      x.magnitude = r.magnitudes[static_cast<std::size_t>(w - r.nlgs)];
    }
    if (truth)
      s.truth = x;
    else
      s.sensors.push_back(x);
  }
  s.field_radius_arcsec = field_radius_for(s);
  s.noise.enabled = true;
  s.noise.frame_time_s = r.frame_time;
  s.noise.bandwidth_m = r.bandwidth;
  s.noise.atmosphere_throughput = r.atm_throughput;
  return s;
}

}  // namespace halfscope::ao::detail

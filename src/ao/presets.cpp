// Built-in AO systems and atmospheric profiles (docs/ao.md, "Presets", says where every value
// comes from).
//
// Geometry. check and mid follow the sizes of MOAO's check configurations (nx456: 10 across, 3 LGS
// + 3 NGS; nx5120: 29 across, 5 LGS + 3 NGS) with the LGS on a 23 arcsec-radius ring as there; eelt
// is the MOSAIC-like E-ELT benchmark (nx50184: 86 across, 5 LGS + 4 NGS) with the LGS on MOSAIC's
// 7.4 arcmin-diameter ring inside the E-ELT's 10 arcmin technical field. NGS sit between the LGS
// directions; the truth sensor (the target) is on axis. Only eelt's sizes are nx50184's: that file
// puts the LGS at 23 arcsec and the NGS at 16 to 52 arcsec, a pointing read from the file itself
// (`ao covariance .../nx50184/sys-params.txt --atmosphere prof*-atmos-night*.txt`).
//
// Photometry and detectors: the values of MOAO's check files (NGS magnitude 13, LGS return 6e7
// ph/m^2/s at M1, pixels 0.3 / 1.0 arcsec, 650 / 589 nm, 330 nm bandwidth, throughputs 0.425 /
// 0.382 / 0.84, 3 e- read-out noise, 4 ms frames, 1 arcsec spot, lgsCst 1 arcsec^2) except the
// sodium layer, taken at 90 km with a 10 km FWHM depth (MOAO's gb/ example; the mean sodium
// centroid and a typical thickness) rather than the check files' 100 km / 5 km.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao {

namespace {

// MOAO's public 10-layer night profile (datafile/check/*/prof-1-atmos-night0.txt): Cn2 strengths
// in r0^(-5/3) units (m^(-5/3)); r0 = sum^(-3/5) = 0.128916 m, as the file states.
constexpr double kHeights10[10] = {30, 200, 390, 1880, 4500, 7500, 10500, 13500, 16500, 19500};
constexpr double kCn2Profile10[10] = {16.1481,  3.93694,  3.15623, 2.16198,  1.04095,
                                      0.800734, 0.867462, 1.72825, 0.411711, 0.144132};
constexpr double kOuterScale = 25;     // m, every layer (the profile files' l0)
constexpr double kProfileTop = 20000;  // m, top of both profiles (MOAO's 60-layer grid ends there)

// Slab boundaries of layers at altitudes h: 0, the midpoints between neighbours, kProfileTop.
std::vector<double> slab_edges(const std::vector<double>& h) {
  std::vector<double> e{0};
  for (std::size_t i = 1; i < h.size(); ++i) e.push_back((h[i - 1] + h[i]) / 2);
  e.push_back(kProfileTop);
  return e;
}

Atmosphere profile_from_strengths(const std::vector<double>& h, const std::vector<double>& cn2) {
  double sum = 0;
  for (const double c : cn2) sum += c;
  Atmosphere a;
  a.r0_m = std::pow(sum, -3.0 / 5.0);
  for (std::size_t l = 0; l < h.size(); ++l) a.layers.push_back({h[l], cn2[l] / sum, kOuterScale});
  return a;
}

// The 60-layer profile: MOAO's 60 altitudes (0 to 20 km in 20000/59 m steps, its
// datafile/benchmark/profiles/nLayers60 grid) with strengths from the 10-layer profile read as a
// piecewise-constant Cn2 density: layer i spreads its strength evenly over its slab (midpoint to
// midpoint), and each of the 60 layers takes the strength that falls in its own slab. Both slab
// sets tile [0, 20 km], so the total strength (hence r0) is the 10-layer one and the turbulence
// below any altitude is kept to within one slab.
Atmosphere profile60() {
  const std::vector<double> h10(std::begin(kHeights10), std::end(kHeights10));
  const std::vector<double> e10 = slab_edges(h10);
  std::vector<double> h60;
  for (int j = 0; j < 60; ++j) h60.push_back(kProfileTop * j / 59.0);
  const std::vector<double> e60 = slab_edges(h60);
  std::vector<double> cn2(60, 0.0);
  for (std::size_t j = 0; j < 60; ++j)
    for (std::size_t i = 0; i < 10; ++i) {
      const double overlap = std::min(e60[j + 1], e10[i + 1]) - std::max(e60[j], e10[i]);
      if (overlap > 0) cn2[j] += kCn2Profile10[i] * overlap / (e10[i + 1] - e10[i]);
    }
  return profile_from_strengths(h60, cn2);
}

Sensor common_sensor(std::string name, GuideStar g, double radius, double angle_deg, int nssp) {
  Sensor w;
  w.name = std::move(name);
  w.guide_star = g;
  const double a = angle_deg * std::numbers::pi / 180;
  // Exact zeros on the axes (cos 90 deg is 6e-17 in doubles) keep the JSON readable.
  w.x_arcsec = std::abs(std::cos(a)) < 1e-12 ? 0.0 : radius * std::cos(a);
  w.y_arcsec = std::abs(std::sin(a)) < 1e-12 ? 0.0 : radius * std::sin(a);
  w.subapertures = nssp;
  w.readout_noise_e = 3;
  return w;
}

Sensor ngs(std::string name, double radius, double angle_deg, int nssp) {
  Sensor w = common_sensor(std::move(name), GuideStar::ngs, radius, angle_deg, nssp);
  w.wavelength_m = 650e-9;
  w.pixel_arcsec = 0.3;
  w.throughput = 0.425;
  w.magnitude = 13;
  return w;
}

Sensor lgs(std::string name, double radius, double angle_deg, int nssp) {
  Sensor w = common_sensor(std::move(name), GuideStar::lgs, radius, angle_deg, nssp);
  w.wavelength_m = 589e-9;
  w.pixel_arcsec = 1.0;
  w.throughput = 0.382;
  w.lgs_altitude_m = 90e3;
  w.lgs_depth_m = 10e3;
  w.lgs_flux = 6e7;
  w.spot_fwhm_arcsec = 1.0;
  w.lgs_tiptilt_arcsec2 = 1.0;
  return w;
}

struct Layout {
  int nssp, n_lgs, n_ngs;
  double lgs_radius, ngs_radius, field_radius, obstruction;
};

AoSystem build(std::string name, const Layout& l, int layers) {
  AoSystem s;
  s.name = std::move(name);
  s.diameter_m = 39;
  s.obstruction = l.obstruction;
  s.field_radius_arcsec = l.field_radius;
  // LGS evenly on their ring from the +x axis; NGS evenly on theirs, half a step off, so that no
  // NGS hides behind an LGS direction.
  for (int i = 0; i < l.n_lgs; ++i)
    s.sensors.push_back(
        lgs("LGS" + std::to_string(i + 1), l.lgs_radius, 360.0 * i / l.n_lgs, l.nssp));
  for (int i = 0; i < l.n_ngs; ++i)
    s.sensors.push_back(
        ngs("NGS" + std::to_string(i + 1), l.ngs_radius, 360.0 * (i + 0.5) / l.n_ngs, l.nssp));
  s.truth = ngs("truth", 0, 0, l.nssp);
  s.atmosphere = ao_profile(layers);
  s.noise.enabled = true;
  s.noise.frame_time_s = 0.004;
  s.noise.bandwidth_m = 330e-9;
  s.noise.atmosphere_throughput = 0.84;
  return s;
}

std::string names_list() {
  std::string list;
  for (const std::string& n : ao_preset_names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

Atmosphere ao_profile(int layers) {
  if (layers == 10)
    return profile_from_strengths(
        std::vector<double>(std::begin(kHeights10), std::end(kHeights10)),
        std::vector<double>(std::begin(kCn2Profile10), std::end(kCn2Profile10)));
  if (layers == 60) return profile60();
  throw InvalidInput("ao profile layers: expected 10 or 60, found " + std::to_string(layers));
}

std::vector<std::string> ao_preset_names() {
  return {"check", "mid", "eelt"};
}

AoSystem ao_preset(std::string_view name, int layers) {
  if (layers != 10 && layers != 60)
    throw InvalidInput("ao preset " + std::string(name) + ": layers: expected 10 or 60, found " +
                       std::to_string(layers));
  // 7.4 arcmin diameter = 222 arcsec radius; the E-ELT technical field is 10 arcmin across.
  const Layout check{10, 3, 3, 23, 40, 60, 0.2};
  const Layout mid{29, 5, 3, 23, 40, 60, 0.2};
  const Layout eelt{86, 5, 4, 222, 260, 300, 0.2};
  AoSystem s;
  if (name == "check") {
    s = build("check", check, layers);
  } else if (name == "mid") {
    s = build("mid", mid, layers);
  } else if (name == "eelt") {
    s = build("eelt", eelt, layers);
  } else {
    throw InvalidInput("ao preset: expected one of " + names_list() + ", found \"" +
                       std::string(name) + "\"");
  }
  s.name += ", " + std::to_string(layers) + " layers";
  validate(s, "preset " + std::string(name));
  return s;
}

}  // namespace halfscope::ao

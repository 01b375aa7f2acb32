// AO system description: guide-star names, validation of every field, valid-subaperture counts.
// The JSON form is in system_json.cpp, the MOAO readers in system_moao.cpp, the presets in
// presets.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ao/system_detail.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao {

namespace detail {

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string sensor_path(std::int64_t index) {
  return index < 0 ? std::string("truth") : "sensors[" + std::to_string(index) + "]";
}

std::string field_message(std::string_view source, std::string_view path, std::string_view expected,
                          std::string_view found) {
  std::string m;
  m.append(source).append(": ").append(path).append(": expected ").append(expected);
  m.append(", found ").append(found);
  return m;
}

}  // namespace detail

std::string_view guide_star_name(GuideStar g) noexcept {
  return g == GuideStar::lgs ? "lgs" : "ngs";
}

GuideStar parse_guide_star(std::string_view text, std::string_view field) {
  if (text == "ngs") return GuideStar::ngs;
  if (text == "lgs") return GuideStar::lgs;
  throw InvalidInput(std::string(field) + ": expected \"ngs\" or \"lgs\", found \"" +
                     std::string(text) + "\"");
}

namespace {

using detail::format_number;

// Throws the InvalidInput of one field. Every check names the field by its JSON path so that the
// message points at the line to fix, whichever form (JSON, MOAO text, preset) the system came from.
class Checker {
 public:
  explicit Checker(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(std::string_view path, std::string_view expected,
                         std::string_view found) const {
    throw InvalidInput(detail::field_message(source_, path, expected, found));
  }
  void finite(const std::string& path, double v) const {
    if (!std::isfinite(v)) fail(path, "a finite number", format_number(v));
  }
  void positive(const std::string& path, double v) const {
    if (!(std::isfinite(v) && v > 0)) fail(path, "a finite number > 0", format_number(v));
  }
  void non_negative(const std::string& path, double v) const {
    if (!(std::isfinite(v) && v >= 0)) fail(path, "a finite number >= 0", format_number(v));
  }
  void unit_interval(const std::string& path, double v) const {  // (0, 1]
    if (!(v > 0 && v <= 1)) fail(path, "a number in (0, 1]", format_number(v));
  }
  void zero_for(const std::string& path, double v, std::string_view kind) const {
    if (v != 0)
      fail(path, "0 for " + std::string(kind) + " sensor (the field belongs to the other type)",
           format_number(v));
  }

 private:
  std::string_view source_;
};

void check_sensor(const Checker& c, const AoSystem& s, const Sensor& w, std::int64_t index) {
  const std::string p = detail::sensor_path(index);
  if (w.name.empty()) c.fail(p + ".name", "a non-empty name", "\"\"");
  if (w.subapertures < 1 || w.subapertures > max_subapertures)
    c.fail(p + ".subapertures", "between 1 and " + std::to_string(max_subapertures),
           std::to_string(w.subapertures));
  // A sensor whose every subaperture centre falls in the central obstruction (N = 1 with any
  // obstruction > 0: its one centre is on axis) would contribute no slope: a measuring sensor
  // would silently drop out and an empty truth makes an m = 0 problem that LAPACK rejects with an
  // opaque message.
  if (valid_subaperture_count(s, w) == 0)
    c.fail(p + ".subapertures",
           "at least one valid subaperture (obstruction " + format_number(s.obstruction) + ", " +
               std::to_string(w.subapertures) + " across)",
           std::to_string(w.subapertures) +
               " across: no subaperture centre lies between the "
               "obstruction and the pupil edge");
  c.finite(p + ".x_arcsec", w.x_arcsec);
  c.finite(p + ".y_arcsec", w.y_arcsec);
  const double radius = std::hypot(w.x_arcsec, w.y_arcsec);
  if (radius > s.field_radius_arcsec)
    c.fail(p,
           "a pointing inside the field (radius <= field_radius_arcsec = " +
               format_number(s.field_radius_arcsec) + " arcsec)",
           "(x_arcsec, y_arcsec) = (" + format_number(w.x_arcsec) + ", " +
               format_number(w.y_arcsec) + "), radius " + format_number(radius) +
               " arcsec: pointing outside the field");
  c.finite(p + ".pupil_shift_x_m", w.pupil_shift_x_m);
  c.finite(p + ".pupil_shift_y_m", w.pupil_shift_y_m);
  c.finite(p + ".rotation_deg", w.rotation_deg);
  c.positive(p + ".wavelength_m", w.wavelength_m);
  c.positive(p + ".pixel_arcsec", w.pixel_arcsec);
  c.non_negative(p + ".readout_noise_e", w.readout_noise_e);
  c.unit_interval(p + ".throughput", w.throughput);
  if (w.guide_star == GuideStar::ngs) {
    c.finite(p + ".magnitude", w.magnitude);
    c.zero_for(p + ".lgs_altitude_m", w.lgs_altitude_m, "an NGS");
    c.zero_for(p + ".lgs_depth_m", w.lgs_depth_m, "an NGS");
    c.zero_for(p + ".lgs_flux", w.lgs_flux, "an NGS");
    c.zero_for(p + ".spot_fwhm_arcsec", w.spot_fwhm_arcsec, "an NGS");
    c.zero_for(p + ".lgs_tiptilt_arcsec2", w.lgs_tiptilt_arcsec2, "an NGS");
    return;
  }
  c.zero_for(p + ".magnitude", w.magnitude, "an LGS");
  c.positive(p + ".lgs_altitude_m", w.lgs_altitude_m);
  // The cone effect scales a layer's footprint by 1 - h / H: a layer at or above the laser spot
  // would have no footprint (or a flipped one), which the model cannot describe. The message names
  // the highest layer, the one the LGS must clear.
  std::size_t highest = 0;
  for (std::size_t l = 1; l < s.atmosphere.layers.size(); ++l)
    if (s.atmosphere.layers[l].altitude_m > s.atmosphere.layers[highest].altitude_m) highest = l;
  if (!s.atmosphere.layers.empty() && !(w.lgs_altitude_m > s.atmosphere.layers[highest].altitude_m))
    c.fail(p + ".lgs_altitude_m",
           "an LGS above every layer (the highest: atmosphere.layers[" + std::to_string(highest) +
               "].altitude_m = " + format_number(s.atmosphere.layers[highest].altitude_m) + " m)",
           format_number(w.lgs_altitude_m) + " m: LGS below a layer");
  c.non_negative(p + ".lgs_depth_m", w.lgs_depth_m);
  if (!(w.lgs_depth_m < w.lgs_altitude_m))
    c.fail(p + ".lgs_depth_m", "a depth below lgs_altitude_m = " + format_number(w.lgs_altitude_m),
           format_number(w.lgs_depth_m));
  c.positive(p + ".lgs_flux", w.lgs_flux);
  c.non_negative(p + ".spot_fwhm_arcsec", w.spot_fwhm_arcsec);
  c.non_negative(p + ".lgs_tiptilt_arcsec2", w.lgs_tiptilt_arcsec2);
}

void check_atmosphere(const Checker& c, const Atmosphere& a) {
  c.positive("atmosphere.r0_m", a.r0_m);
  if (a.layers.empty()) c.fail("atmosphere.layers", "at least one layer", "none");
  double sum = 0;
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const std::string p = "atmosphere.layers[" + std::to_string(l) + "]";
    c.non_negative(p + ".altitude_m", a.layers[l].altitude_m);
    c.non_negative(p + ".fraction", a.layers[l].fraction);
    c.positive(p + ".outer_scale_m", a.layers[l].outer_scale_m);
    sum += a.layers[l].fraction;
  }
  // 1e-6 admits fractions printed with 7 significant digits (MOAO-style files) while catching a
  // forgotten layer or fractions given in percent.
  if (!(std::abs(sum - 1) <= 1e-6))
    c.fail("atmosphere.layers[*].fraction", "fractions summing to 1 (within 1e-6)",
           "a sum of " + format_number(sum));
}

}  // namespace

void validate(const AoSystem& s, std::string_view source) {
  const Checker c(source);
  c.positive("telescope.diameter_m", s.diameter_m);
  if (!(s.obstruction >= 0 && s.obstruction < 1))
    c.fail("telescope.obstruction", "a fraction of the diameter in [0, 1)",
           format_number(s.obstruction));
  c.positive("field_radius_arcsec", s.field_radius_arcsec);
  check_atmosphere(c, s.atmosphere);
  if (s.sensors.empty()) c.fail("sensors", "at least one measuring sensor", "none");
  std::map<std::string, std::string, std::less<>> names;  // name -> path of its first use
  for (std::size_t i = 0; i <= s.sensors.size(); ++i) {
    const bool truth = i == s.sensors.size();
    const Sensor& w = truth ? s.truth : s.sensors[i];
    const std::int64_t index = truth ? -1 : static_cast<std::int64_t>(i);
    check_sensor(c, s, w, index);
    const auto [it, inserted] = names.emplace(w.name, detail::sensor_path(index));
    if (!inserted)
      c.fail(detail::sensor_path(index) + ".name", "a name no other sensor has",
             "\"" + w.name + "\", the name of " + it->second);
  }
  if (s.truth.guide_star != GuideStar::ngs)
    c.fail("truth.guide_star", "\"ngs\" (the truth sensor stands for the target, at infinity)",
           "\"lgs\"");
  c.non_negative("noise.frame_time_s", s.noise.frame_time_s);
  c.non_negative("noise.bandwidth_m", s.noise.bandwidth_m);
  c.unit_interval("noise.atmosphere_throughput", s.noise.atmosphere_throughput);
  if (s.noise.enabled) {
    // The photon counts per frame (and the NGS flux through the bandwidth) divide nothing by
    // these, but a zero would make every noise variance infinite.
    c.positive("noise.frame_time_s", s.noise.frame_time_s);
    c.positive("noise.bandwidth_m", s.noise.bandwidth_m);
  }
}

bool subaperture_is_valid(double obstruction, int subapertures, std::int64_t column,
                          std::int64_t row) noexcept {
  const std::int64_t n = subapertures;
  if (n < 1 || n > max_subapertures || column < 0 || row < 0 || column >= n || row >= n)
    return false;
  const std::int64_t cx = 2 * column + 1 - n, cy = 2 * row + 1 - n;
  const std::int64_t k = cx * cx + cy * cy;  // r^2 in units of (d/2)^2, exact
  if (k >= n * n) return false;
  const double inner = obstruction * static_cast<double>(n);
  return inner * inner <= static_cast<double>(k);  // k < 2^34: exact in double
}

std::int64_t valid_subaperture_count(const AoSystem& system, const Sensor& sensor) {
  std::int64_t count = 0;
  for (std::int64_t row = 0; row < sensor.subapertures; ++row)
    for (std::int64_t col = 0; col < sensor.subapertures; ++col)
      count += subaperture_is_valid(system.obstruction, sensor.subapertures, col, row) ? 1 : 0;
  return count;
}

std::int64_t measurement_count(const AoSystem& system) {
  std::int64_t n = 0;
  for (const Sensor& w : system.sensors) n += 2 * valid_subaperture_count(system, w);
  return n;
}

std::int64_t truth_count(const AoSystem& system) {
  return 2 * valid_subaperture_count(system, system.truth);
}

}  // namespace halfscope::ao

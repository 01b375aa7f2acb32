// JSON form of an AO system (schema in docs/ao.md, "System description"), its atomic writer and
// read_ao_system, which picks the JSON or the MOAO reader (system_moao.cpp) by the file's name.
//
// The reader is strict: an unknown key is an error naming it (a misspelt optional key must not
// silently take its default), a missing required key is an error, a value of the wrong type names
// its path; then validate() checks the values. Doubles are written by nlohmann's shortest
// round-trip formatting, so to_json -> dump -> parse -> ao_system_from_json is exact.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ao/system_detail.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::ao {

namespace {

using nlohmann::json;
constexpr std::string_view kFormat = "halfscope-ao-system";
constexpr int kVersion = 1;

std::string type_name(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Reads one JSON object, remembering its path for messages, and checks at the end that every key
// it holds was asked for.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, std::string_view source)
      : object_(object), path_(std::move(path)), source_(source) {
    if (!object_.is_object()) fail(path_, "an object", type_name(object_));
  }

  [[noreturn]] void fail(std::string_view path, std::string_view expected,
                         std::string_view found) const {
    throw InvalidInput(
        detail::field_message(source_, path.empty() ? "(top level)" : path, expected, found));
  }
  [[nodiscard]] std::string path_of(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  [[nodiscard]] bool has(std::string_view key) const { return object_.contains(key); }

  // The value of a required key (`required` false: nullptr when absent).
  const json* value(std::string_view key, bool required = true) {
    allowed_.emplace_back(key);
    const auto it = object_.find(key);
    if (it == object_.end()) {
      if (required) fail(path_of(key), "a value (the key is required)", "no such key");
      return nullptr;
    }
    return &*it;
  }
  double number(std::string_view key, bool required = true, double fallback = 0) {
    const json* v = value(key, required);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(path_of(key), "a number", type_name(*v));
    return v->get<double>();
  }
  int integer(std::string_view key) {
    const json* v = value(key);
    if (!(v->is_number_integer() || v->is_number_unsigned()))
      fail(path_of(key), "an integer", type_name(*v) + " " + v->dump());
    if (v->is_number_unsigned()
            ? v->get<std::uint64_t>() > INT_MAX
            : (v->get<std::int64_t>() > INT_MAX || v->get<std::int64_t>() < INT_MIN))
      fail(path_of(key), "an integer that fits in 32 bits", v->dump());
    return static_cast<int>(v->get<std::int64_t>());
  }
  std::string string(std::string_view key, bool required = true) {
    const json* v = value(key, required);
    if (v == nullptr) return {};
    if (!v->is_string()) fail(path_of(key), "a string", type_name(*v));
    return v->get<std::string>();
  }
  bool boolean(std::string_view key) {
    const json* v = value(key);
    if (!v->is_boolean()) fail(path_of(key), "true or false", type_name(*v));
    return v->get<bool>();
  }
  const json& array(std::string_view key) {
    const json* v = value(key);
    if (!v->is_array()) fail(path_of(key), "an array", type_name(*v));
    return *v;
  }
  // Every key of the object must have been asked for.
  void finish() const {
    for (const auto& [key, unused] : object_.items()) {
      if (std::find(allowed_.begin(), allowed_.end(), key) != allowed_.end()) continue;
      std::string list;
      for (const std::string& k : allowed_) list += (list.empty() ? "" : ", ") + k;
      fail(path_of(key), "one of the keys " + list, "the unknown key \"" + key + "\"");
    }
  }

 private:
  const json& object_;
  std::string path_;
  std::string_view source_;
  std::vector<std::string> allowed_;
};

json sensor_to_json(const Sensor& w) {
  json j = {{"name", w.name},
            {"guide_star", guide_star_name(w.guide_star)},
            {"x_arcsec", w.x_arcsec},
            {"y_arcsec", w.y_arcsec},
            {"subapertures", w.subapertures},
            {"pupil_shift_x_m", w.pupil_shift_x_m},
            {"pupil_shift_y_m", w.pupil_shift_y_m},
            {"rotation_deg", w.rotation_deg},
            {"wavelength_m", w.wavelength_m},
            {"pixel_arcsec", w.pixel_arcsec},
            {"readout_noise_e", w.readout_noise_e},
            {"throughput", w.throughput}};
  if (w.guide_star == GuideStar::ngs) {
    j["magnitude"] = w.magnitude;
  } else {
    j["lgs_altitude_m"] = w.lgs_altitude_m;
    j["lgs_depth_m"] = w.lgs_depth_m;
    j["lgs_flux"] = w.lgs_flux;
    j["spot_fwhm_arcsec"] = w.spot_fwhm_arcsec;
    j["lgs_tiptilt_arcsec2"] = w.lgs_tiptilt_arcsec2;
  }
  return j;
}

Sensor sensor_from_json(const json& j, const std::string& path, std::string_view source) {
  ObjectReader r(j, path, source);
  Sensor w;
  w.name = r.string("name");
  const std::string star = r.string("guide_star");
  if (star != "ngs" && star != "lgs")
    r.fail(r.path_of("guide_star"), "\"ngs\" or \"lgs\"", "\"" + star + "\"");
  w.guide_star = parse_guide_star(star, r.path_of("guide_star"));
  w.x_arcsec = r.number("x_arcsec");
  w.y_arcsec = r.number("y_arcsec");
  w.subapertures = r.integer("subapertures");
  w.pupil_shift_x_m = r.number("pupil_shift_x_m", false);
  w.pupil_shift_y_m = r.number("pupil_shift_y_m", false);
  w.rotation_deg = r.number("rotation_deg", false);
  w.wavelength_m = r.number("wavelength_m");
  w.pixel_arcsec = r.number("pixel_arcsec");
  w.readout_noise_e = r.number("readout_noise_e");
  w.throughput = r.number("throughput");
  // The keys of the other guide-star type are unknown keys here: an NGS with a laser altitude is
  // a mistake to report, not a value to drop.
  if (w.guide_star == GuideStar::ngs) {
    w.magnitude = r.number("magnitude");
  } else {
    w.lgs_altitude_m = r.number("lgs_altitude_m");
    w.lgs_depth_m = r.number("lgs_depth_m");
    w.lgs_flux = r.number("lgs_flux");
    w.spot_fwhm_arcsec = r.number("spot_fwhm_arcsec");
    w.lgs_tiptilt_arcsec2 = r.number("lgs_tiptilt_arcsec2");
  }
  r.finish();
  return w;
}

// Layers give either Cn2 fractions with atmosphere.r0_m, or Cn2 strengths `cn2` (m^(-5/3), the
// MOAO "ESO units") without r0_m, from which r0 = sum(cn2)^(-3/5) and fraction = cn2 / sum.
Atmosphere atmosphere_from_json(const json& j, std::string_view source) {
  ObjectReader r(j, "atmosphere", source);
  const json& layers = r.array("layers");
  const bool strengths = !layers.empty() && layers[0].is_object() && layers[0].contains("cn2");
  Atmosphere a;
  if (!strengths) a.r0_m = r.number("r0_m");
  double sum = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string lp = "atmosphere.layers[" + std::to_string(l) + "]";
    ObjectReader lr(layers[l], lp, source);
    Layer layer;
    layer.altitude_m = lr.number("altitude_m");
    layer.fraction = lr.number(strengths ? "cn2" : "fraction");
    // Check the raw strength before normalising: validate() would otherwise report a .fraction the
    // user never wrote, with the normalised value.
    if (strengths && !(std::isfinite(layer.fraction) && layer.fraction >= 0))
      lr.fail(lp + ".cn2", "a finite strength >= 0", detail::format_number(layer.fraction));
    layer.outer_scale_m = lr.number("outer_scale_m");
    lr.finish();
    sum += layer.fraction;
    a.layers.push_back(layer);
  }
  if (strengths) {
    if (r.has("r0_m"))
      r.fail("atmosphere.r0_m", "no r0_m when the layers give cn2 strengths (r0 = sum(cn2)^(-3/5))",
             "both");
    if (!(std::isfinite(sum) && sum > 0))
      r.fail("atmosphere.layers[*].cn2", "strengths with a finite positive sum",
             "a sum of " + detail::format_number(sum));
    a.r0_m = std::pow(sum, -3.0 / 5.0);
    for (Layer& layer : a.layers) layer.fraction /= sum;
  }
  r.finish();
  return a;
}

}  // namespace

nlohmann::json to_json(const AoSystem& s) {
  json layers = json::array();
  for (const Layer& l : s.atmosphere.layers)
    layers.push_back({{"altitude_m", l.altitude_m},
                      {"fraction", l.fraction},
                      {"outer_scale_m", l.outer_scale_m}});
  json sensors = json::array();
  for (const Sensor& w : s.sensors) sensors.push_back(sensor_to_json(w));
  return {{"format", kFormat},
          {"version", kVersion},
          {"name", s.name},
          {"telescope", {{"diameter_m", s.diameter_m}, {"obstruction", s.obstruction}}},
          {"field_radius_arcsec", s.field_radius_arcsec},
          {"sensors", sensors},
          {"truth", sensor_to_json(s.truth)},
          {"atmosphere", {{"r0_m", s.atmosphere.r0_m}, {"layers", layers}}},
          {"noise",
           {{"enabled", s.noise.enabled},
            {"frame_time_s", s.noise.frame_time_s},
            {"bandwidth_m", s.noise.bandwidth_m},
            {"atmosphere_throughput", s.noise.atmosphere_throughput}}}};
}

AoSystem ao_system_from_json(const nlohmann::json& j, std::string_view source) {
  ObjectReader r(j, "", source);
  const std::string format = r.string("format", false);
  if (r.has("format") && format != kFormat)
    r.fail("format", "\"" + std::string(kFormat) + "\"", "\"" + format + "\"");
  if (r.has("version")) {
    const int version = r.integer("version");
    if (version != kVersion) r.fail("version", std::to_string(kVersion), std::to_string(version));
  }
  AoSystem s;
  s.name = r.string("name", false);
  {
    ObjectReader t(*r.value("telescope"), "telescope", source);
    s.diameter_m = t.number("diameter_m");
    s.obstruction = t.number("obstruction");
    t.finish();
  }
  s.field_radius_arcsec = r.number("field_radius_arcsec");
  const json& sensors = r.array("sensors");
  for (std::size_t i = 0; i < sensors.size(); ++i)
    s.sensors.push_back(
        sensor_from_json(sensors[i], detail::sensor_path(static_cast<std::int64_t>(i)), source));
  s.truth = sensor_from_json(*r.value("truth"), "truth", source);
  s.atmosphere = atmosphere_from_json(*r.value("atmosphere"), source);
  {
    ObjectReader n(*r.value("noise"), "noise", source);
    s.noise.enabled = n.boolean("enabled");
    s.noise.frame_time_s = n.number("frame_time_s");
    s.noise.bandwidth_m = n.number("bandwidth_m");
    s.noise.atmosphere_throughput = n.number("atmosphere_throughput");
    n.finish();
  }
  r.finish();
  validate(s, source);
  return s;
}

AoSystem read_ao_system_json(const std::filesystem::path& path) {
  const std::vector<std::byte> bytes = io::read_file_bytes(path);
  json j;
  try {
    j = json::parse(reinterpret_cast<const char*>(bytes.data()),
                    reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const json::parse_error& e) {
    throw IoError(path.string() + ": expected a JSON document, found a syntax error at byte " +
                  std::to_string(e.byte) + " (" + e.what() + ")");
  } catch (const json::exception& e) {
    // Not a syntax error but still the file's content, e.g. out_of_range 406 for a number such as
    // 1e400 that overflows a double: the file is what is wrong, so IoError naming it (exit 2).
    throw IoError(path.string() + ": expected a JSON document with finite numbers, found " +
                  e.what());
  }
  try {
    return ao_system_from_json(j, path.string());
  } catch (const InvalidInput& e) {
    throw IoError(e.what());  // a file's content: the file is what is wrong, not an argument
  }
}

void write_ao_system(const std::filesystem::path& path, const AoSystem& system) {
  validate(system, "write_ao_system " + path.string());
  io::check_output_path(path);
  io::AtomicOutput out(path);
  out.write(to_json(system).dump(2) + "\n");
  out.commit();
}

}  // namespace halfscope::ao

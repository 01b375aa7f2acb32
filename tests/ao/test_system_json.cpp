// JSON form of an AO system: exact round trip through text, strict schema (unknown, missing and
// mistyped keys named by their path), the cn2-strength form of the atmosphere, atomic writing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"
#include "thrown_message.hpp"

namespace halfscope::ao {
namespace {

using nlohmann::json;

void expect_same_sensor(const Sensor& a, const Sensor& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.guide_star, b.guide_star);
  // Exact equality: the text must carry every bit of every double.
  for (const auto field :
       {&Sensor::x_arcsec, &Sensor::y_arcsec, &Sensor::pupil_shift_x_m, &Sensor::pupil_shift_y_m,
        &Sensor::rotation_deg, &Sensor::wavelength_m, &Sensor::pixel_arcsec,
        &Sensor::readout_noise_e, &Sensor::throughput, &Sensor::magnitude, &Sensor::lgs_altitude_m,
        &Sensor::lgs_depth_m, &Sensor::lgs_flux, &Sensor::spot_fwhm_arcsec,
        &Sensor::lgs_tiptilt_arcsec2})
    EXPECT_EQ(a.*field, b.*field) << a.name;
  EXPECT_EQ(a.subapertures, b.subapertures);
}

void expect_same_system(const AoSystem& a, const AoSystem& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.diameter_m, b.diameter_m);
  EXPECT_EQ(a.obstruction, b.obstruction);
  EXPECT_EQ(a.field_radius_arcsec, b.field_radius_arcsec);
  ASSERT_EQ(a.sensors.size(), b.sensors.size());
  for (std::size_t i = 0; i < a.sensors.size(); ++i) expect_same_sensor(a.sensors[i], b.sensors[i]);
  expect_same_sensor(a.truth, b.truth);
  EXPECT_EQ(a.atmosphere.r0_m, b.atmosphere.r0_m);
  ASSERT_EQ(a.atmosphere.layers.size(), b.atmosphere.layers.size());
  for (std::size_t l = 0; l < a.atmosphere.layers.size(); ++l) {
    EXPECT_EQ(a.atmosphere.layers[l].altitude_m, b.atmosphere.layers[l].altitude_m);
    EXPECT_EQ(a.atmosphere.layers[l].fraction, b.atmosphere.layers[l].fraction);
    EXPECT_EQ(a.atmosphere.layers[l].outer_scale_m, b.atmosphere.layers[l].outer_scale_m);
  }
  EXPECT_EQ(a.noise.enabled, b.noise.enabled);
  EXPECT_EQ(a.noise.frame_time_s, b.noise.frame_time_s);
  EXPECT_EQ(a.noise.bandwidth_m, b.noise.bandwidth_m);
  EXPECT_EQ(a.noise.atmosphere_throughput, b.noise.atmosphere_throughput);
}

using test::invalid_message;

// A system whose doubles need all 17 digits (1/3, 0.1 + 0.2, pi-derived angles, the 60-layer
// fractions), pupil shifts and a rotation, and noise off.
AoSystem awkward_system() {
  AoSystem s = ao_preset("mid", 60);
  s.diameter_m = 39.0 / 3.0;
  s.sensors[1].pupil_shift_x_m = 0.1 + 0.2;
  s.sensors[1].rotation_deg = 1.0 / 7.0;
  s.sensors[6].magnitude = 12.345678901234567;  // NGS2
  s.truth.y_arcsec = -1e-300;
  s.noise.enabled = false;
  return s;
}

TEST(AoSystemJson, RoundTripThroughTextIsExact) {
  for (const AoSystem& s : {awkward_system(), ao_preset("eelt", 10), ao_preset("check", 60)}) {
    validate(s, "round trip");
    const std::string text = to_json(s).dump(2);
    const AoSystem back = ao_system_from_json(json::parse(text), "round trip");
    expect_same_system(s, back);
    EXPECT_EQ(to_json(back).dump(), to_json(s).dump());
  }
}

TEST(AoSystemJson, WriteAndReadFile) {
  const test::TempDir dir;
  const AoSystem s = awkward_system();
  write_ao_system(dir / "system.json", s);
  expect_same_system(s, read_ao_system(dir / "system.json"));
  // Nothing but the target is left in the folder (the temporary was renamed).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(AoSystemJson, InvalidSystemDoesNotReplaceTheTarget) {
  // The target exists with an earlier, valid system: a failed write must leave its bytes as they
  // were (an implementation that opened or truncated the target before validating would not).
  const test::TempDir dir;
  write_ao_system(dir / "system.json", ao_preset("mid"));
  const std::string before = file_text(dir / "system.json");
  ASSERT_NE(before.find("\"mid"), std::string::npos);
  AoSystem s = ao_preset("check");
  s.atmosphere.r0_m = -1;
  EXPECT_THROW(write_ao_system(dir / "system.json", s), InvalidInput);
  EXPECT_EQ(file_text(dir / "system.json"), before);
  // Nothing else was left in the folder (no temporary).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  EXPECT_THROW(write_ao_system(dir.path(), ao_preset("check")), IoError);  // a folder
}

struct Edit {
  const char* what;
  std::function<void(json&)> change;
  std::vector<std::string> words;
};

TEST(AoSystemJson, SchemaErrorsNameThePath) {
  const std::vector<Edit> edits = {
      {"unknown top key",
       [](json& j) { j["feild_radius_arcsec"] = 60; },
       {"feild_radius_arcsec", "unknown key"}},
      {"unknown sensor key",
       [](json& j) { j["sensors"][2]["lgs_altitude"] = 9e4; },
       {"sensors[2].lgs_altitude", "unknown key", "lgs_altitude_m"}},
      {"LGS key on an NGS",
       [](json& j) { j["sensors"][3]["lgs_flux"] = 1e6; },
       {"sensors[3].lgs_flux", "unknown key"}},
      {"unknown layer key",
       [](json& j) { j["atmosphere"]["layers"][1]["L0"] = 25; },
       {"atmosphere.layers[1].L0"}},
      {"missing key",
       [](json& j) { j["telescope"].erase("obstruction"); },
       {"telescope.obstruction", "required"}},
      {"missing truth", [](json& j) { j.erase("truth"); }, {"truth", "required"}},
      {"missing noise key", [](json& j) { j["noise"].erase("enabled"); }, {"noise.enabled"}},
      {"string for a number",
       [](json& j) { j["sensors"][0]["x_arcsec"] = "23"; },
       {"sensors[0].x_arcsec", "a number", "a string"}},
      {"float subapertures",
       [](json& j) { j["truth"]["subapertures"] = 10.5; },
       {"truth.subapertures", "an integer"}},
      {"number for a boolean",
       [](json& j) { j["noise"]["enabled"] = 1; },
       {"noise.enabled", "true or false"}},
      {"object for an array",
       [](json& j) { j["sensors"] = json::object(); },
       {"sensors", "an array"}},
      {"null for a number",
       [](json& j) { j["atmosphere"]["r0_m"] = nullptr; },
       {"atmosphere.r0_m", "null"}},
      {"bad guide star",
       [](json& j) { j["sensors"][0]["guide_star"] = "laser"; },
       {"sensors[0].guide_star", "\"laser\""}},
      {"wrong format", [](json& j) { j["format"] = "moao"; }, {"format", "\"moao\""}},
      {"wrong version", [](json& j) { j["version"] = 2; }, {"version", "found 2"}},
      {"not an object", [](json& j) { j = json::array(); }, {"(top level)", "an object"}},
      {"validation after parsing",
       [](json& j) { j["atmosphere"]["r0_m"] = -0.2; },
       {"atmosphere.r0_m", "found -0.2"}},
      {"zero subapertures",
       [](json& j) { j["sensors"][5]["subapertures"] = 0; },
       {"sensors[5].subapertures", "found 0"}},
      {"obstruction hides every subaperture",
       [](json& j) { j["telescope"]["obstruction"] = 0.99; },
       {"sensors[0].subapertures", "at least one valid subaperture", "obstruction 0.99"}},
      {"one truth subaperture behind the obstruction",
       [](json& j) { j["truth"]["subapertures"] = 1; },
       {"truth.subapertures", "at least one valid subaperture", "1 across"}},
      {"negative cn2 named as written",
       [](json& j) {
         j["atmosphere"].erase("r0_m");
         for (json& l : j["atmosphere"]["layers"]) {
           l["cn2"] = l["fraction"];
           l.erase("fraction");
         }
         j["atmosphere"]["layers"][2]["cn2"] = -0.25;
       },
       {"atmosphere.layers[2].cn2", ">= 0", "found -0.25"}},
      {"cn2 with r0",
       [](json& j) {
         for (json& l : j["atmosphere"]["layers"]) {
           l["cn2"] = l["fraction"];
           l.erase("fraction");
         }
       },
       {"atmosphere.r0_m", "cn2"}},
  };
  for (const Edit& e : edits) {
    json j = to_json(ao_preset("check"));
    e.change(j);
    const std::string m = invalid_message([&] { (void)ao_system_from_json(j, "in.json"); });
    EXPECT_EQ(m.rfind("in.json: ", 0), 0u) << e.what << ": " << m;
    for (const std::string& w : e.words)
      EXPECT_NE(m.find(w), std::string::npos) << e.what << ": '" << w << "' not in " << m;
    // The normalised fraction the user never wrote must not be what the message names.
    EXPECT_EQ(m.find(".fraction"), std::string::npos) << e.what << ": " << m;
  }
}

TEST(AoSystemJson, OptionalKeysAndStrengths) {
  json j = to_json(ao_preset("check"));
  j.erase("format");
  j.erase("version");
  j.erase("name");
  j["sensors"][0].erase("rotation_deg");
  j["sensors"][0].erase("pupil_shift_x_m");
  // Layers given as Cn2 strengths (m^-5/3) without r0: r0 = sum^(-3/5), fractions = cn2 / sum.
  j["atmosphere"] = {{"layers",
                      {{{"altitude_m", 0}, {"cn2", 20.0}, {"outer_scale_m", 30}},
                       {{"altitude_m", 5000}, {"cn2", 5.0}, {"outer_scale_m", 25}}}}};
  const AoSystem s = ao_system_from_json(j, "strengths");
  EXPECT_EQ(s.name, "");
  EXPECT_EQ(s.sensors[0].rotation_deg, 0);
  EXPECT_NEAR(s.atmosphere.r0_m, std::pow(25.0, -0.6), 1e-16);
  EXPECT_NEAR(s.atmosphere.layers[0].fraction, 0.8, 1e-16);
  EXPECT_NEAR(s.atmosphere.layers[1].fraction, 0.2, 1e-16);
}

TEST(AoSystemJson, FileErrorsAreIoErrorsNamingTheFile) {
  const test::TempDir dir;
  { std::ofstream(dir / "syntax.json") << "{\"name\": \"x\","; }
  try {
    (void)read_ao_system(dir / "syntax.json");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("syntax.json"), std::string::npos) << e.what();
  }
  json j = to_json(ao_preset("check"));
  j["atmosphere"]["layers"][0]["altitude_m"] = -1;
  { std::ofstream(dir / "bad.json") << j.dump(); }
  try {
    (void)read_ao_system(dir / "bad.json");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bad.json: atmosphere.layers[0].altitude_m"), std::string::npos) << m;
  }
  // A number that overflows a double is not a syntax error for the parser (nlohmann's
  // out_of_range 406) but is still the file's fault: IoError naming the file.
  std::string text = to_json(ao_preset("check")).dump();
  const std::string key = "\"diameter_m\":";
  const std::size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::size_t value = at + key.size();
  text.replace(value, text.find_first_of(",}", value) - value, "1e400");
  { std::ofstream(dir / "overflow.json") << text; }
  try {
    (void)read_ao_system(dir / "overflow.json");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind((dir / "overflow.json").string() + ": ", 0), 0u) << m;
    EXPECT_NE(m.find("1e400"), std::string::npos) << m;
  }
  EXPECT_THROW((void)read_ao_system(dir / "missing.json"), IoError);
  write_ao_system(dir / "ok.json", ao_preset("check"));
  EXPECT_THROW((void)read_ao_system(dir / "ok.json", dir / "atm.txt"), InvalidInput);
}

}  // namespace
}  // namespace halfscope::ao

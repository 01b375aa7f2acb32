// MOAO text formats on our own fixtures (tests/data/ao/, written from the documented layouts): the
// full layout with a separate atmosphere file, the short layout with the atmosphere appended, the
// short layout without the truth sensor's entries, and the errors (file ending early, a letter in
// a number, too few values, inconsistent entries). Expected values are the numbers in the files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"
#include "thrown_message.hpp"

namespace halfscope::ao {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return test::source_dir() / "tests" / "data" / "ao" / name;
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::filesystem::path write_lines(const test::TempDir& dir, const std::string& name,
                                  const std::vector<std::string>& lines) {
  std::ofstream out(dir / name);
  for (const std::string& l : lines) out << l << "\n";
  return dir / name;
}

using test::io_message;

TEST(AoMoaoReader, FullLayoutWithAtmosphereFile) {
  const AoSystem s =
      read_ao_system(fixture("full-sys-params.txt"), fixture("prof-test-atmos-night0.txt"));
  EXPECT_EQ(s.diameter_m, 8);
  EXPECT_EQ(s.obstruction, 0.14);
  EXPECT_EQ(s.noise.frame_time_s, 0.002);
  EXPECT_EQ(s.noise.bandwidth_m, 3e-7);
  EXPECT_EQ(s.noise.atmosphere_throughput, 0.8);
  EXPECT_TRUE(s.noise.enabled);
  ASSERT_EQ(s.sensors.size(), 3u);
  const Sensor& l2 = s.sensors[1];
  EXPECT_EQ(l2.name, "LGS2");
  EXPECT_EQ(l2.guide_star, GuideStar::lgs);
  EXPECT_EQ(l2.x_arcsec, -20);
  EXPECT_EQ(l2.pupil_shift_x_m, 0.1);
  EXPECT_DOUBLE_EQ(l2.lgs_altitude_m, 1e5);
  EXPECT_EQ(l2.lgs_depth_m, 8000);
  EXPECT_EQ(l2.lgs_flux, 5e6);
  EXPECT_EQ(l2.pixel_arcsec, 0.8);
  EXPECT_EQ(l2.wavelength_m, 589e-9);
  EXPECT_EQ(l2.throughput, 0.35);
  EXPECT_EQ(l2.spot_fwhm_arcsec, 1.2);
  EXPECT_EQ(l2.lgs_tiptilt_arcsec2, 0.5);
  EXPECT_EQ(l2.readout_noise_e, 2.5);
  EXPECT_EQ(l2.subapertures, 8);
  const Sensor& n1 = s.sensors[2];
  EXPECT_EQ(n1.name, "NGS1");
  EXPECT_EQ(n1.guide_star, GuideStar::ngs);
  EXPECT_EQ(n1.y_arcsec, 30);
  EXPECT_EQ(n1.pupil_shift_y_m, -0.05);
  EXPECT_EQ(n1.rotation_deg, 1.5);
  EXPECT_EQ(n1.magnitude, 12.5);
  EXPECT_EQ(n1.wavelength_m, 700e-9);
  EXPECT_EQ(n1.pixel_arcsec, 0.25);
  EXPECT_EQ(n1.throughput, 0.4);
  EXPECT_EQ(n1.lgs_altitude_m, 0);
  // The truth sensor points at the target, not at its alphaX/alphaY entry (5, 7).
  EXPECT_EQ(s.truth.name, "truth");
  EXPECT_EQ(s.truth.x_arcsec, 3);
  EXPECT_EQ(s.truth.y_arcsec, -4);
  EXPECT_EQ(s.truth.magnitude, 14);
  // Largest pointing 30 arcsec: a one-arcminute field.
  EXPECT_EQ(s.field_radius_arcsec, 60);
  // Atmosphere: cn2 20, 5, 2.5 -> fractions by the sum 27.5, r0 = 27.5^(-3/5).
  ASSERT_EQ(s.atmosphere.layers.size(), 3u);
  EXPECT_NEAR(s.atmosphere.r0_m, std::pow(27.5, -0.6), 1e-15);
  EXPECT_NEAR(s.atmosphere.layers[0].fraction, 20 / 27.5, 1e-15);
  EXPECT_NEAR(s.atmosphere.layers[2].fraction, 2.5 / 27.5, 1e-15);
  EXPECT_EQ(s.atmosphere.layers[1].altitude_m, 5000);
  EXPECT_EQ(s.atmosphere.layers[2].outer_scale_m, 20);
  EXPECT_EQ(read_moao_atmosphere(fixture("prof-test-atmos-night0.txt")).layers.size(), 3u);
}

TEST(AoMoaoReader, ShortLayoutWithAtmosphereAppended) {
  const AoSystem s = read_ao_system(fixture("short-sys-params.txt"));
  EXPECT_EQ(s.diameter_m, 10);
  ASSERT_EQ(s.sensors.size(), 2u);
  EXPECT_EQ(s.sensors[0].guide_star, GuideStar::lgs);
  EXPECT_DOUBLE_EQ(s.sensors[0].lgs_altitude_m, 80000);
  EXPECT_EQ(s.sensors[0].lgs_depth_m, 6000);
  EXPECT_EQ(s.sensors[0].lgs_tiptilt_arcsec2, 0.2);
  EXPECT_EQ(s.sensors[0].x_arcsec, 15);
  EXPECT_EQ(s.sensors[1].guide_star, GuideStar::ngs);
  EXPECT_EQ(s.sensors[1].y_arcsec, 12);
  // No photometry in this layout: MOAO's check-file values.
  EXPECT_EQ(s.sensors[1].magnitude, 13);
  EXPECT_EQ(s.sensors[0].lgs_flux, 6e7);
  EXPECT_EQ(s.noise.frame_time_s, 0.004);
  EXPECT_EQ(s.truth.x_arcsec, 0);
  ASSERT_EQ(s.atmosphere.layers.size(), 2u);
  EXPECT_NEAR(s.atmosphere.r0_m, std::pow(29.0, -0.6), 1e-15);
  EXPECT_NEAR(s.atmosphere.layers[1].fraction, 4 / 29.0, 1e-15);
  EXPECT_EQ(s.atmosphere.layers[1].altitude_m, 12500);
  // D = 10, Nssp = 6, obstruction 0.2: 32 valid subapertures (36 minus the 4 corners).
  EXPECT_EQ(measurement_count(s), 2 * 2 * 32);
}

TEST(AoMoaoReader, ShortLayoutWithTheTruthEntriesOmitted) {
  const AoSystem s = read_ao_system(fixture("short-truth-omitted-sys-params.txt"),
                                    fixture("prof-test-atmos-night0.txt"));
  ASSERT_EQ(s.sensors.size(), 2u);
  EXPECT_EQ(s.truth.guide_star, GuideStar::ngs);
  EXPECT_EQ(s.truth.x_arcsec, 0);
  EXPECT_EQ(s.truth.pupil_shift_x_m, 0);
  EXPECT_EQ(s.atmosphere.layers.size(), 3u);
}

TEST(AoMoaoReader, ShortLayoutWithTwoSensorsAndTheTruthOmitted) {
  // nW = 2 with the truth sensor's entries omitted: gsAlt then holds one value, as nLgs does in the
  // full layout, so only the entry count (22) tells the layouts apart.
  const test::TempDir dir;
  std::vector<std::string> lines = lines_of(fixture("short-truth-omitted-sys-params.txt"));
  ASSERT_EQ(lines.size(), 44u);
  lines[5] = "2";  // nW: one LGS, then the truth
  // gsAlt, type and the per-sensor arrays alphaX ... sensibilite keep the LGS's value only.
  for (const std::size_t value_line : {9, 11, 15, 17, 19, 21, 23, 25, 27})
    lines[value_line] = lines[value_line].substr(0, lines[value_line].find(' '));
  const auto path = write_lines(dir, "two.txt", lines);
  const AoSystem s = read_ao_system(path, fixture("prof-test-atmos-night0.txt"));
  ASSERT_EQ(s.sensors.size(), 1u);
  EXPECT_EQ(s.sensors[0].guide_star, GuideStar::lgs);
  EXPECT_EQ(s.sensors[0].lgs_altitude_m, 80000);
  EXPECT_EQ(s.sensors[0].x_arcsec, 15);
  EXPECT_EQ(s.truth.guide_star, GuideStar::ngs);
  EXPECT_EQ(s.truth.x_arcsec, 0);
  EXPECT_TRUE(is_moao_short_layout(path));
  EXPECT_FALSE(is_moao_short_layout(fixture("full-sys-params.txt")));
  EXPECT_TRUE(is_moao_short_layout(fixture("short-sys-params.txt")));  // atmosphere appended
}

TEST(AoMoaoReader, BlankCommentLinesAndWindowsLineEndings) {
  // SYS_PARAM.md: "each parameter must be preceded by a blank line (used for comments)".
  const test::TempDir dir;
  std::vector<std::string> lines = lines_of(fixture("full-sys-params.txt"));
  for (std::size_t i = 0; i < lines.size(); i += 2) lines[i].clear();
  for (std::string& l : lines) l += "\r";
  lines.emplace_back("");
  const auto path = write_lines(dir, "blank.txt", lines);
  const AoSystem s = read_ao_system(path, fixture("prof-test-atmos-night0.txt"));
  EXPECT_EQ(s.sensors[2].magnitude, 12.5);
  EXPECT_EQ(s.truth.y_arcsec, -4);
}

TEST(AoMoaoReader, TruncatedFileNamesTheMissingEntry) {
  const test::TempDir dir;
  std::vector<std::string> lines = lines_of(fixture("full-sys-params.txt"));
  ASSERT_EQ(lines.size(), 72u);
  lines.resize(41);  // ends with the comment line of entry 21, lgsFlux
  const auto path = write_lines(dir, "cut.txt", lines);
  const std::string m =
      io_message([&] { (void)read_ao_system(path, fixture("prof-test-atmos-night0.txt")); });
  for (const char* w : {"cut.txt", "entry lgsFlux", "file ends early"})
    EXPECT_NE(m.find(w), std::string::npos) << m;
  // The atmosphere file cut after its cn2 entry.
  std::vector<std::string> atm = lines_of(fixture("prof-test-atmos-night0.txt"));
  atm.resize(6);
  const auto atm_path = write_lines(dir, "atm.txt", atm);
  const std::string ma = io_message([&] { (void)read_moao_atmosphere(atm_path); });
  EXPECT_NE(ma.find("entry h"), std::string::npos) << ma;
}

struct LineEdit {
  const char* file;
  std::size_t line;  // 0-based
  const char* text;
  std::vector<std::string> words;
};

TEST(AoMoaoReader, BadValuesNameTheEntry) {
  const std::vector<LineEdit> edits = {
      {"full-sys-params.txt", 13, "1O", {"entry Nssp (line 14)", "a number", "\"1O\""}},
      {"full-sys-params.txt", 23, "0 0.1 0", {"entry XPup", "4 values", "too few values"}},
      {"full-sys-params.txt", 23, "0 0.1 0 0 0", {"entry XPup", "too many values"}},
      {"full-sys-params.txt", 7, "2.5", {"entry nW", "an integer", "2.5"}},
      {"full-sys-params.txt", 7, "1", {"entry nW", "at least 2"}},
      {"full-sys-params.txt", 11, "2", {"entry nTarget", "1 target"}},
      {"full-sys-params.txt", 17, "2 1 2 1", {"entry type", "sensor 2"}},
      {"full-sys-params.txt", 15, "1e-05 0 0 0", {"entry gsAlt", "sensor 2"}},
      {"full-sys-params.txt", 39, "12.5", {"entry mrNGS", "2 values"}},
      {"full-sys-params.txt", 65, "90000", {"entry lgsAlt", "1 / gsAlt"}},
      {"full-sys-params.txt", 3, "0.14 0.2", {"entry obs", "one value"}},
      {"full-sys-params.txt", 3, "", {"entry obs", "an empty line"}},
      {"full-sys-params.txt", 3, "nan", {"entry obs", "finite"}},
      {"short-sys-params.txt",
       3,
       "1.4",
       {"short-sys-params.txt", "telescope.obstruction", "found 1.4"}},
      {"short-sys-params.txt", 47, "0.2", {"entry r0", "sum(cn2)^(-3/5)"}},
      {"short-sys-params.txt", 49, "25 -4", {"entry cn2", ">= 0"}},
      {"short-sys-params.txt", 41, "95000", {"entry lgs_alt"}},
      {"short-sys-params.txt", 53, "25 25 25", {"entry l0", "2 values"}},
      {"short-sys-params.txt", 51, "30 85000", {"sensors[0].lgs_altitude_m", "LGS below a layer"}},
  };
  for (const LineEdit& e : edits) {
    const test::TempDir dir;
    std::vector<std::string> lines = lines_of(fixture(e.file));
    ASSERT_LT(e.line, lines.size());
    lines[e.line] = e.text;
    const auto path = write_lines(dir, e.file, lines);
    const bool full = std::string(e.file).rfind("full", 0) == 0;
    const std::string m = io_message([&] {
      (void)read_ao_system(path,
                           full ? fixture("prof-test-atmos-night0.txt") : std::filesystem::path{});
    });
    for (const std::string& w : e.words)
      EXPECT_NE(m.find(w), std::string::npos)
          << e.file << ":" << e.line + 1 << ": '" << w << "' not in " << m;
  }
}

TEST(AoMoaoReader, AtmosphereMustComeExactlyOnce) {
  const std::string none = io_message([] { (void)read_ao_system(fixture("full-sys-params.txt")); });
  EXPECT_NE(none.find("atmosphere"), std::string::npos) << none;
  const std::string both = io_message([] {
    (void)read_ao_system(fixture("short-sys-params.txt"), fixture("prof-test-atmos-night0.txt"));
  });
  EXPECT_NE(both.find("an atmosphere file was given as well"), std::string::npos) << both;
  EXPECT_NE(both.find("line 45"), std::string::npos) << both;
  const test::TempDir dir;
  std::vector<std::string> lines = lines_of(fixture("short-sys-params.txt"));
  lines.push_back("one entry too many");
  lines.push_back("1");
  const auto path = write_lines(dir, "extra.txt", lines);
  const std::string extra = io_message([&] { (void)read_ao_system(path); });
  EXPECT_NE(extra.find("entry l0"), std::string::npos) << extra;
}

TEST(AoMoaoReader, SevenAcrossCanaryObstructionKeepsMoaosSubapertures) {
  const test::TempDir dir;
  std::vector<std::string> lines = lines_of(fixture("full-sys-params.txt"));
  lines[3] = "0.286";
  lines[13] = "7";
  const auto path = write_lines(dir, "canary.txt", lines);
  const AoSystem s = read_ao_system(path, fixture("prof-test-atmos-night0.txt"));
  EXPECT_EQ(s.obstruction, 0.285);
  EXPECT_EQ(valid_subaperture_count(s, s.truth), 36);
}

TEST(AoMoaoReader, ReadSystemWritesAsJsonAndBack) {
  const AoSystem s =
      read_ao_system(fixture("full-sys-params.txt"), fixture("prof-test-atmos-night0.txt"));
  const test::TempDir dir;
  write_ao_system(dir / "s.json", s);
  const AoSystem back = read_ao_system(dir / "s.json");
  EXPECT_EQ(back.sensors[2].rotation_deg, 1.5);
  EXPECT_EQ(back.atmosphere.layers[0].fraction, s.atmosphere.layers[0].fraction);
  EXPECT_EQ(measurement_count(back), measurement_count(s));
}

}  // namespace
}  // namespace halfscope::ao

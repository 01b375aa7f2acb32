// Antenna tables (sim/radio.hpp): the embedded MeerKAT table and user CSV files.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/sim/radio.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

std::string message_of(std::string_view text) {
  try {
    (void)sim::parse_antenna_csv(text, "ants.csv");
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RadioAntennas, MeerKatHas64AntennasAnd2016BaselinesUpTo8Km) {
  const sim::AntennaTable t = sim::meerkat_antennas();
  ASSERT_EQ(t.antennas.size(), 64u);
  EXPECT_EQ(sim::baseline_count(t), 2016);
  std::set<std::string> names;
  for (const auto& a : t.antennas) names.insert(a.name);
  EXPECT_EQ(names.size(), 64u);
  EXPECT_EQ(t.antennas.front().name, "m000");
  EXPECT_EQ(t.antennas.back().name, "m063");
  // m000 as published: -8.264 -207.290 8.597 (data/antennas/meerkat.csv).
  EXPECT_EQ(t.antennas[0].east, -8.264);
  EXPECT_EQ(t.antennas[0].north, -207.290);
  EXPECT_EQ(t.antennas[0].up, 8.597);
  // The longest baseline is m049-m059... about 7.7 km (MeerKAT's published maximum is 8 km).
  const double bmax = sim::max_baseline_m(t);
  EXPECT_GT(bmax, 7500);
  EXPECT_LT(bmax, 8000);
  // The embedded copy is the file in the repository, byte for byte.
  std::ifstream in(test::source_dir() / "data/antennas/meerkat.csv", std::ios::binary);
  ASSERT_TRUE(in) << "run with HALFSCOPE_SOURCE_DIR set";
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file, sim::detail::meerkat_csv_text());
  EXPECT_EQ(sim::load_antennas("MeerKAT").antennas.size(), 64u);
}

TEST(RadioAntennas, ParsesAUserTable) {
  const sim::AntennaTable t = sim::parse_antenna_csv(
      "# a comment\n\nname, east, north, up\r\nA1, 1.5, -2, +3e1\n\nA2,0,0,0\n", "mine.csv");
  EXPECT_EQ(t.source, "mine.csv");
  ASSERT_EQ(t.antennas.size(), 2u);
  EXPECT_EQ(t.antennas[0].name, "A1");
  EXPECT_EQ(t.antennas[0].east, 1.5);
  EXPECT_EQ(t.antennas[0].north, -2);
  EXPECT_EQ(t.antennas[0].up, 30);
  EXPECT_DOUBLE_EQ(sim::max_baseline_m(t), std::sqrt(1.5 * 1.5 + 4 + 900));
}

TEST(RadioAntennas, BadRowsNameFileLineFieldAndWhatWasFound) {
  const std::string h = "name,east_m,north_m,up_m\n";
  auto expect = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " / " << p;
  };
  expect(message_of(h + "a,1,2,3\nb,1,2\n"), {"ants.csv:3", "expected 4 fields", "found 3"});
  expect(message_of(h + "a,1,x2,3\nb,0,0,0\n"),
         {"ants.csv:2", "field 3 (north (m))", "expected a finite number", "found \"x2\""});
  expect(message_of(h + "a,1,2,nan\nb,0,0,0\n"), {"ants.csv:2", "field 4 (up (m))", "\"nan\""});
  expect(message_of(h + "a,1,2,3\na,0,0,0\n"), {"ants.csv:3", "duplicate antenna name \"a\""});
  expect(message_of(h + ",1,2,3\nb,0,0,0\n"), {"ants.csv:2", "field 1 (name)"});
  expect(message_of("a,1,2,3\nb,0,0,0\n"), {"ants.csv:1", "expected a header line"});
  expect(message_of(h + "a,1,2,3\n"), {"ants.csv", "at least 2 antennas", "found 1"});
  EXPECT_THROW((void)sim::read_antenna_csv("/nonexistent/antennas.csv"), IoError);
}

}  // namespace
}  // namespace halfscope

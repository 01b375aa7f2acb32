// SAC reader and writer against files written by ObsPy in both byte orders (tests/data/sac,
// made by tests/data/make_seismic_fits_fixtures.py, with ObsPy's own reading in expected.json).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <string>

#include "halfscope/io/file.hpp"
#include "halfscope/io/sac.hpp"
#include "test_support.hpp"

namespace halfscope::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

fs::path fixture(const std::string& name) {
  return test::source_dir() / "tests/data/sac" / name;
}

const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture("expected.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::string field(const SacFile& s, int offset, int width) {
  std::string v(s.chars.data() + offset, static_cast<std::size_t>(width));
  return v.erase(v.find_last_not_of(' ') + 1);
}

// Overwrites 4-byte word `word` of a SAC file held in `bytes` (in the file's byte order).
void poke(std::vector<std::byte>& bytes, int word, std::uint32_t value, bool big) {
  if (big) value = __builtin_bswap32(value);
  std::memcpy(bytes.data() + 4 * word, &value, 4);
}

Trace sample_trace() {
  Trace t{"IU", "ANMO", "00", "BHZ", parse_iso8601("2021-03-04T05:06:07.890123456Z"), 40.0, {}};
  t.data = Array::from_values<float>(test::random_floats(257, -3.f, 3.f, 11), {257});
  return t;
}

void expect_same_trace(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.sample_rate, b.sample_rate);
  ASSERT_EQ(a.data.dtype(), b.data.dtype());
  ASSERT_EQ(a.data.shape(), b.data.shape());
  EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), static_cast<std::size_t>(a.data.nbytes())),
            0);
}

TEST(Sac, ReadsObspyFilesOfBothByteOrders) {
  for (const auto& [name, e] : expected().items()) {
    SCOPED_TRACE(name);
    const SacFile s = read_sac(fixture(name));
    const Trace& t = s.trace;
    EXPECT_EQ(t.id(), e["id"].get<std::string>());
    EXPECT_EQ(t.start_ns, e["start_ns"].get<std::int64_t>());
    EXPECT_EQ(t.sample_rate, e["sample_rate"].get<double>());
    EXPECT_EQ(static_cast<double>(s.floats[sac_float::delta]), e["delta"].get<double>());
    ASSERT_EQ(t.data.dtype(), DType::f32);
    ASSERT_EQ(t.data.size(), e["npts"].get<std::int64_t>());
    const auto& data = e["data"];
    for (std::int64_t k = 0; k < t.data.size(); ++k)
      ASSERT_EQ(static_cast<double>(t.data.data_as<float>()[k]), data[k].get<double>()) << k;
    const auto& h = e["header"];
    EXPECT_EQ(static_cast<double>(s.floats[35]), h["evla"].get<double>());
    EXPECT_EQ(static_cast<double>(s.floats[36]), h["evlo"].get<double>());
    EXPECT_EQ(static_cast<double>(s.floats[40]), h["user0"].get<double>());
    EXPECT_EQ(static_cast<double>(s.floats[sac_float::t0 + 1]), h["t1"].get<double>());
    EXPECT_EQ(static_cast<double>(s.floats[sac_float::b]), h["b"].get<double>());
    EXPECT_EQ(field(s, sac_char::kevnm, 16), h["kevnm"].get<std::string>());
    EXPECT_EQ(s.ints[sac_int::nzyear], h["nzyear"].get<int>());
    EXPECT_EQ(s.ints[sac_int::nzjday], h["nzjday"].get<int>());
    EXPECT_EQ(s.ints[sac_int::nzmsec], h["nzmsec"].get<int>());
  }
}

TEST(Sac, WriteOfReadGivesTheSameBytes) {
  for (const auto& [name, big] : {std::pair{"little.sac", false}, std::pair{"big.sac", true}}) {
    SCOPED_TRACE(name);
    const auto original = read_file_bytes(fixture(name));
    const SacFile s = parse_sac(original, name);
    EXPECT_EQ(serialize_sac(s, big), original);
    // The other byte order holds the same header and samples.
    const auto swapped = serialize_sac(s, !big);
    EXPECT_NE(swapped, original);
    const SacFile back = parse_sac(swapped, "swapped.sac");
    EXPECT_EQ(std::memcmp(back.floats.data(), s.floats.data(), sizeof s.floats), 0);
    EXPECT_EQ(back.ints, s.ints);
    EXPECT_EQ(back.chars, s.chars);
    expect_same_trace(back.trace, s.trace);
  }
}

TEST(Sac, MakeSacRoundTripsATrace) {
  const Trace t = sample_trace();
  const SacFile s = make_sac(t);
  EXPECT_EQ(s.ints[sac_int::npts], 257);
  EXPECT_EQ(s.ints[sac_int::nzyear], 2021);
  EXPECT_EQ(s.ints[sac_int::nzjday], 63);
  EXPECT_EQ(s.ints[sac_int::nzmsec], 890);
  EXPECT_EQ(s.ints[7], kSacUndefinedInt) << "NORID stays undefined";
  EXPECT_EQ(s.floats[35], kSacUndefinedFloat) << "EVLA stays undefined";
  EXPECT_EQ(field(s, sac_char::kevnm, 16), "-12345");
  EXPECT_EQ(field(s, sac_char::kstnm, 8), "ANMO");
  const TempDir dir;
  for (bool big : {false, true}) {
    write_sac(dir / "t.sac", s, big);
    expect_same_trace(read_sac(dir / "t.sac").trace, t);
  }
}

TEST(Sac, EditedTraceUpdatesHeaderAndKeepsMarkerTimes) {
  SacFile s = read_sac(fixture("little.sac"));
  const double t1_before = static_cast<double>(s.trace.start_ns) * 1e-9 -
                           static_cast<double>(s.floats[sac_float::b]) +
                           static_cast<double>(s.floats[sac_float::t0 + 1]);
  s.trace.start_ns += 1'500'000'000;  // 1.5 s later
  s.trace.station = "NEW";
  s.trace.data = s.trace.data.slice(0, 10, 60).contiguous();
  const SacFile back = parse_sac(serialize_sac(s), "edited.sac");
  expect_same_trace(back.trace, s.trace);
  EXPECT_EQ(back.ints[sac_int::npts], 50);
  const double t1_after = static_cast<double>(back.trace.start_ns) * 1e-9 -
                          static_cast<double>(back.floats[sac_float::b]) +
                          static_cast<double>(back.floats[sac_float::t0 + 1]);
  EXPECT_NEAR(t1_after, t1_before, 1e-5) << "T1 keeps its absolute time";
  EXPECT_EQ(back.floats[35], s.floats[35]) << "unrelated fields are kept";
  const float* d = back.trace.data.data_as<float>();
  EXPECT_EQ(back.floats[sac_float::depmax], *std::max_element(d, d + 50));
  EXPECT_EQ(back.floats[sac_float::depmin], *std::min_element(d, d + 50));
}

TEST(Sac, IntegerSamplesBecomeFloat32) {
  Trace t = sample_trace();
  const std::int32_t ints[] = {1, -2, 3, 16777216};
  t.data = Array::from_values<std::int32_t>(ints, {4});
  const SacFile s = parse_sac(serialize_sac(make_sac(t)), "i.sac");
  ASSERT_EQ(s.trace.data.dtype(), DType::f32);
  EXPECT_EQ(s.trace.data.data_as<float>()[3], 16777216.0f);
}

TEST(Sac, RejectsBadTraces) {
  Trace t = sample_trace();
  t.station = "TOOLONGNAME";
  EXPECT_THROW((void)make_sac(t), InvalidInput);
  t = sample_trace();
  t.sample_rate = 0.0;
  EXPECT_THROW((void)make_sac(t), InvalidInput);
  t = sample_trace();
  t.data = Array(DType::f32, {2, 3});
  EXPECT_THROW((void)make_sac(t), InvalidInput);
}

TEST(Sac, MalformedFilesGiveIoErrorNamingTheFile) {
  const auto good = read_file_bytes(fixture("big.sac"));
  const auto expect_io_error = [](std::vector<std::byte> bytes, const std::string& what,
                                  const std::string& needle) {
    try {
      (void)parse_sac(bytes, "bad.sac");
      ADD_FAILURE() << what << ": no error";
    } catch (const IoError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("bad.sac: ", 0), 0u) << m;
      EXPECT_NE(m.find(needle), std::string::npos) << what << ": " << m;
    }
  };
  auto b = good;
  b.pop_back();
  expect_io_error(b, "one byte short", "truncated");
  b = good;
  b.resize(b.size() + 4);
  expect_io_error(b, "one sample too many", "size mismatch");
  expect_io_error({good.begin(), good.begin() + 600}, "short header", "632");
  b = good;
  poke(b, 70 + sac_int::npts, static_cast<std::uint32_t>(-5), true);
  expect_io_error(b, "negative NPTS", "NPTS");
  b = good;
  poke(b, 70 + sac_int::nvhdr, 7, true);
  expect_io_error(b, "header version 7", "NVHDR");
  b = good;
  poke(b, sac_float::delta, 0, true);
  expect_io_error(b, "zero DELTA", "DELTA");
  b = good;
  poke(b, 70 + sac_int::leven, 0, true);
  expect_io_error(b, "uneven", "LEVEN");
  b = good;
  poke(b, 70 + sac_int::nzjday, 400, true);
  expect_io_error(b, "day 400", "NZJDAY");
  b = good;
  poke(b, 70 + sac_int::nzyear, 99999, true);
  expect_io_error(b, "year 99999", "NZYEAR");
  b = good;
  poke(b, sac_float::b, std::bit_cast<std::uint32_t>(1e30f), true);
  expect_io_error(b, "huge B", "B");
}

}  // namespace
}  // namespace halfscope::io

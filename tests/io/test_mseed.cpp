// MiniSEED reader and writer against files written by ObsPy (tests/data/mseed, made by
// tests/data/make_seismic_fits_fixtures.py, with ObsPy's own reading in expected.json), and the
// shared waveform helpers (merge_traces, ISO-8601 times).
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"
#include "test_support.hpp"

namespace halfscope::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

Trace make_trace(const std::string& cha, std::int64_t start, double rate, Array data) {
  return Trace{"XX", "STA", "00", cha, start, rate, std::move(data)};
}

Array ints(std::initializer_list<std::int32_t> v) {
  return Array::from_values<std::int32_t>(std::span(v.begin(), v.size()), {std::int64_t(v.size())});
}

std::vector<std::int32_t> values(const Array& a) {
  const Array c = a.contiguous();
  return {c.data_as<std::int32_t>(), c.data_as<std::int32_t>() + c.size()};
}

// ---- ISO-8601 times (reference values from ObsPy's UTCDateTime(...).ns) ----

TEST(Waveform, Iso8601FormatsAndParses) {
  EXPECT_EQ(parse_iso8601("2019-01-01T00:00:00.123456Z"), 1546300800123456000);
  EXPECT_EQ(format_iso8601(1546300800123456000, 6), "2019-01-01T00:00:00.123456Z");
  EXPECT_EQ(format_iso8601(1546300800123456789), "2019-01-01T00:00:00.123456789Z");
  EXPECT_EQ(parse_iso8601("2020-02-29 23:59:59.999999999"), 1583020799999999999);
  EXPECT_EQ(parse_iso8601("1969-12-31T23:59:59.5Z"), -500000000);
  EXPECT_EQ(format_iso8601(-500000000, 3), "1969-12-31T23:59:59.500Z");
  EXPECT_EQ(format_iso8601(0, 0), "1970-01-01T00:00:00Z");
  for (const char* bad :
       {"2019-02-29T00:00:00Z", "2019-13-01T00:00:00Z", "2019-01-01", "2019-01-01T24:00:00",
        "2019-01-01T00:00:00.Z", "2019-01-01T00:00:00.1234567890Z", "3000-01-01T00:00:00Z",
        "2019-01-01T00:00:00Zjunk"})
    EXPECT_THROW((void)parse_iso8601(bad), InvalidInput) << bad;
}

TEST(Waveform, UtcFieldsRoundTrip) {
  for (std::int64_t ns : {std::int64_t{0}, std::int64_t{951782400} * 1'000'000'000 + 7,
                          std::int64_t{-1}, std::int64_t{4102444799} * 1'000'000'000}) {
    const UtcFields f = ns_to_utc(ns);
    EXPECT_EQ(utc_to_ns(f.year, f.day_of_year, f.hour, f.minute, f.second, f.nanosecond), ns);
  }
}

// ---- merge_traces ----

TEST(Waveform, MergeJoinsContiguousSegmentsInTimeOrder) {
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 500'000'000, 10.0, ints({4, 5})));
  w.traces.push_back(make_trace("BHZ", 0, 10.0, ints({0, 1, 2, 3})));
  w.traces.push_back(make_trace("BHN", 0, 10.0, ints({9})));
  w.traces.push_back(
      make_trace("BHZ", 400'000'000 + 20'000'000, 10.0, ints({6})));  // off by 0.2 sample
  for (bool fill : {false, true}) {
    const Waveforms m = merge_traces(w, fill);
    ASSERT_EQ(m.traces.size(), 2u);
    EXPECT_EQ(m.traces[0].channel, "BHZ");
    EXPECT_EQ(m.traces[0].start_ns, 0);
    EXPECT_EQ(values(m.traces[0].data), (std::vector<std::int32_t>{0, 1, 2, 3, 6, 4, 5}));
    EXPECT_TRUE(m.gaps.empty());
  }
}

TEST(Waveform, GapIsReportedAndZeroFilledOnRequest) {
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 0, 10.0, ints({1, 2, 3})));
  w.traces.push_back(make_trace("BHZ", 600'000'000, 10.0, ints({7, 8})));  // 3 samples missing
  Waveforms m = merge_traces(w, false);
  ASSERT_EQ(m.traces.size(), 2u);
  ASSERT_EQ(m.gaps.size(), 1u);
  EXPECT_EQ(m.gaps[0].id, "XX.STA.00.BHZ");
  EXPECT_EQ(m.gaps[0].start_ns, 300'000'000);
  EXPECT_EQ(m.gaps[0].end_ns, 600'000'000);
  EXPECT_EQ(m.gaps[0].missing_samples, 3);
  m = merge_traces(w, true);
  ASSERT_EQ(m.traces.size(), 1u);
  EXPECT_EQ(values(m.traces[0].data), (std::vector<std::int32_t>{1, 2, 3, 0, 0, 0, 7, 8}));
  ASSERT_EQ(m.gaps.size(), 1u);
  EXPECT_EQ(m.gaps[0].missing_samples, 3);
}

TEST(Waveform, OverlapKeepsTheEarlierSamples) {
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 0, 10.0, ints({1, 2, 3, 4})));
  w.traces.push_back(make_trace("BHZ", 200'000'000, 10.0, ints({-3, -4, 5, 6})));  // 2 overlap
  w.traces.push_back(make_trace("BHZ", 100'000'000, 10.0, ints({-2})));  // inside the first
  // Unfilled, the overlapping segment stays apart, and the one continuing it joins it.
  Waveforms m = merge_traces(w, false);
  ASSERT_EQ(m.traces.size(), 2u);
  EXPECT_EQ(values(m.traces[0].data), (std::vector<std::int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(values(m.traces[1].data), (std::vector<std::int32_t>{-2, -3, -4, 5, 6}));
  ASSERT_EQ(m.gaps.size(), 1u);
  EXPECT_EQ(m.gaps[0].missing_samples, -1);
  m = merge_traces(w, true);
  ASSERT_EQ(m.traces.size(), 1u);
  EXPECT_EQ(values(m.traces[0].data), (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(m.gaps.size(), 2u);
  EXPECT_EQ(m.gaps[0].missing_samples, -1);
  EXPECT_EQ(m.gaps[1].missing_samples, -2);
  EXPECT_EQ(m.gaps[1].start_ns, 200'000'000);
  EXPECT_EQ(m.gaps[1].end_ns, 400'000'000);
}

TEST(Waveform, DifferentRatesOrDtypesAreNeverJoined) {
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 0, 10.0, ints({1, 2})));
  w.traces.push_back(make_trace("BHZ", 200'000'000, 20.0, ints({3})));
  w.traces.push_back(make_trace("BHZ", 250'000'000, 20.0, Array::zeros(DType::f32, {2})));
  const Waveforms m = merge_traces(w, true);
  EXPECT_EQ(m.traces.size(), 3u);
  EXPECT_TRUE(m.gaps.empty());
}

#if HALFSCOPE_HAS_MSEED

void expect_same_trace(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.start_ns, b.start_ns)
      << format_iso8601(a.start_ns) << " vs " << format_iso8601(b.start_ns);
  EXPECT_EQ(a.sample_rate, b.sample_rate);
  ASSERT_EQ(a.data.dtype(), b.data.dtype());
  ASSERT_EQ(a.data.shape(), b.data.shape());
  const Array ca = a.data.contiguous(), cb = b.data.contiguous();
  EXPECT_EQ(std::memcmp(ca.data(), cb.data(), static_cast<std::size_t>(ca.nbytes())), 0);
}

fs::path fixture(const std::string& name) {
  return test::source_dir() / "tests/data/mseed" / name;
}

const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture("expected.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

void expect_matches_obspy(const Waveforms& w, const nlohmann::json& e) {
  const auto& traces = e["traces"];
  ASSERT_EQ(w.traces.size(), traces.size());
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const Trace& t = w.traces[i];
    const auto& x = traces[i];
    SCOPED_TRACE(x["id"].get<std::string>());
    EXPECT_EQ(t.id(), x["id"].get<std::string>());
    EXPECT_EQ(t.start_ns, x["start_ns"].get<std::int64_t>());
    EXPECT_EQ(t.sample_rate, x["sample_rate"].get<double>());
    ASSERT_EQ(std::string(dtype_name(t.data.dtype())), x["dtype"].get<std::string>());
    const auto& data = x["data"];
    ASSERT_EQ(t.size(), static_cast<std::int64_t>(data.size()));
    for (std::int64_t k = 0; k < t.size(); ++k)
      ASSERT_EQ(t.data.at_as_double(k), data[static_cast<std::size_t>(k)].get<double>()) << k;
  }
}

TEST(Mseed, ReadsObspyFiles) {
  for (const auto& [name, e] : expected().items()) {
    SCOPED_TRACE(name);
    testing::internal::CaptureStderr();
    const Waveforms w = read_mseed(fixture(name));
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    expect_matches_obspy(w, e);
    if (e.contains("gaps")) {
      ASSERT_EQ(w.gaps.size(), e["gaps"].size());
      for (std::size_t i = 0; i < w.gaps.size(); ++i) {
        EXPECT_EQ(w.gaps[i].id, e["gaps"][i]["id"].get<std::string>());
        EXPECT_EQ(w.gaps[i].start_ns, e["gaps"][i]["start_ns"].get<std::int64_t>());
        EXPECT_EQ(w.gaps[i].end_ns, e["gaps"][i]["end_ns"].get<std::int64_t>());
        EXPECT_EQ(w.gaps[i].missing_samples, e["gaps"][i]["missing_samples"].get<std::int64_t>());
      }
    } else {
      EXPECT_TRUE(w.gaps.empty());
    }
  }
}

TEST(Mseed, GapFileMergesIntoOneZeroFilledTrace) {
  const Waveforms m = merge_traces(read_mseed(fixture("gap.mseed")), true);
  ASSERT_EQ(m.traces.size(), 1u);
  const auto& e = expected()["gap.mseed"]["traces"];
  ASSERT_EQ(m.traces[0].size(), 300 + 50 + 200);
  EXPECT_EQ(m.traces[0].data.at_as_double(299), e[0]["data"][299].get<double>());
  for (int k = 300; k < 350; ++k) EXPECT_EQ(m.traces[0].data.at_as_double(k), 0.0);
  EXPECT_EQ(m.traces[0].data.at_as_double(350), e[1]["data"][0].get<double>());
}

TEST(Mseed, RoundTripIsBitExact) {
  const Waveforms in = read_mseed(fixture("stream.mseed"));
  const TempDir dir;
  for (MseedIntEncoding enc :
       {MseedIntEncoding::steim2, MseedIntEncoding::steim1, MseedIntEncoding::int32}) {
    for (int reclen : {128, 512, 4096}) {
      SCOPED_TRACE(std::to_string(reclen));
      write_mseed(dir / "rt.mseed", in, {enc, reclen});
      const Waveforms back = read_mseed(dir / "rt.mseed");
      ASSERT_EQ(back.traces.size(), in.traces.size());
      for (std::size_t i = 0; i < in.traces.size(); ++i)
        expect_same_trace(back.traces[i], in.traces[i]);
      EXPECT_TRUE(back.gaps.empty());
    }
  }
}

TEST(Mseed, TimesKeepMicrosecondsAndRatesSurvive) {
  const auto noise = test::random_floats(1000, -1e6f, 1e6f, 3);
  Waveforms w;
  const std::int64_t t0 = parse_iso8601("2022-06-30T23:59:59.999999501Z");
  for (double rate : {100.0, 19.98, 0.1, 1.0 / 3.0}) {
    w.traces.push_back(make_trace("HH" + std::to_string(w.traces.size()), t0, rate,
                                  Array::from_values<float>(noise, {1000}).astype(DType::i32)));
  }
  const Waveforms back =
      parse_mseed(serialize_mseed(w, {MseedIntEncoding::steim2, 512}), "m.mseed");
  ASSERT_EQ(back.traces.size(), w.traces.size());
  for (std::size_t i = 0; i < w.traces.size(); ++i) {
    EXPECT_EQ(back.traces[i].start_ns, t0 + 499) << "rounded to the nearest microsecond";
    EXPECT_EQ(back.traces[i].sample_rate, w.traces[i].sample_rate);
    EXPECT_EQ(values(back.traces[i].data), values(w.traces[i].data));
  }
  // A rate SEED's factor/multiplier cannot hold goes through Blockette 100 as a float32.
  w.traces.resize(1);
  w.traces[0].sample_rate = 100.123456789;
  const Waveforms odd = parse_mseed(serialize_mseed(w), "odd.mseed");
  ASSERT_EQ(odd.traces.size(), 1u);
  EXPECT_EQ(odd.traces[0].sample_rate, static_cast<double>(100.123456789f));
}

TEST(Mseed, SteimFallsBackToInt32ForHugeDifferences) {
  std::vector<std::int32_t> x(300);
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = (k % 2 ? 1 : -1) * 2'000'000'000;
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 0, 50.0, Array::from_values<std::int32_t>(x, {300})));
  testing::internal::CaptureStderr();
  const Waveforms back = parse_mseed(serialize_mseed(w), "big.mseed");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(back.traces.size(), 1u);
  EXPECT_EQ(values(back.traces[0].data), x);
}

TEST(Mseed, WidensSmallIntegersAndRejectsWhatItCannotStore) {
  Waveforms w;
  const std::int16_t s[] = {-7, 8, 30000};
  w.traces.push_back(make_trace("BHZ", 0, 1.0, Array::from_values<std::int16_t>(s, {3})));
  const Waveforms back = parse_mseed(serialize_mseed(w), "s.mseed");
  EXPECT_EQ(values(back.traces[0].data), (std::vector<std::int32_t>{-7, 8, 30000}));

  w.traces[0].data = Array::zeros(DType::i64, {3});
  EXPECT_THROW((void)serialize_mseed(w), InvalidInput);
  w.traces[0].data = ints({1});
  w.traces[0].station = "TOOLONG";
  EXPECT_THROW((void)serialize_mseed(w), InvalidInput);
  w.traces[0].station = "STA";
  EXPECT_THROW((void)serialize_mseed(w, {MseedIntEncoding::steim2, 1000}), InvalidInput);
  w.traces[0].sample_rate = -1.0;
  EXPECT_THROW((void)serialize_mseed(w), InvalidInput);
}

TEST(Mseed, MalformedFilesGiveIoErrorNamingTheFileAndNoStderr) {
  const auto good = read_file_bytes(fixture("stream.mseed"));
  const auto expect_io_error = [](const std::vector<std::byte>& bytes, const std::string& what) {
    testing::internal::CaptureStderr();
    try {
      (void)parse_mseed(bytes, "bad.mseed");
      ADD_FAILURE() << what << ": no error";
    } catch (const IoError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.mseed: ", 0), 0u) << e.what();
    }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << what;
  };
  expect_io_error({good.begin(), good.end() - 100}, "truncated record");
  expect_io_error({good.begin(), good.begin() + 30}, "short header");
  expect_io_error({}, "empty");
  expect_io_error(std::vector<std::byte>(1024, std::byte{'x'}), "not miniSEED");
  auto b = good;
  b.insert(b.end(), 600, std::byte{0});
  expect_io_error(b, "trailing zeros");
  // A wrong reverse integration constant: libmseed decodes and only warns, halfscope refuses.
  b = good;
  b[64 + 8 + 3] ^= std::byte{5};
  expect_io_error(b, "Steim integrity check");
  // Garbage in the Steim frames of the first record: libmseed's decoder complains.
  b = good;
  for (std::size_t k = 64; k < 512; ++k) b[k] = std::byte(k * 37 + 11);
  testing::internal::CaptureStderr();
  try {
    (void)parse_mseed(b, "garbled.mseed");
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("garbled.mseed: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(Mseed, FailedWriteLeavesNoFile) {
  const TempDir dir;
  Waveforms w;
  w.traces.push_back(make_trace("BHZ", 0, 1.0, ints({1, 2})));
  w.traces.push_back(make_trace("BHZ", 0, 1.0, Array::zeros(DType::u64, {2})));
  EXPECT_THROW(write_mseed(dir / "x.mseed", w), InvalidInput);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

#else

TEST(Mseed, UnsupportedWithoutLibmseed) {
  EXPECT_THROW((void)parse_mseed({}, "x.mseed"), Unsupported);
}

#endif

}  // namespace
}  // namespace halfscope::io

// Matched-filter inputs: data from .npy, MiniSEED and SAC (ordering, gaps, alignment, rates),
// templates from .npy and cut from data with a pick table, and the InvalidInput messages.
// The waveform files are written here with halfscope's own writers; the Python tests
// (tests/python/test_mfilter_cli.py) repeat the reading checks on files written by ObsPy.
#include <cmath>
#include <fstream>

#include "halfscope/core/error.hpp"
#include "halfscope/io/mseed.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "io_test_support.hpp"

namespace halfscope::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::write_text;

constexpr std::int64_t kT0 = 1'262'304'000'000'000'000;  // 2010-01-01T00:00:00Z

Array ramp(std::int64_t n, double first) {
  Array a(DType::f64, {n});
  for (std::int64_t i = 0; i < n; ++i) a.data_as<double>()[i] = first + static_cast<double>(i);
  return a;
}

Trace trace(const std::string& sta, std::int64_t start, double rate, Array data) {
  return Trace{"XX", sta, "", "HHZ", start, rate, std::move(data)};
}

bool have_mseed() {
  try {
    (void)serialize_mseed(Waveforms{{trace("A", kT0, 1.0, ramp(2, 1))}, {}});
    return true;
  } catch (const Unsupported&) {
    return false;
  }
}

template <class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no InvalidInput)";
}

TEST(SeismicInput, NpyDataOneAndTwoDimensional) {
  TempDir dir;
  write_npy(dir / "one.npy", ramp(10, 1));
  const SeismicData one = read_seismic_data((dir / "one.npy").string());
  EXPECT_EQ(one.data.shape(), (Shape{1, 10}));
  EXPECT_FALSE(one.start_ns.has_value());
  write_npy(dir / "two.npy", ramp(12, 1).reshape({3, 4}).astype(DType::f32));
  const SeismicData two = read_seismic_data((dir / "two.npy").string());
  EXPECT_EQ(two.data.shape(), (Shape{3, 4}));
  EXPECT_EQ(two.data.dtype(), DType::f32);
  EXPECT_EQ(two.channel_ids, (std::vector<std::string>{"0", "1", "2"}));
  write_npy(dir / "three.npy", ramp(8, 1).reshape({2, 2, 2}));
  const std::string m = message_of([&] { (void)read_seismic_data((dir / "three.npy").string()); });
  EXPECT_NE(m.find("three.npy"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 2, 2]"), std::string::npos) << m;
  const std::string list = (dir / "one.npy").string() + "," + (dir / "two.npy").string();
  EXPECT_NE(message_of([&] { (void)read_seismic_data(list); }).find("alone"), std::string::npos);
  EXPECT_NE(message_of([&] { (void)read_seismic_data((dir / "x.txt").string()); }).find("x.txt"),
            std::string::npos);
}

TEST(SeismicInput, MseedChannelsSortedGapsFilledAndAligned) {
  if (!have_mseed()) GTEST_SKIP() << "built without libmseed";
  TempDir dir;
  // Channel B (written first) has a 5-sample gap; channel A starts 3 samples later than B.
  Waveforms w;
  w.traces.push_back(trace("B", kT0, 100.0, ramp(20, 1)));
  w.traces.push_back(trace("B", kT0 + 250'000'000, 100.0, ramp(10, 101)));  // sample 25
  w.traces.push_back(trace("A", kT0 + 30'000'000, 100.0, ramp(30, 1001)));  // sample 3
  write_mseed(dir / "d.mseed", w);
  const SeismicData d = read_seismic_data((dir / "d.mseed").string());
  ASSERT_EQ(d.channel_ids, (std::vector<std::string>{"XX.A..HHZ", "XX.B..HHZ"}));
  ASSERT_EQ(d.data.shape(), (Shape{2, 35}));
  EXPECT_EQ(*d.start_ns, kT0);
  EXPECT_EQ(d.sample_rate, 100.0);
  const double* a = d.data.data_as<double>();
  const double* b = a + 35;
  EXPECT_EQ(a[0], 0.0);
  EXPECT_EQ(a[3], 1001.0);
  EXPECT_EQ(a[32], 1030.0);
  EXPECT_EQ(b[19], 20.0);
  for (int i = 20; i < 25; ++i) EXPECT_EQ(b[i], 0.0) << i;
  EXPECT_EQ(b[25], 101.0);
  // The gap of B, the 3-sample lead pad of A and the 2-sample tail pad of A are all reported.
  std::int64_t gap_b = 0, pads_a = 0;
  for (const Gap& g : d.gaps) (g.id == "XX.B..HHZ" ? gap_b : pads_a) += g.missing_samples;
  EXPECT_EQ(gap_b, 5);
  EXPECT_EQ(pads_a, 5);
  EXPECT_EQ(d.time_of_sample(25), kT0 + 250'000'000);
}

TEST(SeismicInput, MismatchedRatesAreInvalidInput) {
  if (!have_mseed()) GTEST_SKIP() << "built without libmseed";
  TempDir dir;
  write_mseed(dir / "a.mseed", Waveforms{{trace("A", kT0, 100.0, ramp(10, 1))}, {}});
  write_mseed(dir / "b.mseed", Waveforms{{trace("B", kT0, 50.0, ramp(10, 1))}, {}});
  const std::string m = message_of([&] {
    (void)read_seismic_data((dir / "a.mseed").string() + "," + (dir / "b.mseed").string());
  });
  EXPECT_NE(m.find("XX.B..HHZ"), std::string::npos) << m;
  EXPECT_NE(m.find("50"), std::string::npos) << m;
  EXPECT_NE(m.find("expected 100"), std::string::npos) << m;
}

TEST(SeismicInput, ChannelsFromDifferentDaysAreRefused) {
  if (!have_mseed()) GTEST_SKIP() << "built without libmseed";
  TempDir dir;
  // 4 days apart at 1 kHz: 3.5e8 samples of zeros to align them, beyond the 2^28 limit.
  constexpr std::int64_t kDay = 86'400'000'000'000;
  write_mseed(dir / "far.mseed", Waveforms{{trace("A", kT0, 1000.0, ramp(10, 1)),
                                            trace("B", kT0 + 4 * kDay, 1000.0, ramp(10, 1))},
                                           {}});
  const std::string m = message_of([&] { (void)read_seismic_data((dir / "far.mseed").string()); });
  EXPECT_NE(m.find("far.mseed"), std::string::npos) << m;
  EXPECT_NE(m.find("span 345600010 samples"), std::string::npos) << m;
}

TEST(SeismicInput, SacFilesAsAList) {
  TempDir dir;
  write_sac(dir / "b.sac", make_sac(trace("B", kT0, 100.0, ramp(8, 1))));
  write_sac(dir / "a.sac", make_sac(trace("A", kT0 + 10'000'000, 100.0, ramp(8, 11))));
  const SeismicData d =
      read_seismic_data((dir / "b.sac").string() + "," + (dir / "a.sac").string());
  ASSERT_EQ(d.channel_ids, (std::vector<std::string>{"XX.A..HHZ", "XX.B..HHZ"}));
  ASSERT_EQ(d.data.shape(), (Shape{2, 9}));
  EXPECT_EQ(d.data.dtype(), DType::f32);  // SAC stores float32: nothing widened
  EXPECT_EQ(d.data.data_as<float>()[1], 11.0f);
  EXPECT_EQ(d.data.data_as<float>()[9], 1.0f);
}

TEST(SeismicInput, TemplateArrays) {
  TempDir dir;
  write_npy(dir / "t2.npy", ramp(6, 1).reshape({2, 3}));
  const SeismicTemplates t = read_template_array(dir / "t2.npy");
  EXPECT_EQ(t.templates.shape(), (Shape{2, 1, 3}));
  EXPECT_TRUE(t.moveouts.empty());
  Array bad = ramp(6, 1).reshape({1, 2, 3});
  bad.data_as<double>()[4] = std::nan("");
  write_npy(dir / "nan.npy", bad);
  const std::string m = message_of([&] { (void)read_template_array(dir / "nan.npy"); });
  EXPECT_NE(m.find("channel 1, sample 1"), std::string::npos) << m;
  write_npy(dir / "t1.npy", ramp(3, 1));
  EXPECT_NE(message_of([&] { (void)read_template_array(dir / "t1.npy"); }).find("(T, C, K)"),
            std::string::npos);
}

TEST(SeismicInput, CutTemplatesBySampleAndChannelIndex) {
  SeismicData d;
  d.data = ramp(3 * 50, 0).reshape({3, 50});
  d.channel_ids = {"0", "1", "2"};
  d.source = "mem";
  TempDir dir;
  write_text(dir / "p.csv", "template,channel,start\n# comment\nev1, 2, 10\nev1,0,4\nev2,1,0\n");
  const SeismicTemplates t = cut_templates(d, dir / "p.csv", 5);
  ASSERT_EQ(t.templates.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"ev1", "ev2"}));
  const double* v = t.templates.data_as<double>();
  EXPECT_EQ(v[0], 4.0);            // ev1, channel 0 from sample 4
  EXPECT_EQ(v[5], 0.0);            // ev1 does not list channel 1
  EXPECT_EQ(v[10], 100.0 + 10.0);  // ev1, channel 2 from sample 10
  EXPECT_EQ(v[15 + 5], 50.0);      // ev2, channel 1 from sample 0
  const auto* mo = t.moveouts.data_as<std::int64_t>();
  EXPECT_EQ(mo[0], 0);
  EXPECT_EQ(mo[2], 6);
  const double* w = t.weights.data_as<double>();
  EXPECT_EQ(w[0], 1.0);
  EXPECT_EQ(w[1], 0.0);
  EXPECT_EQ(w[4], 1.0);
}

TEST(SeismicInput, CutTemplatesByIdAndTime) {
  SeismicData d;
  d.data = ramp(2 * 100, 1).reshape({2, 100}).astype(DType::f32);  // cut windows are widened
  d.channel_ids = {"XX.A..HHZ", "XX.B..HHZ"};
  d.start_ns = kT0;
  d.sample_rate = 100.0;
  d.source = "mem";
  TempDir dir;
  write_text(dir / "p.csv", "0,XX.B..HHZ,2010-01-01T00:00:00.25Z\n");
  const SeismicTemplates t = cut_templates(d, dir / "p.csv", 4);
  EXPECT_EQ(t.templates.data_as<double>()[4], 101.0 + 25.0);
}

TEST(SeismicInput, BadPickTablesNameTheLineAndField) {
  SeismicData d;
  d.data = ramp(2 * 30, 1).reshape({2, 30});
  for (int i = 30; i < 35; ++i) d.data.data_as<double>()[i] = 0;  // channel 1 starts flat
  d.channel_ids = {"0", "1"};
  d.source = "data.npy";
  TempDir dir;
  const auto bad = [&](const std::string& text, std::int64_t k) {
    write_text(dir / "p.csv", text);
    return message_of([&] { (void)cut_templates(d, dir / "p.csv", k); });
  };
  EXPECT_NE(bad("a,7,0\n", 5).find("line 1: channel '7'"), std::string::npos);
  EXPECT_NE(bad("a,0,28\n", 5).find("[28, 33)"), std::string::npos);
  EXPECT_NE(bad("a,0,0\na,0,3\n", 5).find("line 2"), std::string::npos);
  EXPECT_NE(bad("a,0,2010-01-01T00:00:00Z\n", 5).find("no start time"), std::string::npos);
  EXPECT_NE(bad("a,0\n", 5).find("expected 3"), std::string::npos);
  EXPECT_NE(bad("# nothing\n", 5).find("no picks"), std::string::npos);
  EXPECT_NE(bad("a,1,0\n", 5).find("all zeros"), std::string::npos);
  EXPECT_NE(bad("a,0,0\n", 0).find("--template-length"), std::string::npos);
  EXPECT_NE(bad("a,0,0\n", 31).find("longer"), std::string::npos);
  // A start near 2^63: start + length would overflow; the pick table still names the line.
  const std::string huge = bad("a,0,9223372036854775800\n", 10);
  EXPECT_NE(huge.find("line 1"), std::string::npos) << huge;
  EXPECT_NE(huge.find("9223372036854775800 + 10"), std::string::npos) << huge;
  EXPECT_NE(bad("a,0,26\n", 5).find("[26, 31)"), std::string::npos);  // one past the end
  EXPECT_EQ(bad("a,0,25\n", 5), "(no InvalidInput)");                 // the last full window
}

// Times in a pick table: a start that is neither a sample index nor a time names the table, its
// line and the field; a pick before or after the data names its true window in samples.
TEST(SeismicInput, PickTimesNameTheLineAndTheirTrueWindow) {
  SeismicData d;
  d.data = ramp(2 * 100, 1).reshape({2, 100}).astype(DType::f32);
  d.channel_ids = {"XX.A..HHZ", "XX.B..HHZ"};
  d.start_ns = kT0;  // 2010-01-01T00:00:00Z
  d.sample_rate = 100.0;
  d.source = "mem";
  TempDir dir;
  const auto bad = [&](const std::string& start) {
    write_text(dir / "p.csv", "a,0,0\na,1," + start + "\n");
    return message_of([&] { (void)cut_templates(d, dir / "p.csv", 10); });
  };
  for (const char* start : {"abc", "1.5", "nan", "2010-13-45T99:00:00Z", "99999999999999999999"}) {
    const std::string m = bad(start);
    EXPECT_NE(m.find((dir / "p.csv").string() + " line 2: start '" + start + "'"),
              std::string::npos)
        << m;
  }
  EXPECT_NE(bad("2009-12-31T23:59:59.5Z").find("[-50, -40)"), std::string::npos);
  EXPECT_NE(bad("2009-12-31T00:00:00Z").find("[-8640000, -8639990)"), std::string::npos);
  EXPECT_NE(bad("2010-01-01T00:00:01.5Z").find("[150, 160)"), std::string::npos);
  const std::string far = bad("1700-01-01T00:00:00Z");  // 310 years before the data
  EXPECT_NE(far.find("line 2: template window [-97826"), std::string::npos) << far;
  EXPECT_NE(bad("0001-01-01T00:00:00Z").find("line 2: start '0001-01-01T00:00:00Z'"),
            std::string::npos);  // outside the ns timestamps (1677..2262)
}

// A table of 3.5 MB (the reader takes it in pieces of 1 MiB): 240,000 picks of 80,000 templates,
// CRLF line ends, comment lines of odd lengths so lines straddle every piece border, and a last
// line without its end; every label, moveout and weight as the table was written, and an error
// on the last line names its number.
TEST(SeismicInput, LongPickTableReadInPieces) {
  SeismicData d;
  d.data = ramp(3 * 400, 1).reshape({3, 400});
  d.channel_ids = {"0", "1", "2"};
  d.source = "mem";
  constexpr std::int64_t kTemplates = 80'000;
  std::string text = "template,channel,start\r\n";
  std::int64_t lines = 1;
  for (std::int64_t t = 0; t < kTemplates; ++t) {
    for (std::int64_t c = 0; c < 3; ++c) {
      text += "ev" + std::to_string(t) + "," + std::to_string((c + t) % 3) + "," +
              std::to_string((t * 7 + c * 13) % 390) + "\r\n";
      ++lines;
    }
    if (t % 97 == 0) {
      text += "#" + std::string(static_cast<std::size_t>(t % 89), '-') + "\r\n";
      ++lines;
    }
  }
  text.resize(text.size() - 2);  // the last pick without its line end
  ASSERT_GT(text.size(), std::size_t{3} << 20);
  TempDir dir;
  write_text(dir / "p.csv", text);
  const SeismicTemplates got = cut_templates(d, dir / "p.csv", 10);
  ASSERT_EQ(got.labels.size(), static_cast<std::size_t>(kTemplates));
  ASSERT_EQ(got.moveouts.shape(), (Shape{kTemplates, 3}));
  const auto* mo = got.moveouts.data_as<std::int64_t>();
  const double* w = got.weights.data_as<double>();
  for (std::int64_t t = 0; t < kTemplates; ++t) {
    ASSERT_EQ(got.labels[static_cast<std::size_t>(t)], "ev" + std::to_string(t));
    std::int64_t start[3], earliest = 400;
    for (std::int64_t c = 0; c < 3; ++c) {
      start[(c + t) % 3] = (t * 7 + c * 13) % 390;
      earliest = std::min(earliest, start[(c + t) % 3]);
    }
    for (std::int64_t ch = 0; ch < 3; ++ch) {
      ASSERT_EQ(mo[t * 3 + ch], start[ch] - earliest) << t << ", " << ch;
      ASSERT_EQ(w[t * 3 + ch], 1.0);
    }
  }
  // The last line (no end) naming a channel that does not exist.
  text.replace(text.rfind(',') - 1, 1, "9");
  write_text(dir / "p.csv", text);
  const std::string msg = message_of([&] { (void)cut_templates(d, dir / "p.csv", 10); });
  EXPECT_NE(msg.find("line " + std::to_string(lines) + ": channel '9'"), std::string::npos) << msg;
}

// A NaN or inf sample is refused with the file's name, the channel and the sample, for .npy
// and MiniSEED data alike.
TEST(SeismicInput, NonFiniteDataNamesFileChannelAndSample) {
  TempDir dir;
  Array a = ramp(12, 1).reshape({3, 4});
  a.data_as<double>()[1 * 4 + 2] = std::nan("");
  write_npy(dir / "nan.npy", a);
  const std::string m = message_of([&] { (void)read_seismic_data((dir / "nan.npy").string()); });
  EXPECT_NE(m.find("nan.npy: channel 1, sample 2 is NaN"), std::string::npos) << m;
  if (!have_mseed()) GTEST_SKIP() << "built without libmseed";
  Array inf = ramp(6, 1);
  inf.data_as<double>()[5] = INFINITY;
  write_mseed(dir / "inf.mseed",
              Waveforms{{trace("A", kT0, 1.0, ramp(6, 1)), trace("B", kT0, 1.0, inf)}, {}});
  const std::string n = message_of([&] { (void)read_seismic_data((dir / "inf.mseed").string()); });
  EXPECT_NE(n.find("inf.mseed: channel XX.B..HHZ, sample 5 is infinite"), std::string::npos) << n;
}

}  // namespace
}  // namespace halfscope::io

// DATA opened for reading by windows (io::open_seismic_windows, what MPI ranks read): SAC files of
// one channel each, listed out of order, starting at different times (one off the sample grid),
// of different lengths and byte orders; a channel in several SAC files with gaps and overlaps, a
// SAC file without samples; MiniSEED files whose channels have gaps, overlaps, segments in two
// files, integer and float records; lists mixing SAC and MiniSEED (one channel in both, integers
// making the data float64) give every window and every SeismicData field exactly as
// read_seismic_data gives them; the lists that must be read whole get no source;
// bad files are refused with read_seismic_data's own messages. Templates cut by a pick table
// from such windows (cut_template_source) equal cut_templates' from the whole data in every range,
// with its messages.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "io/seismic_align.hpp"
#include "io_test_support.hpp"

namespace halfscope::io {
namespace {

using test::message_of;
using test::same_bytes;
using test::write_text;

constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // 2023-11-14T22:13:20Z

Trace trace(const std::string& sta, std::int64_t start, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  Array data(DType::f32, {n});
  for (std::int64_t k = 0; k < n; ++k) data.data_as<float>()[k] = normal(rng);
  return Trace{"XX", sta, "00", "HHZ", start, 100.0, std::move(data)};
}

// Three stations at 100 Hz: STA0 from kT0, STA1 half a second later and shorter, STA2 1.2345 s
// later (off the grid by 0.45 samples) and longest, STA1 big-endian; listed out of order.
std::string three_channels(const test::TempDir& dir) {
  write_sac(dir / "s2.sac", make_sac(trace("STA2", kT0 + 1'234'500'000, 9000, 2)));
  write_sac(dir / "s0.sac", make_sac(trace("STA0", kT0, 8000, 0)));
  write_sac(dir / "s1.sac", make_sac(trace("STA1", kT0 + 500'000'000, 5000, 1)), true);
  return (dir / "s2.sac").string() + "," + (dir / "s0.sac").string() + "," +
         (dir / "s1.sac").string();
}

// The data as the files hold it, laid out here from whole reads (read_sac, read_mseed and
// merge_traces), independently of the windows' plan that read_seismic_data now shares: the
// merged channels by id, each at its start rounded to the grid of the earliest start, zeros
// elsewhere, float32 when every trace is float32; and merge_traces' gaps.
struct Reference {
  Array data;
  std::vector<std::string> ids;
  std::int64_t start_ns = 0;
  std::vector<Gap> merge_gaps;
};

Reference reference_of(const std::string& spec) {
  Waveforms all;
  for (const std::string& p : detail::split_list(spec)) {
    if (p.ends_with(".sac")) {
      all.traces.push_back(read_sac(p).trace);
    } else {
      for (Trace& t : read_mseed(p).traces) all.traces.push_back(std::move(t));
    }
  }
  Waveforms merged = merge_traces(all, true);
  std::sort(merged.traces.begin(), merged.traces.end(),
            [](const Trace& a, const Trace& b) { return a.id() < b.id(); });
  Reference r;
  r.merge_gaps = merged.gaps;
  r.start_ns = merged.traces.front().start_ns;
  bool f32 = true;
  for (const Trace& t : merged.traces) {
    r.start_ns = std::min(r.start_ns, t.start_ns);
    f32 = f32 && t.data.dtype() == DType::f32;
  }
  std::vector<std::int64_t> offsets;
  std::int64_t length = 0;
  for (const Trace& t : merged.traces) {
    offsets.push_back(std::llround(static_cast<double>(t.start_ns - r.start_ns) * 100.0 / 1e9));
    length = std::max(length, offsets.back() + t.size());
  }
  const auto channels = static_cast<std::int64_t>(merged.traces.size());
  r.data = Array::zeros(DType::f64, {channels, length});
  for (std::int64_t c = 0; c < channels; ++c) {
    const Trace& t = merged.traces[static_cast<std::size_t>(c)];
    r.ids.push_back(t.id());
    const Array x = t.data.astype(DType::f64).contiguous();
    std::copy_n(x.data_as<double>(), t.size(),
                r.data.data_as<double>() + c * length + offsets[static_cast<std::size_t>(c)]);
  }
  if (f32) r.data = r.data.astype(DType::f32);
  return r;
}

// The given windows of open_seismic_windows(spec) and read_seismic_data(spec)'s array equal the
// independent layout of the files (every sample at 100 Hz); every other field of the two agrees,
// and the gaps begin with merge_traces' (then the alignment pads).
void expect_windows_equal_whole(const std::string& spec, std::size_t min_gaps,
                                std::vector<std::pair<std::int64_t, std::int64_t>> windows) {
  const Reference ref = reference_of(spec);
  const SeismicData whole = read_seismic_data(spec);
  EXPECT_TRUE(same_bytes(ref.data, whole.data));
  EXPECT_EQ(whole.channel_ids, ref.ids);
  EXPECT_EQ(whole.start_ns, ref.start_ns);
  const WindowedData w = open_seismic_windows(spec);
  ASSERT_TRUE(w.samples);
  EXPECT_EQ(w.samples->shape(), whole.data.shape());
  EXPECT_EQ(w.samples->dtype(), whole.data.dtype());
  EXPECT_EQ(w.samples->name(), spec);
  EXPECT_EQ(w.info.channel_ids, whole.channel_ids);
  EXPECT_EQ(w.info.start_ns, whole.start_ns);
  EXPECT_EQ(w.info.sample_rate, whole.sample_rate);
  EXPECT_EQ(w.info.notes, whole.notes);
  EXPECT_EQ(w.info.source, whole.source);
  ASSERT_EQ(w.info.gaps.size(), whole.gaps.size());
  EXPECT_GE(whole.gaps.size(), min_gaps);  // gaps, overlaps, pads: the comparison means something
  ASSERT_GE(whole.gaps.size(), ref.merge_gaps.size());
  for (std::size_t i = 0; i < whole.gaps.size(); ++i) {
    EXPECT_EQ(w.info.gaps[i].id, whole.gaps[i].id);
    EXPECT_EQ(w.info.gaps[i].start_ns, whole.gaps[i].start_ns);
    EXPECT_EQ(w.info.gaps[i].end_ns, whole.gaps[i].end_ns);
    EXPECT_EQ(w.info.gaps[i].missing_samples, whole.gaps[i].missing_samples);
    if (i >= ref.merge_gaps.size()) continue;
    EXPECT_EQ(whole.gaps[i].id, ref.merge_gaps[i].id);
    EXPECT_EQ(whole.gaps[i].start_ns, ref.merge_gaps[i].start_ns);
    EXPECT_EQ(whole.gaps[i].missing_samples, ref.merge_gaps[i].missing_samples);
  }
  const std::int64_t L = whole.data.dim(1);
  windows.insert(windows.end(), {{0, L}, {0, 1}, {L - 1, L}, {77, 77}});
  for (const auto& [a, b] : windows)
    EXPECT_TRUE(same_bytes(ref.data.slice(1, a, b).contiguous(), w.samples->read(a, b)))
        << "[" << a << ", " << b << ")";
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)w.samples->read(5, L + 1); }),
            spec + ": samples [5, " + std::to_string(L + 1) + "): expected a window inside [0, " +
                std::to_string(L) + ")");
}

TEST(SeismicWindows, SacChannelsEqualReadSeismicData) {
  const test::TempDir dir;
  const std::string spec = three_channels(dir);
  expect_windows_equal_whole(spec, 3, {{40, 60}, {45, 5100}, {4990, 8200}, {8100, 9100}});
  // Blanks around the names, as read_seismic_data allows them.
  std::string spaced = " " + spec + " ";
  spaced.replace(spaced.find(','), 1, " ,  ");
  expect_windows_equal_whole(spaced, 3, {{45, 5100}});
}

Trace int_trace(const std::string& sta, std::int64_t start, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> step(-300, 300);
  Array data(DType::i32, {n});
  std::int32_t v = 0;
  for (std::int64_t k = 0; k < n; ++k) data.data_as<std::int32_t>()[k] = v += step(rng);
  return Trace{"XX", sta, "00", "HHZ", start, 100.0, std::move(data)};
}

TEST(SeismicWindows, MseedChannelsEqualReadSeismicData) {
  // 100 Hz, 512-byte records. STA0 (int32, Steim-2): 3000 samples, a gap of 50, 2000 samples,
  // then in the second file 1500 samples overlapping the end by 30. STA1 (float32) starts 0.25 s
  // later, in the second file. STA2 (int32) starts 0.4567 s off the grid, in the first file.
  const test::TempDir dir;
  constexpr std::int64_t P = 10'000'000;  // ns per sample
  const Trace a1 = int_trace("STA0", kT0, 3000, 1);
  const Trace a2 = int_trace("STA0", kT0 + 3050 * P, 2000, 2);
  const Trace a3 = int_trace("STA0", kT0 + 5020 * P, 1500, 3);
  const Trace b = trace("STA1", kT0 + 25 * P, 6000, 4);
  const Trace c = int_trace("STA2", kT0 + 45'670'000, 4000, 5);
  write_mseed(dir / "one.mseed", Waveforms{{a1, c, a2}, {}}, {MseedIntEncoding::steim2, 512});
  write_mseed(dir / "two.mseed", Waveforms{{b, a3}, {}}, {MseedIntEncoding::steim2, 512});
  const std::string spec = (dir / "two.mseed").string() + "," + (dir / "one.mseed").string();
  expect_windows_equal_whole(
      spec, 5, {{2990, 3060}, {3049, 3051}, {5000, 5100}, {5049, 5051}, {100, 6400}, {6480, 6520}});
  // Float32 records alone stay float32, as read_seismic_data keeps them.
  write_mseed(dir / "f.mseed", Waveforms{{b}, {}}, {MseedIntEncoding::steim2, 512});
  expect_windows_equal_whole((dir / "f.mseed").string(), 0, {{10, 4000}});
}

TEST(SeismicWindows, SacSegmentsAndMixedListsEqualReadSeismicData) {
  // STA0 in four hourly-style SAC files listed out of order: 2000 samples, the next 1500 right
  // after them (big-endian), a gap of 30 then 1000, and 400 overlapping that by 25; a file of
  // STA1 without samples (dropped, as merging drops it) beside STA1's 3000 samples from
  // 0.37 s on.
  const test::TempDir dir;
  constexpr std::int64_t P = 10'000'000;  // ns per sample
  write_sac(dir / "h0.sac", make_sac(trace("STA0", kT0, 2000, 10)));
  write_sac(dir / "h1.sac", make_sac(trace("STA0", kT0 + 2000 * P, 1500, 11)), true);
  write_sac(dir / "h2.sac", make_sac(trace("STA0", kT0 + 3530 * P, 1000, 12)));
  write_sac(dir / "h3.sac", make_sac(trace("STA0", kT0 + 4505 * P, 400, 13)));
  write_sac(dir / "e.sac", make_sac(trace("STA1", kT0, 0, 14)));
  write_sac(dir / "b.sac", make_sac(trace("STA1", kT0 + 37 * P, 3000, 15)));
  const auto path = [&](const char* name) { return (dir / name).string(); };
  const std::string sac = path("h2.sac") + "," + path("h0.sac") + "," + path("e.sac") + "," +
                          path("h3.sac") + "," + path("b.sac") + "," + path("h1.sac");
  expect_windows_equal_whole(sac, 3,
                             {{1990, 2010}, {3490, 3540}, {3520, 3535}, {4480, 4540}, {36, 38}});
  // STA0's tail as float32 MiniSEED records joining its SAC files (one channel in two formats),
  // and STA2 as Steim-2 integers, which makes the data float64 (the SAC samples widened).
  write_mseed(dir / "t.mseed", Waveforms{{trace("STA0", kT0 + 4905 * P, 700, 16)}, {}},
              {MseedIntEncoding::steim2, 512});
  write_mseed(dir / "i.mseed", Waveforms{{int_trace("STA2", kT0 + 100 * P, 2500, 17)}, {}},
              {MseedIntEncoding::steim2, 512});
  const std::string mixed = sac + "," + path("t.mseed");
  expect_windows_equal_whole(mixed, 3, {{4890, 4920}, {5000, 5605}});
  ASSERT_EQ(read_seismic_data(mixed).data.dtype(), DType::f32);
  const std::string wide = path("i.mseed") + "," + mixed;
  ASSERT_EQ(read_seismic_data(wide).data.dtype(), DType::f64);
  expect_windows_equal_whole(wide, 4, {{90, 110}, {1990, 2010}, {2590, 2610}, {4890, 4920}});
}

TEST(SeismicWindows, NpyAndWhatMustBeReadWhole) {
  const test::TempDir dir;
  write_npy(dir / "d.npy", Array::zeros(DType::f32, {3, 50}));
  const WindowedData npy = open_seismic_windows((dir / "d.npy").string());
  ASSERT_TRUE(npy.samples);
  EXPECT_EQ(npy.info.channel_ids, (std::vector<std::string>{"0", "1", "2"}));
  // An empty name, and a .npy in a list: no source (read_seismic_data refuses them).
  write_sac(dir / "a.sac", make_sac(trace("A", kT0, 100, 3)));
  const std::string a = (dir / "a.sac").string();
  for (const std::string& spec : {a + ",", a + "," + (dir / "d.npy").string()}) {
    SCOPED_TRACE(spec);
    EXPECT_FALSE(open_seismic_windows(spec).samples);
    EXPECT_THROW((void)read_seismic_data(spec), InvalidInput);
  }
  // A name read_seismic_data refuses: its message.
  const std::string txt = (dir / "d.txt").string();
  const std::string refused = message_of<InvalidInput>([&] { (void)read_seismic_data(txt); });
  EXPECT_NE(refused.find("unknown file type"), std::string::npos) << refused;
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)open_seismic_windows(txt); }), refused);
}

TEST(SeismicWindows, BadFilesRefusedAsReadSeismicDataRefusesThem) {
  const test::TempDir dir;
  write_sac(dir / "a.sac", make_sac(trace("A", kT0, 100, 6)));
  Trace fast = trace("B", kT0, 100, 7);
  fast.sample_rate = 50.0;
  write_sac(dir / "b.sac", make_sac(fast));
  const std::string rates = (dir / "a.sac").string() + "," + (dir / "b.sac").string();
  const std::string want = message_of<InvalidInput>([&] { (void)read_seismic_data(rates); });
  EXPECT_NE(want.find("sampling rate of XX.B.00.HHZ is 50"), std::string::npos) << want;
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)open_seismic_windows(rates); }), want);
  // A file cut short.
  const auto bytes = read_file_bytes(dir / "a.sac");
  std::ofstream(dir / "cut.sac", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size() - 8));
  const std::string cut = (dir / "a.sac").string() + "," + (dir / "cut.sac").string();
  const std::string io = message_of<IoError>([&] { (void)read_seismic_data(cut); });
  EXPECT_NE(io.find("cut.sac: truncated"), std::string::npos) << io;
  EXPECT_EQ(message_of<IoError>([&] { (void)open_seismic_windows(cut); }), io);
  // A MiniSEED file cut inside its third record.
  write_mseed(dir / "m.mseed", Waveforms{{trace("M", kT0, 1000, 8)}, {}},
              {MseedIntEncoding::steim2, 512});
  const auto m = read_file_bytes(dir / "m.mseed");
  std::ofstream(dir / "mcut.mseed", std::ios::binary)
      .write(reinterpret_cast<const char*>(m.data()), 2 * 512 + 300);
  const std::string mcut = (dir / "mcut.mseed").string();
  const std::string mio = message_of<IoError>([&] { (void)read_seismic_data(mcut); });
  EXPECT_NE(mio.find("record at byte offset 1024: truncated"), std::string::npos) << mio;
  EXPECT_EQ(message_of<IoError>([&] { (void)open_seismic_windows(mcut); }), mio);
}

TEST(SeismicWindows, TemplatesCutFromWindowsEqualCutTemplates) {
  const test::TempDir dir;
  const std::string spec = three_channels(dir);
  const SeismicData whole = read_seismic_data(spec);
  const WindowedData w = open_seismic_windows(spec);
  ASSERT_TRUE(w.samples);
  // Picks by id and time, and by index and sample; template "b" lists two channels far apart
  // (one window of every channel from 900 to 7040), "c" one channel.
  write_text(dir / "picks.csv",
             "template,channel,start\n"
             "a,XX.STA0.00.HHZ,2023-11-14T22:13:21.5Z\n"
             "b,2,7000\nb,0,900\na,1,260\nc,XX.STA1.00.HHZ,3000\n");
  const SeismicTemplates expected = cut_templates(whole, dir / "picks.csv", 40);
  const CutTemplateSource cut = cut_template_source(w.info, *w.samples, dir / "picks.csv", 40);
  EXPECT_EQ(cut.labels, expected.labels);
  for (const auto& [table, rows] : {std::pair{cut.moveouts.get(), &expected.moveouts},
                                    std::pair{cut.weights.get(), &expected.weights}}) {
    ASSERT_TRUE(table);
    EXPECT_EQ(table->shape(), rows->shape());
    EXPECT_EQ(table->dtype(), rows->dtype());
    EXPECT_EQ(table->describe(), rows->describe());
    for (std::int64_t a = 0; a <= 3; ++a)
      for (std::int64_t b = a; b <= 3; ++b)
        EXPECT_TRUE(same_bytes(rows->slice(0, a, b).contiguous(), table->read(a, b)))
            << table->describe() << " [" << a << ", " << b << ")";
  }
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)cut.weights->read(2, 4); }),
            "weights of " + (dir / "picks.csv").string() +
                ": rows [2, 4): expected a range inside [0, 3)");
  EXPECT_EQ(cut.templates->shape(), (Shape{3, 3, 40}));
  EXPECT_EQ(cut.templates->name(), (dir / "picks.csv").string());
  test::expect_every_range(*cut.templates, 3, [&](std::int64_t a, std::int64_t b) {
    return expected.templates.slice(0, a, b).contiguous();
  });
  // The table's errors are cut_templates' own; a flat cut is refused when its template is read.
  write_text(dir / "late.csv", "a,0,7990\n");
  EXPECT_EQ(message_of<InvalidInput>(
                [&] { (void)cut_template_source(w.info, *w.samples, dir / "late.csv", 40); }),
            message_of<InvalidInput>([&] { (void)cut_templates(whole, dir / "late.csv", 40); }));
  // STA1 starts 50 samples late: its first samples are the alignment pad, zeros.
  write_text(dir / "flat.csv", "a,0,100\nz,1,10\n");
  const CutTemplateSource flat = cut_template_source(w.info, *w.samples, dir / "flat.csv", 40);
  EXPECT_NO_THROW((void)flat.templates->read(0, 1));
  const std::string m = message_of<InvalidInput>([&] { (void)flat.templates->read(0, 2); });
  EXPECT_EQ(m, message_of<InvalidInput>([&] { (void)cut_templates(whole, dir / "flat.csv", 40); }));
  EXPECT_NE(m.find("line 2: the template window of XX.STA1.00.HHZ is all zeros"), std::string::npos)
      << m;
  // A channel listed twice, by id and by index, lines apart: refused when the table is first read,
  // naming both lines, as cut_templates names them.
  write_text(dir / "twice.csv",
             "template,channel,start\n# picks\na,0,100\nb,1,300\n\na,2,50\nb,XX.STA1.00.HHZ,20\n");
  const std::string twice = message_of<InvalidInput>(
      [&] { (void)cut_template_source(w.info, *w.samples, dir / "twice.csv", 40); });
  EXPECT_EQ(twice, (dir / "twice.csv").string() +
                       " line 7: template 'b' lists channel XX.STA1.00.HHZ again (first on line "
                       "4): expected one pick per channel");
  EXPECT_EQ(twice,
            message_of<InvalidInput>([&] { (void)cut_templates(whole, dir / "twice.csv", 40); }));
  // The table changed after it was checked (a rank reads its group's picks again): an IoError.
  write_text(dir / "grows.csv", "a,0,100\nb,1,300\n");
  const CutTemplateSource grows = cut_template_source(w.info, *w.samples, dir / "grows.csv", 40);
  write_text(dir / "grows.csv", "a,0,100\nb,1,300\nc,2,400\n");
  EXPECT_EQ(message_of<IoError>([&] { (void)grows.moveouts->read(0, 1); }),
            (dir / "grows.csv").string() +
                ": 3 templates: expected the 2 found when it was first read (the table changed)");
}

}  // namespace
}  // namespace halfscope::io

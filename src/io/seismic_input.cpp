#include "halfscope/io/seismic_input.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "io/seismic_align.hpp"

namespace halfscope::io {

namespace fs = std::filesystem;

namespace detail {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (true) {
    const auto at = s.find(sep, from);
    out.push_back(trim(s.substr(from, at == std::string_view::npos ? at : at - from)));
    if (at == std::string_view::npos) return out;
    from = at + 1;
  }
}

std::optional<std::int64_t> parse_int(const std::string& s) {
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || s.empty()) return std::nullopt;
  return v;
}

long double samples_between(std::int64_t from_ns, std::int64_t to_ns, double rate) {
  // The difference in long double (exact: a 64-bit mantissa holds any difference of two int64):
  // an int64 one overflows for times three centuries apart (a pick in 1700 against 2010 data).
  return (static_cast<long double>(to_ns) - static_cast<long double>(from_ns)) * rate / 1e9L;
}

}  // namespace detail

namespace {

using detail::samples_between;
using detail::split;

SeismicData read_npy_data(const fs::path& path) {
  const std::string name = path.string();
  Array a = read_npy(path);
  SeismicData d;
  d.data = a.contiguous().reshape(continuous_data_shape(name, a.shape()));
  for (std::int64_t c = 0; c < d.data.dim(0); ++c) d.channel_ids.push_back(std::to_string(c));
  d.source = name;
  return d;
}

// A NaN or inf sample is the file's fault: say so with the file's name here, before the library
// reports it about an anonymous array.
void check_finite(const SeismicData& d) {
  const DType t = d.data.dtype();
  if (t != DType::f64 && t != DType::f32 && t != DType::f16 && t != DType::bf16) return;
  // In the array's own type (float32 holds float16 and bfloat16 exactly): a float64 copy of a
  // day of float32 data would double the command's peak memory.
  const Array v =
      t == DType::f64 || t == DType::f32 ? d.data.contiguous() : d.data.astype(DType::f32);
  const std::int64_t length = v.dim(1);
  const auto first_bad = [&](const auto* x) {
    return std::find_if(x, x + v.size(), [](auto s) { return !std::isfinite(s); }) - x;
  };
  const std::int64_t i =
      v.dtype() == DType::f64 ? first_bad(v.data_as<double>()) : first_bad(v.data_as<float>());
  if (i == v.size()) return;
  const double x = v.at_as_double(i);
  throw InvalidInput(d.source + ": channel " + d.channel_ids[static_cast<std::size_t>(i / length)] +
                     ", sample " + std::to_string(i % length) + " is " +
                     (std::isnan(x) ? "NaN" : "infinite") + ": expected finite data");
}

}  // namespace

std::int64_t SeismicData::time_of_sample(std::int64_t index) const {
  if (!start_ns) throw InvalidInput(source + ": the data has no start time (a .npy file)");
  return *start_ns + static_cast<std::int64_t>(std::llround(static_cast<long double>(index) * 1e9L /
                                                            static_cast<long double>(sample_rate)));
}

namespace detail {

std::vector<std::string> split_list(const std::string& spec) {
  return split(spec, ',');
}

Alignment align_channels(const std::vector<ChannelInfo>& channels, std::vector<Gap> gaps,
                         const std::string& source) {
  if (channels.empty())
    throw InvalidInput(source + ": no samples: expected at least one trace with data");
  Alignment a;
  a.order.resize(channels.size());
  for (std::size_t i = 0; i < channels.size(); ++i) a.order[i] = i;
  std::sort(a.order.begin(), a.order.end(),
            [&](std::size_t x, std::size_t y) { return channels[x].id < channels[y].id; });
  const auto at = [&](std::size_t c) -> const ChannelInfo& { return channels[a.order[c]]; };
  for (std::size_t c = 1; c < a.order.size(); ++c)
    if (at(c).id == at(c - 1).id)
      throw InvalidInput(source + ": channel " + at(c).id +
                         " has segments that cannot be joined (sampling rate " +
                         std::to_string(at(c - 1).rate) + " Hz vs " + std::to_string(at(c).rate) +
                         " Hz, or a different sample type): expected one rate and type per "
                         "channel");
  const ChannelInfo& first = at(0);
  const double rate = first.rate;
  std::int64_t t0 = first.start_ns;
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    const ChannelInfo& t = at(c);
    if (std::abs(t.rate - rate) > 1e-6 * rate)
      throw InvalidInput(source + ": sampling rate of " + t.id + " is " + std::to_string(t.rate) +
                         " Hz: expected " + std::to_string(rate) + " Hz like " + first.id +
                         " (every channel must share one rate)");
    a.all_f32 = a.all_f32 && t.f32;
    t0 = std::min(t0, t.start_ns);
  }
  SeismicData& d = a.info;
  d.source = source;
  d.sample_rate = rate;
  d.start_ns = t0;
  d.gaps = std::move(gaps);
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    const long double exact = samples_between(t0, at(c).start_ns, rate);
    const auto off = static_cast<std::int64_t>(std::llround(exact));
    if (std::abs(exact - static_cast<long double>(off)) > 1e-3L) {
      std::ostringstream note;
      note << at(c).id << " starts " << static_cast<double>(exact - static_cast<long double>(off))
           << " samples off the common sample grid; aligned to the nearest sample";
      d.notes.push_back(note.str());
    }
    a.offsets.push_back(off);
    a.length = std::max(a.length, off + at(c).samples);
  }
  // Channels from different days would be aligned by gigabytes of zeros: refuse, like
  // merge_traces refuses to zero-fill a trace beyond 2^28 samples.
  constexpr std::int64_t kMaxAligned = std::int64_t{1} << 28;
  if (a.length > kMaxAligned)
    throw InvalidInput(source + ": the channels span " + std::to_string(a.length) +
                       " samples from the earliest start to the latest end: expected at most " +
                       std::to_string(kMaxAligned) + " (channels covering one time range)");
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    const ChannelInfo& t = at(c);
    d.channel_ids.push_back(t.id);
    // The alignment pads are zero-filled exactly like gaps, so they are reported as gaps.
    if (a.offsets[c] > 0) d.gaps.push_back({t.id, t0, t.start_ns, a.offsets[c]});
    const std::int64_t tail = a.length - a.offsets[c] - t.samples;
    if (tail > 0) d.gaps.push_back({t.id, t.end_ns, d.time_of_sample(a.length), tail});
  }
  return a;
}

}  // namespace detail

SeismicData read_seismic_data(const std::string& spec) {
  const std::vector<std::string> paths = detail::split_list(spec);
  if (!(paths.size() == 1 && format_of(paths.front()) == Format::npy)) {
    // A list of SAC and MiniSEED files is laid out by the reader of windows and read as one
    // window: each sample goes once into the (C, L) array, not through every file's trace and the
    // merged traces too (three copies of the day).
    if (WindowedData w = open_seismic_windows(spec); w.samples) {
      SeismicData d = std::move(w.info);
      d.data = w.samples->read(0, w.samples->shape()[1]);
      check_finite(d);
      return d;
    }
  }
  // A .npy file, or a list refused at its first bad entry once the files before it were read
  // (an error in an earlier file comes first).
  for (const std::string& p : paths) {
    if (p.empty())
      throw InvalidInput("DATA '" + spec +
                         "': empty file name in the list: expected FILE[,FILE...]");
    const Format f = format_of(p);
    if (f == Format::npy) {
      if (paths.size() != 1)
        throw InvalidInput(p +
                           ": a .npy file holds every channel: expected it alone, not in a "
                           "list of " +
                           std::to_string(paths.size()) + " files");
      SeismicData d = read_npy_data(p);
      check_finite(d);
      return d;
    }
    if (f == Format::mseed)
      (void)read_mseed(p);
    else if (f == Format::sac)
      (void)read_sac(p);
    else
      throw InvalidInput(p + ": data of type " + std::string(format_name(f)) +
                         ": expected .npy, MiniSEED (.mseed, .miniseed, .ms) or SAC (.sac)");
  }
  throw Error("read_seismic_data: " + spec + ": a list of SAC and MiniSEED files not opened");
}

SeismicTemplates read_template_array(const fs::path& path) {
  const std::string name = path.string();
  if (format_of(path) != Format::npy)
    throw InvalidInput(name +
                       ": templates must be a .npy array of shape (T, C, K) or (T, K); "
                       "to cut them from data use --template-times");
  const Array a = read_npy(path);
  const Shape shape = template_array_shape(name, a.shape(), a.dtype());
  SeismicTemplates t;
  // float32 stays float32 (matched filtering computes from it as from its float64 widening).
  t.templates = (a.dtype() == DType::f32 || a.dtype() == DType::f64 ? a : a.astype(DType::f64))
                    .contiguous()
                    .reshape(shape);
  check_finite_templates(name, t.templates, 0);
  for (std::int64_t i = 0; i < a.dim(0); ++i) t.labels.push_back(std::to_string(i));
  return t;
}

}  // namespace halfscope::io

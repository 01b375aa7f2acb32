// Templates cut from continuous data with a pick table (halfscope/io/seismic_input.hpp): the table
// is read line by line, parsed and checked against the data once, then each template is cut from
// the whole data (cut_templates) or from one window of every channel read from a SampleSource
// (cut_template_source, what MPI ranks use: each cuts only its template group and computes only
// its group's rows of the moveouts and weights).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/io/waveform.hpp"
#include "io/npy_detail.hpp"
#include "io/seismic_align.hpp"

namespace halfscope::io {

namespace fs = std::filesystem;

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

struct Pick {
  std::int64_t channel, start, line;
};

// A pick table checked against the data: the labels in order of first appearance and the picks,
// in the table's order, of templates [first, first + of.size()).
struct Picks {
  std::string table;
  std::vector<std::string> labels;
  std::vector<std::vector<Pick>> of;  // per kept template
  std::int64_t first = 0;
  std::int64_t templates = 0;  // labels.size(), also once the labels have been moved out
};

// A text file's lines (as std::getline gives them), read in pieces: a table of millions of picks
// is never held whole.
class LineReader {
 public:
  explicit LineReader(const fs::path& path) : name_(path.string()), file_(open_input_file(path)) {}

  bool next(std::string& line) {
    for (;;) {
      const std::size_t eol = buffer_.find('\n', pos_);
      if (eol != std::string::npos) {
        line.assign(buffer_, pos_, eol - pos_);
        pos_ = eol + 1;
        return true;
      }
      if (offset_ == file_.size) {
        if (pos_ == buffer_.size()) return false;
        line.assign(buffer_, pos_);  // the last line, without its end
        pos_ = buffer_.size();
        return true;
      }
      buffer_.erase(0, pos_);
      pos_ = 0;
      const std::int64_t count = std::min(kPiece, file_.size - offset_);
      const std::size_t held = buffer_.size();
      buffer_.resize(held + static_cast<std::size_t>(count));
      file_.read_exact(reinterpret_cast<std::byte*>(buffer_.data() + held), count, offset_, name_);
      offset_ += count;
    }
  }

 private:
  static constexpr std::int64_t kPiece = std::int64_t{1} << 20;
  std::string name_;
  InputFile file_;
  std::string buffer_;
  std::size_t pos_ = 0;
  std::int64_t offset_ = 0;
};

// The data's channel `c` by its id, for messages.
const std::string& channel_id(const SeismicData& info, std::int64_t c) {
  return info.channel_ids[static_cast<std::size_t>(c)];
}

// Every pick of the table, checked line by line (every message names the table, its line and the
// field at fault): `on_pick(label, channel, start, line)` for each, until it returns false. Not
// checked here: a template listing a channel twice.
template <typename OnPick>
void for_each_pick(const SeismicData& info, std::int64_t samples, const fs::path& path,
                   std::int64_t length, OnPick on_pick) {
  const std::string table = path.string();
  if (length < 1) throw InvalidInput("--template-length " + str(length) + ": expected >= 1 sample");
  const auto channels = static_cast<std::int64_t>(info.channel_ids.size());
  if (length > samples)
    throw InvalidInput("--template-length " + str(length) + ": longer than the " + str(samples) +
                       " samples of " + info.source);
  // Channels by id in one lookup: a catalogue's millions of picks against hundreds of channels.
  std::unordered_map<std::string, std::int64_t> by_id;
  for (std::int64_t c = channels - 1; c >= 0; --c) by_id[channel_id(info, c)] = c;
  LineReader in(path);
  std::string line;
  std::int64_t line_no = 0;
  bool header_allowed = true;
  while (in.next(line)) {
    ++line_no;
    const std::string text = detail::trim(line);
    if (text.empty() || text.front() == '#') continue;
    const std::vector<std::string> f = detail::split(text, ',');
    const auto where = [&] { return table + " line " + str(line_no); };
    if (header_allowed && f.size() == 3 && f[0] == "template") {
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    if (f.size() != 3)
      throw InvalidInput(where() + ": " + str(static_cast<std::int64_t>(f.size())) +
                         " fields: expected 3 (template, channel, start)");
    // Channel: an id of the data, else a 0-based index.
    std::int64_t channel = 0;
    if (const auto id = by_id.find(f[1]); id != by_id.end()) {
      channel = id->second;
    } else {
      const auto idx = detail::parse_int(f[1]);
      if (!idx || *idx < 0 || *idx >= channels)
        throw InvalidInput(where() + ": channel '" + f[1] + "': expected one of the " +
                           str(channels) + " channel ids of " + info.source +
                           " or an index in [0, " + str(channels) + ")");
      channel = *idx;
    }
    // Start: a sample index, else an ISO time.
    std::int64_t start = 0;
    if (const auto s = detail::parse_int(f[2])) {
      start = *s;
    } else {
      if (!info.start_ns)
        throw InvalidInput(where() + ": start '" + f[2] + "' is a time but " + info.source +
                           " has no start time: expected a sample index");
      std::int64_t t = 0;
      try {
        t = parse_iso8601(f[2]);
      } catch (const InvalidInput& e) {
        throw InvalidInput(where() + ": start '" + f[2] +
                           "': expected a sample index or an ISO-8601 UTC time (" + e.what() + ")");
      }
      const long double at = detail::samples_between(*info.start_ns, t, info.sample_rate);
      // The window check below names the pick's true samples; clamping at 4e18 samples (a
      // billion years at 100 Hz) only keeps llround, and start + length, inside an int64.
      constexpr long double kFar = 4e18L;
      start = static_cast<std::int64_t>(std::llround(std::clamp(at, -kFar, kFar)));
    }
    // `start > samples - length`, not `start + length > samples`: a start near 2^63 would
    // overflow the sum (length <= samples is checked above).
    if (start < 0 || start > samples - length)
      throw InvalidInput(where() + ": template window [" + str(start) + ", " +
                         (start > std::numeric_limits<std::int64_t>::max() - length
                              ? str(start) + " + " + str(length)
                              : str(start + length)) +
                         ") of channel " + channel_id(info, channel) +
                         ": expected inside the data [0, " + str(samples) + ")");
    if (!on_pick(f[0], channel, start, line_no)) return;
  }
}

// The table parsed and checked, keeping the picks of templates [keep_begin, keep_end) only (a rank
// its template group's; every template for one process). A template listing a channel twice is
// caught by a bit per template and channel, and its first line found by reading the table again.
Picks parse_picks(const SeismicData& info, std::int64_t samples, const fs::path& path,
                  std::int64_t length, std::int64_t keep_begin, std::int64_t keep_end) {
  Picks p;
  p.table = path.string();
  p.first = keep_begin;
  const auto channels = static_cast<std::int64_t>(info.channel_ids.size());
  const std::int64_t words = (channels + 63) / 64;
  std::vector<std::uint64_t> seen;  // per template, `words` words of one bit per channel
  std::unordered_map<std::string, std::int64_t> index;
  for_each_pick(
      info, samples, path, length,
      [&](const std::string& label, std::int64_t channel, std::int64_t start, std::int64_t line) {
        const auto [at, added] = index.try_emplace(label, std::ssize(p.labels));
        if (added) {
          p.labels.push_back(label);
          seen.resize(seen.size() + static_cast<std::size_t>(words));
        }
        const std::int64_t t = at->second;
        std::uint64_t& word = seen[static_cast<std::size_t>(t * words + channel / 64)];
        const std::uint64_t bit = std::uint64_t{1} << (channel % 64);
        if (word & bit) {
          std::int64_t first = 0;
          for_each_pick(
              info, samples, path, length,
              [&](const std::string& l, std::int64_t c, std::int64_t, std::int64_t at_line) {
                first = at_line;
                return !(l == label && c == channel);
              });
          throw InvalidInput(p.table + " line " + str(line) + ": template '" + label +
                             "' lists channel " + channel_id(info, channel) +
                             " again (first on line " + str(first) +
                             "): expected one pick per channel");
        }
        word |= bit;
        if (t >= keep_begin && t < keep_end) {
          if (t - keep_begin >= std::ssize(p.of))
            p.of.resize(static_cast<std::size_t>(t - keep_begin + 1));
          p.of[static_cast<std::size_t>(t - keep_begin)].push_back({channel, start, line});
        }
        return true;
      });
  if (p.labels.empty())
    throw InvalidInput(p.table + ": no picks: expected rows 'template, channel, start'");
  p.templates = std::ssize(p.labels);
  p.of.resize(static_cast<std::size_t>(std::clamp(p.templates, keep_begin, keep_end) - keep_begin));
  return p;
}

// Rows [begin, end) of the table's moveouts (each pick's offset from its template's earliest) or
// weights (1 where a template has a pick), from picks that hold those templates.
Array network_rows(const Picks& p, std::int64_t channels, bool weights, std::int64_t begin,
                   std::int64_t end) {
  Array out = Array::zeros(weights ? DType::f64 : DType::i64, {end - begin, channels});
  for (std::int64_t i = begin; i < end; ++i) {
    const auto& list = p.of[static_cast<std::size_t>(i - p.first)];
    std::int64_t earliest = list.front().start;
    for (const Pick& q : list) earliest = std::min(earliest, q.start);
    const std::int64_t row = (i - begin) * channels;
    for (const Pick& q : list) {
      if (weights)
        out.data_as<double>()[row + q.channel] = 1.0;
      else
        out.data_as<std::int64_t>()[row + q.channel] = q.start - earliest;
    }
  }
  return out;
}

// Template `list`'s picks cut into `dst` (C x length float64, zero where it has no pick) from
// `window`: every channel's samples from sample `first` of the data on. InvalidInput naming the
// table's line for a flat cut.
void cut_one(const std::vector<Pick>& list, const std::string& table, const SeismicData& info,
             const Array& window, std::int64_t first, std::int64_t length, double* dst) {
  for (const Pick& q : list) {
    double* row = dst + q.channel * length;
    // Only the picked window is converted: the data may be days long.
    const Array cut = window.select(0, q.channel)
                          .slice(0, q.start - first, q.start - first + length)
                          .astype(DType::f64)
                          .contiguous();
    std::copy_n(cut.data_as<double>(), length, row);
    if (std::all_of(row, row + length, [](double x) { return x == 0.0; }))
      throw InvalidInput(table + " line " + str(q.line) + ": the template window of " +
                         channel_id(info, q.channel) +
                         " is all zeros (a gap?): expected a waveform");
  }
}

// The picks of the templates a rank asks for, read again from the table (checked again as it is
// read) and kept for the next request of the same range: a rank reads its group's templates, then
// its moveouts and weights, so it parses the table twice in all and never holds more picks than
// its group's.
class PickStore {
 public:
  PickStore(const SeismicData& info, std::int64_t samples, fs::path path, std::int64_t length,
            std::int64_t templates)
      : info_(info),
        samples_(samples),
        path_(std::move(path)),
        length_(length),
        templates_(templates) {
    info_.data = {};
    info_.gaps.clear();
  }
  [[nodiscard]] const SeismicData& info() const { return info_; }
  [[nodiscard]] std::string table() const { return path_.string(); }
  [[nodiscard]] std::int64_t templates() const { return templates_; }
  [[nodiscard]] std::int64_t length() const { return length_; }

  [[nodiscard]] std::shared_ptr<const Picks> picks(std::int64_t begin, std::int64_t end) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!held_ || begin < held_->first || end > held_->first + std::ssize(held_->of)) {
      auto p = std::make_shared<Picks>(parse_picks(info_, samples_, path_, length_, begin, end));
      if (p->templates != templates_)
        throw IoError(table() + ": " + str(p->templates) + " templates: expected the " +
                      str(templates_) + " found when it was first read (the table changed)");
      p->labels = {};
      held_ = std::move(p);
    }
    return held_;
  }

 private:
  SeismicData info_;
  std::int64_t samples_;
  fs::path path_;
  std::int64_t length_, templates_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Picks> held_;
};

// The moveouts or weights of the table as a TableSource: each read computes its rows.
class PickTable final : public TableSource {
 public:
  PickTable(std::shared_ptr<const PickStore> store, bool weights)
      : store_(std::move(store)), weights_(weights) {}
  [[nodiscard]] Shape shape() const override {
    return {store_->templates(), std::ssize(store_->info().channel_ids)};
  }
  [[nodiscard]] DType dtype() const override { return weights_ ? DType::f64 : DType::i64; }
  [[nodiscard]] std::string describe() const override {
    return std::string(dtype_name(dtype())) + shape_to_string(shape()) + " " +
           std::string(memory_name(Memory::host));
  }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_range(std::string(weights_ ? "weights" : "moveouts") + " of " + store_->table(),
                        "rows", "range", begin, end, store_->templates());
    if (begin == end) return Array::zeros(dtype(), {0, shape()[1]});
    return network_rows(*store_->picks(begin, end), shape()[1], weights_, begin, end);
  }

 private:
  std::shared_ptr<const PickStore> store_;
  bool weights_;
};

// Templates cut on demand: template i from one window of every channel, from its earliest pick
// to its latest pick's end.
class CutTemplates final : public TemplateSource {
 public:
  CutTemplates(const SampleSource& samples, std::shared_ptr<const PickStore> store)
      : samples_(samples), store_(std::move(store)) {}
  [[nodiscard]] Shape shape() const override {
    return {store_->templates(), std::ssize(store_->info().channel_ids), store_->length()};
  }
  [[nodiscard]] DType dtype() const override { return DType::f64; }
  [[nodiscard]] std::string name() const override { return store_->table(); }
  [[nodiscard]] std::string describe() const override {
    return "templates cut from " + store_->info().source + " by " + store_->table() + " (float64" +
           shape_to_string(shape()) + ")";
  }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_template_range(*this, begin, end);
    const Shape s = shape();
    Array out = Array::zeros(DType::f64, {end - begin, s[1], s[2]});
    if (begin == end) return out;
    const std::shared_ptr<const Picks> picks = store_->picks(begin, end);
    for (std::int64_t t = begin; t < end; ++t) {
      const auto& list = picks->of[static_cast<std::size_t>(t - picks->first)];
      const auto [lo, hi] = std::minmax_element(
          list.begin(), list.end(), [](const Pick& a, const Pick& b) { return a.start < b.start; });
      const Array window = samples_.read(lo->start, hi->start + s[2]);
      cut_one(list, picks->table, store_->info(), window, lo->start, s[2],
              out.data_as<double>() + (t - begin) * s[1] * s[2]);
    }
    return out;
  }

 private:
  const SampleSource& samples_;
  std::shared_ptr<const PickStore> store_;
};

}  // namespace

SeismicTemplates cut_templates(const SeismicData& source, const fs::path& picks,
                               std::int64_t length) {
  const std::int64_t channels = source.data.dim(0);
  const Picks p = parse_picks(source, source.data.dim(1), picks, length, 0,
                              std::numeric_limits<std::int64_t>::max());
  const std::int64_t n = p.templates;
  SeismicTemplates t;
  t.labels = p.labels;
  t.moveouts = network_rows(p, channels, false, 0, n);
  t.weights = network_rows(p, channels, true, 0, n);
  t.templates = Array::zeros(DType::f64, {n, channels, length});
  for (std::int64_t i = 0; i < n; ++i)
    cut_one(p.of[static_cast<std::size_t>(i)], p.table, source, source.data, 0, length,
            t.templates.data_as<double>() + i * channels * length);
  return t;
}

CutTemplateSource cut_template_source(const SeismicData& info, const SampleSource& samples,
                                      const fs::path& picks, std::int64_t length) {
  const Shape shape = samples.shape();
  if (shape[0] != std::ssize(info.channel_ids))
    throw Error("cut_template_source: " + str(shape[0]) + " channels of samples, " +
                str(std::ssize(info.channel_ids)) + " channel ids in " + info.source);
  // The whole table checked here, keeping its labels but no pick.
  Picks checked = parse_picks(info, shape[1], picks, length, 0, 0);
  auto store = std::make_shared<const PickStore>(info, shape[1], picks, length, checked.templates);
  CutTemplateSource cut;
  cut.labels = std::move(checked.labels);
  cut.moveouts = std::make_shared<PickTable>(store, false);
  cut.weights = std::make_shared<PickTable>(store, true);
  cut.templates = std::make_unique<CutTemplates>(samples, store);
  return cut;
}

}  // namespace halfscope::io

// Templates cut from continuous data with a pick table (halfscope/io/seismic_input.hpp): the table
// is read line by line, parsed and checked against the data once, then each template is cut from
// the whole data (cut_templates) or from one window of every channel read from a SampleSource
// (cut_template_source, what MPI ranks use: each cuts only its template group and computes only
// its group's rows of the moveouts and weights).
#include <algorithm>
#include <cmath>
#include <limits>
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

// A pick table checked against the data: the labels in order of first appearance and each
// template's picks in the table's order.
struct Picks {
  std::string table;
  std::vector<std::string> labels;
  std::vector<std::vector<Pick>> of;  // per label
  std::int64_t templates = 0;         // of.size(), also once the labels have been moved out
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

// The table parsed and checked: every message names the table, its line and the field at fault.
Picks parse_picks(const SeismicData& info, std::int64_t samples, const fs::path& path,
                  std::int64_t length) {
  Picks p;
  p.table = path.string();
  if (length < 1) throw InvalidInput("--template-length " + str(length) + ": expected >= 1 sample");
  const auto channels = static_cast<std::int64_t>(info.channel_ids.size());
  if (length > samples)
    throw InvalidInput("--template-length " + str(length) + ": longer than the " + str(samples) +
                       " samples of " + info.source);
  LineReader in(path);
  std::unordered_map<std::string, std::size_t> index;
  std::string line;
  std::int64_t line_no = 0;
  bool header_allowed = true;
  while (in.next(line)) {
    ++line_no;
    const std::string text = detail::trim(line);
    if (text.empty() || text.front() == '#') continue;
    const std::vector<std::string> f = detail::split(text, ',');
    const std::string where = p.table + " line " + str(line_no);
    if (header_allowed && f.size() == 3 && f[0] == "template") {
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    if (f.size() != 3)
      throw InvalidInput(where + ": " + str(static_cast<std::int64_t>(f.size())) +
                         " fields: expected 3 (template, channel, start)");
    // Channel: an id of the data, else a 0-based index.
    const auto id = std::find(info.channel_ids.begin(), info.channel_ids.end(), f[1]);
    std::int64_t channel = id - info.channel_ids.begin();
    if (id == info.channel_ids.end()) {
      const auto idx = detail::parse_int(f[1]);
      if (!idx || *idx < 0 || *idx >= channels)
        throw InvalidInput(where + ": channel '" + f[1] + "': expected one of the " +
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
        throw InvalidInput(where + ": start '" + f[2] + "' is a time but " + info.source +
                           " has no start time: expected a sample index");
      const std::int64_t t = parse_iso8601(f[2]);
      const long double at = detail::samples_between(*info.start_ns, t, info.sample_rate);
      // Outside [0, samples] it fails the window check below anyway; clamping first keeps
      // llround in range (a time centuries away would not fit an int64 sample index).
      start = at < 0 ? -1
              : at > static_cast<long double>(samples)
                  ? samples + 1
                  : static_cast<std::int64_t>(std::llround(at));
    }
    // `start > samples - length`, not `start + length > samples`: a start near 2^63 would
    // overflow the sum (length <= samples is checked above).
    if (start < 0 || start > samples - length)
      throw InvalidInput(where + ": template window [" + str(start) + ", " +
                         (start > std::numeric_limits<std::int64_t>::max() - length
                              ? str(start) + " + " + str(length)
                              : str(start + length)) +
                         ") of channel " + channel_id(info, channel) +
                         ": expected inside the data [0, " + str(samples) + ")");
    const auto [at, added] = index.try_emplace(f[0], p.labels.size());
    if (added) {
      p.labels.push_back(f[0]);
      p.of.emplace_back();
    }
    std::vector<Pick>& list = p.of[at->second];
    for (const Pick& q : list)
      if (q.channel == channel)
        throw InvalidInput(where + ": template '" + f[0] + "' lists channel " +
                           channel_id(info, channel) + " again (first on line " + str(q.line) +
                           "): expected one pick per channel");
    list.push_back({channel, start, line_no});
  }
  if (p.labels.empty())
    throw InvalidInput(p.table + ": no picks: expected rows 'template, channel, start'");
  p.templates = static_cast<std::int64_t>(p.labels.size());
  return p;
}

// Rows [begin, end) of the table's moveouts (each pick's offset from its template's earliest) or
// weights (1 where a template has a pick).
Array network_rows(const Picks& p, std::int64_t channels, bool weights, std::int64_t begin,
                   std::int64_t end) {
  Array out = Array::zeros(weights ? DType::f64 : DType::i64, {end - begin, channels});
  for (std::int64_t i = begin; i < end; ++i) {
    const auto& list = p.of[static_cast<std::size_t>(i)];
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

// The moveouts or weights of the table as a TableSource: each read computes its rows, so a rank
// holds its template group's rows only.
class PickTable final : public TableSource {
 public:
  PickTable(std::shared_ptr<const Picks> picks, std::int64_t channels, bool weights)
      : picks_(std::move(picks)), channels_(channels), weights_(weights) {}
  [[nodiscard]] Shape shape() const override { return {picks_->templates, channels_}; }
  [[nodiscard]] DType dtype() const override { return weights_ ? DType::f64 : DType::i64; }
  [[nodiscard]] std::string describe() const override {
    return std::string(dtype_name(dtype())) + shape_to_string(shape()) + " " +
           std::string(memory_name(Memory::host));
  }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    const std::int64_t n = shape()[0];
    if (begin < 0 || begin > end || end > n)
      throw InvalidInput(std::string(weights_ ? "weights" : "moveouts") + " of " + picks_->table +
                         ": rows [" + str(begin) + ", " + str(end) +
                         "): expected a range inside [0, " + str(n) + ")");
    return network_rows(*picks_, channels_, weights_, begin, end);
  }

 private:
  std::shared_ptr<const Picks> picks_;
  std::int64_t channels_;
  bool weights_;
};

// Template i cut into `dst` (C x length float64, zero where it has no pick) from `window`: every
// channel's samples from sample `first` of the data on. InvalidInput for a flat cut.
void cut_one(const Picks& p, const SeismicData& info, std::size_t i, const Array& window,
             std::int64_t first, std::int64_t length, double* dst) {
  for (const Pick& q : p.of[i]) {
    double* row = dst + q.channel * length;
    // Only the picked window is converted: the data may be days long.
    const Array cut = window.select(0, q.channel)
                          .slice(0, q.start - first, q.start - first + length)
                          .astype(DType::f64)
                          .contiguous();
    std::copy_n(cut.data_as<double>(), length, row);
    if (std::all_of(row, row + length, [](double x) { return x == 0.0; }))
      throw InvalidInput(p.table + " line " + str(q.line) + ": the template window of " +
                         channel_id(info, q.channel) +
                         " is all zeros (a gap?): expected a waveform");
  }
}

// Templates cut on demand: template i from one window of every channel, from its earliest pick
// to its latest pick's end.
class CutTemplates final : public TemplateSource {
 public:
  CutTemplates(const SeismicData& info, const SampleSource& samples,
               std::shared_ptr<const Picks> picks, std::int64_t length)
      : info_(info), samples_(samples), picks_(std::move(picks)), length_(length) {
    info_.data = {};
    info_.gaps.clear();
  }
  [[nodiscard]] Shape shape() const override {
    return {picks_->templates, static_cast<std::int64_t>(info_.channel_ids.size()), length_};
  }
  [[nodiscard]] DType dtype() const override { return DType::f64; }
  [[nodiscard]] std::string name() const override { return picks_->table; }
  [[nodiscard]] std::string describe() const override {
    return "templates cut from " + info_.source + " by " + picks_->table + " (float64" +
           shape_to_string(shape()) + ")";
  }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_template_range(*this, begin, end);
    const Shape s = shape();
    Array out = Array::zeros(DType::f64, {end - begin, s[1], s[2]});
    for (std::int64_t t = begin; t < end; ++t) {
      const auto& list = picks_->of[static_cast<std::size_t>(t)];
      const auto [lo, hi] = std::minmax_element(
          list.begin(), list.end(), [](const Pick& a, const Pick& b) { return a.start < b.start; });
      const Array window = samples_.read(lo->start, hi->start + length_);
      cut_one(*picks_, info_, static_cast<std::size_t>(t), window, lo->start, length_,
              out.data_as<double>() + (t - begin) * s[1] * s[2]);
    }
    return out;
  }

 private:
  SeismicData info_;
  const SampleSource& samples_;
  std::shared_ptr<const Picks> picks_;
  std::int64_t length_;
};

}  // namespace

SeismicTemplates cut_templates(const SeismicData& source, const fs::path& picks,
                               std::int64_t length) {
  const std::int64_t channels = source.data.dim(0);
  const Picks p = parse_picks(source, source.data.dim(1), picks, length);
  const auto n = static_cast<std::int64_t>(p.labels.size());
  SeismicTemplates t;
  t.labels = p.labels;
  t.moveouts = network_rows(p, channels, false, 0, n);
  t.weights = network_rows(p, channels, true, 0, n);
  t.templates = Array::zeros(DType::f64, {std::ssize(p.labels), channels, length});
  for (std::size_t i = 0; i < p.labels.size(); ++i)
    cut_one(p, source, i, source.data, 0, length,
            t.templates.data_as<double>() + static_cast<std::int64_t>(i) * channels * length);
  return t;
}

CutTemplateSource cut_template_source(const SeismicData& info, const SampleSource& samples,
                                      const fs::path& picks, std::int64_t length) {
  const Shape shape = samples.shape();
  if (shape[0] != std::ssize(info.channel_ids))
    throw Error("cut_template_source: " + str(shape[0]) + " channels of samples, " +
                str(std::ssize(info.channel_ids)) + " channel ids in " + info.source);
  Picks parsed = parse_picks(info, shape[1], picks, length);
  CutTemplateSource cut;
  cut.labels = std::move(parsed.labels);  // the sources need only their count
  parsed.templates = static_cast<std::int64_t>(cut.labels.size());
  auto p = std::make_shared<const Picks>(std::move(parsed));
  cut.moveouts = std::make_shared<PickTable>(p, shape[0], false);
  cut.weights = std::make_shared<PickTable>(p, shape[0], true);
  cut.templates = std::make_unique<CutTemplates>(info, samples, p, length);
  return cut;
}

}  // namespace halfscope::io

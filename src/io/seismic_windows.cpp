// Continuous data read by windows (halfscope/io/seismic_input.hpp, open_seismic_windows): a .npy
// file, or a list of SAC and MiniSEED files, laid out as read_seismic_data lays them out.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "io/merge_plan.hpp"
#include "io/npy_detail.hpp"
#include "io/seismic_align.hpp"

namespace halfscope::io {

namespace {

// SAC and MiniSEED files laid out by pieces: each piece is samples [begin, end) of one item of
// one file (a SAC file's samples, a MiniSEED record) landing at `dest` of its channel's row, where
// read_seismic_data places them (the records of each MiniSEED file joined as read_mseed joins
// them, every file's segments merged with gaps zero-filled and overlaps dropped as merge_traces
// does, the channels aligned); the rest is zeros. A window reads only the SAC samples and decodes
// only the records it overlaps, opening each file it needs once: a network's hundreds of files
// hold no descriptors between windows, and reads from several threads share nothing.
class WaveformSamples final : public SampleSource {
 public:
  struct Piece {
    std::size_t file = 0, item = 0;
    std::int64_t begin = 0, end = 0, dest = 0;
  };
  /// What a window needs of one file: a SAC file's header, or a MiniSEED file's records.
  using FileIndex = std::variant<SacHeader, std::vector<MseedRecord>>;

  WaveformSamples(std::string spec, std::vector<std::string> paths, std::vector<FileIndex> files,
                  std::vector<std::vector<Piece>> rows, std::int64_t length, DType dtype)
      : spec_(std::move(spec)),
        paths_(std::move(paths)),
        files_(std::move(files)),
        rows_(std::move(rows)),
        length_(length),
        dtype_(dtype) {}

  [[nodiscard]] Shape shape() const override {
    return {static_cast<std::int64_t>(rows_.size()), length_};
  }
  [[nodiscard]] DType dtype() const override { return dtype_; }
  [[nodiscard]] std::string name() const override { return spec_; }
  [[nodiscard]] std::string describe() const override {
    return spec_ + " (" + std::string(dtype_name(dtype_)) + shape_to_string(shape()) + ")";
  }

  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_window(*this, begin, end);
    const std::int64_t n = end - begin, item = dtype_size(dtype_);
    Array out = Array::zeros(dtype_, {static_cast<std::int64_t>(rows_.size()), n});
    auto* bytes = static_cast<std::byte*>(out.data());
    std::vector<std::optional<InputFile>> open(paths_.size());
    for (std::size_t c = 0; c < rows_.size(); ++c) {
      const std::vector<Piece>& row = rows_[c];
      // The first piece that ends after `begin` (pieces lie in order of their destination).
      auto it = std::partition_point(row.begin(), row.end(), [&](const Piece& p) {
        return p.dest + (p.end - p.begin) <= begin;
      });
      for (; it != row.end() && it->dest < end; ++it) {
        const std::int64_t lo = std::max(begin, it->dest);
        const std::int64_t hi = std::min(end, it->dest + (it->end - it->begin));
        std::optional<InputFile>& f = open[it->file];
        if (!f) f = open_input_file(paths_[it->file]);
        fetch(*f, *it, it->begin + (lo - it->dest), hi - lo,
              bytes + (static_cast<std::int64_t>(c) * n + lo - begin) * item);
      }
    }
    return out;
  }

 private:
  // `count` samples of the piece's item from its sample `first` on, as dtype(), into `out`.
  void fetch(InputFile& file, const Piece& piece, std::int64_t first, std::int64_t count,
             std::byte* out) const {
    const std::string& path = paths_[piece.file];
    const FileIndex& index = files_[piece.file];
    if (const auto* sac = std::get_if<SacHeader>(&index)) {
      // float32 in the file; widened where a MiniSEED channel of integers makes the data float64.
      std::vector<float> wide(static_cast<std::size_t>(dtype_ == DType::f32 ? 0 : count));
      std::byte* to = wide.empty() ? out : reinterpret_cast<std::byte*>(wide.data());
      file.read_exact(to, count * 4, kSacHeaderBytes + first * 4, path);
      sac_samples_to_native(*sac, to, count);
      for (std::size_t k = 0; k < wide.size(); ++k) {
        const double x = wide[k];
        std::memcpy(out + k * sizeof x, &x, sizeof x);
      }
      return;
    }
    const auto& records = std::get<std::vector<MseedRecord>>(index);
    const Array samples = read_mseed_record(file, path, records[piece.item]);
    const Array part = samples.slice(0, first, first + count).astype(dtype_);
    std::memcpy(out, part.data(), static_cast<std::size_t>(part.nbytes()));
  }

  std::string spec_;
  std::vector<std::string> paths_;
  std::vector<FileIndex> files_;          // per file of the list
  std::vector<std::vector<Piece>> rows_;  // per channel, in the aligned order
  std::int64_t length_;
  DType dtype_;
};

// One file's contribution to merging: a segment of whole items (a SAC file's samples, or
// MiniSEED records joined as read_mseed joins them).
struct Segment {
  std::size_t file;
  detail::PlannedTrace trace;  // its pieces: items of the file
};

// Each file's segments, in list order: a SAC file is one segment (none without samples); a
// MiniSEED file's records are scanned (each decoded once to check it, as read_mseed does) and
// joined.
WaveformSamples::FileIndex index_file(const std::string& path, std::size_t file,
                                      std::vector<Segment>& segments,
                                      std::vector<detail::TraceMeta>& metas) {
  if (format_of(path) == Format::sac) {
    SacHeader h = read_sac_header(path);
    const Trace& t = h.sac.trace;
    metas.push_back({t.id(), t.start_ns, t.sample_rate, DType::f32, h.samples});
    segments.push_back({file, {0, h.samples, {{0, 0, h.samples}}}});
    return h;
  }
  std::vector<MseedRecord> records = scan_mseed(path);
  std::vector<detail::TraceMeta> of_records;
  for (const MseedRecord& r : records)
    of_records.push_back({r.trace.id(), r.trace.start_ns, r.trace.sample_rate, r.dtype, r.samples});
  for (detail::PlannedTrace& t : detail::plan_merge(of_records, false).traces) {
    detail::TraceMeta m = of_records[static_cast<std::size_t>(t.head)];
    m.size = t.count;
    metas.push_back(std::move(m));
    segments.push_back({file, std::move(t)});
  }
  return records;
}

// SAC and MiniSEED files by windows: only headers and the records' placement are kept.
WindowedData waveform_windows(const std::string& spec, const std::vector<std::string>& paths) {
  std::vector<WaveformSamples::FileIndex> files;
  std::vector<Segment> segments;
  std::vector<detail::TraceMeta> segment_metas;
  for (std::size_t f = 0; f < paths.size(); ++f)
    files.push_back(index_file(paths[f], f, segments, segment_metas));
  // Every file's segments merged with gaps filled (segments without samples dropped), then the
  // channels aligned.
  const detail::MergePlan merged = detail::plan_merge(segment_metas, true);
  std::vector<detail::ChannelInfo> channels;
  for (const detail::PlannedTrace& t : merged.traces) {
    const detail::TraceMeta& m = segment_metas[static_cast<std::size_t>(t.head)];
    channels.push_back({m.id, m.start_ns, trace_end_ns(m.start_ns, t.count, m.sample_rate), t.count,
                        m.sample_rate, m.dtype == DType::f32});
  }
  detail::Alignment a = detail::align_channels(channels, merged.gaps, spec);
  std::vector<std::vector<WaveformSamples::Piece>> rows(a.order.size());
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    std::int64_t dest = a.offsets[c];
    for (const detail::PlanPiece& piece : merged.traces[a.order[c]].pieces) {
      if (piece.input >= 0) {
        // Samples [piece.begin, piece.end) of a segment: the parts of its items in that range.
        const Segment& seg = segments[static_cast<std::size_t>(piece.input)];
        std::int64_t at = 0;  // the segment's sample where the item's piece starts
        for (const detail::PlanPiece& ip : seg.trace.pieces) {
          const std::int64_t len = ip.end - ip.begin;
          const std::int64_t lo = std::max(piece.begin, at), hi = std::min(piece.end, at + len);
          if (hi > lo)
            rows[c].push_back({seg.file, static_cast<std::size_t>(ip.input), ip.begin + (lo - at),
                               ip.begin + (hi - at), dest + (lo - piece.begin)});
          at += len;
        }
      }
      dest += piece.end - piece.begin;
    }
  }
  WindowedData w;
  w.samples = std::make_unique<WaveformSamples>(spec, paths, std::move(files), std::move(rows),
                                                a.length, a.all_f32 ? DType::f32 : DType::f64);
  w.info = std::move(a.info);
  return w;
}

}  // namespace

WindowedData open_seismic_windows(const std::string& spec) {
  const std::vector<std::string> paths = detail::split_list(spec);
  WindowedData w;
  if (paths.size() == 1 && format_of(paths.front()) == Format::npy) {
    w.samples = npy_samples(paths.front());
    for (std::int64_t c = 0; c < w.samples->shape()[0]; ++c)
      w.info.channel_ids.push_back(std::to_string(c));
    w.info.source = spec;
    return w;
  }
  // Other files in a list (a .npy, an unknown type) and empty names: read_seismic_data's
  // messages.
  const bool waveforms = std::all_of(paths.begin(), paths.end(), [](const std::string& p) {
    return !p.empty() && (format_of(p) == Format::sac || format_of(p) == Format::mseed);
  });
  if (!waveforms) return w;
  return waveform_windows(spec, paths);
}

}  // namespace halfscope::io

// Continuous data read by windows (halfscope/io/seismic_input.hpp, open_seismic_windows): a .npy
// file, SAC files holding one channel each, or MiniSEED files, laid out as read_seismic_data lays
// them out.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
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

// Channels laid out by pieces: each piece is samples [begin, end) of one item of one file (a SAC
// file's samples, a MiniSEED record) landing at `dest` of its channel's row; the rest is zeros.
// A window reads each piece it overlaps, opening each file it needs once: a network's hundreds
// of files hold no descriptors between windows, and reads from several threads share nothing.
class PlacedSamples : public SampleSource {
 public:
  struct Piece {
    std::size_t file = 0, item = 0;
    std::int64_t begin = 0, end = 0, dest = 0;
  };
  PlacedSamples(std::string spec, std::vector<std::string> paths,
                std::vector<std::vector<Piece>> rows, std::int64_t length, DType dtype)
      : spec_(std::move(spec)),
        paths_(std::move(paths)),
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
        fetch(*f, paths_[it->file], *it, it->begin + (lo - it->dest), hi - lo,
              bytes + (static_cast<std::int64_t>(c) * n + lo - begin) * item);
      }
    }
    return out;
  }

 protected:
  // `count` samples of the piece's item from its sample `first` on, as dtype(), into `out`.
  virtual void fetch(InputFile& file, const std::string& path, const Piece& piece,
                     std::int64_t first, std::int64_t count, std::byte* out) const = 0;

 private:
  std::string spec_;
  std::vector<std::string> paths_;
  std::vector<std::vector<Piece>> rows_;  // per channel, in the aligned order
  std::int64_t length_;
  DType dtype_;
};

// One SAC file per channel (a piece per row), float32 samples read straight from the file.
class SacSamples final : public PlacedSamples {
 public:
  SacSamples(std::string spec, std::vector<std::string> paths, std::vector<SacHeader> headers,
             std::vector<std::vector<Piece>> rows, std::int64_t length)
      : PlacedSamples(std::move(spec), std::move(paths), std::move(rows), length, DType::f32),
        headers_(std::move(headers)) {}

 private:
  void fetch(InputFile& file, const std::string& path, const Piece& piece, std::int64_t first,
             std::int64_t count, std::byte* out) const override {
    file.read_exact(out, count * 4, kSacHeaderBytes + first * 4, path);
    sac_samples_to_native(headers_[piece.file], out, count);
  }
  std::vector<SacHeader> headers_;  // per file
};

// MiniSEED files: every record placed where read_seismic_data places its samples (the records of
// each file joined as read_mseed joins them, then every file's segments merged with gaps
// zero-filled and overlaps dropped as merge_traces does, then the channels aligned); a window
// decodes only the records it overlaps.
class MseedSamples final : public PlacedSamples {
 public:
  MseedSamples(std::string spec, std::vector<std::string> paths,
               std::vector<std::vector<MseedRecord>> records, std::vector<std::vector<Piece>> rows,
               std::int64_t length, DType dtype)
      : PlacedSamples(std::move(spec), std::move(paths), std::move(rows), length, dtype),
        records_(std::move(records)) {}

 private:
  void fetch(InputFile& file, const std::string& path, const Piece& piece, std::int64_t first,
             std::int64_t count, std::byte* out) const override {
    const Array samples = read_mseed_record(file, path, records_[piece.file][piece.item]);
    const Array part = samples.slice(0, first, first + count).astype(dtype());
    std::memcpy(out, part.data(), static_cast<std::size_t>(part.nbytes()));
  }
  std::vector<std::vector<MseedRecord>> records_;  // per file, in file order
};

// MiniSEED files by windows: only the records' placement is kept (scan_mseed decodes each record
// once to check it, as read_mseed does).
WindowedData mseed_windows(const std::string& spec, const std::vector<std::string>& paths) {
  std::vector<std::vector<MseedRecord>> records_of;  // per file
  // Each file's records joined as read_mseed joins them: segments of whole records.
  struct Segment {
    std::size_t file;
    detail::PlannedTrace trace;
  };
  std::vector<Segment> segments;
  std::vector<detail::TraceMeta> segment_metas;
  for (const std::string& p : paths) {
    const auto& records = records_of.emplace_back(scan_mseed(p));
    std::vector<detail::TraceMeta> metas;
    for (const MseedRecord& r : records)
      metas.push_back({r.trace.id(), r.trace.start_ns, r.trace.sample_rate, r.dtype, r.samples});
    for (detail::PlannedTrace& t : detail::plan_merge(metas, false).traces) {
      detail::TraceMeta m = metas[static_cast<std::size_t>(t.head)];
      m.size = t.count;
      segment_metas.push_back(m);
      segments.push_back({records_of.size() - 1, std::move(t)});
    }
  }
  // Every file's segments merged with gaps filled, then the channels aligned.
  const detail::MergePlan merged = detail::plan_merge(segment_metas, true);
  std::vector<detail::ChannelInfo> channels;
  for (const detail::PlannedTrace& t : merged.traces) {
    const detail::TraceMeta& m = segment_metas[static_cast<std::size_t>(t.head)];
    channels.push_back({m.id, m.start_ns, trace_end_ns(m.start_ns, t.count, m.sample_rate), t.count,
                        m.sample_rate, m.dtype == DType::f32});
  }
  detail::Alignment a = detail::align_channels(channels, merged.gaps, spec);
  std::vector<std::vector<PlacedSamples::Piece>> rows(a.order.size());
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    std::int64_t dest = a.offsets[c];
    for (const detail::PlanPiece& piece : merged.traces[a.order[c]].pieces) {
      if (piece.input >= 0) {
        // Samples [piece.begin, piece.end) of a segment: the parts of its records in that range.
        const Segment& seg = segments[static_cast<std::size_t>(piece.input)];
        std::int64_t at = 0;  // the segment's sample where the record piece starts
        for (const detail::PlanPiece& rp : seg.trace.pieces) {
          const std::int64_t len = rp.end - rp.begin;
          const std::int64_t lo = std::max(piece.begin, at), hi = std::min(piece.end, at + len);
          if (hi > lo)
            rows[c].push_back({seg.file, static_cast<std::size_t>(rp.input), rp.begin + (lo - at),
                               rp.begin + (hi - at), dest + (lo - piece.begin)});
          at += len;
        }
      }
      dest += piece.end - piece.begin;
    }
  }
  WindowedData w;
  w.samples = std::make_unique<MseedSamples>(spec, paths, std::move(records_of), std::move(rows),
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
  const auto all = [&](Format f) {
    return std::all_of(paths.begin(), paths.end(),
                       [&](const std::string& p) { return !p.empty() && format_of(p) == f; });
  };
  if (all(Format::mseed)) return mseed_windows(spec, paths);
  if (!all(Format::sac)) return w;  // mixed lists and empty names: read whole
  std::vector<SacHeader> headers;
  std::vector<detail::ChannelInfo> channels;
  for (const std::string& p : paths) {
    SacHeader h = read_sac_header(p);
    const Trace& t = h.sac.trace;
    // A file without samples is dropped by merging and a channel in several files is joined:
    // read whole, as one process does.
    if (h.samples == 0) return w;
    channels.push_back({t.id(), t.start_ns, trace_end_ns(t.start_ns, h.samples, t.sample_rate),
                        h.samples, t.sample_rate, true});
    headers.push_back(std::move(h));
  }
  std::vector<std::string> ids;
  for (const auto& c : channels) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return w;
  detail::Alignment a = detail::align_channels(channels, {}, spec);
  std::vector<std::vector<PlacedSamples::Piece>> rows(a.order.size());
  for (std::size_t c = 0; c < a.order.size(); ++c)
    rows[c].push_back({a.order[c], 0, 0, channels[a.order[c]].samples, a.offsets[c]});
  w.samples =
      std::make_unique<SacSamples>(spec, paths, std::move(headers), std::move(rows), a.length);
  w.info = std::move(a.info);
  return w;
}

}  // namespace halfscope::io

// Continuous data read by windows (halfscope/io/seismic_input.hpp, open_seismic_windows): a .npy
// file, or SAC files holding one channel each, laid out as read_seismic_data lays them out.
#include <algorithm>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "io/seismic_align.hpp"

namespace halfscope::io {

namespace {

std::vector<std::string> split_list(const std::string& spec) {
  std::vector<std::string> out;
  std::string::size_type begin = 0;
  while (true) {
    const auto comma = spec.find(',', begin);
    out.push_back(
        spec.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}

// One SAC file per channel, each at its offset in the common grid (zeros around it).
class SacSamples final : public SampleSource {
 public:
  struct Channel {
    std::string path;
    SacHeader header;
    std::int64_t offset = 0;
  };
  SacSamples(std::string spec, std::vector<Channel> channels, std::int64_t length)
      : spec_(std::move(spec)), channels_(std::move(channels)), length_(length) {}

  [[nodiscard]] Shape shape() const override {
    return {static_cast<std::int64_t>(channels_.size()), length_};
  }
  [[nodiscard]] DType dtype() const override { return DType::f32; }
  [[nodiscard]] std::string name() const override { return spec_; }
  [[nodiscard]] std::string describe() const override {
    return spec_ + " (float32" + shape_to_string(shape()) + ")";
  }

  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    if (begin < 0 || begin > end || end > length_)
      throw InvalidInput(spec_ + ": samples [" + std::to_string(begin) + ", " +
                         std::to_string(end) + "): expected a window inside [0, " +
                         std::to_string(length_) + ")");
    const std::int64_t n = end - begin;
    Array out = Array::zeros(DType::f32, {static_cast<std::int64_t>(channels_.size()), n});
    auto* bytes = static_cast<std::byte*>(out.data());
    for (std::size_t c = 0; c < channels_.size(); ++c) {
      const Channel& ch = channels_[c];
      const std::int64_t lo = std::max(begin, ch.offset);
      const std::int64_t hi = std::min(end, ch.offset + ch.header.samples);
      if (hi <= lo) continue;  // the window lies in this channel's alignment pad
      std::byte* dst = bytes + (static_cast<std::int64_t>(c) * n + lo - begin) * 4;
      // Each read opens its file: a network's hundreds of channels hold no descriptors between
      // reads, and reads from several threads share nothing.
      InputFile f = open_input_file(ch.path);
      const std::int64_t at = kSacHeaderBytes + (lo - ch.offset) * 4, count = (hi - lo) * 4;
      if (f.read_at(dst, count, at) != count)
        throw IoError(ch.path + ": truncated while reading: " + std::to_string(count) +
                      " bytes wanted at byte " + std::to_string(at));
      sac_samples_to_native(ch.header, dst, hi - lo);
    }
    return out;
  }

 private:
  std::string spec_;
  std::vector<Channel> channels_;
  std::int64_t length_;
};

}  // namespace

WindowedData open_seismic_windows(const std::string& spec) {
  const std::vector<std::string> paths = split_list(spec);
  WindowedData w;
  if (paths.size() == 1 && format_of(paths.front()) == Format::npy) {
    w.samples = npy_samples(paths.front());
    for (std::int64_t c = 0; c < w.samples->shape()[0]; ++c)
      w.info.channel_ids.push_back(std::to_string(c));
    w.info.source = spec;
    return w;
  }
  const bool sac = std::all_of(paths.begin(), paths.end(), [](const std::string& p) {
    return !p.empty() && format_of(p) == Format::sac;
  });
  if (!sac) return w;  // MiniSEED (records to merge), mixed lists and bad names: read whole
  std::vector<SacSamples::Channel> files;
  std::vector<detail::ChannelInfo> channels;
  for (const std::string& p : paths) {
    SacHeader h = read_sac_header(p);
    const Trace& t = h.sac.trace;
    // A file without samples is dropped by merging and a channel in several files is joined:
    // read whole, as one process does.
    if (h.samples == 0) return w;
    channels.push_back({t.id(), t.start_ns, trace_end_ns(t.start_ns, h.samples, t.sample_rate),
                        h.samples, t.sample_rate, true});
    files.push_back({p, std::move(h), 0});
  }
  std::vector<std::string> ids;
  for (const auto& c : channels) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return w;
  detail::Alignment a = detail::align_channels(channels, {}, spec);
  std::vector<SacSamples::Channel> sorted;
  for (std::size_t c = 0; c < a.order.size(); ++c) {
    sorted.push_back(std::move(files[a.order[c]]));
    sorted.back().offset = a.offsets[c];
  }
  w.samples = std::make_unique<SacSamples>(spec, std::move(sorted), a.length);
  w.info = std::move(a.info);
  return w;
}

}  // namespace halfscope::io

// Internal: how read_seismic_data lays the channels of waveform data side by side
// (seismic_input.cpp), shared with the reader of SAC data by windows (seismic_windows.cpp), which
// knows the channels from their headers alone; and the text helpers of DATA's list and of the
// pick tables that templates are cut with (template_cut.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/io/seismic_input.hpp"

namespace halfscope::io::detail {

/// `s` without the blanks (spaces, tabs, CR) around it.
std::string trim(std::string_view s);

/// The fields of `s` separated by `sep`, each trimmed (empty fields kept).
std::vector<std::string> split(std::string_view s, char sep);

/// `s` as a whole decimal integer, or nothing.
std::optional<std::int64_t> parse_int(const std::string& s);

/// Samples at `rate` Hz from `from_ns` to `to_ns`, as long double: exact enough for offsets of
/// days at kHz rates.
long double samples_between(std::int64_t from_ns, std::int64_t to_ns, double rate);

/// The fields of a comma-separated list, blanks around each trimmed (how read_seismic_data reads
/// DATA's list of files; empty fields kept).
std::vector<std::string> split_list(const std::string& spec);

/// What aligning needs of one channel's (merged) trace.
struct ChannelInfo {
  std::string id;
  std::int64_t start_ns = 0, end_ns = 0, samples = 0;
  double rate = 0.0;
  bool f32 = false;
};

/// The channels sorted by id, each at its offset in a common sample grid of `length` samples
/// starting at the earliest start; `info` holds every SeismicData field but `data` (the gaps
/// given, then each channel's alignment pads, and the notes).
struct Alignment {
  std::vector<std::size_t> order;     // indices into the channels, sorted by id
  std::vector<std::int64_t> offsets;  // per sorted channel
  std::int64_t length = 0;
  bool all_f32 = true;
  SeismicData info;
};

/// InvalidInput naming `source` for no channel, an id twice (segments that could not be
/// joined), rates that differ, or more than 2^28 samples from the earliest start to the latest
/// end.
Alignment align_channels(const std::vector<ChannelInfo>& channels, std::vector<Gap> gaps,
                         const std::string& source);

}  // namespace halfscope::io::detail

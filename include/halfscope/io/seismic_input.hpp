// Inputs of matched filtering: continuous multi-channel data and templates, read from .npy,
// MiniSEED or SAC files and checked so that every bad input is an InvalidInput naming the file,
// the field, what was expected and what was found.
//
// Data: one .npy file of shape (C, L) or (L), or one or more MiniSEED / SAC files (a comma-
// separated list; one SAC file is one channel). Waveform channels are ordered by their id
// (NET.STA.LOC.CHA), every segment of one id is merged with gaps zero-filled (overlaps keep the
// earlier segment's samples), and the channels are aligned on the earliest start time: a channel
// that starts later or ends sooner is zero-padded, and each gap and pad is listed in `gaps` so the
// caller can report it (zero-filled windows are flat and give CC = 0). Every channel must share
// one sampling rate (relative difference below 1e-6).
//
// Templates: a .npy file of shape (T, C, K) or (T, K), or cut from continuous data with a pick
// table (EQcorrscan-style templates): CSV rows `template, channel, start` where template is any
// label (templates are numbered in order of first appearance), channel is a channel id or a
// 0-based index, and start is an ISO-8601 UTC time (needs data with a start time) or a sample
// index. Each pick cuts K samples of that channel; channels a template does not list stay zero
// with weight 0, and the moveouts are each pick's offset from the template's earliest pick, so the
// network stack aligns the channels as the picks did.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/io/waveform.hpp"

namespace halfscope::io {

/// Continuous data ready for matched filtering.
struct SeismicData {
  /// (C, L): the .npy file's dtype as read; float64 for waveforms (float32 when every trace was
  /// float32, so no precision is invented and none is lost).
  Array data;
  /// One id per channel: "NET.STA.LOC.CHA" for waveforms, the row index ("0", "1", ...) for .npy.
  std::vector<std::string> channel_ids;
  /// Time of sample 0 (ns since the epoch, UTC) and the sampling rate (Hz), for waveforms only.
  std::optional<std::int64_t> start_ns;
  double sample_rate = 0.0;
  /// Every gap, overlap and alignment pad that was zero-filled or resolved (see Gap).
  std::vector<Gap> gaps;
  /// Human-readable notes for the user (for example a sub-sample start misalignment).
  std::vector<std::string> notes;
  /// The file(s) read, for messages.
  std::string source;

  /// Time of sample `index` as ns since the epoch; requires start_ns.
  [[nodiscard]] std::int64_t time_of_sample(std::int64_t index) const;
};

/// Reads DATA: a .npy path, or a comma-separated list of MiniSEED (.mseed, .miniseed, .ms) and
/// SAC (.sac) paths, laid out by open_seismic_windows and read as one window (every sample copied
/// once into the (C, L) array; a MiniSEED record is decoded once to check it, then once to read
/// it). Throws InvalidInput / IoError naming the file for every bad input: an
/// unknown extension, a .npy that is not 1-D or 2-D or holds no samples, a .npy in a list,
/// mismatched sampling rates, a channel that ends up empty.
SeismicData read_seismic_data(const std::string& spec);

/// DATA to be read by windows (what MPI ranks take: each reads only its share).
struct WindowedData {
  /// The samples, or null for a list that read_seismic_data refuses.
  std::unique_ptr<SampleSource> samples;
  /// Every SeismicData field but `data`, as read_seismic_data gives them.
  SeismicData info;
};

/// Opens DATA for reading by windows: a .npy file, or a list of SAC and MiniSEED files in any mix
/// (a channel may lie in several files of either kind), whose samples are then read as needed
/// and laid out exactly as read_seismic_data lays them out (records and files joined, gaps
/// zero-filled and overlaps dropped as merge_traces does, files without samples dropped, channels
/// by id, aligned on the earliest start, pads zero). Only headers are read here, but for
/// MiniSEED, whose records are each parsed and decoded once to check them (the file read in
/// pieces), and then again when a window needs them. `samples` is null for a list holding an
/// empty name or a file of another type (read_seismic_data then refuses it). IoError /
/// InvalidInput as read_seismic_data words them for an unknown file type, a bad .npy, SAC or
/// MiniSEED file, or rates that differ.
WindowedData open_seismic_windows(const std::string& spec);

/// Templates with the network parameters that come with them.
struct SeismicTemplates {
  Array templates;                  // (T, C, K) float32 or float64
  Array moveouts;                   // (T, C) int64, or empty when the source has none (.npy)
  Array weights;                    // (T, C) float64, or empty when the source has none (.npy)
  std::vector<std::string> labels;  // one per template: "0", "1", ... for .npy, else the CSV label
};

/// Reads a .npy of shape (T, C, K) or (T, K) (the latter becomes (T, 1, K)) with any real dtype:
/// float32 and float64 as stored, the other types as float64. Throws InvalidInput naming the file
/// when the rank or dtype is wrong, an extent is zero, or a value is not finite.
SeismicTemplates read_template_array(const std::filesystem::path& path);

/// Cuts templates of `length` samples from `source` with the pick table `picks` (see the top of
/// this file). Throws InvalidInput naming the table, its line and the field at fault: an unknown
/// channel, a time without a start time in the data, a window running outside the data, a
/// template listing the same channel twice, a flat (all-zero) cut, length < 1.
SeismicTemplates cut_templates(const SeismicData& source, const std::filesystem::path& picks,
                               std::int64_t length);

/// Templates cut from data read by windows (what MPI ranks use: each cuts only its template
/// group and computes only its group's rows of the network): `labels` are cut_templates' labels,
/// `templates` reads templates [a, b) by cutting each from one window of every channel (from its
/// earliest pick to its latest pick's end) read from `samples`, and `moveouts` / `weights` read
/// rows [a, b) of the (T, C) tables, each equal to those rows of cut_templates' templates
/// (float64), moveouts (int64) and weights (float64). The table is read line by line, parsed and
/// checked here with cut_templates' messages (each rank then holds its picks, not the T x C
/// tables); a flat cut is refused when its template is read. `info`: the data's fields but `data`
/// (open_seismic_windows' info). `samples` must outlive `templates`.
struct CutTemplateSource {
  std::vector<std::string> labels;
  std::unique_ptr<TemplateSource> templates;
  std::shared_ptr<const TableSource> moveouts, weights;
};
CutTemplateSource cut_template_source(const SeismicData& info, const SampleSource& samples,
                                      const std::filesystem::path& picks, std::int64_t length);

}  // namespace halfscope::io

// Seismic waveforms shared by the MiniSEED and SAC readers and writers: one Trace per contiguous
// segment of one channel, the gaps and overlaps between segments, and ISO-8601 UTC times.
//
// Times are integer nanoseconds since the Unix epoch (UTC, no leap seconds, like ObsPy's
// UTCDateTime.ns), so arithmetic on them is exact. A trace's sample k lies at
// start_ns + k * 1e9 / sample_rate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// One evenly sampled segment of one channel.
struct Trace {
  std::string network, station, location, channel;
  std::int64_t start_ns = 0;  // time of the first sample, ns since the Unix epoch (UTC)
  double sample_rate = 0.0;   // Hz
  Array data;                 // 1-D int32, float32 or float64, as stored in the file

  /// "NET.STA.LOC.CHA" (ObsPy's trace id; empty codes stay empty: "XX.ABC..BHZ").
  [[nodiscard]] std::string id() const;
  /// Number of samples (0 for an empty data array).
  [[nodiscard]] std::int64_t size() const noexcept { return data.empty() ? 0 : data.size(); }
  /// Time of the sample after the last one: start_ns + size() / sample_rate, rounded to the ns.
  [[nodiscard]] std::int64_t end_ns() const;
};

/// The time after `samples` samples at `rate` from `start_ns`, rounded to the ns (what
/// Trace::end_ns gives for a trace of that many samples); `start_ns` for a rate <= 0.
std::int64_t trace_end_ns(std::int64_t start_ns, std::int64_t samples, double rate);

/// A hole or an overlap between two consecutive segments of one channel.
///
/// For a gap (missing_samples > 0), [start_ns, end_ns) is the span with no data: start_ns is
/// where the next sample of the earlier segment would have been and end_ns is the first sample
/// of the later one. For an overlap (missing_samples < 0), [start_ns, end_ns) is the doubly
/// covered span: from the later segment's first sample to the end of the earlier one, and
/// -missing_samples samples of the later segment fall in it.
struct Gap {
  std::string id;
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t missing_samples = 0;  // negative for an overlap
};

/// Traces in the order their channels first appear, and the gaps and overlaps found between
/// consecutive segments of each channel.
struct Waveforms {
  std::vector<Trace> traces;
  std::vector<Gap> gaps;
};

/// Joins the segments of each channel.
///
/// Segments of one id are taken in order of start time. A segment that starts within half a
/// sample period of where the previous one ends, with the same sample rate (relative difference
/// below 1e-6) and dtype, is appended to it (a sub-sample misalignment is absorbed, not
/// resampled). Otherwise, with `fill_gaps_with_zero` false the segments stay apart; with it true a
/// gap is filled with zero samples and an overlap is resolved by keeping the earlier segment's
/// samples and dropping the later segment's overlapping ones (never averaging), so that each id
/// becomes one trace. Segments with a different rate or dtype are never joined. Every gap and
/// overlap met is returned in `gaps` (recomputed; the input's gaps are not copied), filled or not.
/// Segments without samples are dropped. Throws InvalidInput for a trace that is not 1-D or has a
/// non-positive rate, and when zero-filling would make a trace longer than 2^28 samples.
Waveforms merge_traces(const Waveforms& in, bool fill_gaps_with_zero);

/// "2019-01-01T00:00:00.000000Z": ISO-8601 UTC with `fraction_digits` (0..9) digits of seconds,
/// truncated toward the past. Years 0000..9999.
std::string format_iso8601(std::int64_t ns, int fraction_digits = 9);

/// Parses "YYYY-MM-DDTHH:MM:SS[.fraction][Z]" (a space may replace T; up to 9 fraction digits;
/// "Z" or no zone means UTC) into ns since the epoch. Throws InvalidInput naming the text.
std::int64_t parse_iso8601(std::string_view text);

/// ns since the epoch of a UTC calendar time (proleptic Gregorian; day_of_year is 1-based).
/// Fields are not range-checked here (callers validate what they read), but a year outside
/// 1677..2262 or a result outside int64 throws InvalidInput.
std::int64_t utc_to_ns(std::int64_t year, std::int64_t day_of_year, std::int64_t hour,
                       std::int64_t minute, std::int64_t second, std::int64_t nanosecond);

/// The UTC calendar fields of a time (month, day and day_of_year 1-based).
struct UtcFields {
  std::int64_t year, month, day, day_of_year, hour, minute, second, nanosecond;
};
/// The calendar fields of `ns` since the epoch, the inverse of utc_to_ns (any int64 works).
UtcFields ns_to_utc(std::int64_t ns);

}  // namespace halfscope::io

// Internal: what the preparation of matched-filtering data (prepare.cpp) takes from a whole
// channel, in pieces that ranks holding disjoint sample ranges of the channel can combine exactly
// (the MPI path, src/mpi/mfilter_data.cpp): the range of its values, its first non-finite sample,
// and its FP64 sum in a fixed order of blocks, then the factors that every sample is converted
// with. The one-process path runs the same pieces over the whole channel, so a rank's converted
// window equals the one-process data bit for bit.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::mfilter {

/// Samples per block of a channel's FP64 sum (full normalization's mean): each block of samples
/// [j kSumBlock, (j + 1) kSumBlock) is summed alone (block_sum), and the block sums then added
/// in block order, so any partition of a channel into whole blocks gives the same bits. 2^16
/// keeps a year of 100 Hz samples at 48k sums per channel while a day still spreads over 132.
inline constexpr std::int64_t kSumBlock = std::int64_t{1} << 16;

/// Data channels whose largest magnitude lies in [kDataBandLow, kDataBandHigh] are not scaled:
/// against unit-energy templates (|t| <= 1) their FP32 products stay below 2^32 K, far from
/// FP32's overflow, and above 2^-32 times a template sample, far above FP32's normal minimum
/// 2^-126 for every template sample that matters (|t| > 2^-60, i.e. 2^-60 relative to the
/// template's norm). Leaving them as they are keeps the caller's float32 values bit for bit and
/// lets device data be computed in place; outside the band the channel is scaled into [0.5, 1).
inline constexpr double kDataBandLow = 0x1p-32, kDataBandHigh = 0x1p+32;

/// The power of two 2^-e with max_abs * 2^-e in [0.5, 1), or 1 when max_abs is 0 or lies in
/// [lo, hi]: multiplying by it is exact in FP64 for every sample that stays a normal number
/// (every sample above 2^-1022 max_abs), so it changes no CC.
double power_of_two_outside(double max_abs, double lo, double hi);

/// What samples [first, first + n) of one channel say: their smallest and largest finite values
/// and their first non-finite sample (its index in the channel and its value; -1 when none).
struct RangeScan {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  std::int64_t first_bad = -1;
  double bad_value = 0;
  /// Adds the facts of another range of the same channel (either side of this one).
  void merge(const RangeScan& other) noexcept;
};

RangeScan scan_range(const float* x, std::int64_t n, std::int64_t first);
RangeScan scan_range(const double* x, std::int64_t n, std::int64_t first);

/// The FP64 sum of x[k] * pre over one block (n <= kSumBlock samples), in a fixed order (four
/// interleaved partial sums, then (s0 + s1) + (s2 + s3)): the same bits wherever it runs.
double block_sum(const float* x, std::int64_t n, double pre);
double block_sum(const double* x, std::int64_t n, double pre);

/// The exact power of two applied to a channel before its FP64 sum: 1 unless its largest
/// magnitude lies outside [2^-960, 2^960] (f64 data only), when it brings it into [0.5, 1), so
/// the sum cannot overflow.
double pre_factor(const RangeScan& whole);

/// How one channel's samples become the operands: s = (x * pre - mean) * post in FP64, rounded
/// once to the storage type. `mean` is the channel's FP64 mean of x * pre in full normalization
/// (0 in short); `post` the power of two that brings max |x * pre - mean| into [0.5, 1) when it
/// lies outside [2^-32, 2^32] (dispatch.hpp's band), else 1.
struct ChannelFactors {
  double pre = 1, mean = 0, post = 1;
  /// The removed mean in the scaled units (Prepared::channel_offsets).
  [[nodiscard]] double offset() const noexcept { return mean * post; }
  /// Whether any sample changes.
  [[nodiscard]] bool changes() const noexcept { return mean != 0 || pre * post != 1.0; }
};

/// Each channel's offset() (Prepared::channel_offsets).
std::vector<double> offsets_of(const std::vector<ChannelFactors>& factors);

/// The factors of a channel from its whole-channel range, pre and mean (x -> fl(x pre - mean) is
/// monotone, so the largest |x pre - mean| lies at the smallest or the largest x).
ChannelFactors channel_factors(const RangeScan& whole, double pre, double mean);

/// The scans of every row of `x` ((C, n), float32 or float64, C-contiguous) whose first sample is
/// sample `first` of its channel; channels in parallel.
std::vector<RangeScan> scan_rows(const Array& x, std::int64_t first);

/// Every row c of `x` ((C, n), float32 or float64, C-contiguous) converted with factors[c] into
/// the same row of `out` ((C, n), float32 or float64): out = fl((x * pre - mean) * post) in FP64
/// without contraction (the arithmetic device_shift_scale repeats on the GPU); channels in
/// parallel.
void convert_rows(const Array& x, const std::vector<ChannelFactors>& factors, Array& out);

/// The message for a non-finite data sample: matched_filter's own ("matched_filter: data: NaN
/// (nan) at channel c, sample k; ...") when `source` is empty, else the file's as the CLI's
/// readers word it ("FILE: channel c, sample k is NaN: expected finite data").
std::string bad_sample_message(const std::string& source, std::int64_t channel, std::int64_t sample,
                               double value);

}  // namespace halfscope::mfilter

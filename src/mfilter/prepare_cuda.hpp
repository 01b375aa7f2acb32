// Device side of dispatch's data preparation (prepare.cpp): per-channel statistics of device data
// in one pass, and the shift and power-of-two scaling applied on the device, so device data never
// travel to the host and back (CUDA builds only).
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::mfilter {

/// One channel's statistics over its samples as FP64 values: how many are NaN or infinite, the
/// smallest and largest finite value, and the compensated (Neumaier) sum of the values times the
/// channel's `pre` factor (exact powers of two).
struct DeviceChannelStats {
  std::int64_t non_finite = 0;
  double min = 0;
  double max = 0;
  double sum = 0;
};

/// Statistics of each channel of `data` (device, C-contiguous, f32 or f64, shape (C, L) or (L)),
/// computed on the device; `pre` holds one factor per channel (empty: all 1). Blocks until the C
/// records are on the host.
std::vector<DeviceChannelStats> device_channel_stats(const Array& data, std::int64_t channels,
                                                     std::int64_t samples,
                                                     const std::vector<double>& pre);

/// A new device array of `want` (f32 or f64) and shape (C, L) with, per channel c,
/// out = (x * pre[c] - mean[c]) * post[c] computed in FP64 (no contraction) and rounded once to
/// `want`: exactly prepare_data's host arithmetic. Queued on the legacy default stream.
Array device_shift_scale(const Array& data, std::int64_t channels, std::int64_t samples, DType want,
                         const std::vector<double>& pre, const std::vector<double>& mean,
                         const std::vector<double>& post);

}  // namespace halfscope::mfilter

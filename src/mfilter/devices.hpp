// Internal: matched filtering spread over several CUDA devices of one host (issue 9): the
// template groups, the per-device threads and the merge, for mfilter.cpp and detect_network.cpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mfilter {

/// [begin, end) template ranges for `parts` groups: contiguous, in order, covering 0..templates,
/// sizes differing by at most one; min(parts, templates) groups (none empty). InvalidInput for
/// templates < 1 or parts < 1.
std::vector<std::pair<std::int64_t, std::int64_t>> template_ranges(std::int64_t templates,
                                                                   std::int64_t parts);

/// Checks options.devices against the machine and the call: every index a CUDA device of this
/// host, a GPU method, host data when the call spreads over more than the data's own device.
/// InvalidInput naming the index, the count and what was found; Unsupported without CUDA.
void validate_devices(const std::vector<int>& devices, const Prepared& p);

#if HALFSCOPE_WITH_CUDA
/// run_cuda over options.devices (validated): one host thread per device on its template group,
/// the rows merged into one host array of p.out_shape.
Array run_cuda_devices(const Prepared& p, const std::vector<int>& devices);
/// detect_cuda over the devices: each group's detections with template indices made absolute,
/// in template order (what one device returns).
std::vector<Detection> detect_cuda_devices(const Prepared& p, const DetectOptions& detect,
                                           const std::vector<int>& devices);
#endif

}  // namespace halfscope::mfilter

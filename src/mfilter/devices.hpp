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
#include "mfilter/wgmma_plan.hpp"

namespace halfscope::mfilter {

/// Templates per group are multiples of this (but the last group's): the tensor kernel works on
/// tiles of 16 templates (kTemplatesPerTile, kernels/tensor_step.cuh) and stages each tile's data
/// from the tile's smallest moveout, so groups aligned to 16 give every tile the templates, hence
/// the staged samples and their FP16 scaling, that it has in a one-device call.
inline constexpr std::int64_t kGroupGranule = 16;
/// The granule of a call's template groups over devices: kWgmmaGroupTemplates where the call may
/// run the wgmma network kernel (the tensor method and wgmma_network_call), so every group
/// computes the whole call's rows with it; kGroupGranule otherwise.
std::int64_t group_granule(const Prepared& p);

/// The wgmma network kernel's longest template row K' over the whole call: 16 wgmma_group_ksteps,
/// the largest over its 64-template groups and channels.
std::int64_t wgmma_row_length(const Prepared& p);

/// The same over `rows` templates of (rows, C) moveouts and weights that start at a multiple of
/// 64 templates of the call: the largest over the call's 64-template groups among them (the
/// whole call's is the largest over its template groups so aligned).
std::int64_t wgmma_row_length(const std::int64_t* moveouts, const float* weights, std::int64_t rows,
                              std::int64_t C, std::int64_t K);

/// [begin, end) template ranges for `parts` groups: contiguous, in order, covering 0..templates,
/// each a multiple of `granule` templates but the last (which ends at `templates`), the counts of
/// granules differing by at most one; min(parts, ceil(templates / granule)) groups (none empty).
/// InvalidInput for templates, parts or granule < 1.
std::vector<std::pair<std::int64_t, std::int64_t>> template_ranges(std::int64_t templates,
                                                                   std::int64_t parts,
                                                                   std::int64_t granule = 1);

/// The largest moveout spread within a tile of kGroupGranule templates, over channels and tiles,
/// of the whole call: the tensor kernel tiles correlation time by it, so a template group run on
/// its own (over devices or MPI ranks) sets Prepared::tile_spread_floor to it to compute the
/// whole call's bits.
std::int64_t tile_moveout_spread(const Prepared& p);

/// The same over `rows` templates of (rows, C) moveouts that start at a multiple of
/// kGroupGranule templates of the call.
std::int64_t tile_moveout_spread(const std::int64_t* moveouts, std::int64_t rows, std::int64_t C);

/// Checks options.devices against the machine and the call: every index a CUDA device of this
/// host, a GPU method, and for device data only the device that holds them.
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
/// detect_candidates_cuda over the devices: every group's candidates, template indices made
/// absolute, group after group.
std::vector<Detection> candidates_cuda_devices(const Prepared& p, const DetectOptions& detect,
                                               const std::vector<int>& devices);
#endif

}  // namespace halfscope::mfilter

// GPU window statistics (backends.hpp: window_stats_cuda): 1 / sqrt(window energy) and, in full
// normalization, the window mean, for every window start of every channel, in FP64.
//
// Each thread owns a run of consecutive window starts: a compensated K-sum for the first, then
// add-one / drop-one FP64 updates (kernels/window_stats.cuh). Restarting per run keeps the
// running sums' drift to ~run * u64 of the largest energy in the run; windows whose energy is not
// well above that drift (quiet windows right after a loud burst) or near the flat threshold are
// recomputed directly, so flat decisions are the CPU reference's (window_stats.cpp), including
// the channel offsets that dispatch removed (Dims::channel_offsets). For K <= kTileMaxK (the fast
// path: 16-window runs, the block's samples staged in shared memory, first windows built from
// shared 16-sample segment sums, coalesced stores) the FP64 work is ~60-90 operations per window,
// ~17-25 us for 4.32e6 windows at Hopper's 64 FP64 operations per SM clock; measured on an
// H200 before the rare path was added (a few more operations per window): 47 us (was 140 us with
// 64-window runs reading global memory, which longer templates still use).
// Floors (one channel of 4.32e6 samples, K = 256): ~17-35 MB of DRAM traffic, ~8 us at 4.2 TB/s.
#include <algorithm>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/baseline_tuning.hpp"
#include "mfilter/kernels/window_stats.cuh"

namespace halfscope::mfilter {

void window_stats_cuda(const Dims& dims, const float* data, float* inv_norm, float* mean,
                       cudaStream_t stream) {
  const bool full = dims.normalize == MfNormalize::Full;
  if (dims.length < 1 || dims.samples < dims.length)
    throw InvalidInput("window_stats_cuda: expected 1 <= K <= L, found K = " +
                       std::to_string(dims.length) + ", L = " + std::to_string(dims.samples));
  if (full && mean == nullptr)
    throw InvalidInput("window_stats_cuda: full normalization needs the `mean` output, found null");
  const std::int64_t windows = dims.samples - dims.length + 1;
  if (dims.length <= kernels::kTileMaxK) {
    // Fast path: samples and segment sums staged in shared memory (window_stats.cuh).
    const std::int64_t tiles =
        dims.channels * ((windows + kernels::kTileWindows - 1) / kernels::kTileWindows);
    const std::int64_t smem = kernels::tile_shared_bytes(dims.length, full);
    kernels::window_stats_tile_kernel<<<
        cuda::grid_blocks(tiles * kernels::kTileThreads, kernels::kTileThreads, 8),
        kernels::kTileThreads, static_cast<std::size_t>(smem), stream>>>(
        data, dims.channels, dims.samples, dims.length, full, dims.channel_offsets, inv_norm,
        full ? mean : nullptr);
    HS_CHECK_LAUNCH();
    return;
  }
  const std::int64_t runs =
      dims.channels * ((windows + tuning::kWindowRun - 1) / tuning::kWindowRun);
  if (runs == 0) return;
  kernels::window_stats_kernel<<<cuda::grid_blocks(runs, tuning::kThreads, tuning::kBlocksPerSm),
                                 tuning::kThreads, 0, stream>>>(
      data, dims.channels, dims.samples, dims.length, tuning::kWindowRun, full,
      dims.channel_offsets, inv_norm, full ? mean : nullptr);
  HS_CHECK_LAUNCH();
}

}  // namespace halfscope::mfilter

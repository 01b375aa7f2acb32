// Internal: copies of large pageable arrays between the host and a device through pinned staging
// on several host threads (the data of a matched-filtering call spread over devices,
// mfilter/devices.cpp; a GPU rank's tiles, linalg/rank_kernels_cuda.cu).
#pragma once

#include <cstdint>

#include "halfscope/config.hpp"

namespace halfscope::cuda {

#if HALFSCOPE_WITH_CUDA
/// Copies `bytes` of pageable host memory `src` to device memory `dst` of the calling thread's
/// current device, and returns when they are there. A pageable cudaMemcpy is staged by the
/// driver on the calling thread alone: 0.52 GB took 78 ms on an H200 host (6.6 GB/s), as many
/// threads copying parts of it to one device took as long. Here `threads` host threads each copy
/// a contiguous part through two pinned blocks of their own (the pinned cache, pinned_pool.hpp),
/// one filling while the other's DMA runs: 16 threads took 14 ms (37 GB/s), 4 threads per device
/// on two devices 10 ms (bench/prototypes/upload_staging.cu, a stream per thread; the copies here
/// share one stream, which measured as fast in the library, docs/scaling.md).
void upload_staged(void* dst, const void* src, std::int64_t bytes, int threads);

/// The way back: `bytes` of device memory `src` (the calling thread's current device) into
/// pageable host memory `dst`, each thread's part through two pinned blocks (one's DMA runs while
/// the other is copied out); returns when they are there.
void download_staged(void* dst, const void* src, std::int64_t bytes, int threads);

/// The host threads a device's upload_staged gets when `devices` devices upload at once: the
/// host's hardware threads shared among them, from 1 to 8 each.
int staging_threads(int devices);
#endif

}  // namespace halfscope::cuda

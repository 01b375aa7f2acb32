// The tensor-core matched filter's scans of its inputs before the main kernel (tensor_cuda.cu):
// the data's maxima per segment and the templates' moveout spread per 16-template tile. Apart
// from tensor_operand.cuh because they are not templates: one translation unit defines them.
#pragma once

#include <cstdint>

#include "mfilter/kernels/tensor_tuning.hpp"

namespace halfscope::mfilter::tensor {

/// Bits of max |S| over each segment of `segment` samples of each channel (seg_max[c * segs + j]):
/// for non-negative floats the bit patterns order as the values, and inf / NaN lie above every
/// finite value, so an integer maximum keeps them and one comparison counts the segments that
/// hold any (into `bad`). One warp per segment, 8 samples per lane per pass.
__global__ void segment_max_kernel(const float* data, std::int64_t C, std::int64_t L,
                                   std::int64_t segs, int segment, unsigned* seg_max, int* bad) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < C * segs; w += warps) {
    const std::int64_t c = w / segs, j0 = (w % segs) * segment;
    const std::int64_t n = L - j0 < segment ? L - j0 : segment;
    const float* x = data + c * L + j0;
    unsigned m = 0;
    for (std::int64_t k = lane; k < n; k += 32) m = max(m, __float_as_uint(x[k]) & 0x7fffffffu);
    m = __reduce_max_sync(0xffffffffu, m);
    if (lane == 0) {
      seg_max[w] = m;
      if (m >= 0x7f800000u) atomicAdd(bad, 1);
    }
  }
}

/// Largest moveout spread (max - min over the real templates of one 16-template group, for one
/// channel) over all groups and channels: the main kernel shortens its output tiles by it so
/// that one tile of kTileLags window starts covers every template's shifted windows.
__global__ void moveout_spread_kernel(const std::int64_t* moveouts, std::int64_t T, std::int64_t C,
                                      std::int64_t groups, unsigned long long* spread) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       j < groups * C; j += stride) {
    const std::int64_t group = j / C, c = j % C;
    std::int64_t lo = moveouts[group * kTemplatesPerTile * C + c], hi = lo;
    for (std::int64_t t = group * kTemplatesPerTile + 1;
         t < T && t < (group + 1) * kTemplatesPerTile; ++t) {
      const std::int64_t m = moveouts[t * C + c];
      lo = m < lo ? m : lo;
      hi = m > hi ? m : hi;
    }
    atomicMax(spread, static_cast<unsigned long long>(hi - lo));
  }
}

}  // namespace halfscope::mfilter::tensor

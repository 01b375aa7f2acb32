// Internal: the tensor-core backend with per-phase timing, for the benchmark and the GPU tests
// (tensor_cuda of backends.hpp is this with no timing).
#pragma once

#include "halfscope/config.hpp"
#include "halfscope/core/precision.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::mfilter {

#if HALFSCOPE_WITH_CUDA
/// Milliseconds of each phase of one tensor_cuda call, from CUDA events on its stream:
/// window statistics (window_stats_cuda), template preparation (operands in fragment order) and
/// the correlation kernel itself (the part the floors in docs/mfilter-tensor.md are about).
struct TensorPhaseTimes {
  float window_stats_ms = 0;
  float prepare_ms = 0;
  float kernel_ms = 0;
};

/// How the kernel cuts a block's 16 x 512 tile among its warps (kernels/tensor_tuning.hpp):
/// Wide = 4 warps x 128 lags, Deep = 8 warps x 64 lags; the *Pairs variants stage the
/// observation as 64-bit operand pairs (Tiling::kPairs); Auto = the measured default.
enum class TensorTiling { Auto, Wide, Deep, WidePairs, DeepPairs };

/// tensor_cuda with a chosen tiling, and when `times` is not null the phase timings of this call.
void tensor_cuda_timed(const DeviceProblem& problem, Precision precision, TensorPhaseTimes* times,
                       TensorTiling tiling = TensorTiling::Auto);
#endif

}  // namespace halfscope::mfilter

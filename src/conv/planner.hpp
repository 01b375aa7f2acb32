// Internal: choosing and running a convolution method (the FFTW-style planner of method=auto).
#pragma once

#include "conv/geometry.hpp"
#include "conv/separable.hpp"
#include "core/env.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv {

// Heuristic thresholds (kernel width = max(krows, kcols)) used when Auto does not measure. The
// study found FFT overtaking direct methods between widths 35 and 50 on a Titan V. CPU: on
// 512x512 single, our direct loop against FFTW on 2 threads measured 1.2 / 3.8 ms at width 15,
// 4.4 / 5.1 ms at 31, 17.7 / 4.7 ms at 63 (Debian 12 build machine, 2026-11-21): crossover ~31.
// GPU: from `halfscope bench conv` (docs/performance.md).
inline constexpr std::int64_t kCpuDirectMaxWidth = 31;
inline constexpr std::int64_t kGpuRegisterMaxWidth = 15;
inline constexpr std::int64_t kGpuTensorMaxWidth = 63;

/// What Auto runs: a method and the precision it runs in. The precision differs from the one asked
/// for only where the storage is the same and the accuracy at least as good (single as split).
struct Plan {
  ConvMethod method;
  Precision precision;
};

/// The plan for `g` at precision `p` on `device` (Cpu or Cuda): the heuristic, or on the GPU with
/// `measure`, the fastest supported candidate timed (median of three) once per problem and cached.
/// `factors` (GPU only): the kernel's low-rank factors, which make Separable a candidate (the
/// heuristic takes it outright); the cache key holds their rank.
Plan plan_method(const Geometry& g, Precision p, DeviceKind device, bool measure,
                 const SeparableFactors* factors = nullptr);

/// Runs one method on storage-typed arrays (host for CPU methods, device for GPU methods);
/// `factors` are passed to Separable (null: it factors the kernel itself).
void run_method(ConvMethod m, const Geometry& g, Precision p, const Array& image,
                const Array& kernel, Array& out, const SeparableFactors* factors = nullptr);

}  // namespace halfscope::conv

// Constants shared by the FP64 statistics kernels (window_stats.cuh, template_stats.cuh).
#pragma once

namespace halfscope::mfilter::kernels {

/// FP64 unit roundoff, 2^-53: the rounding bounds of the flat rule are multiples of it.
inline constexpr double kU64 = 1.1102230246251565e-16;

}  // namespace halfscope::mfilter::kernels

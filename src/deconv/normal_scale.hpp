// Internal: the power-of-two scale of scaled_normal (solvers.hpp), shared by the host solvers and
// the CUDA backend's device-side CG step (backend_cuda_cg.cuh), so both pick the same e.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define HS_DECONV_HD __host__ __device__
#else
#define HS_DECONV_HD
#endif

namespace halfscope::deconv::detail {

/// t with 2^t ~ sqrt(||Q||): floor(log2(max(||Q||, 1)) / 2).
inline int normal_scale_bias(double norm_q) {
  return static_cast<int>(floor(log2(norm_q > 1.0 ? norm_q : 1.0) / 2));
}

/// e = 2^(ceil(log2 m) + t) for m = max|x| > 0 (1 for m == 0): x / e has max 2^-t, so Q (x / e)
/// peaks near sqrt(||Q||) too, both far inside FP16's range (6e-5 .. 65504) for any
/// ||Q|| < 2^30. The exponent is clamped to [-14, 14] so that 1 / e is itself a normal FP16
/// number (half rounds its scalars to FP16).
HS_DECONV_HD inline double normal_scale(double m, int t) {
  if (m == 0) return 1.0;
  int ex = 0;
  const double fr = frexp(m, &ex);
  int k = (fr == 0.5 ? ex - 1 : ex) + t;
  k = k < -14 ? -14 : (k > 14 ? 14 : k);
  return ldexp(1.0, k);
}

}  // namespace halfscope::deconv::detail

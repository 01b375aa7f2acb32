// Device code of the GPU covariance generator: the per-layer slope covariance terms of
// covariance_plan.hpp evaluated with the table structure function (vonkarman.cuh). Shared by the
// offset-table kernel and the direct path of the element kernel (covariance_elements.cuh).
//
// Floors of the direct evaluation (E-ELT Cmm, 60 layers): 4 structure functions per layer and
// element; the LGS x NGS blocks (20 of the 45 sensor-pair blocks of the lower triangle, 3.2e9
// elements) need 7.7e11 of them. One costs ~12 FP64 instructions (3 for q, 1 for s, 7 FMA of the
// polynomial, 1 to combine): 9.2e12, ~0.54 s at the H200's FP64 rate (34 TFLOP/s, FMA = 2 flops,
// so 17e12 instructions/s); and 8 coefficient loads, each at least one L1 wavefront per warp
// (128 B/clock/SM): 1.9e11 wavefronts, ~0.74 s at 132 SMs x 1.98 GHz. The loads are the floor;
// measured 1.66 s (2026-11-21, H200, 8 x 4 warps) means ~2.2 lines per load (lanes in different
// octaves). The ladder: interval-major table 3.8 s, degree-major 1.93 s, 8 x 4 warps 1.66 s.
#pragma once

#include <cstdint>

#include "ao/covariance_plan.hpp"
#include "ao/kernels/vonkarman.cuh"

namespace halfscope::ao::detail {

/// One layer as the kernels see it.
struct DevLayer {
  double weight = 0;  // cn2 k1 L0^(5/3): D_l(r) = weight G(q), with r0 = 1 m folded in by cn2
  double kq = 0;      // (2 pi / L0)^2: q = kq r^2
};

/// The structure function D / weight at separation (du, dv): G(kq (du^2 + dv^2)).
template <VkLayout L>
__device__ __forceinline__ double vk_g(double du, double dv, double kq, const double* table,
                                       const VonKarmanScalars& k) {
  return vonkarman_bracket_q<L>(kq * fma(du, du, dv * dv), table, k);
}

/// 2 x the xx term of covariance_plan.hpp (without the layer weight): along the first argument;
/// the yy term is the same with du and dv exchanged.
template <VkLayout L>
__device__ __forceinline__ double vk_parallel_term(double du, double dv, double s1, double s2,
                                                   double kq, const double* table,
                                                   const VonKarmanScalars& k) {
  const double hp = 0.5 * (s1 + s2);
  const double hm = 0.5 * (s1 - s2);
  return (vk_g<L>(du + hp, dv, kq, table, k) + vk_g<L>(du - hp, dv, kq, table, k)) -
         (vk_g<L>(du + hm, dv, kq, table, k) + vk_g<L>(du - hm, dv, kq, table, k));
}

/// 2 x the xy term: offsets hx on du, hy on dv (xy(i, j): hx = s1 / 2, hy = s2 / 2; yx(i, j) =
/// xy(j, i) is the same with hx = s2 / 2, hy = s1 / 2 at the same (du, dv), D being even).
template <VkLayout L>
__device__ __forceinline__ double vk_cross_term(double du, double dv, double hx, double hy,
                                                double kq, const double* table,
                                                const VonKarmanScalars& k) {
  return (vk_g<L>(du + hx, dv + hy, kq, table, k) + vk_g<L>(du - hx, dv - hy, kq, table, k)) -
         (vk_g<L>(du + hx, dv - hy, kq, table, k) + vk_g<L>(du - hx, dv + hy, kq, table, k));
}

/// Sum over layers of weight_l x (2 x term_l) for slopes (sensor a, pupil position (xp, yp), axis
/// ax_i) and (sensor b, (xq, yq), axis ax_j). `geom` is the plan's sensor_layer (sensor-major).
/// Layers one of the two sensors does not see (size 0) add nothing.
template <VkLayout L>
__device__ __forceinline__ double direct_layer_sum(const PlanSensorLayer* __restrict__ geom,
                                                   const DevLayer* __restrict__ layers, int nlayers,
                                                   int a, int b, double xp, double yp, double xq,
                                                   double yq, int ax_i, int ax_j,
                                                   const double* __restrict__ table,
                                                   const VonKarmanScalars& k) {
  const PlanSensorLayer* ga = geom + static_cast<std::int64_t>(a) * nlayers;
  const PlanSensorLayer* gb = geom + static_cast<std::int64_t>(b) * nlayers;
  double acc = 0.0;
  for (int l = 0; l < nlayers; ++l) {
    const double s1 = __ldg(&ga[l].size);
    const double s2 = __ldg(&gb[l].size);
    if (s1 == 0.0 || s2 == 0.0) continue;
    const double du = (__ldg(&ga[l].scale) * xp + __ldg(&ga[l].shift_x)) -
                      (__ldg(&gb[l].scale) * xq + __ldg(&gb[l].shift_x));
    const double dv = (__ldg(&ga[l].scale) * yp + __ldg(&ga[l].shift_y)) -
                      (__ldg(&gb[l].scale) * yq + __ldg(&gb[l].shift_y));
    const double kq = __ldg(&layers[l].kq);
    double t;
    if (ax_i == ax_j) {
      t = ax_i == 0 ? vk_parallel_term<L>(du, dv, s1, s2, kq, table, k)
                    : vk_parallel_term<L>(dv, du, s1, s2, kq, table, k);
    } else {
      t = ax_i == 0 ? vk_cross_term<L>(du, dv, 0.5 * s1, 0.5 * s2, kq, table, k)
                    : vk_cross_term<L>(du, dv, 0.5 * s2, 0.5 * s1, kq, table, k);
    }
    acc = fma(__ldg(&layers[l].weight), t, acc);
  }
  return acc;
}

}  // namespace halfscope::ao::detail

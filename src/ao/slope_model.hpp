// The per-element slope covariance model in FP64, shared by the CPU backend (covariance_cpu.cpp),
// the direct evaluation (covariance_entry) and the GPU backend (covariance_cuda.cu), so the three
// compute the same formula; each brings its own structure-function evaluator.
//
// A slope is the phase difference across its subaperture along its axis divided by the pupil
// subaperture size. For two slopes seen on one layer through footprints of sizes s1 and s2 whose
// centres are (du, dv) apart (first minus second), Cov(a - b, c - d) = [D(a - d) + D(b - c)
// - D(a - c) - D(b - d)] / 2 with a, b the ends of the first slope's baseline and c, d the ends of
// the second one's gives, in units of D (rad^2 at 500 nm for r0 = 1 m):
//   xx: a - d = du + (s1+s2)/2, b - c = du - (s1+s2)/2, a - c = du + (s1-s2)/2, b - d = du -
//   (s1-s2)/2 yy: the same offsets on dv xy: a - d = (du + s1/2, dv + s2/2), b - c = (du - s1/2, dv
//   - s2/2),
//       a - c = (du + s1/2, dv - s2/2), b - d = (du - s1/2, dv + s2/2)
// The structure function is even, so every term is unchanged by (du, dv) -> (-du, -dv): yx(i, j)
// = xy(j, i) is xy with the sizes swapped and the same (du, dv).
//
// The evaluator `d` is called as d(r, layer) with r >= 0 in metres and the layer's index, and
// returns the r0 = 1 m structure function of that layer (its outer scale is the evaluator's
// business, so a GPU evaluator can keep per-layer constants in registers).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define HS_AO_HOST_DEVICE __host__ __device__
#else
#define HS_AO_HOST_DEVICE
#endif

namespace halfscope::ao::detail {

/// The value of one layer's term and the sum of the absolute values of its four structure-function
/// terms (the scale against which its rounding error is measured: the terms cancel strongly when
/// the subapertures are far apart compared with their size).
struct SlopeTerm {
  double value = 0;
  double magnitude = 0;
};

/// D at the 2-D separation (a, b).
template <class D>
HS_AO_HOST_DEVICE inline double structure_at(double a, double b, std::int64_t layer, const D& d) {
  return d(std::sqrt(a * a + b * b), layer);
}

/// xx covariance term of one layer (without cn2 and the unit factor), see the header comment.
template <class D>
HS_AO_HOST_DEVICE inline SlopeTerm slope_xx(double du, double dv, double s1, double s2,
                                            std::int64_t layer, const D& d) {
  const double sum = 0.5 * (s1 + s2), diff = 0.5 * (s1 - s2);
  const double t1 = structure_at(du + sum, dv, layer, d), t2 = structure_at(du - sum, dv, layer, d);
  const double t3 = structure_at(du + diff, dv, layer, d);
  const double t4 = structure_at(du - diff, dv, layer, d);
  return {0.5 * ((t1 + t2) - (t3 + t4)), 0.5 * (t1 + t2 + t3 + t4)};
}

/// yy term: xx with the roles of the axes exchanged.
template <class D>
HS_AO_HOST_DEVICE inline SlopeTerm slope_yy(double du, double dv, double s1, double s2,
                                            std::int64_t layer, const D& d) {
  return slope_xx(dv, du, s1, s2, layer, d);
}

/// xy term: first slope along x (footprint s1), second along y (footprint s2).
template <class D>
HS_AO_HOST_DEVICE inline SlopeTerm slope_xy(double du, double dv, double s1, double s2,
                                            std::int64_t layer, const D& d) {
  const double h1 = 0.5 * s1, h2 = 0.5 * s2;
  const double t1 = structure_at(du + h1, dv + h2, layer, d);
  const double t2 = structure_at(du - h1, dv - h2, layer, d);
  const double t3 = structure_at(du + h1, dv - h2, layer, d);
  const double t4 = structure_at(du - h1, dv + h2, layer, d);
  return {0.5 * ((t1 + t2) - (t3 + t4)), 0.5 * (t1 + t2 + t3 + t4)};
}

/// The term of one layer for slope axes (axis1, axis2), 0 = x and 1 = y.
template <class D>
HS_AO_HOST_DEVICE inline SlopeTerm slope_term(int axis1, int axis2, double du, double dv, double s1,
                                              double s2, std::int64_t layer, const D& d) {
  if (axis1 == 0 && axis2 == 0) return slope_xx(du, dv, s1, s2, layer, d);
  if (axis1 == 1 && axis2 == 1) return slope_yy(du, dv, s1, s2, layer, d);
  if (axis1 == 0) return slope_xy(du, dv, s1, s2, layer, d);
  return slope_xy(du, dv, s2, s1, layer, d);  // yx(i, j) = xy(j, i), see the header comment
}

/// Geometry of one slope on one layer: its footprint centre and size (size <= 0: not seen).
struct SlopeOnLayer {
  double u = 0, v = 0, size = 0;
};

/// The two slopes of an element on one layer.
struct SlopePairOnLayer {
  SlopeOnLayer first, second;
};

/// The turbulent part of one covariance element: sum over the layers seen by both sensors of
/// cn2_l * term_l, times unit2 / (pitch1 * pitch2). `geometry(l)` returns the
/// SlopePairOnLayer of layer l and `cn2(l)` its strength. A layer that either sensor does not see
/// (footprint size <= 0: above its LGS) contributes nothing. Returns the value and the magnitude
/// of its terms in the same units.
template <class Geometry, class Cn2, class D>
HS_AO_HOST_DEVICE inline SlopeTerm slope_covariance(int axis1, int axis2, std::int64_t layers,
                                                    const Geometry& geometry, const Cn2& cn2,
                                                    double unit2, double pitch1, double pitch2,
                                                    const D& d) {
  SlopeTerm sum;
  for (std::int64_t l = 0; l < layers; ++l) {
    const auto g = geometry(l);
    if (!(g.first.size > 0.0) || !(g.second.size > 0.0)) continue;
    const SlopeTerm t = slope_term(axis1, axis2, g.first.u - g.second.u, g.first.v - g.second.v,
                                   g.first.size, g.second.size, l, d);
    sum.value += cn2(l) * t.value;
    sum.magnitude += cn2(l) * t.magnitude;
  }
  const double factor = unit2 / (pitch1 * pitch2);
  return {sum.value * factor, sum.magnitude * factor};
}

}  // namespace halfscope::ao::detail

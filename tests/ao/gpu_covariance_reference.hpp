// Host reference for the GPU covariance tests: one element of a plan by the formula of
// covariance_plan.hpp with the reference structure function (turbulence.hpp), written here from
// the formula (not through slope_model.hpp or the backends), with an error bound per element.
//
// Bound. The GPU and this reference differ by (i) the structure functions: the table's D is within
// 1.5e-15 of the reference (measured), the reference within 1.5e-14 of the true D at small x (its
// own stated limit), so 3e-14 D_k per term; (ii) the rounding of the separations: u_i - u_j is
// formed from positions of size |u| (pupil + shifts), each rounded to eps |u|, and the offset
// table path rebuilds the separation from the lattice (16 ulp of the pupil extent, checked by the
// backend), so an argument r_k moves by delta <= 32 eps (|u_i| + |u_j| + |v_i| + |v_j| + s1 + s2),
// which moves D_k by at most (5/3) D_k delta / r_k (d ln D / d ln r <= 5/3 for von Karman); (iii)
// the sums: 8 eps times the sum of |terms|. The covariance of distant subapertures is a strong
// cancellation of the four terms, so the bound is relative to their magnitude, not to the value.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "ao/covariance_plan.hpp"
#include "halfscope/ao/turbulence.hpp"

namespace halfscope::ao::test {

/// The value of an element and the bound on |GPU - value|.
struct RefElement {
  double value = 0;
  double bound = 0;
};

/// Sensor, subaperture (global index) and axis of slope `index` of one side.
struct RefSlope {
  std::int64_t sensor = 0, subaperture = 0;
  int axis = 0;
};

inline RefSlope ref_locate(const detail::CovariancePlan& plan, bool truth_side,
                           std::int64_t index) {
  const std::int64_t first = truth_side ? plan.truth() : 0;
  const std::int64_t last = truth_side ? plan.truth() + 1 : plan.truth();
  for (std::int64_t s = first; s < last; ++s) {
    const auto& ps = plan.sensors[static_cast<std::size_t>(s)];
    const std::int64_t local = index - ps.slope_offset;
    if (local >= 0 && local < 2 * ps.subapertures)
      return {s, ps.subaperture_offset + local % ps.subapertures,
              static_cast<int>(local / ps.subapertures)};
  }
  throw std::out_of_range("ref_locate: slope index outside the side");
}

inline RefElement reference_element(const detail::CovariancePlan& plan, CovarianceKind kind,
                                    std::int64_t row, std::int64_t col) {
  constexpr double eps = std::numeric_limits<double>::epsilon();
  const RefSlope si = ref_locate(plan, kind != CovarianceKind::cmm, row);
  const RefSlope sj = ref_locate(plan, kind == CovarianceKind::ctt, col);
  const auto nl = static_cast<std::int64_t>(plan.layers.size());
  const double xp = plan.x[static_cast<std::size_t>(si.subaperture)];
  const double yp = plan.y[static_cast<std::size_t>(si.subaperture)];
  const double xq = plan.x[static_cast<std::size_t>(sj.subaperture)];
  const double yq = plan.y[static_cast<std::size_t>(sj.subaperture)];
  double value = 0, bound = 0;
  for (std::int64_t l = 0; l < nl; ++l) {
    const auto& ga = plan.sensor_layer[static_cast<std::size_t>(si.sensor * nl + l)];
    const auto& gb = plan.sensor_layer[static_cast<std::size_t>(sj.sensor * nl + l)];
    const double s1 = ga.size, s2 = gb.size;
    if (!(s1 > 0) || !(s2 > 0)) continue;
    const double ui = ga.scale * xp + ga.shift_x, vi = ga.scale * yp + ga.shift_y;
    const double uj = gb.scale * xq + gb.shift_x, vj = gb.scale * yq + gb.shift_y;
    const double du = ui - uj, dv = vi - vj;
    // The four (offset, sign) of the term: a - d, b - c (+), a - c, b - d (-).
    double ox[4], oy[4];
    if (si.axis == sj.axis) {
      const double hp = 0.5 * (s1 + s2), hm = 0.5 * (s1 - s2);
      const double o[4] = {hp, -hp, hm, -hm};
      for (int k = 0; k < 4; ++k) {
        ox[k] = si.axis == 0 ? o[k] : 0.0;
        oy[k] = si.axis == 0 ? 0.0 : o[k];
      }
    } else {
      // xy(i, j): x offsets s1 / 2 (slope i's footprint), y offsets s2 / 2; yx swaps the sizes.
      const double hx = si.axis == 0 ? 0.5 * s1 : 0.5 * s2;
      const double hy = si.axis == 0 ? 0.5 * s2 : 0.5 * s1;
      const double px[4] = {hx, -hx, hx, -hx}, py[4] = {hy, -hy, -hy, hy};
      for (int k = 0; k < 4; ++k) {
        ox[k] = px[k];
        oy[k] = py[k];
      }
    }
    const double L0 = plan.layers[static_cast<std::size_t>(l)].outer_scale_m;
    const double cn2 = plan.layers[static_cast<std::size_t>(l)].cn2;
    const double delta =
        32.0 * eps * (std::fabs(ui) + std::fabs(uj) + std::fabs(vi) + std::fabs(vj) + s1 + s2);
    double sum = 0, err = 0;
    for (int k = 0; k < 4; ++k) {
      const double r = std::hypot(du + ox[k], dv + oy[k]);
      const double d = vonkarman_structure_function(r, 1.0, L0);
      sum += k < 2 ? d : -d;
      err += 3e-14 * d + 8.0 * eps * d + (r > 0 ? (5.0 / 3.0) * d * delta / r : 0.0);
    }
    value += cn2 * 0.5 * sum;
    bound += cn2 * 0.5 * err;
  }
  const double factor =
      detail::kSlopeUnit2 / (plan.sensors[static_cast<std::size_t>(si.sensor)].pitch_m *
                             plan.sensors[static_cast<std::size_t>(sj.sensor)].pitch_m);
  value *= factor;
  bound *= factor;
  if (plan.noise && si.sensor == sj.sensor) {
    double n = 0;
    if (si.axis == sj.axis) n += plan.sensors[static_cast<std::size_t>(si.sensor)].lgs_tiptilt;
    if (si.subaperture == sj.subaperture) {
      const auto p = static_cast<std::size_t>(si.subaperture);
      n += si.axis != sj.axis ? plan.noise_xy[p]
                              : (si.axis == 0 ? plan.noise_xx[p] : plan.noise_yy[p]);
    }
    value += n;
    bound += 4.0 * eps * std::fabs(n);
  }
  return {value, bound + 4.0 * eps * std::fabs(value)};
}

}  // namespace halfscope::ao::test

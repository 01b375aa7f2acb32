// One covariance element of a plan by the direct evaluation (slope_model.hpp), with any
// structure-function evaluator: the fast one in the CPU backend, the reference one in
// covariance_entry. Host code only.
#pragma once

#include <cstddef>

#include "ao/covariance_plan.hpp"
#include "ao/slope_model.hpp"

namespace halfscope::ao::detail {

/// The noise of element (i, j) of a plan (0 unless both slopes belong to the same sensor and
/// the plan's noise is on): the subaperture's variances on its diagonal, the LGS tip-tilt constant
/// on every xx / yy entry of an LGS block. The truth sensor's noise is zero in the plan (Ctt is
/// noise-free).
inline double plan_noise(const CovariancePlan& plan, const SlopeRef& i, const SlopeRef& j) {
  if (!plan.noise || i.sensor != j.sensor) return 0.0;
  const PlanSensor& s = plan.sensors[static_cast<std::size_t>(i.sensor)];
  double value = 0.0;
  if (i.axis == j.axis) value += s.lgs_tiptilt;
  if (i.subaperture == j.subaperture) {
    const auto k = static_cast<std::size_t>(s.subaperture_offset + i.subaperture);
    value +=
        i.axis != j.axis ? plan.noise_xy[k] : (i.axis == 0 ? plan.noise_xx[k] : plan.noise_yy[k]);
  }
  return value;
}

/// The turbulent part of element (i, j) by the direct sum over layers; `d(r, layer)` is the
/// r0 = 1 m structure function of that layer. Returns the value and the magnitude of its terms.
template <class D>
SlopeTerm plan_turbulence(const CovariancePlan& plan, const SlopeRef& i, const SlopeRef& j,
                          const D& d) {
  const auto layers = static_cast<std::int64_t>(plan.layers.size());
  const PlanSensor& a = plan.sensors[static_cast<std::size_t>(i.sensor)];
  const PlanSensor& b = plan.sensors[static_cast<std::size_t>(j.sensor)];
  const auto p = static_cast<std::size_t>(a.subaperture_offset + i.subaperture);
  const auto q = static_cast<std::size_t>(b.subaperture_offset + j.subaperture);
  const PlanSensorLayer* ga = &plan.sensor_layer[static_cast<std::size_t>(i.sensor * layers)];
  const PlanSensorLayer* gb = &plan.sensor_layer[static_cast<std::size_t>(j.sensor * layers)];
  const auto geometry = [&](std::int64_t l) {
    const PlanSensorLayer& g1 = ga[l];
    const PlanSensorLayer& g2 = gb[l];
    return SlopePairOnLayer{
        {g1.scale * plan.x[p] + g1.shift_x, g1.scale * plan.y[p] + g1.shift_y, g1.size},
        {g2.scale * plan.x[q] + g2.shift_x, g2.scale * plan.y[q] + g2.shift_y, g2.size}};
  };
  const auto cn2 = [&](std::int64_t l) { return plan.layers[static_cast<std::size_t>(l)].cn2; };
  return slope_covariance(i.axis, j.axis, layers, geometry, cn2, kSlopeUnit2, a.pitch_m, b.pitch_m,
                          d);
}

}  // namespace halfscope::ao::detail

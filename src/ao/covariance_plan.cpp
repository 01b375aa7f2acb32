// The flattened system both covariance backends consume (src/ao/covariance_plan.hpp).
//
// Geometry, following the MOAO conventions (ecrc/moao tomo_struct.cpp, projectedSubap): a
// subaperture of grid position (x0, y0) is rotated by the lenslet angle (x = x0 cos - y0 sin,
// y = x0 sin + y0 cos), shifted by the pupil shift (valid_subapertures), then seen on layer l at
// (1 - h_l / H) (x, y) + h_l (alpha_x, alpha_y), alpha in radians, 1 / H = 0 for an NGS.
#include "ao/covariance_plan.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ao/noise.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

constexpr double kArcsecPerRadian = 206265.0;

PlanSensor plan_sensor(const AoSystem& system, const Sensor& sensor, std::int64_t slope_offset,
                       std::int64_t subaperture_offset, std::int64_t subapertures, bool noise) {
  PlanSensor s;
  s.slope_offset = slope_offset;
  s.subaperture_offset = subaperture_offset;
  s.subapertures = subapertures;
  s.pitch_m = system.diameter_m / sensor.subapertures;
  s.lgs = sensor.guide_star == GuideStar::lgs;
  s.lgs_tiptilt = noise && s.lgs ? sensor.lgs_tiptilt_arcsec2 : 0.0;
  s.grid = sensor.subapertures;
  s.rotation_rad = sensor.rotation_deg * (3.14159265358979323846 / 180.0);
  s.pupil_shift_x_m = sensor.pupil_shift_x_m;
  s.pupil_shift_y_m = sensor.pupil_shift_y_m;
  return s;
}

}  // namespace

CovariancePlan make_covariance_plan(const AoSystem& system, bool noise) {
  validate(system, "covariance: system '" + system.name + "'");
  CovariancePlan plan;
  plan.noise = noise && system.noise.enabled;

  std::vector<const Sensor*> sensors;
  for (const Sensor& s : system.sensors) sensors.push_back(&s);
  sensors.push_back(&system.truth);

  std::int64_t slope_offset = 0, subaperture_offset = 0;
  for (std::size_t k = 0; k < sensors.size(); ++k) {
    const Sensor& sensor = *sensors[k];
    const bool truth = k + 1 == sensors.size();
    const std::vector<Subaperture> subs = valid_subapertures(system, sensor);
    const auto count = static_cast<std::int64_t>(subs.size());
    // The truth sensor's slopes are rows / columns of their own matrix side: they start at 0.
    // The truth slopes stand for the noise-free turbulence in the target direction, so the truth
    // sensor carries no noise (zeros here, no LGS tip-tilt): Ctt is noise-free. MOAO adds the
    // truth sensor's noise to Ctt; that only offsets diag(Cee) by a constant independent of the
    // reconstructor, and inflated the tomographic error (+22 % trace(Cee) on preset check).
    plan.sensors.push_back(plan_sensor(system, sensor, truth ? 0 : slope_offset, subaperture_offset,
                                       count, plan.noise && !truth));
    for (const Subaperture& sub : subs) {
      plan.x.push_back(sub.x_m);
      plan.y.push_back(sub.y_m);
      plan.column.push_back(sub.column);
      plan.row.push_back(sub.row);
    }
    std::vector<SubapertureNoise> n(subs.size());
    if (plan.noise && !truth) n = sensor_noise(system, sensor, subs);
    for (const SubapertureNoise& v : n) {
      plan.noise_xx.push_back(v.xx);
      plan.noise_yy.push_back(v.yy);
      plan.noise_xy.push_back(v.xy);
    }
    slope_offset += truth ? 0 : 2 * count;
    subaperture_offset += count;
  }

  const double r0_power = std::pow(system.atmosphere.r0_m, -5.0 / 3.0);
  for (const Layer& layer : system.atmosphere.layers) {
    PlanLayer l;
    l.cn2 = layer.fraction * r0_power;
    l.outer_scale_m = layer.outer_scale_m;
    const auto it =
        std::find(plan.outer_scales.begin(), plan.outer_scales.end(), layer.outer_scale_m);
    l.outer_scale_group = static_cast<int>(it - plan.outer_scales.begin());
    if (it == plan.outer_scales.end()) plan.outer_scales.push_back(layer.outer_scale_m);
    plan.layers.push_back(l);
  }

  for (std::size_t k = 0; k < sensors.size(); ++k) {
    const Sensor& sensor = *sensors[k];
    const PlanSensor& ps = plan.sensors[k];
    for (const Layer& layer : system.atmosphere.layers) {
      PlanSensorLayer g;
      // The cone effect: an LGS at altitude H sees a layer at h through a footprint shrunk by
      // 1 - h / H; above the LGS (scale <= 0) the layer is not seen at all.
      g.scale = ps.lgs ? 1.0 - layer.altitude_m / sensor.lgs_altitude_m : 1.0;
      g.shift_x = layer.altitude_m * sensor.x_arcsec / kArcsecPerRadian;
      g.shift_y = layer.altitude_m * sensor.y_arcsec / kArcsecPerRadian;
      g.size = g.scale > 0.0 ? ps.pitch_m * g.scale : 0.0;
      plan.sensor_layer.push_back(g);
    }
  }
  return plan;
}

std::int64_t plan_slopes(const CovariancePlan& plan, bool truth_side) noexcept {
  if (truth_side) return 2 * plan.sensors.back().subapertures;
  std::int64_t n = 0;
  for (std::int64_t s = 0; s < plan.truth(); ++s)
    n += 2 * plan.sensors[static_cast<std::size_t>(s)].subapertures;
  return n;
}

void check_covariance_target(const CovariancePlan& plan, const CovarianceTarget& target,
                             const char* who) {
  const std::string kind(covariance_kind_name(target.kind));
  const std::string where = std::string(who) + ": " + kind + " target ";
  if (target.dtype != DType::f32 && target.dtype != DType::f64)
    throw InvalidInput(where + "dtype must be float32 or float64, found " +
                       std::string(dtype_name(target.dtype)));
  const std::int64_t rows = plan_slopes(plan, target.kind != CovarianceKind::cmm);
  const std::int64_t cols = plan_slopes(plan, target.kind == CovarianceKind::ctt);
  const auto shape = [](std::int64_t r, std::int64_t c) {
    return std::to_string(r) + " x " + std::to_string(c);
  };
  if (target.rows != rows || target.cols != cols)
    throw InvalidInput(where + "must be " + shape(rows, cols) + " (the system's slopes), found " +
                       shape(target.rows, target.cols));
  const bool row_range = target.row_begin != 0 || target.row_end >= 0;
  if (row_range && (target.tiles != nullptr || target.kind != CovarianceKind::ctm))
    throw InvalidInput(where + "row range [" + std::to_string(target.row_begin) + ", " +
                       std::to_string(target.row_end) +
                       ") expected only for a dense ctm target, found a " +
                       (target.tiles != nullptr ? "tiled" : "dense") + " " + kind + " one");
  const std::int64_t row_end = target.row_end < 0 ? rows : target.row_end;
  if (target.row_begin < 0 || target.row_begin > row_end || row_end > rows)
    throw InvalidInput(where + "row range must lie in [0, " + std::to_string(rows) + "], found [" +
                       std::to_string(target.row_begin) + ", " + std::to_string(row_end) + ")");
  if (target.tile_data != nullptr && target.tiles == nullptr)
    throw InvalidInput(where + "tile pointers (tile_data) expected with a tile layout, found none");
  if (target.data == nullptr && target.tile_data == nullptr &&
      (row_end - target.row_begin) * cols > 0)
    throw InvalidInput(where + "data must not be null");
  if (target.tiles == nullptr) return;
  const linalg::TileLayout& t = *target.tiles;
  if (t.rows() != rows || t.cols() != cols)
    throw InvalidInput(where + "tile layout must be " + shape(rows, cols) + ", found " +
                       shape(t.rows(), t.cols()));
  // Only the lower tiles of a symmetric kind are computed: a full layout would keep its upper
  // off-diagonal tiles uninitialised, so it is refused rather than half written.
  const bool symmetric = target.kind != CovarianceKind::ctm;
  const linalg::TileFill want = symmetric ? linalg::TileFill::lower : linalg::TileFill::full;
  if (t.fill() != want)
    throw InvalidInput(where + "tile layout must have " + (symmetric ? "lower" : "full") +
                       " fill, found " + (t.fill() == linalg::TileFill::lower ? "lower" : "full"));
}

SlopeRef locate_slope(const CovariancePlan& plan, bool truth_side, std::int64_t index) {
  const std::int64_t truth = plan.truth();
  const std::int64_t first = truth_side ? truth : 0, last = truth_side ? truth + 1 : truth;
  for (std::int64_t s = first; s < last; ++s) {
    const PlanSensor& ps = plan.sensors[static_cast<std::size_t>(s)];
    const std::int64_t local = index - ps.slope_offset;
    if (local >= 0 && local < 2 * ps.subapertures)
      return {s, local % ps.subapertures, static_cast<int>(local / ps.subapertures)};
  }
  if (last <= first) throw InvalidInput("covariance: the system has no measuring sensor");
  const PlanSensor& end = plan.sensors[static_cast<std::size_t>(last - 1)];
  throw InvalidInput("covariance: slope index " + std::to_string(index) + " is outside the " +
                     (truth_side ? "truth" : "measurement") + " slopes [0, " +
                     std::to_string(end.slope_offset + 2 * end.subapertures) + ")");
}

}  // namespace halfscope::ao::detail

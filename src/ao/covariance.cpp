// Covariance matrices of wavefront-sensor slopes: validation, allocation and dispatch
// (include/halfscope/ao/covariance.hpp). The model is in covariance_plan.hpp / slope_model.hpp,
// the noise in noise.cpp, the CPU backend in covariance_cpu.cpp, the GPU one in
// covariance_cuda.cu.
#include "halfscope/ao/covariance.hpp"

#include <cmath>
#include <string>

#include "ao/covariance_plan.hpp"
#include "ao/plan_element.hpp"
#include "halfscope/ao/turbulence.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao {
namespace {

bool symmetric(CovarianceKind kind) {
  return kind != CovarianceKind::ctm;
}
bool rows_are_truth(CovarianceKind kind) {
  return kind != CovarianceKind::cmm;
}
bool cols_are_truth(CovarianceKind kind) {
  return kind == CovarianceKind::ctt;
}

void check_options(const CovarianceOptions& options, const char* fn) {
  if (options.dtype != DType::f32 && options.dtype != DType::f64)
    throw InvalidInput(std::string(fn) + ": option 'dtype' must be float32 or float64, found " +
                       std::string(dtype_name(options.dtype)));
}

/// Where the computation runs: the GPU only when this build has CUDA and a device is usable.
DeviceKind backend(const CovarianceOptions& options) {
  return resolve_device(options.device);
}

/// Runs the chosen backend on `target`, whose data lives in `memory`. The CPU backend computes on
/// the host (into `host_scratch` when the result must live on a device).
void run_backend(const detail::CovariancePlan& plan, detail::CovarianceTarget target,
                 DeviceKind device) {
  if (device == DeviceKind::Cuda) {
#if HALFSCOPE_WITH_CUDA
    detail::covariance_cuda(plan, target);
    return;
#else
    throw Unsupported("covariance: this halfscope was built without CUDA; use device cpu");
#endif
  }
  detail::covariance_cpu(plan, target);
}

/// Fills `out` (host, pinned or device memory) through the backend; a backend whose memory does
/// not match computes into a scratch array that is then copied.
template <class Fill>
void fill_in(Array& out, DeviceKind device, const Fill& fill) {
  const bool want_device = out.on_device();
  const bool gpu = device == DeviceKind::Cuda;
  if (want_device == gpu) {
    fill(out.data());
    return;
  }
  Array scratch(out.dtype(), out.shape(), gpu ? Memory::device : Memory::host);
  fill(scratch.data());
  out = scratch.to(out.memory());
}

}  // namespace

std::string_view covariance_kind_name(CovarianceKind kind) noexcept {
  switch (kind) {
    case CovarianceKind::cmm:
      return "cmm";
    case CovarianceKind::ctm:
      return "ctm";
    case CovarianceKind::ctt:
      return "ctt";
  }
  return "?";
}

CovarianceKind parse_covariance_kind(std::string_view text, std::string_view field) {
  for (const CovarianceKind k : {CovarianceKind::cmm, CovarianceKind::ctm, CovarianceKind::ctt})
    if (text == covariance_kind_name(k)) return k;
  throw InvalidInput(std::string(field) + ": expected one of cmm, ctm, ctt, found '" +
                     std::string(text) + "'");
}

std::vector<Subaperture> valid_subapertures(const AoSystem& system, const Sensor& sensor) {
  if (sensor.subapertures < 1)
    throw InvalidInput("valid_subapertures: sensor '" + sensor.name +
                       "' subapertures must be >= 1, found " + std::to_string(sensor.subapertures));
  const int n = sensor.subapertures;
  const double d = system.diameter_m / n;
  const double outer2 = 0.25 * system.diameter_m * system.diameter_m;
  const double inner = 0.5 * system.diameter_m * system.obstruction;
  const double inner2 = inner * inner;
  const double angle = sensor.rotation_deg * (3.14159265358979323846 / 180.0);
  const double c = std::cos(angle), s = std::sin(angle);
  std::vector<Subaperture> out;
  for (int row = 0; row < n; ++row) {
    const double y0 = -0.5 * system.diameter_m + d * (row + 0.5);
    for (int col = 0; col < n; ++col) {
      const double x0 = -0.5 * system.diameter_m + d * (col + 0.5);
      const double r2 = x0 * x0 + y0 * y0;
      if (r2 < inner2 || r2 >= outer2) continue;
      out.push_back({x0 * c - y0 * s + sensor.pupil_shift_x_m,
                     x0 * s + y0 * c + sensor.pupil_shift_y_m, col, row});
    }
  }
  return out;
}

std::int64_t covariance_rows(const AoSystem& system, CovarianceKind kind) {
  if (rows_are_truth(kind))
    return 2 * static_cast<std::int64_t>(valid_subapertures(system, system.truth).size());
  std::int64_t n = 0;
  for (const Sensor& s : system.sensors)
    n += 2 * static_cast<std::int64_t>(valid_subapertures(system, s).size());
  return n;
}

std::int64_t covariance_cols(const AoSystem& system, CovarianceKind kind) {
  return covariance_rows(system, cols_are_truth(kind) ? CovarianceKind::ctt : CovarianceKind::cmm);
}

Array covariance(const AoSystem& system, CovarianceKind kind, const CovarianceOptions& options) {
  check_options(options, "covariance");
  const detail::CovariancePlan plan = detail::make_covariance_plan(system, options.noise);
  const DeviceKind device = backend(options);
  const std::int64_t rows = covariance_rows(system, kind), cols = covariance_cols(system, kind);
  Array out(options.dtype, {rows, cols}, options.memory);
  fill_in(out, device, [&](void* data) {
    run_backend(plan, {kind, options.dtype, data, rows, cols, nullptr}, device);
  });
  return out;
}

linalg::TileMatrix covariance_tiles(const AoSystem& system, CovarianceKind kind, std::int64_t nb,
                                    const CovarianceOptions& options) {
  check_options(options, "covariance_tiles");
  if (nb < 1)
    throw InvalidInput("covariance_tiles: argument 'nb' (tile size) must be >= 1, found " +
                       std::to_string(nb));
  const detail::CovariancePlan plan = detail::make_covariance_plan(system, options.noise);
  const DeviceKind device = backend(options);
  const std::int64_t rows = covariance_rows(system, kind), cols = covariance_cols(system, kind);
  linalg::TileMatrix out(
      linalg::TileLayout(rows, cols, nb,
                         symmetric(kind) ? linalg::TileFill::lower : linalg::TileFill::full),
      options.dtype, options.memory);
  fill_in(out.storage, device, [&](void* data) {
    run_backend(plan, {kind, options.dtype, data, rows, cols, &out.layout}, device);
  });
  return out;
}

namespace detail {

double covariance_entry(const CovariancePlan& plan, CovarianceKind kind, std::int64_t row,
                        std::int64_t col) {
  const std::int64_t rows = plan_slopes(plan, rows_are_truth(kind));
  const std::int64_t cols = plan_slopes(plan, cols_are_truth(kind));
  const std::string name(covariance_kind_name(kind));
  if (row < 0 || row >= rows)
    throw InvalidInput("covariance_entry: argument 'row' must lie in [0, " + std::to_string(rows) +
                       ") for " + name + ", found " + std::to_string(row));
  if (col < 0 || col >= cols)
    throw InvalidInput("covariance_entry: argument 'col' must lie in [0, " + std::to_string(cols) +
                       ") for " + name + ", found " + std::to_string(col));
  const SlopeRef i = locate_slope(plan, rows_are_truth(kind), row);
  const SlopeRef j = locate_slope(plan, cols_are_truth(kind), col);
  // The reference structure function of turbulence.hpp (r0 = 1 m), independent of the fast
  // evaluator the backends use.
  const auto reference = [&](double r, std::int64_t layer) {
    return vonkarman_structure_function(r, 1.0,
                                        plan.layers[static_cast<std::size_t>(layer)].outer_scale_m);
  };
  return plan_turbulence(plan, i, j, reference).value + plan_noise(plan, i, j);
}

}  // namespace detail

double covariance_entry(const AoSystem& system, CovarianceKind kind, std::int64_t row,
                        std::int64_t col, bool noise) {
  return detail::covariance_entry(detail::make_covariance_plan(system, noise), kind, row, col);
}

}  // namespace halfscope::ao

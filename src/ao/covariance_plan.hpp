// What the covariance backends (CPU: covariance_cpu.cpp, GPU: covariance_cuda.cu) are handed: the
// system flattened into plain arrays, so both compute exactly the same model from the same numbers
// (public model: include/halfscope/ao/covariance.hpp). Built once per call by make_covariance_plan.
//
// Element (i, j) of a covariance: slope i belongs to plan sensor a (measurement sensors first, the
// truth sensor last), subaperture p, axis x or y; slope j to sensor b, subaperture q. For layer l
// with projected geometry g_al = sensor_layer[a * layers + l] (and g_bl):
//   u_i = g_al.scale * x[p] + g_al.shift_x,  v_i = g_al.scale * y[p] + g_al.shift_y  (metres)
//   du = u_i - u_j, dv = v_i - v_j, s1 = g_al.size, s2 = g_bl.size (0 when inactive: no term)
//   xx: [ D(du + (s1+s2)/2, dv) + D(du - (s1+s2)/2, dv) - D(du + (s1-s2)/2, dv)
//        - D(du - (s1-s2)/2, dv) ] / 2
//   yy: the same with the offsets on dv
//   xy: [ D(du + s1/2, dv + s2/2) + D(du - s1/2, dv - s2/2) - D(du + s1/2, dv - s2/2)
//        - D(du - s1/2, dv + s2/2) ] / 2            (yx(i, j) = xy(j, i))
// where D(a, b) = D_1(sqrt(a^2 + b^2); L0_l), the r0 = 1 m von Karman structure function; then
//   cov = lambda2 / (sensor[a].pitch_m * sensor[b].pitch_m) * sum_l cn2_l * term_l
// plus, when a == b and the noise is on: noise_xx/yy/xy[subaperture offset + p] on the diagonal
// (p == q; xy on the (x_p, y_p) and (y_p, x_p) entries), and lgs_tiptilt on every xx and yy entry.
// The truth sensor's noise arrays are zeros and its lgs_tiptilt 0: Ctt is noise-free (the truth
// slopes are the turbulence in the target direction; see covariance_plan.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/ao/covariance.hpp"

namespace halfscope::ao::detail {

/// (lambda / 2 pi)^2 with lambda = 0.5 um in arcsec (206265 x 0.5e-6): turns the r0 = 1 m,
/// 500 nm structure function (rad^2 of phase) into arcsec^2 of angle of arrival x m^2.
inline constexpr double kSlopeUnit2 = (206265.0 * 0.5e-6 / (2.0 * 3.14159265358979323846)) *
                                      (206265.0 * 0.5e-6 / (2.0 * 3.14159265358979323846));

/// One sensor of the plan.
struct PlanSensor {
  std::int64_t slope_offset = 0;        // first row / column of this sensor in its matrix
  std::int64_t subaperture_offset = 0;  // first index of its subapertures in x / y / noise arrays
  std::int64_t subapertures = 0;        // valid subapertures (the sensor has 2x as many slopes)
  double pitch_m = 0;                   // pupil-plane subaperture size d = D / Nssp
  double lgs_tiptilt = 0;               // arcsec^2 added to every xx / yy entry of its own block
  bool lgs = false;
  // Added by aocov: the lenslet grid, so a backend can recognise two sensors whose subaperture
  // offsets are grid offsets (same grid, pitch and rotation) and tabulate by offset.
  int grid = 0;             // subapertures across (Nssp)
  double rotation_rad = 0;  // lenslet-array rotation
  double pupil_shift_x_m = 0, pupil_shift_y_m = 0;
};

/// Geometry of one sensor on one layer.
struct PlanSensorLayer {
  double scale = 0;    // 1 - h / H (1 for an NGS); <= 0 above the LGS: the layer is not seen
  double shift_x = 0;  // h * alpha_x (metres on the layer)
  double shift_y = 0;
  double size = 0;  // subaperture size on the layer, pitch * scale (0 when not seen)
};

/// One layer.
struct PlanLayer {
  double cn2 = 0;             // fraction * r0^(-5/3), r0 at 500 nm (metres^(-5/3))
  double outer_scale_m = 0;   // L0
  int outer_scale_group = 0;  // index into the plan's distinct L0 values
};

/// The flattened system.
struct CovariancePlan {
  std::vector<PlanSensor> sensors;  // measuring sensors, then the truth sensor (last)
  std::vector<PlanLayer> layers;
  std::vector<double> outer_scales;           // the distinct L0 values
  std::vector<PlanSensorLayer> sensor_layer;  // sensors.size() x layers.size(), sensor-major
  std::vector<double> x, y;                   // subaperture centres in the pupil (m), all sensors
  std::vector<int> column, row;               // their grid indices (added by aocov)
  std::vector<double> noise_xx, noise_yy, noise_xy;  // per subaperture, arcsec^2 (0 without noise)
  bool noise = true;

  /// Index of the truth sensor in `sensors`.
  [[nodiscard]] std::int64_t truth() const noexcept {
    return static_cast<std::int64_t>(sensors.size()) - 1;
  }
};

/// Flattens a validated system (validate() is called first).
[[nodiscard]] CovariancePlan make_covariance_plan(const AoSystem& system, bool noise);

/// For slope `index` of a matrix side (rows: truth for ctm / ctt, else measurements; columns:
/// measurements for cmm / ctm, else truth): its plan sensor, subaperture within the sensor and
/// axis (0 = x, 1 = y).
struct SlopeRef {
  std::int64_t sensor = 0, subaperture = 0;
  int axis = 0;
};
[[nodiscard]] SlopeRef locate_slope(const CovariancePlan& plan, bool truth_side,
                                    std::int64_t index);

/// Where a backend writes: a dense row-major matrix (tiles == nullptr; row stride = cols) or a
/// tiled one (tiles.hpp), float32 or float64, in host memory (CPU backend) or device memory (GPU
/// backend). For a lower tile layout only the stored tiles are written, diagonal tiles whole.
struct CovarianceTarget {
  CovarianceKind kind = CovarianceKind::cmm;
  DType dtype = DType::f64;
  void* data = nullptr;
  std::int64_t rows = 0, cols = 0;
  const linalg::TileLayout* tiles = nullptr;
  // A part of the matrix only: the MPI layer generates the tiles / rows its rank owns, never the
  // whole matrix (issue 9). Honoured by both backends. With `tiles`: tile (ti, tj) is written at
  // tile_data[ti * tiles->tile_cols() + tj] (column-major, leading dimension its height) and not
  // generated where that is null; the CPU backend ignores `data`, the GPU one needs it: the start
  // of the device buffer that holds every tile.
  void* const* tile_data = nullptr;
  // Without `tiles`, for Ctm only (the symmetric kinds mirror whole matrices): rows [row_begin,
  // row_end) only, written to `data` from its first row on (row stride cols). row_end < 0: all.
  std::int64_t row_begin = 0, row_end = -1;
};

/// Slopes on one side of a plan's matrices: the truth sensor's (truth_side) or all the measuring
/// sensors' (2 per valid subaperture).
[[nodiscard]] std::int64_t plan_slopes(const CovariancePlan& plan, bool truth_side) noexcept;

/// Checks that `target` fits the plan before a backend writes into it: dtype float32 / float64,
/// rows x cols those of the plan for its kind, data non-null, a tile layout of the same rows x
/// cols whose fill is lower for the symmetric kinds (Cmm, Ctt: only the lower tiles are written)
/// and full for Ctm, tile_data only with a layout, a row range only for a dense Ctm. Throws
/// InvalidInput naming `who` (the backend), what was expected and found.
void check_covariance_target(const CovariancePlan& plan, const CovarianceTarget& target,
                             const char* who);

/// One element (row, col) of a covariance of a prebuilt plan by the direct FP64 evaluation with
/// the reference structure function (turbulence.hpp), noise as the plan carries it: the public
/// covariance_entry without rebuilding the plan (validation, subapertures, noise) per call, for
/// sampling many entries (the benchmark's accuracy check). Throws InvalidInput when row / col lie
/// outside the matrix.
[[nodiscard]] double covariance_entry(const CovariancePlan& plan, CovarianceKind kind,
                                      std::int64_t row, std::int64_t col);

/// The CPU backend (OpenMP over rows / tiles); computes every element in FP64.
void covariance_cpu(const CovariancePlan& plan, const CovarianceTarget& target);

/// The GPU backend (covariance_cuda.cu); `target.data` is device memory. Throws Unsupported in a
/// build without CUDA.
void covariance_cuda(const CovariancePlan& plan, const CovarianceTarget& target);

}  // namespace halfscope::ao::detail

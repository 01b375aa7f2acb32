// The projection from truth-sensor slopes to wavefront (evaluation.hpp, truth_phase_projection):
// the evaluation points, the Fried least-squares projection (ProjectionMethod::fried) and the
// projected phase covariance (evaluation_internal.hpp). The matched projection is in
// phase_projection_matched.cpp.
//
// Evaluation points: the lattice corners inside the pupil annulus (and touching a valid
// subaperture); corners outside the pupil or inside the obstruction carry no light, and their
// extrapolated phase was the largest error (preset check: 22 of 100 corners, 554 nm vs 365 nm
// inside). Piston is removed over the same set.
//
// Fried geometry: the phase is sampled at the subaperture corners, an (Nssp + 1)^2 grid of pitch
// d = D / Nssp, and a point is used when it touches a valid subaperture. In the lenslet frame the
// slope of subaperture (c, r) is the mean of its two corner differences along the axis over d,
// radians of angle of arrival per metre of OPD difference, times 206265 for arcsec:
//   gx' = [phi(c+1, r) - phi(c, r) + phi(c+1, r+1) - phi(c, r+1)] / (2 d)
//   gy' = [phi(c, r+1) - phi(c, r) + phi(c+1, r+1) - phi(c+1, r)] / (2 d)
// and the covariance model's slopes are along the pupil axes, so a lenslet array rotated by theta
// gives gx = cos(theta) gx' - sin(theta) gy', gy = sin(theta) gx' + cos(theta) gy'.
//
// G (m x points) has two null modes on an edge-connected set of subapertures: piston (all ones) and
// the Fried "waffle" (-1)^(c + r), whose corner differences cancel in every subaperture. Slopes
// carry no information on either, so the projection is the pseudo-inverse P = G^+, whose output is
// orthogonal to both (zero mean: piston-free; no waffle). It is formed by the normal equations with
// the null space lifted: A = G^T G + g^2 (u u^T + w w^T), u and w the unit piston and waffle
// vectors and g = 206265 / (2 d) the scale of G, so A is SPD and A^-1 G^T = G^+ (G^T's range is
// orthogonal to u and w, where A acts as G^T G). A geometry with further null modes (subapertures
// touching only by a corner) leaves A singular: the Cholesky reports it as a NumericalError.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ao/evaluation_backends.hpp"
#include "ao/evaluation_internal.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::ao {

namespace detail {

Array lattice_point_mask(const AoSystem& system, bool annulus_only) {
  const Sensor& truth = system.truth;
  const std::int64_t nssp = truth.subapertures;
  const std::int64_t side = nssp + 1;
  const double pitch = system.diameter_m / static_cast<double>(nssp);
  Array mask = Array::zeros(DType::u8, {side, side});
  auto* m = mask.data_as<std::uint8_t>();
  for (const Subaperture& s : valid_subapertures(system, truth))
    for (int dr = 0; dr <= 1; ++dr)
      for (int dc = 0; dc <= 1; ++dc) m[(s.row + dr) * side + s.column + dc] = 1;
  if (!annulus_only) return mask;
  // The closed annulus, with a relative slack of 1e-12 so that corners exactly on the rim (r =
  // D / 2 in exact arithmetic, a few ulp off after -D/2 + d k) count as inside.
  const double outer2 = 0.25 * system.diameter_m * system.diameter_m * (1.0 + 1e-12);
  const double inner = 0.5 * system.diameter_m * system.obstruction;
  const double inner2 = inner * inner * (1.0 - 1e-12);
  for (std::int64_t row = 0; row < side; ++row)
    for (std::int64_t col = 0; col < side; ++col) {
      const double x = -0.5 * system.diameter_m + pitch * static_cast<double>(col);
      const double y = -0.5 * system.diameter_m + pitch * static_cast<double>(row);
      const double r2 = x * x + y * y;
      if (r2 > outer2 || r2 < inner2) m[row * side + col] = 0;
    }
  return mask;
}

PointPositions lattice_point_positions(const AoSystem& system, const Array& mask) {
  const Sensor& truth = system.truth;
  const std::int64_t side = mask.dim(0);
  const double pitch = system.diameter_m / static_cast<double>(truth.subapertures);
  const double theta = truth.rotation_deg * 3.14159265358979323846 / 180.0;
  const double c = std::cos(theta), s = std::sin(theta);
  const auto* m = mask.data_as<std::uint8_t>();
  PointPositions out;
  for (std::int64_t k = 0; k < side * side; ++k) {
    if (!m[k]) continue;
    // The same frame change as valid_subapertures applies to the subaperture centres.
    const double x0 = -0.5 * system.diameter_m + pitch * static_cast<double>(k % side);
    const double y0 = -0.5 * system.diameter_m + pitch * static_cast<double>(k / side);
    out.x.push_back(x0 * c - y0 * s + truth.pupil_shift_x_m);
    out.y.push_back(x0 * s + y0 * c + truth.pupil_shift_y_m);
  }
  return out;
}

void remove_piston(Array& matrix) {
  const std::int64_t points = matrix.dim(0), m = matrix.dim(1);
  if (points == 0) return;
  double* p = matrix.data_as<double>();
  for (std::int64_t j = 0; j < m; ++j) {
    double sum = 0;
    for (std::int64_t i = 0; i < points; ++i) sum += p[i * m + j];
    const double mean = sum / static_cast<double>(points);
    for (std::int64_t i = 0; i < points; ++i) p[i * m + j] -= mean;
  }
}

PhaseProjection fried_pseudo_inverse(const AoSystem& system) {
  validate(system, "truth_phase_projection: system");
  const Sensor& truth = system.truth;
  const std::int64_t nssp = truth.subapertures;
  const std::int64_t side = nssp + 1;
  const double pitch = system.diameter_m / static_cast<double>(nssp);
  const std::vector<Subaperture> subaps = valid_subapertures(system, truth);
  const auto ns = static_cast<std::int64_t>(subaps.size());
  const std::int64_t m = 2 * ns;

  PhaseProjection out;
  out.method = ProjectionMethod::fried;
  out.pitch_m = pitch;
  out.point_mask = lattice_point_mask(system, false);
  const auto* mask = out.point_mask.data_as<std::uint8_t>();
  std::vector<std::int64_t> index(static_cast<std::size_t>(side * side), -1);
  std::int64_t points = 0;
  for (std::int64_t k = 0; k < side * side; ++k)
    if (mask[k]) index[static_cast<std::size_t>(k)] = points++;
  // G, row-major m x points; the x rows of all subapertures first, then the y rows.
  const double g = detail::kArcsecPerRadian / (2.0 * pitch);
  const double theta = truth.rotation_deg * 3.14159265358979323846 / 180.0;
  const double cos_t = std::cos(theta), sin_t = std::sin(theta);
  std::vector<double> gm(static_cast<std::size_t>(m * points), 0.0);
  for (std::int64_t k = 0; k < ns; ++k) {
    const Subaperture& s = subaps[static_cast<std::size_t>(k)];
    auto at = [&](int dc, int dr) {
      return index[static_cast<std::size_t>((s.row + dr) * side + s.column + dc)];
    };
    // Lenslet-frame weights of the corners (c, r), (c+1, r), (c, r+1), (c+1, r+1).
    const std::int64_t corner[4] = {at(0, 0), at(1, 0), at(0, 1), at(1, 1)};
    const double wx[4] = {-g, g, -g, g};
    const double wy[4] = {-g, -g, g, g};
    for (int q = 0; q < 4; ++q) {
      gm[static_cast<std::size_t>(k * points + corner[q])] += cos_t * wx[q] - sin_t * wy[q];
      gm[static_cast<std::size_t>((ns + k) * points + corner[q])] += sin_t * wx[q] + cos_t * wy[q];
    }
  }

  // A = G^T G + g^2 (u u^T + w w^T); G^T G accumulated row by row from the 4 corners each row
  // touches (G is sparse: a dense product would cost 2 points^2 m flops for nothing).
  std::vector<double> a(static_cast<std::size_t>(points * points), 0.0);
  for (std::int64_t row = 0; row < m; ++row) {
    const Subaperture& s = subaps[static_cast<std::size_t>(row % ns)];
    std::int64_t corner[4];
    for (int q = 0; q < 4; ++q)
      corner[q] = index[static_cast<std::size_t>((s.row + q / 2) * side + s.column + q % 2)];
    const double* gr = gm.data() + row * points;
    for (const std::int64_t i : corner)
      for (const std::int64_t j : corner)
        a[static_cast<std::size_t>(i * points + j)] += gr[i] * gr[j];
  }
  std::vector<double> waffle(static_cast<std::size_t>(points));
  for (std::int64_t k = 0; k < side * side; ++k)
    if (index[static_cast<std::size_t>(k)] >= 0)
      waffle[static_cast<std::size_t>(index[static_cast<std::size_t>(k)])] =
          ((k / side + k % side) % 2 == 0) ? 1.0 : -1.0;
  const double lift = g * g / static_cast<double>(points);  // g^2 times 1/sqrt(P) squared
  for (std::int64_t i = 0; i < points; ++i)
    for (std::int64_t j = 0; j < points; ++j)
      a[static_cast<std::size_t>(i * points + j)] +=
          lift * (1.0 + waffle[static_cast<std::size_t>(i)] * waffle[static_cast<std::size_t>(j)]);

#if HALFSCOPE_HAS_LAPACKE
  // Column-major: A (symmetric) X = G^T with the m right-hand sides being G's rows (the row-major
  // m x points G is the column-major points x m G^T); X^T comes back row-major as m x points.
  const lapack_int info = LAPACKE_dposv(
      LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(points), static_cast<lapack_int>(m), a.data(),
      static_cast<lapack_int>(points), gm.data(), static_cast<lapack_int>(points));
  if (info > 0)
    throw NumericalError(
        "truth_phase_projection: the Fried geometry of the truth sensor '" + truth.name +
        "' has null modes beyond piston and waffle (normal matrix singular at order " +
        std::to_string(info) + " of " + std::to_string(points) +
        "): some valid subapertures touch the others only by a corner");
  if (info < 0)
    throw Error("truth_phase_projection: LAPACK dposv rejected argument " + std::to_string(-info));
#else
  throw Unsupported(
      "truth_phase_projection: this build has no LAPACKE (needed for the "
      "least-squares phase projection); rebuild with liblapacke-dev installed");
#endif
  out.matrix = Array(DType::f64, {points, m});
  double* p = out.matrix.data_as<double>();
  for (std::int64_t s = 0; s < m; ++s)
    for (std::int64_t i = 0; i < points; ++i)
      p[i * m + s] = gm[static_cast<std::size_t>(s * points + i)];
  return out;
}

Array phase_covariance(const PhaseProjection& projection, const Array& cee) {
  const Array& p = projection.matrix;
  const std::int64_t points = p.dim(0), m = p.dim(1);
  if (cee.ndim() != 2 || cee.dim(0) != m || cee.dim(1) != m)
    throw InvalidInput("phase_covariance: cee: expected " + std::to_string(m) + " x " +
                       std::to_string(m) + " (the truth slopes), found " + cee.describe());
  const Array c = cee.dtype() == DType::f64 ? cee.contiguous() : cee.astype(DType::f64);
  Array tmp(DType::f64, {points, m});
  gemm_f64(false, false, points, m, m, 1.0, p.data_as<double>(), c.data_as<double>(), 0.0,
           tmp.data_as<double>());
  Array out(DType::f64, {points, points});
  gemm_f64(false, true, points, points, m, 1.0, tmp.data_as<double>(), p.data_as<double>(), 0.0,
           out.data_as<double>());
  symmetrise(out.data_as<double>(), points);
  return out;
}

double mean_phase_variance(const Array& phase_cov) {
  const std::int64_t points = phase_cov.dim(0);
  const double* c = phase_cov.data_as<double>();
  double sum = 0;
  for (std::int64_t i = 0; i < points; ++i) sum += c[i * points + i];
  return points > 0 ? sum / static_cast<double>(points) : 0.0;
}

}  // namespace detail

PhaseProjection truth_phase_projection(const AoSystem& system, ProjectionMethod method,
                                       DeviceKind device) {
  validate(system, "truth_phase_projection: system");
  if (method == ProjectionMethod::matched) {
    CovarianceOptions co;
    co.device = device;
    co.dtype = DType::f64;
    co.memory = Memory::host;
    return detail::matched_projection(system, covariance(system, CovarianceKind::ctt, co));
  }
  // Fried: G^+ on every touching corner, then the rows of the points inside the annulus, piston
  // removed over them (G^+ is piston-free over all corners, not over the subset).
  const PhaseProjection full = detail::fried_pseudo_inverse(system);
  PhaseProjection out;
  out.method = ProjectionMethod::fried;
  out.pitch_m = full.pitch_m;
  out.point_mask = detail::lattice_point_mask(system, true);
  const std::int64_t side = out.point_mask.dim(0), m = full.matrix.dim(1);
  const auto* all = full.point_mask.data_as<std::uint8_t>();
  const auto* used = out.point_mask.data_as<std::uint8_t>();
  std::vector<std::int64_t> rows;
  for (std::int64_t k = 0, row = 0; k < side * side; ++k) {
    if (used[k]) rows.push_back(row);
    if (all[k]) ++row;
  }
  out.matrix = Array(DType::f64, {static_cast<std::int64_t>(rows.size()), m});
  const double* src = full.matrix.data_as<double>();
  double* dst = out.matrix.data_as<double>();
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy_n(src + rows[i] * m, m, dst + static_cast<std::int64_t>(i) * m);
  detail::remove_piston(out.matrix);
  return out;
}

}  // namespace halfscope::ao

// The matched (minimum-variance) projection from truth-sensor slopes to OPD on the evaluation
// points (evaluation.hpp, ProjectionMethod::matched):
//   W = Pi C_phi,t (Ctt + N_t)^-1,   Pi = I - 1 1^T / points (piston removed over the points).
//
// C_phi,t comes from the same layer-summed von Karman model as the slopes (covariance_plan.hpp):
// a truth slope on layer l is phi(A) - phi(B) over the pupil pitch d, A = c + s/2 e and B = c - s/2
// e its baseline ends around the footprint centre c (size s, axis e), and a point P is seen on
// the layer at P_l = scale_l P + shift_l like the subaperture centres. With C(r) = C(0) - D(r) / 2,
//   Cov(phi(P_l), phi(A) - phi(B)) = C(P_l - A) - C(P_l - B) = [D(P_l - B) - D(P_l - A)] / 2,
// infinite-variance-safe (only D enters). In the units of the slope model (D for r0 = 1 m at
// 500 nm, times cn2_l = fraction_l r0^(-5/3)): OPD = (0.5 um / 2 pi) phase and slope (arcsec) =
// 206265 (0.5 um / 2 pi) Delta phase / d, so
//   C_phi,t = kSlopeUnit2 / (206265 d) sum_l cn2_l [D(P_l - B) - D(P_l - A)] / 2   (m x arcsec).
//
// W is the linear MMSE estimator of the piston-removed phase from slopes with noise N_t, so for
// any Cee its projection is the best phase estimate the model allows; with N_t = 0 it would give
// W Ctt W^T = Pi C_phi,t Ctt^-1 C_t,phi Pi <= Pi C_phi,phi Pi (the Schur complement is PSD).
// N_t (the truth sensor's NGS noise variance) only regularises the solve: Ctt is noise-free and
// ill-conditioned (its smallest eigenvalues belong to sub-pitch modes the slopes barely see).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ao/covariance_plan.hpp"
#include "ao/evaluation_internal.hpp"
#include "ao/noise.hpp"
#include "ao/vonkarman_fast.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::ao::detail {

Array phase_slope_covariance(const AoSystem& system, const Array& mask) {
  const CovariancePlan plan = make_covariance_plan(system, false);
  const PointPositions pts = lattice_point_positions(system, mask);
  const auto points = static_cast<std::int64_t>(pts.x.size());
  const std::int64_t t = plan.truth();
  const PlanSensor& truth = plan.sensors[static_cast<std::size_t>(t)];
  const std::int64_t ns = truth.subapertures, m = 2 * ns;
  const auto layers = static_cast<std::int64_t>(plan.layers.size());
  std::vector<double> L0;
  for (const PlanLayer& l : plan.layers) L0.push_back(l.outer_scale_m);
  const LayerStructure d(L0);
  const PlanSensorLayer* geo = &plan.sensor_layer[static_cast<std::size_t>(t * layers)];
  const double factor = kSlopeUnit2 / (kArcsecPerRadian * truth.pitch_m);

  Array out(DType::f64, {points, m});
  double* c = out.data_as<double>();
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t i = 0; i < points; ++i) {
    for (std::int64_t q = 0; q < ns; ++q) {
      const auto sq = static_cast<std::size_t>(truth.subaperture_offset + q);
      double sx = 0, sy = 0;
      for (std::int64_t l = 0; l < layers; ++l) {
        const PlanSensorLayer& g = geo[l];
        if (!(g.size > 0.0)) continue;  // not seen (cannot happen for the NGS truth, kept general)
        const double pu = g.scale * pts.x[static_cast<std::size_t>(i)] + g.shift_x;
        const double pv = g.scale * pts.y[static_cast<std::size_t>(i)] + g.shift_y;
        // P_l - c, then the ends c +- s/2 e along x and along y.
        const double du = pu - (g.scale * plan.x[sq] + g.shift_x);
        const double dv = pv - (g.scale * plan.y[sq] + g.shift_y);
        const double h = 0.5 * g.size;
        const double cn2 = plan.layers[static_cast<std::size_t>(l)].cn2;
        sx += cn2 * (d(std::hypot(du + h, dv), l) - d(std::hypot(du - h, dv), l));
        sy += cn2 * (d(std::hypot(du, dv + h), l) - d(std::hypot(du, dv - h), l));
      }
      c[i * m + q] = 0.5 * factor * sx;
      c[i * m + ns + q] = 0.5 * factor * sy;
    }
  }
  return out;
}

std::vector<double> truth_regulariser(const AoSystem& system, const Array& ctt) {
  const std::vector<Subaperture> subs = valid_subapertures(system, system.truth);
  const auto ns = static_cast<std::int64_t>(subs.size());
  std::vector<double> out(static_cast<std::size_t>(2 * ns));
  if (system.noise.enabled) {
    const std::vector<SubapertureNoise> n = sensor_noise(system, system.truth, subs);
    for (std::int64_t k = 0; k < ns; ++k) {
      out[static_cast<std::size_t>(k)] = n[static_cast<std::size_t>(k)].xx;
      out[static_cast<std::size_t>(ns + k)] = n[static_cast<std::size_t>(k)].yy;
    }
    return out;
  }
  // No noise model: a relative regulariser small enough to leave the estimate unchanged where
  // the slopes carry information (eigenvalues of Ctt above 1e-6 of its mean) and to keep the
  // Cholesky away from the round-off-level ones.
  const std::int64_t m = ctt.dim(0);
  const double* c = ctt.data_as<double>();
  double trace = 0;
  for (std::int64_t i = 0; i < m; ++i) trace += c[i * m + i];
  std::fill(out.begin(), out.end(), 1e-6 * trace / static_cast<double>(m));
  return out;
}

PhaseProjection matched_projection(const AoSystem& system, const Array& ctt) {
  const std::int64_t m = truth_count(system);
  if (ctt.ndim() != 2 || ctt.dim(0) != m || ctt.dim(1) != m || ctt.dtype() != DType::f64 ||
      ctt.on_device())
    throw InvalidInput("matched_projection: ctt: expected " + std::to_string(m) + " x " +
                       std::to_string(m) + " float64 on the host, found " + ctt.describe());
  PhaseProjection out;
  out.method = ProjectionMethod::matched;
  out.pitch_m = system.diameter_m / static_cast<double>(system.truth.subapertures);
  out.point_mask = lattice_point_mask(system, true);
  Array cpt = phase_slope_covariance(system, out.point_mask);
  const std::int64_t points = cpt.dim(0);

  // A = Ctt + N_t (a copy: dposv overwrites it with its factor).
  const Array c = ctt.contiguous();
  std::vector<double> a(c.data_as<double>(), c.data_as<double>() + m * m);
  const std::vector<double> n = truth_regulariser(system, c);
  for (std::int64_t i = 0; i < m; ++i)
    a[static_cast<std::size_t>(i * m + i)] += n[static_cast<std::size_t>(i)];
#if HALFSCOPE_HAS_LAPACKE
  // Column-major: A (symmetric, any triangle) X = B with B = the row-major points x m C_phi,t
  // seen as the column-major m x points C_t,phi; X = A^-1 C_t,phi comes back in place, i.e. the
  // row-major points x m C_phi,t A^-1 = W (A symmetric).
  const lapack_int info = LAPACKE_dposv(
      LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(m), static_cast<lapack_int>(points), a.data(),
      static_cast<lapack_int>(m), cpt.data_as<double>(), static_cast<lapack_int>(m));
  if (info > 0)
    throw NumericalError("truth_phase_projection: Ctt + N_t of the truth sensor '" +
                         system.truth.name + "' (" + std::to_string(m) + " x " + std::to_string(m) +
                         ") is not positive definite at leading minor " + std::to_string(info) +
                         ": Ctt is not a valid covariance");
  if (info < 0)
    throw Error("truth_phase_projection: LAPACK dposv rejected argument " + std::to_string(-info));
#else
  throw Unsupported(
      "truth_phase_projection: this build has no LAPACKE (needed for the matched phase "
      "projection); rebuild with liblapacke-dev installed");
#endif
  remove_piston(cpt);
  out.matrix = std::move(cpt);
  return out;
}

}  // namespace halfscope::ao::detail

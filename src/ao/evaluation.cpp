// Evaluation of a tomographic reconstructor (include/halfscope/ao/evaluation.hpp): covariances ->
// Cee -> projected phase covariance -> tomographic error, Marechal Strehl and the OTF path.
#include "halfscope/ao/evaluation.hpp"

#include <cmath>
#include <string>

#include "ao/evaluation_internal.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao {

double marechal_strehl(double rms_nm, double wavelength_m) {
  if (!(wavelength_m > 0) || !std::isfinite(wavelength_m))
    throw InvalidInput(
        "marechal_strehl: wavelength_m: expected a positive wavelength in metres, "
        "found " +
        std::to_string(wavelength_m));
  if (!(rms_nm >= 0) || !std::isfinite(rms_nm))
    throw InvalidInput(
        "marechal_strehl: rms_nm: expected a non-negative wavefront error in nm, "
        "found " +
        std::to_string(rms_nm));
  const double phase_rad = 2.0 * 3.14159265358979323846 * rms_nm * 1e-9 / wavelength_m;
  return std::exp(-phase_rad * phase_rad);
}

namespace {

// The evaluation of a checked FP64 host Cee; `ctt` (may be null) is the system's Ctt when the
// caller already generated it, so the matched projection does not generate it again.
Evaluation evaluate(const AoSystem& system, Array c, const EvaluationOptions& options,
                    const Array* ctt) {
  const PhaseProjection projection =
      options.projection == ProjectionMethod::matched && ctt != nullptr
          ? detail::matched_projection(system, *ctt)
          : truth_phase_projection(system, options.projection, options.device);
  const Array phase_cov = detail::phase_covariance(projection, c);
  const double variance_m2 = detail::mean_phase_variance(phase_cov);
  if (variance_m2 < 0)
    throw NumericalError(
        "evaluate_error_covariance: the projected error has a negative mean "
        "variance (" +
        std::to_string(variance_m2) + " m^2): Cee is not positive semi-definite");

  Evaluation e;
  e.wavelength_m = options.wavelength_m;
  e.tomographic_error_nm = std::sqrt(variance_m2) * 1e9;
  e.strehl_marechal = marechal_strehl(e.tomographic_error_nm, options.wavelength_m);
  const detail::StructureFunctionMap map =
      detail::structure_function_map(phase_cov, projection.point_mask);
  detail::OtfResult otf =
      detail::otf_path(map, projection.pitch_m, system.diameter_m, system.obstruction,
                       options.wavelength_m, options.psf_size);
  e.strehl_otf = otf.strehl;
  e.psf = std::move(otf.psf);
  e.psf_diffraction = std::move(otf.psf_diffraction);
  e.error_covariance = std::move(c);
  return e;
}

}  // namespace

Evaluation evaluate_error_covariance(const AoSystem& system, const Array& cee,
                                     const EvaluationOptions& options) {
  const std::int64_t m = truth_count(system);
  if (cee.ndim() != 2 || cee.dim(0) != m || cee.dim(1) != m)
    throw InvalidInput("evaluate_error_covariance: cee: expected " + std::to_string(m) + " x " +
                       std::to_string(m) + " (2 x the truth sensor's valid subapertures), found " +
                       cee.describe());
  if (!dtype_is_float(cee.dtype()))
    throw InvalidInput("evaluate_error_covariance: cee: expected a floating dtype, found " +
                       cee.describe());
  Array c = cee.on_device() ? cee.to(Memory::host) : cee;
  c = c.dtype() == DType::f64 ? c.clone(Memory::host) : c.astype(DType::f64);
  const double* p = c.data_as<double>();
  for (std::int64_t i = 0; i < c.size(); ++i)
    if (!std::isfinite(p[i]))
      throw InvalidInput("evaluate_error_covariance: cee: element (" + std::to_string(i / m) +
                         ", " + std::to_string(i % m) + ") is not finite");
  return evaluate(system, std::move(c), options, nullptr);
}

Evaluation evaluate_reconstructor(const AoSystem& system, const Array& reconstructor,
                                  const EvaluationOptions& options) {
  const std::int64_t m = truth_count(system), n = measurement_count(system);
  if (reconstructor.ndim() != 2 || reconstructor.dim(0) != m || reconstructor.dim(1) != n)
    throw InvalidInput("evaluate_reconstructor: reconstructor: expected " + std::to_string(m) +
                       " x " + std::to_string(n) + " (truth slopes x measurement slopes of '" +
                       system.name + "'), found " + reconstructor.describe());
  CovarianceOptions co;
  co.device = options.device;
  co.dtype = DType::f64;
  co.memory = Memory::host;
  co.noise = true;
  const Array cmm = covariance(system, CovarianceKind::cmm, co);
  const Array ctm = covariance(system, CovarianceKind::ctm, co);
  // Ctt is noise-free whatever co.noise says: the truth sensor carries no noise (the truth
  // slopes are the turbulence in the target direction, covariance_plan.cpp).
  const Array ctt = covariance(system, CovarianceKind::ctt, co);
  Array cee = error_covariance(ctt, ctm, cmm, reconstructor, options.device);
  return evaluate(system, std::move(cee), options, &ctt);
}

}  // namespace halfscope::ao

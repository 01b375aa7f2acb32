// Evaluation of a tomographic reconstructor (study 002 section V): the FP64 reference
// reconstructor R = Ctm Cmm^-1, the error covariance Cee, its projection to phase (tomographic
// error in nm rms) and the Strehl ratio by the Marechal approximation and by the full OTF path.
// Formulas, the phase projection and the measured accuracy are in docs/ao.md ("Evaluation").
#pragma once

#include <cstdint>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"

namespace halfscope::ao {

/// R = Ctm Cmm^-1 (m x n, float64, host) by a plain FP64 Cholesky solve: LAPACK dposv on the CPU,
/// cuSOLVER potrf + potrs on the GPU. `cmm` is n x n SPD, `ctm` m x n, any floating dtype (widened
/// to FP64). NotPositiveDefinite when Cmm is not SPD (for instance generated without noise).
[[nodiscard]] Array reconstructor_fp64(const Array& cmm, const Array& ctm,
                                       DeviceKind device = DeviceKind::Auto);

/// Cee = Ctt - Ctm R^T - R Ctm^T + R Cmm R^T (m x m, float64, host, symmetrised), arcsec^2.
[[nodiscard]] Array error_covariance(const Array& ctt, const Array& ctm, const Array& cmm,
                                     const Array& reconstructor, DeviceKind device = DeviceKind::Auto);

/// The projection from truth-sensor slopes (arcsec) to wavefront (metres of optical path) on the
/// points of the truth sensor's Fried geometry (subaperture corners inside the pupil): the
/// least-squares inverse of the Fried gradient model with the piston removed.
struct PhaseProjection {
  Array matrix;          // points x m, float64: OPD in metres per arcsec of slope
  Array point_mask;      // (Nssp + 1) x (Nssp + 1) uint8: 1 where a point is used
  double pitch_m = 0;    // distance between points (the subaperture size)
};

/// The phase projection of the system's truth sensor.
[[nodiscard]] PhaseProjection truth_phase_projection(const AoSystem& system);

/// Options of the evaluation.
struct EvaluationOptions {
  double wavelength_m = 1.65e-6;         // H band
  std::int64_t psf_size = 256;           // PSF image pixels across (power of two >= 64)
  DeviceKind device = DeviceKind::Auto;  // for the covariance generation and the products
};

/// What the evaluation finds.
struct Evaluation {
  double tomographic_error_nm = 0;  // rms over the pupil points of the projected Cee, piston-free
  double strehl_marechal = 0;       // exp(-(2 pi sigma / lambda)^2)
  double strehl_otf = 0;            // sum(OTF_tel OTF_err) / sum(OTF_tel)
  double wavelength_m = 0;
  Array psf;                        // psf_size^2 float64, normalised to the diffraction peak = 1
  Array psf_diffraction;            // the telescope alone, same sampling (peak 1)
  Array error_covariance;           // Cee, m x m float64 (arcsec^2)
};

/// Marechal's approximation of the Strehl ratio for a wavefront error of `rms_nm` at `wavelength_m`.
[[nodiscard]] double marechal_strehl(double rms_nm, double wavelength_m);

/// Evaluates a reconstructor (m x n, any floating dtype) on the system: generates Cmm, Ctm, Ctt in
/// FP64, forms Cee, projects it to phase, and computes the tomographic error and both Strehl
/// ratios. InvalidInput when R's shape is not m x n (the message gives both).
[[nodiscard]] Evaluation evaluate_reconstructor(const AoSystem& system, const Array& reconstructor,
                                                const EvaluationOptions& options = {});

/// The same from an error covariance Cee (m x m) already formed.
[[nodiscard]] Evaluation evaluate_error_covariance(const AoSystem& system, const Array& cee,
                                                   const EvaluationOptions& options = {});

}  // namespace halfscope::ao

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
/// to FP64). Only the row-major lower triangle of Cmm is read. The solver overwrites its operands,
/// so Cmm and Ctm are copied once. NotPositiveDefinite when Cmm is not SPD (for instance generated
/// without noise); InvalidInput for a non-floating dtype or a non-finite element.
[[nodiscard]] Array reconstructor_fp64(const Array& cmm, const Array& ctm,
                                       DeviceKind device = DeviceKind::Auto);

/// Cee = Ctt - Ctm R^T - R Ctm^T + R Cmm R^T (m x m, float64, host, symmetrised), arcsec^2. Only
/// the row-major lower triangle of Cmm is read; inputs already FP64, C-contiguous and on the host
/// are used in place (no n x n copy), others converted. One m x n FP64 workspace is allocated.
[[nodiscard]] Array error_covariance(const Array& ctt, const Array& ctm, const Array& cmm,
                                     const Array& reconstructor,
                                     DeviceKind device = DeviceKind::Auto);

/// How truth-sensor slopes (arcsec) are turned into wavefront (metres of optical path) on the
/// evaluation points.
///  - matched (default): the minimum-variance estimate W = C_phi,t (Ctt + N_t)^-1, with C_phi,t the
///    phase-slope covariance of the same layer-summed von Karman model the slopes come from and
///    N_t the truth sensor's NGS noise variance (a small regulariser). Its output variance never
///    exceeds the true phase variance (W Ctt W^T <= C_phi,phi).
///  - fried: the least-squares inverse of the Fried corner-average gradient model (piston and
///    waffle removed). Biased for the covariance model's slopes (phase differences between edge
///    midpoints): structure below the pitch is aliased and amplified, +24 % rms on the uncorrected
///    wavefront at d = 3.9 m (preset check) and about 2x on a tomographic residual. Kept for
///    comparison.
enum class ProjectionMethod { matched, fried };

/// The projection from truth-sensor slopes to OPD on the evaluation points: the corners of the
/// truth sensor's subaperture lattice (pitch d = D / Nssp, in the lenslet frame: rotated and
/// shifted with the lenslet array) that lie inside the pupil annulus (obstruction D / 2 <= r <=
/// D / 2 in the lenslet frame, the valid-subaperture rule's frame) and touch a valid subaperture.
/// Piston is removed over those points (each column of `matrix` sums to zero).
struct PhaseProjection {
  Array matrix;        // points x m, float64: OPD in metres per arcsec of slope
  Array point_mask;    // (Nssp + 1) x (Nssp + 1) uint8: 1 where a point is used
  double pitch_m = 0;  // distance between points (the subaperture size)
  ProjectionMethod method = ProjectionMethod::matched;
};

/// The phase projection of the system's truth sensor by `method` (matched: generates Ctt in FP64
/// on `device`). NumericalError when the Fried normal matrix or Ctt + N_t is singular.
[[nodiscard]] PhaseProjection truth_phase_projection(
    const AoSystem& system, ProjectionMethod method = ProjectionMethod::matched,
    DeviceKind device = DeviceKind::Auto);

/// Options of the evaluation.
struct EvaluationOptions {
  double wavelength_m = 1.65e-6;         // H band
  std::int64_t psf_size = 256;           // PSF image pixels across (power of two >= 64)
  DeviceKind device = DeviceKind::Auto;  // for the covariance generation and the products
  ProjectionMethod projection = ProjectionMethod::matched;  // slopes -> phase (see above)
};

/// What the evaluation finds.
struct Evaluation {
  double tomographic_error_nm = 0;  // rms over the evaluation points (inside the annulus) of the
                                    // projected Cee, piston removed over those points
  double strehl_marechal = 0;       // exp(-(2 pi sigma / lambda)^2)
  double strehl_otf = 0;            // sum(OTF_tel OTF_err) / sum(OTF_tel)
  double wavelength_m = 0;
  // psf_size^2 float64, normalised to the diffraction peak = 1. Its axes are those of the truth
  // sensor's lenslet lattice (the structure function is sampled on it): for a lenslet array
  // rotated by theta the PSF is the sky PSF rotated by theta, not in the pupil frame.
  Array psf;
  Array psf_diffraction;   // the telescope alone, same sampling (peak 1)
  Array error_covariance;  // Cee, m x m float64 (arcsec^2)
};

/// Marechal's approximation of the Strehl ratio for a wavefront error of `rms_nm` at
/// `wavelength_m`.
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

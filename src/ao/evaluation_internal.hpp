// Internal steps of the tomographic evaluation (public API: include/halfscope/ao/evaluation.hpp),
// split out so the tests can check each one against an independent reference:
//   Cee (slopes, arcsec^2) --projection--> phase covariance on the evaluation points (the truth
//   lattice's corners inside the annulus, m^2 of OPD)
//   --pair average--> phase structure function on the point lattice --> OTF_err --> PSF, Strehl.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/ao/evaluation.hpp"
#include "halfscope/core/array.hpp"

namespace halfscope::ao::detail {

/// Arcseconds per radian, the slope unit of the covariance model.
inline constexpr double kArcsecPerRadian = 206265.0;

/// The points of the truth sensor's Fried lattice ((Nssp + 1)^2 corners, pitch D / Nssp) that
/// touch a valid subaperture, as a row-major (Nssp + 1)^2 uint8 mask; with `annulus_only` also
/// inside the pupil annulus (obstruction D / 2 <= r <= D / 2, r measured in the lenslet frame as
/// the valid-subaperture rule does).
[[nodiscard]] Array lattice_point_mask(const AoSystem& system, bool annulus_only);

/// Pupil-frame positions (x, y in metres: the lenslet frame rotated and shifted like the
/// subaperture centres) of the points of `mask`, in mask order.
struct PointPositions {
  std::vector<double> x, y;
};
[[nodiscard]] PointPositions lattice_point_positions(const AoSystem& system, const Array& mask);

/// The least-squares inverse of the Fried gradient model on every lattice point touching a valid
/// subaperture (piston- and waffle-free): the building block of ProjectionMethod::fried.
[[nodiscard]] PhaseProjection fried_pseudo_inverse(const AoSystem& system);

/// C_phi,t (points x m, FP64): Cov(OPD at the points of `mask`, truth slopes) of the von Karman
/// model of the covariance generator, metres x arcsec (covariance_plan.hpp's slope model with one
/// end of each baseline replaced by the point, see phase_projection_matched.cpp).
[[nodiscard]] Array phase_slope_covariance(const AoSystem& system, const Array& mask);

/// The regulariser N_t of the matched projection, per truth slope (arcsec^2): the truth sensor's
/// NGS noise variance from the noise model, or 1e-6 x mean diag(Ctt) when the system's noise model
/// is disabled.
[[nodiscard]] std::vector<double> truth_regulariser(const AoSystem& system, const Array& ctt);

/// The matched projection from a Ctt (m x m FP64 host, noise-free) already generated.
[[nodiscard]] PhaseProjection matched_projection(const AoSystem& system, const Array& ctt);

/// Subtracts from every column of the row-major points x m matrix its mean (piston removal).
void remove_piston(Array& matrix);

/// C_phi = P Cee P^T (points x points, FP64, symmetrised): the covariance of the reconstructed OPD
/// on the evaluation points, m^2. `cee` is m x m FP64 host.
[[nodiscard]] Array phase_covariance(const PhaseProjection& projection, const Array& cee);

/// The piston-free wavefront variance: the mean of diag(C_phi), m^2.
[[nodiscard]] double mean_phase_variance(const Array& phase_cov);

/// The phase structure function of the error averaged over point pairs per separation vector,
/// D(a, b) = < C_ii + C_jj - 2 C_ij > over used points i, j with j - i = (a, b) lattice steps,
/// a, b in [-half, half], half = Nssp. m^2. Separations no pair realises (outside the pupil's
/// autocorrelation support, or through the obstruction) take the value of the nearest realised
/// separation on the ray towards the origin; `realised` says which were measured.
struct StructureFunctionMap {
  std::int64_t half = 0;  // lattice separations run over [-half, half] on each axis
  std::vector<double> d;  // (2 half + 1)^2, row-major by (b + half, a + half): b along y
  std::vector<std::uint8_t> realised;
  [[nodiscard]] double at(std::int64_t a, std::int64_t b) const {
    return d[static_cast<std::size_t>((b + half) * (2 * half + 1) + (a + half))];
  }
};
[[nodiscard]] StructureFunctionMap structure_function_map(const Array& phase_cov,
                                                          const Array& point_mask);

/// What the OTF path produces.
struct OtfResult {
  double strehl = 0;      // sum(OTF_tel OTF_err) / sum(OTF_tel)
  Array psf;              // psf_size^2 FP64, centred, normalised to the diffraction peak
  Array psf_diffraction;  // the telescope alone (OTF_err = 1), same normalisation (peak 1)
};

/// The OTF path. The PSF grid is Nyquist sampled at the wavelength: a pixel is lambda / (2 D), so
/// the OTF grid (psf_size^2, spacing 2 D / psf_size in the pupil) spans separations [-D, D) and
/// holds the pupil (diameter D, central obstruction `obstruction` D) padded by 2. OTF_tel is the
/// pupil's autocorrelation by FFT; OTF_err = exp(-D_phi / 2 (2 pi / lambda)^2) with D_phi
/// bilinearly interpolated from the lattice map (pitch `pitch_m`).
[[nodiscard]] OtfResult otf_path(const StructureFunctionMap& map, double pitch_m, double diameter_m,
                                 double obstruction, double wavelength_m, std::int64_t psf_size);

}  // namespace halfscope::ao::detail

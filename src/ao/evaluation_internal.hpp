// Internal steps of the tomographic evaluation (public API: include/halfscope/ao/evaluation.hpp),
// split out so the tests can check each one against an independent reference:
//   Cee (slopes, arcsec^2) --projection--> phase covariance on the Fried points (m^2 of OPD)
//   --pair average--> phase structure function on the point lattice --> OTF_err --> PSF, Strehl.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/ao/evaluation.hpp"
#include "halfscope/core/array.hpp"

namespace halfscope::ao::detail {

/// Arcseconds per radian, the slope unit of the covariance model.
inline constexpr double kArcsecPerRadian = 206265.0;

/// C_phi = P Cee P^T (points x points, FP64, symmetrised): the covariance of the reconstructed OPD
/// on the Fried points, m^2. `cee` is m x m FP64 host.
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

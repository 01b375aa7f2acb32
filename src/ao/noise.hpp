// Wavefront-sensor noise of the MOAO covariance model (the diagonal of each sensor's own block):
// photon and read-out noise of a Shack-Hartmann centroid, with the LGS spot elongation. The
// formulas, constants and units are in noise.cpp.
#pragma once

#include <vector>

#include "halfscope/ao/covariance.hpp"

namespace halfscope::ao::detail {

/// Noise variances of one subaperture's slopes, arcsec^2 (xy: the x-y cross term, LGS only).
struct SubapertureNoise {
  double xx = 0, yy = 0, xy = 0;
};

/// Photo-electrons per subaperture per frame: NGS from the magnitude (zero point in noise.cpp),
/// LGS from the return flux at M1. Throws InvalidInput naming the sensor when it is not finite
/// and > 0 (e.g. a zero throughput or bandwidth).
[[nodiscard]] double photons_per_subaperture(const AoSystem& system, const Sensor& sensor);

/// Seeing lambda / r0(lambda) in arcsec at `wavelength_m` (r0 scales as lambda^(6/5) from its
/// 500 nm value), the spot size of a seeing-limited subaperture.
[[nodiscard]] double seeing_arcsec(const AoSystem& system, double wavelength_m);

/// LGS spot elongation (arcsec, FWHM-like) of a subaperture at pupil position (x, y), m, for an
/// LGS sensor: |r - r_launch| * 206265 * depth / H^2, the launch telescope at the pupil edge toward
/// the LGS pointing (at the pupil centre for an on-axis LGS). `angle_rad` gets the direction of the
/// elongation (atan2 of r - r_launch).
[[nodiscard]] double lgs_elongation_arcsec(const AoSystem& system, const Sensor& sensor, double x_m,
                                           double y_m, double& angle_rad);

/// The noise of every valid subaperture of `sensor` (in the order of `subapertures`).
[[nodiscard]] std::vector<SubapertureNoise> sensor_noise(
    const AoSystem& system, const Sensor& sensor, const std::vector<Subaperture>& subapertures);

}  // namespace halfscope::ao::detail

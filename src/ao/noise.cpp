// Wavefront-sensor noise (src/ao/noise.hpp), re-derived for the MOAO pseudo-analytical model.
//
// Flux. A star of magnitude m delivers 10^(q - 0.4 m) photons / cm^2 / s / Angstrom above the
// atmosphere with the zero point q = 2.9 (~794 at m = 0, the V-band value MOAO uses, `qr` in
// ecrc/moao tomo_struct.cpp). Per subaperture (d^2 m^2 = 1e4 d^2 cm^2) and frame (t s), over the
// sensor's bandwidth (1e10 * bandwidth_m Angstrom) and through the atmosphere and the telescope:
//   F_ngs = 10^(2.9 - 0.4 m) * 1e4 d^2 * 1e10 bandwidth_m * t * throughput * atmosphere_throughput.
// The LGS return flux is given at M1 (it has crossed the atmosphere twice already), so
//   F_lgs = lgs_flux * d^2 * t * throughput.
// Departure from MOAO: MOAO applies no atmosphere throughput to its NGS and divides its LGS flux
// by it; we follow the photometry instead (with the benchmark files' 0.84: NGS photons x 0.84,
// LGS photons x 0.84^2 = 0.71 relative to MOAO). Both are one multiplicative factor on F.
//
// Centroid noise of a spot of size s (arcsec) on pixels of p arcsec with N = F photo-electrons and
// a read-out noise of RON e- per pixel, the form used by MOAO (updateNoise):
//   sigma^2 = 0.32 s^2 / F + 0.82 (RON / (F p))^2 s^4        (arcsec^2, each of x and y)
// The photon term scales as s^2 / F as for any centroid (an ideal Gaussian-spot centroid gives
// s_FWHM^2 / (8 ln 2 F) = 0.18 s^2 / F; 0.32 carries MOAO's margin for a real windowed centroid).
// The read-out term is the variance of RON over the ~(s / p)^2 pixels of the spot, weighted by
// their lever arm^2 ~s^2 along the axis and divided by F^2. We use MOAO's constants 0.32 and
// 0.82 unchanged.
// NGS: s = lambda / r0(lambda) at the sensing wavelength, xy = 0. Known simplification (MOAO's,
// kept for comparability with the study): the spot size ignores diffraction lambda / d, which
// underestimates the photon noise of a small subaperture (E-ELT NGS: seeing 0.76", lambda / d
// 0.30"; adding them in quadrature would raise s^2, hence the photon term, by ~15 %).
// The truth sensor gets no noise at all (covariance_plan.cpp): Ctt is noise-free.
// LGS: the spot is the seeing convolved with the laser spot, p2 = s^2 + spot^2, elongated along
// the direction from the launch telescope by e (noise.hpp), l2 = p2 + e^2 on the long axis. The
// photon term takes the axis's size^2 (p2 short, l2 long). In the read-out term s^4 becomes the
// spot area sqrt(l2 p2) (pixel count) times the axis's lever arm^2: (l2)^(3/2) p2^(1/2) on the
// long axis, p2^(3/2) l2^(1/2) on the short one (the extra pixels of the elongated spot add
// read-out noise on both axes). The axis variances sigma_l^2, sigma_s^2 rotate by the elongation
// angle theta into xx = sigma_l^2 cos^2 + sigma_s^2 sin^2, yy = sigma_l^2 sin^2 + sigma_s^2 cos^2,
// xy = (sigma_l^2 - sigma_s^2) sin cos. (MOAO uses p2^2 on the short axis, too small by
// sqrt(1 + e^2 / p2).)
#include "ao/noise.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

constexpr double kArcsecPerRadian = 206265.0;
constexpr double kZeroPoint = 2.9;       // log10 photons / cm^2 / s / Angstrom at magnitude 0
constexpr double kPhotonFactor = 0.32;   // photon-noise constant (MOAO)
constexpr double kReadoutFactor = 0.82;  // read-out-noise constant (MOAO)
constexpr double kReferenceWavelength = 0.5e-6;  // r0 is given at 500 nm

std::string format(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

// Variance along one axis for a spot whose photon term has size^2 = a2 and read-out term s^4 = b4.
double axis_variance(double flux, double ron_over_f_pix2, double a2, double b4) {
  return kPhotonFactor * a2 / flux + kReadoutFactor * ron_over_f_pix2 * b4;
}

}  // namespace

double photons_per_subaperture(const AoSystem& system, const Sensor& sensor) {
  const double d = system.diameter_m / sensor.subapertures;
  const double t = system.noise.frame_time_s;
  double flux = 0;
  if (sensor.guide_star == GuideStar::lgs) {
    flux = sensor.lgs_flux * d * d * t * sensor.throughput;
  } else {
    flux = std::pow(10.0, kZeroPoint - 0.4 * sensor.magnitude) * 1e4 * d * d * 1e10 *
           system.noise.bandwidth_m * t * sensor.throughput * system.noise.atmosphere_throughput;
  }
  if (!std::isfinite(flux) || !(flux > 0.0))
    throw InvalidInput("covariance noise: sensor '" + sensor.name +
                       "' must receive a finite, positive photon count per subaperture and frame "
                       "(check magnitude / lgs_flux, throughput, noise.frame_time_s, "
                       "noise.bandwidth_m), found " +
                       format(flux));
  return flux;
}

double seeing_arcsec(const AoSystem& system, double wavelength_m) {
  // r0(lambda) = r0 (lambda / 500 nm)^(6/5), so lambda / r0(lambda) = 500 nm / r0 *
  // (500 nm / lambda)^(1/5).
  return kReferenceWavelength / system.atmosphere.r0_m *
         std::pow(kReferenceWavelength / wavelength_m, 0.2) * kArcsecPerRadian;
}

double lgs_elongation_arcsec(const AoSystem& system, const Sensor& sensor, double x_m, double y_m,
                             double& angle_rad) {
  const double pointing = std::hypot(sensor.x_arcsec, sensor.y_arcsec);
  double launch_x = 0, launch_y = 0;
  if (pointing > 0) {
    launch_x = 0.5 * system.diameter_m * sensor.x_arcsec / pointing;
    launch_y = 0.5 * system.diameter_m * sensor.y_arcsec / pointing;
  }
  const double dx = x_m - launch_x, dy = y_m - launch_y;
  angle_rad = std::atan2(dy, dx);
  // A baseline b seen from the spot at altitude H spans b / H rad; the sodium column of depth
  // dH at range H is seen from it stretched by b dH / H^2 rad.
  return std::hypot(dx, dy) * kArcsecPerRadian * sensor.lgs_depth_m /
         (sensor.lgs_altitude_m * sensor.lgs_altitude_m);
}

std::vector<SubapertureNoise> sensor_noise(const AoSystem& system, const Sensor& sensor,
                                           const std::vector<Subaperture>& subapertures) {
  const double flux = photons_per_subaperture(system, sensor);
  if (!(sensor.pixel_arcsec > 0.0))
    throw InvalidInput("covariance noise: sensor '" + sensor.name +
                       "' pixel_arcsec must be > 0, found " + format(sensor.pixel_arcsec));
  const double ron = sensor.readout_noise_e / (flux * sensor.pixel_arcsec);
  const double ron2 = ron * ron;
  const double seeing = seeing_arcsec(system, sensor.wavelength_m);
  const double s2 = seeing * seeing;
  std::vector<SubapertureNoise> out(subapertures.size());
  if (sensor.guide_star == GuideStar::ngs) {
    const double var = axis_variance(flux, ron2, s2, s2 * s2);
    for (auto& n : out) n = {var, var, 0.0};
    return out;
  }
  const double p2 = s2 + sensor.spot_fwhm_arcsec * sensor.spot_fwhm_arcsec;
  for (std::size_t k = 0; k < subapertures.size(); ++k) {
    double theta = 0;
    const double e =
        lgs_elongation_arcsec(system, sensor, subapertures[k].x_m, subapertures[k].y_m, theta);
    const double l2 = p2 + e * e;
    const double area = std::sqrt(l2) * std::sqrt(p2);  // spot area ~ pixel count
    const double long_axis = axis_variance(flux, ron2, l2, l2 * area);
    const double short_axis = axis_variance(flux, ron2, p2, p2 * area);
    const double c = std::cos(theta), s = std::sin(theta);
    out[k] = {long_axis * c * c + short_axis * s * s, long_axis * s * s + short_axis * c * c,
              (long_axis - short_axis) * s * c};
  }
  return out;
}

}  // namespace halfscope::ao::detail

// Small hand-built MOAO systems for the covariance and evaluation tests (independent of the
// presets).
#pragma once

#include <string>
#include <utility>

#include "halfscope/ao/system.hpp"

namespace halfscope::ao::test {

/// What every hand-built sensor shares: its name, guide star, pointing (arcsec), the Nssp x Nssp
/// subaperture grid and 3 e- of readout noise.
inline Sensor test_sensor(std::string name, GuideStar star, double x_arcsec, double y_arcsec,
                          int nssp) {
  Sensor w;
  w.name = std::move(name);
  w.guide_star = star;
  w.x_arcsec = x_arcsec;
  w.y_arcsec = y_arcsec;
  w.subapertures = nssp;
  w.readout_noise_e = 3;
  return w;
}

/// A visible NGS sensor (650 nm, 0.3"/pixel, throughput 0.4) on a star of `magnitude`.
inline Sensor test_ngs(std::string name, double x_arcsec, double y_arcsec, int nssp,
                       double magnitude = 13) {
  Sensor w = test_sensor(std::move(name), GuideStar::ngs, x_arcsec, y_arcsec, nssp);
  w.wavelength_m = 650e-9;
  w.pixel_arcsec = 0.3;
  w.throughput = 0.4;
  w.magnitude = magnitude;
  return w;
}

/// A sodium LGS sensor (589 nm, 1"/pixel) on a 90 km, 10 km deep spot of 1" FWHM.
inline Sensor test_lgs(std::string name, double x_arcsec, double y_arcsec, int nssp) {
  Sensor w = test_sensor(std::move(name), GuideStar::lgs, x_arcsec, y_arcsec, nssp);
  w.wavelength_m = 589e-9;
  w.pixel_arcsec = 1.0;
  w.throughput = 0.38;
  w.lgs_altitude_m = 90e3;
  w.lgs_depth_m = 10e3;
  w.lgs_flux = 6e7;
  w.spot_fwhm_arcsec = 1.0;
  w.lgs_tiptilt_arcsec2 = 0.5;
  return w;
}

/// A telescope of `diameter_m` and central `obstruction` (a fraction of the diameter) with a
/// one-arcminute field and 4 ms frames over 330 nm of bandwidth; no sensors, no atmosphere.
inline AoSystem test_telescope(std::string name, double diameter_m, double obstruction) {
  AoSystem s;
  s.name = std::move(name);
  s.diameter_m = diameter_m;
  s.obstruction = obstruction;
  s.field_radius_arcsec = 60;
  s.noise.frame_time_s = 0.004;
  s.noise.bandwidth_m = 330e-9;
  return s;
}

/// An 8 m telescope with 2 LGS + 2 NGS of 6 x 6 subapertures, a shifted / rotated NGS, and a
/// 3-layer atmosphere with two outer scales.
inline AoSystem small_system() {
  AoSystem s = test_telescope("small", 8, 0.15);
  s.sensors.push_back(test_lgs("LGS1", 20, 0, 6));
  s.sensors.push_back(test_lgs("LGS2", -10, 17, 6));
  s.sensors.push_back(test_ngs("NGS1", 5, -30, 6));
  Sensor shifted = test_ngs("NGS2", -25, -5, 6);
  shifted.pupil_shift_x_m = 0.07;
  shifted.pupil_shift_y_m = -0.04;
  shifted.rotation_deg = 1.5;
  s.sensors.push_back(shifted);
  s.truth = test_ngs("truth", 3, 4, 6);
  s.atmosphere.r0_m = 0.15;
  s.atmosphere.layers = {{0, 0.5, 25}, {4000, 0.3, 25}, {12000, 0.2, 40}};
  s.noise.enabled = true;
  s.noise.atmosphere_throughput = 0.84;
  return s;
}

/// The pairs small_system leaves out of the edge-point path: an 8 m telescope with an LGS at
/// 90 km, one at 100 km (LGS at different altitudes), an on-axis LGS at 90 km (launched from the
/// pupil centre), an NGS of 5 x 5 subapertures (another grid and pitch), and the truth NGS of
/// 6 x 6; the 3 layers of small_system.
inline AoSystem mixed_system() {
  AoSystem s = small_system();
  s.name = "mixed";
  s.sensors.clear();
  s.sensors.push_back(test_lgs("LGS90", 20, 0, 6));
  Sensor high = test_lgs("LGS100", -10, 17, 6);
  high.lgs_altitude_m = 100e3;
  s.sensors.push_back(high);
  s.sensors.push_back(test_lgs("LGSaxis", 0, 0, 6));
  s.sensors.push_back(test_ngs("NGS5", 5, -30, 5));
  return s;
}

/// One NGS on axis of a 4 m telescope, 4 x 4 subapertures (12 valid), one ground layer.
inline AoSystem one_ngs_system(double altitude_m = 0) {
  AoSystem s = test_telescope("one-ngs", 4, 0);
  s.sensors.push_back(test_ngs("NGS", 10, -5, 4));
  s.truth = test_ngs("truth", 0, 0, 4);
  s.atmosphere.r0_m = 0.12;
  s.atmosphere.layers = {{altitude_m, 1.0, 25}};
  s.noise.enabled = false;
  return s;
}

}  // namespace halfscope::ao::test

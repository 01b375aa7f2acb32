// Description of a multi-object adaptive-optics (MOAO) system and of the atmosphere it looks
// through: the input of the covariance generator (covariance.hpp) and of the tomographic
// evaluation (evaluation.hpp). Study 002 section IV; the MOAO parameter formats and the E-ELT sizes
// are in docs/ao.md ("System description").
//
// Conventions (those of the MOAO pseudo-analytical model, so that existing configurations work):
// angles on the sky in arcsec, lengths in metres, wavefront-sensor slopes in arcsec, r0 at 500 nm.
// Sensors are ordered as given; the measurement vector of the tomography stacks every measuring
// sensor, and within a sensor all x-slopes of its valid subapertures and then all y-slopes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace halfscope::ao {

/// Guide star of a wavefront sensor: natural (at infinity) or laser (at a finite altitude, which
/// makes the cone effect and, through the sodium layer's depth, the spot elongation).
enum class GuideStar : std::uint8_t { ngs, lgs };

/// "ngs" / "lgs"; parse_guide_star throws InvalidInput naming `field` for anything else.
std::string_view guide_star_name(GuideStar g) noexcept;
GuideStar parse_guide_star(std::string_view text, std::string_view field);

/// One Shack-Hartmann wavefront sensor (or the truth sensor, which stands for the target).
struct Sensor {
  std::string name;  // for messages and plots ("LGS1", "truth")
  GuideStar guide_star = GuideStar::ngs;
  double x_arcsec = 0, y_arcsec = 0;  // pointing on the sky, from the optical axis
  int subapertures = 0;               // across the pupil diameter (Nssp)
  double pupil_shift_x_m = 0;         // lenslet-array shift in the pupil (XPup, YPup)
  double pupil_shift_y_m = 0;
  double rotation_deg = 0;      // lenslet-array rotation (thetaML)
  double wavelength_m = 0;      // sensing wavelength
  double pixel_arcsec = 0;      // detector pixel on the sky
  double readout_noise_e = 0;   // e- rms per pixel
  double throughput = 0;        // telescope + instrument, (0, 1]
  double magnitude = 0;         // NGS (and truth) only: V-like magnitude of the star
  double lgs_altitude_m = 0;    // LGS only: focus altitude of the laser spot
  double lgs_depth_m = 0;       // LGS only: FWHM thickness of the sodium layer
  double lgs_flux = 0;          // LGS only: return flux at M1, photons / m^2 / s
  double spot_fwhm_arcsec = 0;  // LGS only: laser spot size (launch + seeing-free)
  /// Variance added to every xx and yy entry of this LGS sensor's own block (the MOAO `lgsCst`):
  /// the sensor cannot measure tip-tilt, a rank-2 "unknown tip-tilt" term that also regularises.
  double lgs_tiptilt_arcsec2 = 0;
};

/// One turbulent layer of a von Karman atmosphere.
struct Layer {
  double altitude_m = 0;     // above the telescope
  double fraction = 0;       // share of the total Cn2 (fractions sum to 1)
  double outer_scale_m = 0;  // L0
};

/// The atmosphere: total r0 (at 500 nm, at zenith) distributed over the layers by their Cn2
/// fractions, so that layer l has strength cn2_l = fraction_l * r0^(-5/3).
struct Atmosphere {
  double r0_m = 0;
  std::vector<Layer> layers;
};

/// What the noise model needs beyond the sensors themselves.
struct NoiseSettings {
  bool enabled = true;               // false: Cmm and Ctt carry turbulence only (no longer SPD!)
  double frame_time_s = 0;           // integration time per frame
  double bandwidth_m = 0;            // optical bandwidth of the NGS sensors
  double atmosphere_throughput = 1;  // transmission of the atmosphere, (0, 1]
};

/// A whole MOAO system: telescope, measuring sensors, truth sensor, atmosphere, noise settings.
struct AoSystem {
  std::string name;
  double diameter_m = 0;           // telescope diameter
  double obstruction = 0;          // central obstruction, as a fraction of the diameter, [0, 1)
  double field_radius_arcsec = 0;  // technical field: every pointing must lie within it
  std::vector<Sensor> sensors;     // the measuring sensors (n slopes in all)
  Sensor truth;                    // the truth sensor, pointing at the target (m slopes)
  Atmosphere atmosphere;
  NoiseSettings noise;
};

/// Checks every field (positive sizes, fractions summing to 1 within 1e-6, LGS above every layer,
/// pointings inside the field, ...) and throws InvalidInput whose message starts with `source` (a
/// file name or "preset eelt") and names the field by its JSON path ("sensors[2].lgs_altitude_m"),
/// what was expected and what was found.
void validate(const AoSystem& system, std::string_view source);

/// The valid-subaperture rule (covariance.hpp, valid_subapertures) for the subaperture in `column`,
/// `row` of an N x N grid (N = `subapertures`, pitch d = D / N, centred on the pupil): valid when
/// its centre radius r satisfies (D obstruction / 2)^2 <= r^2 < (D / 2)^2. Evaluated exactly in
/// units of d / 2, where the centre is (2 column + 1 - N, 2 row + 1 - N) and the pupil radius is N:
/// k = (2 column + 1 - N)^2 + (2 row + 1 - N)^2 (an exact integer) is valid iff k < N^2 and
/// (obstruction N)^2 <= k, so that the result does not depend on D or on rounding of positions.
/// False for indices outside [0, N) and for N outside [1, max_subapertures].
[[nodiscard]] bool subaperture_is_valid(double obstruction, int subapertures, std::int64_t column,
                                        std::int64_t row) noexcept;

/// Largest number of subapertures across a sensor that validate accepts: 48 times the E-ELT's 86,
/// while keeping the counts (an N^2 scan) instant and every integer of subaperture_is_valid exact.
inline constexpr int max_subapertures = 4096;

/// Number of valid subapertures of a sensor (the rule is in covariance.hpp, valid_subapertures).
[[nodiscard]] std::int64_t valid_subaperture_count(const AoSystem& system, const Sensor& sensor);

/// Number of measurement slopes n (2 per valid subaperture of every measuring sensor).
[[nodiscard]] std::int64_t measurement_count(const AoSystem& system);

/// Number of truth slopes m (2 per valid subaperture of the truth sensor).
[[nodiscard]] std::int64_t truth_count(const AoSystem& system);

/// JSON form (schema in docs/ao.md); from_json validates and names the field of any error with
/// `source` first. Unknown keys are an error (a misspelt key must not silently take a default).
[[nodiscard]] nlohmann::json to_json(const AoSystem& system);
[[nodiscard]] AoSystem ao_system_from_json(const nlohmann::json& json, std::string_view source);

/// Reads a system: `.json` (halfscope's format), or a MOAO `sys-params.txt` in either layout: the
/// full layout of MOAO's check files (36 entries) or the older short layout of its benchmark files
/// (22 entries; every `datafile/benchmark/nx*/sys-params.txt` is of this kind). The atmosphere
/// comes either appended to the sys-params file (its five entries Nlayer ... l0 after the system's;
/// none of MOAO's own files does this) or as a separate MOAO atmosphere file
/// (`prof*-atmos-night*.txt`, `--atmosphere` on the command line): exactly one of the two, so
/// MOAO's check and benchmark files alike need `atmosphere_path`. The short layout has no
/// photometry: the values of MOAO's check files are used, and its `noise_var` entry is checked
/// (>= 0) but not used (is_moao_short_layout lets a caller say so). Throws IoError naming the file,
/// the entry and what was found (InvalidInput for an atmosphere file given with a `.json`).
[[nodiscard]] AoSystem read_ao_system(const std::filesystem::path& path,
                                      const std::filesystem::path& atmosphere_path = {});

/// Whether `path` is a MOAO sys-params file in the short (benchmark) layout, by the rule
/// read_ao_system applies (false for a `.json`). Meant for a file read_ao_system has accepted:
/// throws IoError when the file cannot be read.
[[nodiscard]] bool is_moao_short_layout(const std::filesystem::path& path);

/// Reads a MOAO atmosphere file (`prof*-atmos-night*.txt`, `atm-params.txt`: Nlayer, r0, cn2
/// strengths in r0^(-5/3) units, altitudes, outer scales, each entry after one comment line):
/// fractions = cn2 / sum(cn2), r0 = sum(cn2)^(-3/5) (the file's r0 must agree within 1e-3
/// relative). Throws IoError naming the file, the entry and what was found.
[[nodiscard]] Atmosphere read_moao_atmosphere(const std::filesystem::path& path);

/// Writes a system as JSON, atomically (never half-written, never overwriting on failure).
void write_ao_system(const std::filesystem::path& path, const AoSystem& system);

/// Built-in systems: "check" (D = 39 m, 10 subapertures across, 3 LGS + 3 NGS: n = 912, m = 152),
/// "mid" (29 across, 8 sensors: n = 10,240) and "eelt" (the MOSAIC-like E-ELT benchmark: D = 39 m,
/// obstruction 0.2, 86 across, 5 LGS + 4 NGS + truth: n = 100,368, m = 11,152), with the 10-layer
/// or the 60-layer profile (`layers` 10 or 60). InvalidInput for another name or layer count.
/// "eelt" has the sizes of MOAO's nx50184 benchmark (so n, m and the matrix shapes match) but a
/// MOSAIC-like geometry: the 5 LGS on a ring of 7.4 arcmin diameter (222 arcsec radius), the 4 NGS
/// on a 260 arcsec ring, the truth sensor on axis, a 300 arcsec field. It is not the nx50184
/// pointing (LGS at 23 arcsec, NGS at 16 to 52 arcsec): that one is read from MOAO's own file,
/// `datafile/benchmark/nx50184/sys-params.txt` with an atmosphere file (read_ao_system /
/// `--atmosphere`).
[[nodiscard]] AoSystem ao_preset(std::string_view name, int layers = 10);

/// The preset names, for help texts and error messages.
[[nodiscard]] std::vector<std::string> ao_preset_names();

/// The presets' atmosphere alone: the 10-layer profile (MOAO's public 10-layer night profile,
/// r0 = 0.1289 m, L0 = 25 m) or the 60-layer profile (0 to 20 km in 20000/59 m steps, the
/// 10-layer Cn2 density rebinned; docs/ao.md says how). InvalidInput for another layer count.
[[nodiscard]] Atmosphere ao_profile(int layers);

}  // namespace halfscope::ao

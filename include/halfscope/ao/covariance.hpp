// Covariance matrices of wavefront-sensor slopes under von Karman turbulence (the pseudo-analytical
// model of MOAO tomography, study 002 section IV): Cmm (measurements x measurements, n x n, SPD
// with noise), Ctm (truth x measurements, m x n) and Ctt (truth x truth, m x m). The physics, the
// formulas and the measured accuracy are in docs/ao.md ("Covariance generation").
//
// Units: slopes in arcsec, covariances in arcsec^2. Every element is computed in FP64 and rounded
// once to the requested dtype.
//
// Model in brief. A slope is the phase difference across its subaperture, along its axis, divided
// by the subaperture size. Layer l (altitude h, strength cn2_l = fraction_l r0^(-5/3), outer scale
// L0_l) is seen by sensor w through a subaperture of size s = d (1 - h / H_w) (d = D / Nssp in the
// pupil; H_w the LGS altitude, infinite for an NGS: the cone effect) centred at
// (1 - h / H_w) p + h alpha_w (p the subaperture centre in the pupil after the lenslet rotation and
// shift, alpha_w the pointing in radians). With Cov(a - b, c - d) = [D(a-d) + D(b-c) - D(a-c) -
// D(b-d)] / 2 and D the r0 = 1 m von Karman structure function (turbulence.hpp), the xx, yy and xy
// covariances are sums over layers of cn2_l (lambda / 2 pi)^2 / (d_1 d_2) times four structure-
// function values, lambda = 0.5 um expressed in arcsec (206265 x 0.5e-6). Noise (same sensor only):
// photon and read-out noise on the diagonal, LGS spot elongation with its rotation (xx, yy and xy
// on the diagonal), and the LGS tip-tilt constant on every xx and yy entry of an LGS block.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::ao {

/// Which covariance: rows x cols are measurements x measurements (cmm), truth x measurements (ctm)
/// or truth x truth (ctt).
enum class CovarianceKind : std::uint8_t { cmm, ctm, ctt };

/// "cmm" / "ctm" / "ctt"; parse throws InvalidInput naming `field`.
std::string_view covariance_kind_name(CovarianceKind kind) noexcept;
CovarianceKind parse_covariance_kind(std::string_view text, std::string_view field);

/// How to generate.
struct CovarianceOptions {
  DeviceKind device = DeviceKind::Auto;  // Auto: the GPU when present, else the CPU (OpenMP)
  DType dtype = DType::f64;              // f64 or f32 (computed in FP64, rounded once)
  Memory memory = Memory::host;          // where the result lives (device keeps it on the GPU)
  bool noise = true;                     // add the noise terms (system.noise.enabled also gates)
};

/// Centre of one valid subaperture in the pupil plane, metres, after the lenslet rotation and
/// pupil shift; `column`, `row` are its indices on the Nssp x Nssp grid.
struct Subaperture {
  double x_m = 0, y_m = 0;
  int column = 0, row = 0;
};

/// The valid subapertures of a sensor in slope order: the grid of pitch d = D / Nssp centred on
/// the pupil, a subaperture valid when its centre radius r satisfies (D obstruction / 2)^2 <= r^2 <
/// (D / 2)^2, ordered row by row (y outer, x inner).
[[nodiscard]] std::vector<Subaperture> valid_subapertures(const AoSystem& system,
                                                          const Sensor& sensor);

/// Rows x cols of a covariance of this system.
[[nodiscard]] std::int64_t covariance_rows(const AoSystem& system, CovarianceKind kind);
[[nodiscard]] std::int64_t covariance_cols(const AoSystem& system, CovarianceKind kind);

/// The whole matrix, dense, rows x cols in C order (Cmm and Ctt with both triangles).
[[nodiscard]] Array covariance(const AoSystem& system, CovarianceKind kind,
                               const CovarianceOptions& options = {});

/// The matrix straight into the tiled layout the Cholesky uses (tiles.hpp): Cmm and Ctt as lower
/// tiles (TileFill::lower), Ctm as full tiles, tile size nb >= 1.
[[nodiscard]] linalg::TileMatrix covariance_tiles(const AoSystem& system, CovarianceKind kind,
                                                  std::int64_t nb,
                                                  const CovarianceOptions& options = {});

/// One element (row, col) by the direct FP64 evaluation with the reference structure function
/// (turbulence.hpp): the independent check of the fast generators on sampled entries.
[[nodiscard]] double covariance_entry(const AoSystem& system, CovarianceKind kind, std::int64_t row,
                                      std::int64_t col, bool noise = true);

}  // namespace halfscope::ao

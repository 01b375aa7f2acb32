// Checks the CPU covariance tests run on more than one system (test_covariance.cpp on
// small_system and the "check" preset, test_covariance_paths.cpp on mixed_system): the offset /
// edge-point tables against the direct sum, and the generator against a per-element reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ao/covariance_cpu.hpp"
#include "ao/covariance_plan.hpp"
#include "ao/plan_element.hpp"
#include "ao/vonkarman_fast.hpp"
#include "halfscope/ao/covariance.hpp"

namespace halfscope::ao::test {

inline constexpr double kEps = std::numeric_limits<double>::epsilon();
inline constexpr CovarianceKind kKinds[] = {CovarianceKind::cmm, CovarianceKind::ctm,
                                            CovarianceKind::ctt};
/// Relative error of the fast structure function against the reference one (measured over its
/// whole range in test_covariance_model.cpp, FastStructureFunction).
inline constexpr double kFastRelativeError = 2e-15;

/// Element (i, j) of a dense row-major float64 matrix.
inline double at(const Array& a, std::int64_t i, std::int64_t j) {
  return a.data_as<double>()[i * a.dim(1) + j];
}

/// The structure functions of the plan's layers (their outer scales).
inline detail::LayerStructure layer_structure(const detail::CovariancePlan& plan) {
  std::vector<double> L0;
  for (const auto& l : plan.layers) L0.push_back(l.outer_scale_m);
  return detail::LayerStructure(L0);
}

/// Every element of every kind through the tables (offset / edge point) against the direct sum.
/// The tables form du from grid offsets or edge points instead of differences of centres: each
/// of the 4 L structure-function values moves by a few ulp of its size, so the element by ~eps x
/// the magnitude of its terms (64 eps leaves room for the sums over layers). `noise_in_magnitude`
/// adds |noise| to that magnitude (the tests on small_system leave it out: a tighter bound).
inline void check_tables_match_direct(const AoSystem& s, bool noise_in_magnitude) {
  const detail::CovariancePlan plan = detail::make_covariance_plan(s, true);
  const detail::LayerStructure d = layer_structure(plan);
  for (const CovarianceKind kind : kKinds) {
    const std::int64_t rows = covariance_rows(s, kind), cols = covariance_cols(s, kind);
    Array fast(DType::f64, {rows, cols}), direct(DType::f64, {rows, cols});
    detail::covariance_cpu_with(plan, {kind, DType::f64, fast.data(), rows, cols, nullptr}, true);
    detail::covariance_cpu_with(plan, {kind, DType::f64, direct.data(), rows, cols, nullptr},
                                false);
    double worst = 0;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const detail::SlopeRef a = detail::locate_slope(plan, kind != CovarianceKind::cmm, i);
        const detail::SlopeRef b = detail::locate_slope(plan, kind == CovarianceKind::ctt, j);
        const double mag = detail::plan_turbulence(plan, a, b, d).magnitude +
                           (noise_in_magnitude ? std::abs(detail::plan_noise(plan, a, b)) : 0.0);
        const double err = std::abs(at(fast, i, j) - at(direct, i, j));
        worst = std::max(worst, err / mag);
        ASSERT_LE(err, 64 * kEps * mag)
            << s.name << " " << covariance_kind_name(kind) << " (" << i << ", " << j << ")";
      }
    std::printf("%s %s: table vs direct, max |diff| / magnitude = %.3g\n", s.name.c_str(),
                std::string(covariance_kind_name(kind)).c_str(), worst);
  }
}

/// The generator's matrix `a` of `kind` (fast structure function, tables) against `entry(i, j)`
/// (reference structure function, direct sum) on `samples` elements drawn with `rng`, every
/// tenth on the diagonal where the noise sits: they differ by the fast function's relative error
/// times the magnitude of the terms, plus the rounding of the sums over layers x 4 values
/// (16 eps).
template <class Entry>
void check_against_entry(const AoSystem& s, const detail::CovariancePlan& plan, CovarianceKind kind,
                         const Array& a, std::mt19937_64& rng, int samples, Entry entry) {
  const detail::LayerStructure d = layer_structure(plan);
  std::uniform_int_distribution<std::int64_t> ri(0, a.dim(0) - 1), rj(0, a.dim(1) - 1);
  double worst = 0;
  for (int k = 0; k < samples; ++k) {
    const std::int64_t i = ri(rng), j = k % 10 == 0 ? std::min(i, a.dim(1) - 1) : rj(rng);
    const detail::SlopeRef si = detail::locate_slope(plan, kind != CovarianceKind::cmm, i);
    const detail::SlopeRef sj = detail::locate_slope(plan, kind == CovarianceKind::ctt, j);
    const double mag = detail::plan_turbulence(plan, si, sj, d).magnitude +
                       std::abs(detail::plan_noise(plan, si, sj));
    const double expected = entry(i, j);
    ASSERT_NEAR(at(a, i, j), expected, (kFastRelativeError + 16 * kEps) * mag)
        << s.name << " " << covariance_kind_name(kind) << " (" << i << ", " << j << ")";
    worst = std::max(worst, std::abs(at(a, i, j) - expected) / mag);
  }
  std::printf("%s %s: generator vs covariance_entry, max |diff| / magnitude = %.3g (%d samples)\n",
              s.name.c_str(), std::string(covariance_kind_name(kind)).c_str(), worst, samples);
}

}  // namespace halfscope::ao::test

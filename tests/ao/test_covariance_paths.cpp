// The CPU covariance paths on the sensor pairs small_system does not have (mixed_system: LGS at
// two altitudes, an on-axis LGS, an NGS on another grid), the plan-based covariance_entry, the
// on-axis LGS noise, and the backend's checks of its target.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ao/covariance_cpu.hpp"
#include "ao/covariance_plan.hpp"
#include "ao/plan_element.hpp"
#include "ao/vonkarman_fast.hpp"
#include "covariance_checks.hpp"
#include "covariance_test_systems.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao {
namespace {

using test::kEps;
using test::kKinds;

TEST(CovariancePaths, MixedSystemTakesTheEdgePointTables) {
  const AoSystem s = test::mixed_system();
  const detail::CovariancePlan plan = detail::make_covariance_plan(s, true);
  ASSERT_EQ(plan.sensors.size(), 5U);
  EXPECT_EQ(plan.sensors[3].subapertures, 20);  // 5 x 5 less 4 corners and the obstructed centre
  // LGS90 x LGSaxis: same altitude and grid, the offset table; LGS100 with either (another
  // altitude), the NGS5 (another grid) with every LGS and the truth with the LGS: edge points.
  EXPECT_TRUE(detail::offset_table_applies(plan, 2, 0));
  const std::vector<std::pair<int, int>> edge_pairs = {{1, 0}, {2, 1}, {3, 0}, {3, 1},
                                                       {3, 2}, {4, 1}, {4, 2}};
  for (const auto& [a, b] : edge_pairs) {
    EXPECT_FALSE(detail::offset_table_applies(plan, a, b)) << a << " x " << b;
    EXPECT_TRUE(detail::point_table_applies(plan, a, b)) << a << " x " << b;
  }
}

TEST(CovariancePaths, MixedSystemTablesMatchDirectSum) {
  // Same bound as small_system's (test_covariance.cpp), with |noise| added to the magnitude.
  test::check_tables_match_direct(test::mixed_system(), true);
}

TEST(CovariancePaths, MixedSystemMatchesEntry) {
  // The generator (fast structure function, tables) against detail::covariance_entry (reference
  // structure function, direct sum) on sampled elements, every tenth on the diagonal where the
  // noise sits: they differ by the fast function's relative error times the magnitude of the
  // terms, plus the rounding of the sums over 3 layers x 4 values (16 eps).
  const AoSystem s = test::mixed_system();
  const detail::CovariancePlan plan = detail::make_covariance_plan(s, true);
  CovarianceOptions cpu;
  cpu.device = DeviceKind::Cpu;
  std::mt19937_64 rng(11);  // one stream over the three kinds
  for (const CovarianceKind kind : kKinds)
    test::check_against_entry(
        s, plan, kind, covariance(s, kind, cpu), rng, 1500,
        [&](std::int64_t i, std::int64_t j) { return detail::covariance_entry(plan, kind, i, j); });
}

TEST(CovariancePaths, PlanEntryIsThePublicEntry) {
  // detail::covariance_entry on a prebuilt plan is the public covariance_entry without the plan
  // rebuild: the same numbers bit for bit, with and without noise, and the same range errors.
  const AoSystem s = test::mixed_system();
  for (const bool noise : {true, false}) {
    const detail::CovariancePlan plan = detail::make_covariance_plan(s, noise);
    for (const CovarianceKind kind : kKinds) {
      const std::int64_t rows = covariance_rows(s, kind), cols = covariance_cols(s, kind);
      ASSERT_EQ(detail::plan_slopes(plan, kind != CovarianceKind::cmm), rows);
      ASSERT_EQ(detail::plan_slopes(plan, kind == CovarianceKind::ctt), cols);
      const std::vector<std::pair<std::int64_t, std::int64_t>> picks = {
          {0, 0}, {rows - 1, cols - 1}, {rows / 2, cols / 3}, {rows / 3, cols - 1}};
      for (const auto& [i, j] : picks)
        EXPECT_EQ(detail::covariance_entry(plan, kind, i, j),
                  covariance_entry(s, kind, i, j, noise));
      try {
        (void)detail::covariance_entry(plan, kind, 0, cols);
        ADD_FAILURE() << "expected InvalidInput";
      } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("'col'"), std::string::npos) << e.what();
      }
      EXPECT_THROW((void)detail::covariance_entry(plan, kind, -1, 0), InvalidInput);
    }
  }
}

TEST(CovariancePaths, OnAxisLgsElongatesFromThePupilCentre) {
  // An on-axis LGS is launched from behind the secondary (the pupil centre): the 2 x 2 noise
  // block of each subaperture is diag(long, short) rotated to the radial direction, with the
  // elongation e = r 206265 depth / H^2 of its distance r to the centre.
  const AoSystem s = test::mixed_system();
  const detail::CovariancePlan plan = detail::make_covariance_plan(s, true);
  const detail::PlanSensor& w = plan.sensors[2];
  const Sensor& sensor = s.sensors[2];
  ASSERT_EQ(w.subapertures, 32);
  const double d = 8.0 / 6, flux = sensor.lgs_flux * d * d * s.noise.frame_time_s * 0.38;
  const double seeing = 0.5e-6 / 0.15 * std::pow(0.5e-6 / 589e-9, 0.2) * 206265;
  const double p2 = seeing * seeing + 1.0;  // 1" laser spot
  const double ron2 = std::pow(3.0 / (flux * 1.0), 2);
  for (std::int64_t k = 0; k < w.subapertures; ++k) {
    const auto at_k = static_cast<std::size_t>(w.subaperture_offset + k);
    const double x = plan.x[at_k], y = plan.y[at_k], r = std::hypot(x, y);
    const double e = r * 206265 * 10e3 / (90e3 * 90e3);
    // Axis sizes l (long) and s (short); read-out noise ~ pixel count (l s) x lever arm^2.
    const double l = std::sqrt(p2 + e * e), sh = std::sqrt(p2);
    const double lng = 0.32 * l * l / flux + 0.82 * ron2 * (l * sh) * l * l;
    const double sht = 0.32 * sh * sh / flux + 0.82 * ron2 * (l * sh) * sh * sh;
    const double c = x / r, sn = y / r;
    const double xx = plan.noise_xx[at_k], yy = plan.noise_yy[at_k], xy = plan.noise_xy[at_k];
    // Each side is a few roundings of terms of size ~lng (the rotation, the powers): 32 eps.
    const double tol = 32 * kEps * lng;
    EXPECT_NEAR(xx, lng * c * c + sht * sn * sn, tol) << k;
    EXPECT_NEAR(yy, lng * sn * sn + sht * c * c, tol) << k;
    EXPECT_NEAR(xy, (lng - sht) * c * sn, tol) << k;
  }
  // The truth sensor carries no noise even with the noise on.
  for (std::int64_t k = 0; k < plan.sensors.back().subapertures; ++k) {
    const auto at_k = static_cast<std::size_t>(plan.sensors.back().subaperture_offset + k);
    EXPECT_EQ(plan.noise_xx[at_k], 0.0);
    EXPECT_EQ(plan.noise_yy[at_k], 0.0);
    EXPECT_EQ(plan.noise_xy[at_k], 0.0);
  }
  EXPECT_EQ(plan.sensors.back().lgs_tiptilt, 0.0);
}

TEST(CovariancePaths, BackendRejectsATargetThatDoesNotFit) {
  const AoSystem s = test::small_system();
  const detail::CovariancePlan plan = detail::make_covariance_plan(s, true);
  std::vector<double> buffer(256 * 256, -1.0);
  const auto expect_invalid = [&](const detail::CovarianceTarget& t, const std::string& what) {
    try {
      detail::covariance_cpu(plan, t);
      ADD_FAILURE() << "expected InvalidInput mentioning '" << what << "'";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  using K = CovarianceKind;
  // An f16 target would have been written as float (twice its size): refused.
  expect_invalid({K::cmm, DType::f16, buffer.data(), 256, 256, nullptr}, "float16");
  expect_invalid({K::cmm, DType::f64, buffer.data(), 255, 256, nullptr}, "256 x 256");
  expect_invalid({K::ctm, DType::f64, buffer.data(), 256, 64, nullptr}, "64 x 256");
  expect_invalid({K::ctt, DType::f64, nullptr, 64, 64, nullptr}, "null");
  // Symmetric kinds compute only the lower tiles: a full layout would keep garbage above.
  const linalg::TileLayout full(256, 256, 100, linalg::TileFill::full);
  expect_invalid({K::cmm, DType::f64, buffer.data(), 256, 256, &full}, "lower");
  const linalg::TileLayout lower64(64, 64, 16, linalg::TileFill::lower);
  expect_invalid({K::cmm, DType::f64, buffer.data(), 256, 256, &lower64}, "tile layout");
  const linalg::TileLayout ctt_lower(64, 64, 16, linalg::TileFill::lower);
  expect_invalid({K::ctt, DType::f64, buffer.data(), 64, 64, &full}, "64 x 64");
  // The refused calls wrote nothing.
  for (const double v : buffer) ASSERT_EQ(v, -1.0);
  // A fitting target is accepted.
  EXPECT_NO_THROW(
      detail::covariance_cpu(plan, {K::ctt, DType::f64, buffer.data(), 64, 64, &ctt_lower}));
}

}  // namespace
}  // namespace halfscope::ao

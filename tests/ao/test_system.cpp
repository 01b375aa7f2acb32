// AO system description: every validation error names its field, the valid-subaperture counts
// against MOAO's published sizes (the nx numbers of its configuration names) and against the
// covariance generator's own subaperture list, and the presets.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "thrown_message.hpp"

namespace halfscope::ao {
namespace {

using test::invalid_message;

struct Mutation {
  const char* what;
  std::function<void(AoSystem&)> change;
  std::vector<std::string> words;  // all must appear in the message
};

TEST(AoSystemValidate, PresetsAreValid) {
  for (const std::string& name : ao_preset_names())
    for (const int layers : {10, 60}) EXPECT_NO_THROW(validate(ao_preset(name, layers), name));
}

TEST(AoSystemValidate, EveryErrorNamesItsField) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Mutation> mutations = {
      {"diameter",
       [](AoSystem& s) { s.diameter_m = 0; },
       {"telescope.diameter_m", "> 0", "found 0"}},
      {"obstruction", [](AoSystem& s) { s.obstruction = 1; }, {"telescope.obstruction", "[0, 1)"}},
      {"negative obstruction",
       [](AoSystem& s) { s.obstruction = -0.1; },
       {"telescope.obstruction", "found -0.1"}},
      {"field",
       [](AoSystem& s) { s.field_radius_arcsec = -1; },
       {"field_radius_arcsec", "found -1"}},
      {"no sensor", [](AoSystem& s) { s.sensors.clear(); }, {"sensors:", "at least one"}},
      {"zero subapertures",
       [](AoSystem& s) { s.sensors[1].subapertures = 0; },
       {"sensors[1].subapertures", "found 0"}},
      // Obstruction 0.99 on the check system (N = 10 across): a valid centre needs
      // 98.01 = (0.99 N)^2 <= k < N^2 = 100 with k a sum of two odd squares; the only such k
      // below 100 near the edge is 98 = 7^2 + 7^2 < 98.01, so no subaperture is valid.
      {"obstruction hides every subaperture",
       [](AoSystem& s) { s.obstruction = 0.99; },
       {"sensors[0].subapertures", "at least one valid subaperture", "obstruction 0.99",
        "10 across"}},
      // One subaperture across has its centre on the axis (k = 0), inside any obstruction > 0.
      {"one subaperture across behind the obstruction",
       [](AoSystem& s) { s.truth.subapertures = 1; },
       {"truth.subapertures", "at least one valid subaperture", "obstruction 0.2", "1 across",
        "found 1 across"}},
      {"measuring LGS with one subaperture",
       [](AoSystem& s) { s.sensors[1].subapertures = 1; },
       {"sensors[1].subapertures", "at least one valid subaperture"}},
      {"too many subapertures",
       [](AoSystem& s) { s.truth.subapertures = 5000; },
       {"truth.subapertures", "found 5000"}},
      {"negative r0",
       [](AoSystem& s) { s.atmosphere.r0_m = -0.1; },
       {"atmosphere.r0_m", "found -0.1"}},
      {"no layer",
       [](AoSystem& s) { s.atmosphere.layers.clear(); },
       {"atmosphere.layers", "at least one"}},
      {"fraction sum",
       [](AoSystem& s) { s.atmosphere.layers[0].fraction += 2e-6; },
       {"atmosphere.layers[*].fraction", "summing to 1"}},
      {"negative fraction",
       [](AoSystem& s) { s.atmosphere.layers[2].fraction = -0.01; },
       {"atmosphere.layers[2].fraction", ">= 0"}},
      {"outer scale",
       [](AoSystem& s) { s.atmosphere.layers[3].outer_scale_m = 0; },
       {"atmosphere.layers[3].outer_scale_m", "> 0"}},
      {"altitude",
       [](AoSystem& s) { s.atmosphere.layers[4].altitude_m = -5; },
       {"atmosphere.layers[4].altitude_m", "found -5"}},
      {"LGS below a layer",
       [](AoSystem& s) { s.sensors[0].lgs_altitude_m = 15000; },
       {"sensors[0].lgs_altitude_m", "LGS below a layer", "atmosphere.layers[9]", "19500"}},
      {"pointing outside the field",
       [](AoSystem& s) { s.sensors[4].x_arcsec = 70; },
       {"sensors[4]", "pointing outside the field", "field_radius_arcsec = 60"}},
      {"truth outside the field",
       [](AoSystem& s) { s.truth.y_arcsec = -61; },
       {"truth", "pointing outside the field"}},
      {"wavelength",
       [](AoSystem& s) { s.sensors[3].wavelength_m = 0; },
       {"sensors[3].wavelength_m"}},
      {"pixel", [](AoSystem& s) { s.sensors[2].pixel_arcsec = -0.3; }, {"sensors[2].pixel_arcsec"}},
      {"throughput",
       [](AoSystem& s) { s.sensors[5].throughput = 1.5; },
       {"sensors[5].throughput", "(0, 1]", "found 1.5"}},
      {"RON", [](AoSystem& s) { s.truth.readout_noise_e = -1; }, {"truth.readout_noise_e"}},
      {"LGS flux", [](AoSystem& s) { s.sensors[1].lgs_flux = 0; }, {"sensors[1].lgs_flux"}},
      {"LGS depth", [](AoSystem& s) { s.sensors[1].lgs_depth_m = -1; }, {"sensors[1].lgs_depth_m"}},
      {"spot",
       [](AoSystem& s) { s.sensors[2].spot_fwhm_arcsec = nan; },
       {"sensors[2].spot_fwhm_arcsec", "found nan"}},
      {"lgsCst",
       [](AoSystem& s) { s.sensors[0].lgs_tiptilt_arcsec2 = -1; },
       {"sensors[0].lgs_tiptilt_arcsec2"}},
      {"magnitude",
       [](AoSystem& s) { s.sensors[3].magnitude = INFINITY; },
       {"sensors[3].magnitude", "finite", "found inf"}},
      {"LGS field on an NGS",
       [](AoSystem& s) { s.sensors[3].lgs_flux = 1e6; },
       {"sensors[3].lgs_flux", "NGS"}},
      {"NGS field on an LGS",
       [](AoSystem& s) { s.sensors[0].magnitude = 12; },
       {"sensors[0].magnitude", "LGS"}},
      {"non-finite pointing",
       [](AoSystem& s) { s.sensors[0].y_arcsec = nan; },
       {"sensors[0].y_arcsec"}},
      {"non-finite shift",
       [](AoSystem& s) { s.sensors[0].pupil_shift_x_m = nan; },
       {"sensors[0].pupil_shift_x_m"}},
      {"non-finite rotation",
       [](AoSystem& s) { s.sensors[0].rotation_deg = INFINITY; },
       {"sensors[0].rotation_deg"}},
      {"duplicate name",
       [](AoSystem& s) { s.sensors[4].name = "LGS2"; },
       {"sensors[4].name", "\"LGS2\"", "sensors[1]"}},
      {"truth name", [](AoSystem& s) { s.truth.name = "NGS1"; }, {"truth.name", "sensors[3]"}},
      {"empty name", [](AoSystem& s) { s.sensors[2].name.clear(); }, {"sensors[2].name"}},
      {"LGS truth",
       [](AoSystem& s) {
         s.truth = s.sensors[0];
         s.truth.name = "t";
         s.truth.x_arcsec = 0;
       },
       {"truth.guide_star"}},
      {"frame time", [](AoSystem& s) { s.noise.frame_time_s = 0; }, {"noise.frame_time_s", "> 0"}},
      {"bandwidth", [](AoSystem& s) { s.noise.bandwidth_m = 0; }, {"noise.bandwidth_m"}},
      {"atmosphere throughput",
       [](AoSystem& s) { s.noise.atmosphere_throughput = 0; },
       {"noise.atmosphere_throughput"}},
  };
  for (const Mutation& m : mutations) {
    AoSystem s = ao_preset("check");
    m.change(s);
    const std::string message = invalid_message([&] { validate(s, "my-system.json"); });
    EXPECT_EQ(message.rfind("my-system.json: ", 0), 0u) << m.what << ": " << message;
    EXPECT_NE(message.find("expected"), std::string::npos) << m.what << ": " << message;
    for (const std::string& w : m.words)
      EXPECT_NE(message.find(w), std::string::npos)
          << m.what << ": '" << w << "' not in " << message;
  }
}

TEST(AoSystemValidate, NoiseTimesMayBeZeroWhenNoiseIsOff) {
  AoSystem s = ao_preset("check");
  s.noise.enabled = false;
  s.noise.frame_time_s = 0;
  s.noise.bandwidth_m = 0;
  EXPECT_NO_THROW(validate(s, "x"));
  s.noise.frame_time_s = -1;
  EXPECT_THROW(validate(s, "x"), InvalidInput);
}

TEST(AoSystemCounts, PresetsMatchMoaoConfigurationSizes) {
  // MOAO names its configurations by the total number of valid subapertures of the measuring
  // sensors (nx456 = 6 x 76, nx5120 = 8 x 640, nx50184 = 9 x 5576).
  const AoSystem check = ao_preset("check");
  EXPECT_EQ(valid_subaperture_count(check, check.truth), 76);
  EXPECT_EQ(measurement_count(check), 912);
  EXPECT_EQ(truth_count(check), 152);
  const AoSystem mid = ao_preset("mid", 60);
  EXPECT_EQ(valid_subaperture_count(mid, mid.sensors[0]), 640);
  EXPECT_EQ(measurement_count(mid), 10240);
  EXPECT_EQ(truth_count(mid), 1280);
  const AoSystem eelt = ao_preset("eelt");
  for (const Sensor& w : eelt.sensors) EXPECT_EQ(valid_subaperture_count(eelt, w), 5576);
  EXPECT_EQ(measurement_count(eelt), 100368);
  EXPECT_EQ(truth_count(eelt), 11152);
}

// Geometric evaluation in metres, independent of the exact integer form: centre radius against the
// two circles, with the positions as a user would compute them.
std::int64_t count_in_metres(double diameter, double obstruction, int n) {
  std::int64_t count = 0;
  const double d = diameter / n;
  for (int row = 0; row < n; ++row)
    for (int col = 0; col < n; ++col) {
      const double x = -diameter / 2 + d * (col + 0.5), y = -diameter / 2 + d * (row + 0.5);
      const double r2 = x * x + y * y;
      if (r2 >= std::pow(diameter * obstruction / 2, 2) && r2 < diameter * diameter / 4) ++count;
    }
  return count;
}

TEST(AoSystemCounts, ExactRuleAgreesWithTheGeometryAndTheCovarianceGenerator) {
  AoSystem s = ao_preset("check");
  for (const double obstruction : {0.0, 0.1, 0.2, 0.3, 0.5, 0.9}) {
    for (int n = 1; n <= 48; ++n) {
      s.obstruction = obstruction;
      s.truth.subapertures = n;
      const std::int64_t count = valid_subaperture_count(s, s.truth);
      EXPECT_EQ(count, count_in_metres(s.diameter_m, obstruction, n)) << n << " " << obstruction;
      EXPECT_EQ(count, static_cast<std::int64_t>(valid_subapertures(s, s.truth).size()))
          << n << " " << obstruction;
    }
  }
}

TEST(AoSystemCounts, CanaryLikeSevenAcross) {
  // Nssp = 7: the ring at one pitch from the centre has r = D / 7 = 0.1429 D. An obstruction of
  // 0.286 (radius 0.143 D) removes those 4 subapertures (32 valid), 0.285 keeps them (36: CANARY's
  // number of valid subapertures).
  EXPECT_FALSE(subaperture_is_valid(0.286, 7, 4, 3));
  EXPECT_TRUE(subaperture_is_valid(0.285, 7, 4, 3));
  EXPECT_FALSE(subaperture_is_valid(0.285, 7, 3, 3));  // the centre
  AoSystem s = ao_preset("check");
  s.truth.subapertures = 7;
  s.obstruction = 0.286;
  EXPECT_EQ(valid_subaperture_count(s, s.truth), 32);
  s.obstruction = 0.285;
  EXPECT_EQ(valid_subaperture_count(s, s.truth), 36);
  EXPECT_FALSE(subaperture_is_valid(0.2, 7, 7, 0));  // outside the grid
  EXPECT_FALSE(subaperture_is_valid(0.2, 7, -1, 3));
}

TEST(AoPresets, Geometry) {
  const AoSystem eelt = ao_preset("eelt", 60);
  EXPECT_EQ(eelt.diameter_m, 39);
  EXPECT_EQ(eelt.obstruction, 0.2);
  ASSERT_EQ(eelt.sensors.size(), 9u);
  int lgs = 0;
  for (const Sensor& w : eelt.sensors) {
    EXPECT_EQ(w.subapertures, 86);
    if (w.guide_star == GuideStar::lgs) {
      ++lgs;
      // MOSAIC's LGS ring: 7.4 arcmin across = 2 x 222 arcsec.
      EXPECT_NEAR(std::hypot(w.x_arcsec, w.y_arcsec), 7.4 * 60 / 2, 1e-12);
      EXPECT_EQ(w.lgs_altitude_m, 90e3);
      EXPECT_EQ(w.lgs_depth_m, 10e3);
    } else {
      EXPECT_LE(std::hypot(w.x_arcsec, w.y_arcsec), eelt.field_radius_arcsec);
    }
  }
  EXPECT_EQ(lgs, 5);
  EXPECT_EQ(eelt.truth.x_arcsec, 0);
  EXPECT_EQ(eelt.truth.y_arcsec, 0);
  EXPECT_EQ(eelt.truth.guide_star, GuideStar::ngs);
  const AoSystem check = ao_preset("check");
  EXPECT_EQ(check.sensors.size(), 6u);
  EXPECT_EQ(ao_preset("mid").sensors.size(), 8u);
}

TEST(AoPresets, TenLayerProfile) {
  const Atmosphere a = ao_profile(10);
  const std::vector<double> h = {30, 200, 390, 1880, 4500, 7500, 10500, 13500, 16500, 19500};
  ASSERT_EQ(a.layers.size(), 10u);
  double sum = 0;
  for (std::size_t l = 0; l < 10; ++l) {
    EXPECT_EQ(a.layers[l].altitude_m, h[l]);
    EXPECT_EQ(a.layers[l].outer_scale_m, 25);
    sum += a.layers[l].fraction;
  }
  EXPECT_NEAR(sum, 1, 1e-14);
  EXPECT_NEAR(a.r0_m, 0.128916, 1e-6);  // the r0 the public profile file states
  EXPECT_NEAR(a.layers[0].fraction, 16.1481 / 30.396489, 1e-12);
}

TEST(AoPresets, SixtyLayerProfileRebinsTheTenLayerDensity) {
  const Atmosphere a = ao_profile(60), a10 = ao_profile(10);
  ASSERT_EQ(a.layers.size(), 60u);
  EXPECT_NEAR(a.r0_m, a10.r0_m, 1e-15);  // the total strength is kept
  double sum = 0;
  for (std::size_t j = 0; j < 60; ++j) {
    EXPECT_NEAR(a.layers[j].altitude_m, 20000.0 * static_cast<double>(j) / 59, 1e-9);
    EXPECT_GE(a.layers[j].fraction, 0);
    sum += a.layers[j].fraction;
  }
  EXPECT_NEAR(sum, 1, 1e-14);
  // Lowest slab [0, 10000/59 m]: all of the 30 m layer (slab [0, 115]) and the part of the 200 m
  // layer's slab [115, 295] below 169.49 m. Highest slab [20000 - 10000/59, 20000]: its share of
  // the 19500 m layer's slab [18000, 20000].
  const double top = 10000.0 / 59;
  EXPECT_NEAR(a.layers[0].fraction,
              a10.layers[0].fraction + a10.layers[1].fraction * (top - 115) / 180, 1e-14);
  EXPECT_NEAR(a.layers[59].fraction, a10.layers[9].fraction * top / 2000, 1e-14);
}

TEST(AoPresets, UnknownNameOrLayersListTheChoices) {
  const std::string m = invalid_message([] { (void)ao_preset("vlt"); });
  for (const char* w : {"check", "mid", "eelt", "\"vlt\""})
    EXPECT_NE(m.find(w), std::string::npos) << m;
  EXPECT_NE(invalid_message([] { (void)ao_preset("eelt", 35); }).find("10 or 60"),
            std::string::npos);
  EXPECT_THROW((void)ao_profile(0), InvalidInput);
}

TEST(AoSystem, GuideStarNames) {
  EXPECT_EQ(guide_star_name(GuideStar::lgs), "lgs");
  EXPECT_EQ(parse_guide_star("ngs", "f"), GuideStar::ngs);
  const std::string m =
      invalid_message([] { (void)parse_guide_star("LGS", "sensors[0].guide_star"); });
  EXPECT_NE(m.find("sensors[0].guide_star"), std::string::npos);
}

}  // namespace
}  // namespace halfscope::ao

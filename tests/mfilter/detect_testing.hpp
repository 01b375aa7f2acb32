// Shared by the CPU and GPU detection tests: events planted at exact CC 0.72-0.75 with
// sim::simulate_seismic (the "every event found at CC > 0.7", tested near 0.7), the
// same data set as an mftest::Case (for the error bounds), and the check of one detection run
// against the ground truth.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "halfscope/mfilter.hpp"
#include "halfscope/sim/seismic.hpp"
#include "mfilter_testing.hpp"

namespace halfscope::mftest {

/// Three channels, two templates of K = 200 (smooth synthetic wavelets), four events per
/// template with per-channel CC 0.72, 0.73, 0.74 and 0.75 (weights 1 / C, so the stack at an
/// event is that CC), white noise, 60000 samples.
inline sim::SeismicSimulation near_threshold_events(MfNormalize normalize) {
  sim::SeismicSimOptions o;
  o.channels = 3;
  o.samples = 60'000;
  o.templates = 2;
  o.template_length = 200;
  o.events_per_template = 4;
  o.event_cc = {0.72, 0.73, 0.74, 0.75};
  o.max_moveout = 40;
  o.normalize = normalize;
  o.seed = 2026;
  return sim::simulate_seismic(o);
}

/// The simulation as a Case (templates, data, moveouts and weights copied as FP64).
inline Case case_of(const sim::SeismicSimulation& s) {
  Case c;
  c.T = s.templates.dim(0);
  c.C = s.templates.dim(1);
  c.K = s.templates.dim(2);
  c.L = s.data.dim(1);
  const Array t = s.templates.astype(DType::f64), x = s.data.astype(DType::f64);
  const Array w = s.weights.astype(DType::f64), m = s.moveouts.astype(DType::i64);
  c.templates.assign(t.data_as<double>(), t.data_as<double>() + t.size());
  c.data.assign(x.data_as<double>(), x.data_as<double>() + x.size());
  c.weights.assign(w.data_as<double>(), w.data_as<double>() + w.size());
  c.moveouts.assign(m.data_as<std::int64_t>(), m.data_as<std::int64_t>() + m.size());
  return c;
}

/// The simulation's network as MfNetwork.
inline MfNetwork network_of(const sim::SeismicSimulation& s) {
  MfNetwork n;
  n.moveouts = s.moveouts;
  n.weights = s.weights;
  return n;
}

/// Every planted event is found exactly once, at its sample, with the planted sign and a value
/// within `bound` of the planted stack value (sum_c w CC = CC). Anything else detected must be
/// cross-talk: another template's event seen by this template (the synthetic wavelets correlate
/// with each other by ~0.25), within K + max moveout samples of that event and weaker than 0.5;
/// noise alone is not detected (the MAD threshold 8 x median |stack| sits near 5.4 standard
/// deviations of the noise stack, ~0.22 here, above the noise's maximum over 2 x 60000 values).
inline void expect_planted_events(const std::vector<Detection>& got,
                                  const sim::SeismicSimulation& s, double bound,
                                  const std::string& what) {
  const Array mo = s.moveouts.astype(DType::i64);
  const std::int64_t reach =
      s.templates.dim(2) +
      *std::max_element(mo.data_as<std::int64_t>(), mo.data_as<std::int64_t>() + mo.size());
  std::int64_t own = 0;
  for (const Detection& d : got) {
    const bool planted = std::any_of(s.events.begin(), s.events.end(), [&](const auto& e) {
      return e.template_index == d.template_index && e.sample == d.sample;
    });
    if (planted) {
      ++own;
      continue;
    }
    const bool cross_talk = std::any_of(s.events.begin(), s.events.end(), [&](const auto& e) {
      return e.template_index != d.template_index && std::abs(e.sample - d.sample) <= reach;
    });
    EXPECT_TRUE(cross_talk && std::fabs(d.value) < 0.5)
        << what << ": unexpected detection of template " << d.template_index << " at " << d.sample
        << " (" << d.value << ", threshold " << d.threshold << ")";
  }
  EXPECT_EQ(own, static_cast<std::int64_t>(s.events.size())) << what;
  for (const sim::PlantedEvent& e : s.events) {
    const auto it = std::find_if(got.begin(), got.end(), [&](const Detection& d) {
      return d.template_index == e.template_index && d.sample == e.sample;
    });
    ASSERT_NE(it, got.end()) << what << ": event of template " << e.template_index << " at "
                             << e.sample << " (CC " << e.cc << ") not detected";
    EXPECT_NEAR(it->value, e.expected_cc_sum, bound) << what << " at " << e.sample;
    EXPECT_GT(it->value, 0.7) << what;
    EXPECT_EQ(it->channels_used, s.templates.dim(1)) << what;
  }
}

}  // namespace halfscope::mftest

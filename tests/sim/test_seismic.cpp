// simulate_seismic: the planted events have exactly the asked CC (checked with an independent
// FP64 correlation written here), the noise has the asked statistics, the network parameters and
// the event layout follow the documented rules, and bad options are InvalidInput.
#include <algorithm>
#include <cmath>

#include "halfscope/core/error.hpp"
#include "halfscope/sim/seismic.hpp"
#include "test_support.hpp"

namespace halfscope::sim {
namespace {

// Normalized CC of template t (K samples) with the window at w, FP64, optionally demeaned.
double reference_cc(const double* t, const double* w, std::int64_t k, bool demean) {
  double mt = 0, mw = 0;
  if (demean) {
    for (std::int64_t i = 0; i < k; ++i) {
      mt += t[i] / static_cast<double>(k);
      mw += w[i] / static_cast<double>(k);
    }
  }
  double tw = 0, tt = 0, ww = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    tw += (t[i] - mt) * (w[i] - mw);
    tt += (t[i] - mt) * (t[i] - mt);
    ww += (w[i] - mw) * (w[i] - mw);
  }
  return tw / std::sqrt(tt * ww);
}

SeismicSimOptions small_options() {
  SeismicSimOptions o;
  o.channels = 4;
  o.samples = 20'000;
  o.templates = 3;
  o.template_length = 120;
  o.events_per_template = 4;
  o.event_cc = {0.3, 0.75, 0.95};
  o.max_moveout = 30;
  o.seed = 42;
  return o;
}

void expect_planted_cc(const SeismicSimOptions& o) {
  const SeismicSimulation s = simulate_seismic(o);
  const std::int64_t C = o.channels, L = o.samples, K = o.template_length;
  ASSERT_EQ(static_cast<std::int64_t>(s.events.size()), o.templates * o.events_per_template);
  const auto* mo = s.moveouts.data_as<std::int64_t>();
  for (std::size_t e = 0; e < s.events.size(); ++e) {
    const PlantedEvent& ev = s.events[e];
    EXPECT_EQ(ev.cc, o.event_cc[e % o.event_cc.size()]);
    EXPECT_NEAR(ev.expected_cc_sum, ev.cc, 1e-15);  // weights 1 / C sum to 1
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t s0 = ev.sample + mo[ev.template_index * C + c];
      ASSERT_LE(s0 + K, L);
      const double cc =
          reference_cc(s.templates.data_as<double>() + (ev.template_index * C + c) * K,
                       s.data.data_as<double>() + c * L + s0, K, o.normalize == MfNormalize::Full);
      // Evaluating CC in FP64 costs about 2 K u (gamma_K on the numerator, half of gamma_K on
      // each energy through the square root; u = 2^-53); the planting solved the same equation
      // with the same error, and a factor 2 more covers the conditioning of solving for a:
      // 8 K u, about 1e-13 here.
      EXPECT_NEAR(cc, ev.cc, 8.0 * static_cast<double>(K) * 0x1p-53) << "event " << e;
    }
  }
}

TEST(SimulateSeismic, PlantedEventsHaveTheAskedCcShort) {
  expect_planted_cc(small_options());
}

TEST(SimulateSeismic, PlantedEventsHaveTheAskedCcFullAndColoured) {
  SeismicSimOptions o = small_options();
  o.normalize = MfNormalize::Full;
  o.noise_colour = 0.9;
  expect_planted_cc(o);
}

TEST(SimulateSeismic, EventsAreSortedInsideTheDataAndApart) {
  const SeismicSimOptions o = small_options();
  const SeismicSimulation s = simulate_seismic(o);
  const std::int64_t span = o.template_length + o.max_moveout;
  for (std::size_t e = 1; e < s.events.size(); ++e)
    EXPECT_GE(s.events[e].sample - s.events[e - 1].sample, span) << e;
  EXPECT_GE(s.events.front().sample, 0);
  EXPECT_LE(s.events.back().sample + span, o.samples);
  std::vector<int> per_template(static_cast<std::size_t>(o.templates), 0);
  for (const auto& ev : s.events) ++per_template[static_cast<std::size_t>(ev.template_index)];
  for (int n : per_template) EXPECT_EQ(n, o.events_per_template);
}

TEST(SimulateSeismic, NetworkParametersFollowTheRules) {
  const SeismicSimOptions o = small_options();
  const SeismicSimulation s = simulate_seismic(o);
  ASSERT_EQ(s.moveouts.shape(), (Shape{o.templates, o.channels}));
  ASSERT_EQ(s.templates.shape(), (Shape{o.templates, o.channels, o.template_length}));
  for (std::int64_t t = 0; t < o.templates; ++t) {
    std::int64_t lo = o.max_moveout, hi = 0;
    for (std::int64_t c = 0; c < o.channels; ++c) {
      const auto m = s.moveouts.data_as<std::int64_t>()[t * o.channels + c];
      lo = std::min(lo, m);
      hi = std::max(hi, m);
      EXPECT_DOUBLE_EQ(s.weights.data_as<double>()[t * o.channels + c], 0.25);
      double energy = 0;
      for (std::int64_t k = 0; k < o.template_length; ++k) {
        const double v =
            s.templates.data_as<double>()[(t * o.channels + c) * o.template_length + k];
        energy += v * v;
      }
      EXPECT_NEAR(energy, 1.0, 1e-12);
    }
    EXPECT_EQ(lo, 0);
    EXPECT_LE(hi, o.max_moveout);
  }
}

TEST(SimulateSeismic, NoiseStatisticsMatchTheColour) {
  for (double phi : {0.0, 0.6}) {
    SeismicSimOptions o = small_options();
    o.events_per_template = 0;
    o.samples = 200'000;
    o.channels = 1;
    o.noise_colour = phi;
    const SeismicSimulation s = simulate_seismic(o);
    const double* d = s.data.data_as<double>();
    const auto n = static_cast<double>(o.samples);
    double mean = 0, var = 0, lag1 = 0;
    for (std::int64_t i = 0; i < o.samples; ++i) mean += d[i] / n;
    for (std::int64_t i = 0; i < o.samples; ++i) var += (d[i] - mean) * (d[i] - mean) / n;
    for (std::int64_t i = 1; i < o.samples; ++i) lag1 += (d[i] - mean) * (d[i - 1] - mean) / n;
    // AR(1) with unit variance: the sample mean has standard deviation sqrt((1+phi)/(1-phi) / n)
    // and the lag-1 correlation estimate about sqrt((1 - phi^2) / n); 6 sigma bounds.
    const double sd_mean = std::sqrt((1 + phi) / (1 - phi) / n);
    EXPECT_NEAR(mean, 0.0, 6 * sd_mean) << phi;
    EXPECT_NEAR(var, 1.0, 6 * std::sqrt(2.0 * (1 + phi * phi) / (1 - phi * phi) / n)) << phi;
    EXPECT_NEAR(lag1 / var, phi, 6 * std::sqrt((1 - phi * phi) / n) + 1e-12) << phi;
  }
}

TEST(SimulateSeismic, ReproducibleFromTheSeed) {
  SeismicSimOptions o = small_options();
  const SeismicSimulation a = simulate_seismic(o), b = simulate_seismic(o);
  ASSERT_EQ(a.data.size(), b.data.size());
  EXPECT_TRUE(std::equal(a.data.data_as<double>(), a.data.data_as<double>() + a.data.size(),
                         b.data.data_as<double>()));
  o.seed = 43;
  const SeismicSimulation c = simulate_seismic(o);
  EXPECT_FALSE(std::equal(a.data.data_as<double>(), a.data.data_as<double>() + a.data.size(),
                          c.data.data_as<double>()));
}

TEST(SimulateSeismic, WaveletHasUnitEnergyAndDependsOnTheSeed) {
  const auto a = synthetic_wavelet(256, 1), b = synthetic_wavelet(256, 2);
  double ea = 0, ab = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ea += a[i] * a[i];
    ab += a[i] * b[i];
  }
  EXPECT_NEAR(ea, 1.0, 1e-12);
  EXPECT_LT(std::abs(ab), 0.9);  // two draws are different waveforms
  EXPECT_EQ(synthetic_wavelet(1, 5).size(), 1u);
}

TEST(SimulateSeismic, BadOptionsAreInvalidInput) {
  const auto expect_bad = [](auto edit, const char* word) {
    SeismicSimOptions o = small_options();
    edit(o);
    try {
      (void)simulate_seismic(o);
      ADD_FAILURE() << "no exception for " << word;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  expect_bad([](SeismicSimOptions& o) { o.event_cc = {1.0}; }, "event CC");
  expect_bad([](SeismicSimOptions& o) { o.event_cc = {}; }, "event CC");
  expect_bad([](SeismicSimOptions& o) { o.noise_colour = 1.0; }, "colour");
  expect_bad([](SeismicSimOptions& o) { o.channels = 0; }, "channels");
  expect_bad([](SeismicSimOptions& o) { o.max_moveout = -1; }, "moveout");
  expect_bad([](SeismicSimOptions& o) { o.samples = 2000; }, "expected samples >=");
}

}  // namespace
}  // namespace halfscope::sim

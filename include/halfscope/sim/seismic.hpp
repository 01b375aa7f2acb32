// Synthetic continuous seismic data with ground truth for matched filtering: seeded noise on
// several channels (white, or coloured by an AR(1) filter) with scaled copies of templates
// planted at known times, each scaled so that its correlation with the template is exactly the
// asked value.
//
// Planting rule. On channel c, an event of template t at correlation time p adds a * T[t,c] to
// the window starting at s = p + moveout[t,c]. With n the noise already in that window (demeaned,
// like T, for full normalization), tt = T.T, tn = T.n and nn = n.n, the window's CC is
// (a tt + tn) / sqrt(tt (a^2 tt + 2 a tn + nn)); solving CC = rho for a gives
//   a = -tn / tt + rho / sqrt(1 - rho^2) * sqrt(tt nn - tn^2) / tt,
// the root with a tt + tn >= 0 (Cauchy-Schwarz makes the square root real). Events never
// overlap (each occupies its own slot of K + max_moveout samples and more), so every planted
// window holds exactly noise plus one copy and its per-channel CC is rho up to rounding; the
// network stack with the simulated weights (1 / C) is then rho too.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::sim {

/// What to simulate. Sizes are 64-bit; every random draw comes from `seed`.
struct SeismicSimOptions {
  std::int64_t channels = 3;
  std::int64_t samples = 60'000;       // L per channel
  std::int64_t templates = 2;          // T
  std::int64_t template_length = 200;  // K
  std::int64_t events_per_template = 3;
  /// CC of the planted events, used in turn (event e gets event_cc[e % size]); each in (0, 1).
  std::vector<double> event_cc{0.8};
  /// AR(1) coefficient of the noise in [0, 1): 0 is white; closer to 1 is redder.
  double noise_colour = 0.0;
  /// Per-channel moveouts are drawn in [0, max_moveout] (the earliest channel of each template
  /// gets 0).
  std::int64_t max_moveout = 50;
  double sample_rate = 100.0;  // Hz, for times in the ground truth and MiniSEED output
  std::int64_t start_ns = 1'262'304'000'000'000'000;  // 2010-01-01T00:00:00Z
  MfNormalize normalize = MfNormalize::Short;         // the CC the planting makes exact
  std::uint64_t seed = 1;
};

/// One planted event.
struct PlantedEvent {
  std::int64_t template_index = 0;
  std::int64_t sample = 0;        // correlation time p (window start before moveouts)
  double cc = 0;                  // per-channel CC planted on every channel
  double expected_cc_sum = 0;     // sum_c weight[t, c] * cc
  std::vector<double> amplitude;  // a per channel
};

/// The simulated data set.
struct SeismicSimulation {
  Array data;                        // (C, L) float64
  Array templates;                   // (T, C, K) float64, unit energy per channel
  Array moveouts;                    // (T, C) int64
  Array weights;                     // (T, C) float64, 1 / C
  std::vector<PlantedEvent> events;  // sorted by sample
};

/// Simulates a data set. Throws InvalidInput naming the option for a size < 1, a CC outside
/// (0, 1), a colour outside [0, 1), a negative moveout bound, or data too short to hold every
/// event in its own slot (the message gives the length needed).
SeismicSimulation simulate_seismic(const SeismicSimOptions& options);

/// A template-like transient of `length` samples: a sum of three damped sinusoids with random
/// frequencies between 2% and 20% of the sampling rate and a short onset ramp, scaled to unit
/// energy. Reproducible from `seed`.
std::vector<double> synthetic_wavelet(std::int64_t length, std::uint64_t seed);

}  // namespace halfscope::sim

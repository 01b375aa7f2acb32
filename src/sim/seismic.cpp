#include "halfscope/sim/seismic.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::sim {

namespace {

// SplitMix64: independent seeds for each (template, channel) from one user seed, so adding a
// channel does not change the others' wavelets.
std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void check_options(const SeismicSimOptions& o) {
  const auto positive = [](std::int64_t v, const char* name) {
    if (v < 1)
      throw InvalidInput(std::string("simulate seismic: ") + name + " is " + std::to_string(v) +
                         ": expected >= 1");
  };
  positive(o.channels, "channels");
  positive(o.samples, "samples");
  positive(o.templates, "templates");
  positive(o.template_length, "template length");
  if (o.events_per_template < 0)
    throw InvalidInput("simulate seismic: events per template is " +
                       std::to_string(o.events_per_template) + ": expected >= 0");
  if (o.event_cc.empty())
    throw InvalidInput("simulate seismic: no event CC given: expected values in (0, 1)");
  for (double cc : o.event_cc)
    if (!(cc > 0.0 && cc < 1.0))
      throw InvalidInput("simulate seismic: event CC " + std::to_string(cc) +
                         ": expected a value in (0, 1)");
  if (!(o.noise_colour >= 0.0 && o.noise_colour < 1.0))
    throw InvalidInput("simulate seismic: noise colour " + std::to_string(o.noise_colour) +
                       ": expected an AR(1) coefficient in [0, 1)");
  if (o.max_moveout < 0)
    throw InvalidInput("simulate seismic: max moveout " + std::to_string(o.max_moveout) +
                       ": expected >= 0");
  if (!(o.sample_rate > 0.0))
    throw InvalidInput("simulate seismic: sample rate " + std::to_string(o.sample_rate) +
                       ": expected > 0 Hz");
}

// The amplitude that makes CC(a T + n, T) = rho (see the header for the derivation).
double plant_amplitude(const double* t, const double* n, std::int64_t k, bool demean, double rho) {
  double mt = 0, mn = 0;
  if (demean) {
    for (std::int64_t i = 0; i < k; ++i) {
      mt += t[i];
      mn += n[i];
    }
    mt /= static_cast<double>(k);
    mn /= static_cast<double>(k);
  }
  double tt = 0, tn = 0, nn = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    const double a = t[i] - mt, b = n[i] - mn;
    tt += a * a;
    tn += a * b;
    nn += b * b;
  }
  const double disc = std::max(tt * nn - tn * tn, 0.0);
  return -tn / tt + rho / std::sqrt(1.0 - rho * rho) * std::sqrt(disc) / tt;
}

}  // namespace

std::vector<double> synthetic_wavelet(std::int64_t length, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> freq(0.02, 0.2), decay(0.15, 0.4),
      phase(0, 2 * std::numbers::pi), amp(0.5, 1.0);
  std::vector<double> w(static_cast<std::size_t>(length), 0.0);
  const double k_len = static_cast<double>(length);
  const double ramp = std::max(1.0, std::min(10.0, k_len / 10.0));
  for (int j = 0; j < 3; ++j) {
    const double f = freq(rng), tau = decay(rng) * k_len, ph = phase(rng), a = amp(rng);
    for (std::int64_t i = 0; i < length; ++i) {
      const double x = static_cast<double>(i);
      w[static_cast<std::size_t>(i)] +=
          a * std::exp(-x / tau) * std::sin(2 * std::numbers::pi * f * x + ph);
    }
  }
  double energy = 0;
  for (std::int64_t i = 0; i < length; ++i) {
    auto& v = w[static_cast<std::size_t>(i)];
    v *= std::min(1.0, (static_cast<double>(i) + 1.0) / ramp);  // emergent onset
    energy += v * v;
  }
  // A degenerate draw (energy 0 cannot happen for length >= 2, but length 1 with sin = 0 can).
  if (!(energy > 0)) {
    w.assign(w.size(), 0.0);
    w[0] = 1.0;
    energy = 1.0;
  }
  for (auto& v : w) v /= std::sqrt(energy);
  return w;
}

SeismicSimulation simulate_seismic(const SeismicSimOptions& o) {
  check_options(o);
  const std::int64_t C = o.channels, L = o.samples, T = o.templates, K = o.template_length;
  const std::int64_t n_events = T * o.events_per_template;
  // Each event gets its own slot, at least twice the span of its windows so that the
  // correlation side lobes of neighbouring events stay apart.
  const std::int64_t span = K + o.max_moveout;
  if (n_events > 0 && L / n_events < 2 * span)
    throw InvalidInput("simulate seismic: " + std::to_string(L) + " samples cannot hold " +
                       std::to_string(n_events) + " events of span " + std::to_string(span) +
                       " (template length + max moveout): expected samples >= " +
                       std::to_string(2 * span * n_events));
  if (L < span)
    throw InvalidInput("simulate seismic: " + std::to_string(L) +
                       " samples are shorter than the template length + max moveout (" +
                       std::to_string(span) + ")");

  SeismicSimulation s;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0);

  s.data = Array(DType::f64, {C, L});
  double* d = s.data.data_as<double>();
  const double phi = o.noise_colour, innovation = std::sqrt(1.0 - phi * phi);
  for (std::int64_t c = 0; c < C; ++c) {
    double prev = normal(rng);  // stationary start: unit variance from the first sample
    for (std::int64_t i = 0; i < L; ++i) {
      d[c * L + i] = prev;
      prev = phi * prev + innovation * normal(rng);
    }
  }

  s.templates = Array(DType::f64, {T, C, K});
  s.moveouts = Array(DType::i64, {T, C});
  s.weights = Array(DType::f64, {T, C});
  auto* mo = s.moveouts.data_as<std::int64_t>();
  std::uniform_int_distribution<std::int64_t> moveout(0, o.max_moveout);
  for (std::int64_t t = 0; t < T; ++t) {
    std::int64_t earliest = o.max_moveout;
    for (std::int64_t c = 0; c < C; ++c) {
      const auto w = synthetic_wavelet(
          K, mix_seed(o.seed ^ mix_seed(static_cast<std::uint64_t>(t * C + c + 1))));
      std::copy(w.begin(), w.end(), s.templates.data_as<double>() + (t * C + c) * K);
      mo[t * C + c] = moveout(rng);
      earliest = std::min(earliest, mo[t * C + c]);
      s.weights.data_as<double>()[t * C + c] = 1.0 / static_cast<double>(C);
    }
    for (std::int64_t c = 0; c < C; ++c) mo[t * C + c] -= earliest;
  }

  if (n_events == 0) return s;
  // Templates in random slot order; a random position inside each slot.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_events));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  const std::int64_t slot = L / n_events;
  std::uniform_int_distribution<std::int64_t> jitter(0, slot - 2 * span);
  const bool demean = o.normalize == MfNormalize::Full;
  for (std::int64_t e = 0; e < n_events; ++e) {
    PlantedEvent ev;
    ev.template_index = order[static_cast<std::size_t>(e)] % T;
    ev.sample = e * slot + span / 2 + jitter(rng);
    ev.cc = o.event_cc[static_cast<std::size_t>(e) % o.event_cc.size()];
    for (std::int64_t c = 0; c < C; ++c) {
      const double* tmpl = s.templates.data_as<double>() + (ev.template_index * C + c) * K;
      double* win = d + c * L + ev.sample + mo[ev.template_index * C + c];
      const double a = plant_amplitude(tmpl, win, K, demean, ev.cc);
      for (std::int64_t k = 0; k < K; ++k) win[k] += a * tmpl[k];
      ev.amplitude.push_back(a);
      ev.expected_cc_sum += s.weights.data_as<double>()[ev.template_index * C + c] * ev.cc;
    }
    s.events.push_back(std::move(ev));
  }
  return s;
}

}  // namespace halfscope::sim

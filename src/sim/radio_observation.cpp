// The dirty image g = H f + n (sim/radio.hpp).
#include <cmath>
#include <random>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"
#include "halfscope/sim/radio.hpp"
#include "sim/radio_random.hpp"

namespace halfscope::sim {

namespace {

void check_finite(const Array& a, const char* what) {
  const double* p = a.data_as<double>();
  for (std::int64_t k = 0; k < a.size(); ++k)
    if (!std::isfinite(p[k]))
      throw InvalidInput(std::string("simulate observation: ") + what +
                         ": expected finite values, found " + std::to_string(p[k]) +
                         " at element " + std::to_string(k));
}

}  // namespace

ObservationResult simulate_observation(const Array& sky, const Array& psf,
                                       const ObservationOptions& o) {
  if (!std::isfinite(o.snr_db) || std::abs(o.snr_db) > 300)
    throw InvalidInput("simulate observation: SNR: expected dB in [-300, 300], found " +
                       std::to_string(o.snr_db));
  if (sky.ndim() != 2 || psf.ndim() != 2 || sky.shape() != psf.shape() || sky.size() == 0)
    throw InvalidInput("simulate observation: expected a 2-D sky and a PSF of its shape, found " +
                       shape_to_string(sky.shape()) + " and " + shape_to_string(psf.shape()));
  const Array f = sky.to(Memory::host).astype(DType::f64).contiguous();
  const Array h = psf.to(Memory::host).astype(DType::f64).contiguous();
  check_finite(f, "sky");
  check_finite(h, "PSF");
  ObservationResult out;
  out.dirty = deconv::apply_psf(f, h, o.boundary);
  double* g = out.dirty.data_as<double>();
  const std::int64_t n = out.dirty.size();
  double energy = 0;
  for (std::int64_t k = 0; k < n; ++k) energy += g[k] * g[k];
  if (!(energy > 0) || !std::isfinite(energy))
    throw InvalidInput("simulate observation: the noiseless image H f is " +
                       std::string(energy > 0 ? "not finite" : "zero") +
                       " (an empty sky or PSF?): expected a signal to set the SNR against");
  // SNR_dB = 10 log10(P / sigma^2), P = ||H f||^2 / N the mean signal power.
  out.signal_power = energy / static_cast<double>(n);
  out.sigma = std::sqrt(out.signal_power * std::pow(10.0, -o.snr_db / 10));
  std::mt19937_64 rng(o.seed);
  detail::NormalSource normal(rng);
  for (std::int64_t k = 0; k < n; ++k) g[k] += out.sigma * normal();
  return out;
}

}  // namespace halfscope::sim

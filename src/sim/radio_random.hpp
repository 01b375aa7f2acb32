// Internal: the random numbers of the radio simulation (sim/radio.hpp), the same with every
// standard library. std::uniform_real_distribution and std::normal_distribution are
// implementation-defined; std::mt19937_64's output is fixed by the standard, and the transforms
// below are ours.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace halfscope::sim::detail {

/// Uniform in [0, 1): the generator's top 53 bits times 2^-53 (every value a multiple of 2^-53).
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// Standard normal pairs by Box-Muller, (r cos t, r sin t) with r = sqrt(-2 ln(1 - U1)) (1 - U1 is
/// in (0, 1], so the log is finite) and t = 2 pi U2.
class NormalSource {
 public:
  explicit NormalSource(std::mt19937_64& rng) : rng_(rng) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - uniform01(rng_)));
    const double t = 2.0 * std::numbers::pi * uniform01(rng_);
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  std::mt19937_64& rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace halfscope::sim::detail

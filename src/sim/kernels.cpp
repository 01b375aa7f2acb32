#include "halfscope/sim/kernels.hpp"

#include <cmath>
#include <random>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::sim {

Array gaussian_kernel(std::int64_t width, double sigma) {
  if (width < 1)
    throw InvalidInput("gaussian kernel: width must be >= 1, found " + std::to_string(width));
  if (!(sigma > 0)) sigma = static_cast<double>(width) / 6.0;
  Array k(DType::f64, {width, width});
  double* p = k.data_as<double>();
  const double c = (static_cast<double>(width) - 1.0) / 2.0;
  double sum = 0;
  for (std::int64_t y = 0; y < width; ++y)
    for (std::int64_t x = 0; x < width; ++x) {
      const double dy = static_cast<double>(y) - c, dx = static_cast<double>(x) - c;
      sum += p[y * width + x] = std::exp(-(dx * dx + dy * dy) / (2 * sigma * sigma));
    }
  for (std::int64_t i = 0; i < width * width; ++i) p[i] /= sum;
  return k;
}

Array random_image(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double lo, double hi) {
  Array a(DType::f64, {rows, cols});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < a.size(); ++i) p[i] = dist(rng);
  return a;
}

}  // namespace halfscope::sim

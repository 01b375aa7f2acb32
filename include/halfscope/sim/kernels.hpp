// Convolution kernels and test images for the studies' benchmarks.
#pragma once

#include <cstdint>

#include "halfscope/core/array.hpp"

namespace halfscope::sim {

/// The Gaussian kernel of study 000: width x width samples of exp(-(x^2 + y^2) / (2 sigma^2)) at
/// integer offsets from the centre (half-integer offsets for an even width), normalised to sum 1,
/// in float64. sigma <= 0 means width / 6, so the kernel spans +-3 sigma. Throws InvalidInput for
/// width < 1.
Array gaussian_kernel(std::int64_t width, double sigma = 0);

/// A reproducible random image, uniform in [lo, hi), float64.
Array random_image(std::int64_t rows, std::int64_t cols, std::uint64_t seed, double lo = 0.0,
                   double hi = 1.0);

}  // namespace halfscope::sim

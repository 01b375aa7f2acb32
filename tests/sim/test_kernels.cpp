#include <gtest/gtest.h>

#include <cmath>

#include "halfscope/core/error.hpp"
#include "halfscope/sim/kernels.hpp"

namespace halfscope {
namespace {

TEST(GaussianKernel, NormalisedSymmetricAndPeakedAtTheCentre) {
  for (std::int64_t w : {1, 2, 3, 4, 15, 115}) {
    const Array k = sim::gaussian_kernel(w);
    ASSERT_EQ(k.shape(), (Shape{w, w}));
    const double* p = k.data_as<double>();
    double sum = 0;
    for (std::int64_t i = 0; i < w * w; ++i) sum += p[i];
    EXPECT_NEAR(sum, 1.0, 1e-14);
    for (std::int64_t y = 0; y < w; ++y)
      for (std::int64_t x = 0; x < w; ++x) {
        EXPECT_DOUBLE_EQ(p[y * w + x], p[x * w + y]);                      // transpose
        EXPECT_DOUBLE_EQ(p[y * w + x], p[(w - 1 - y) * w + (w - 1 - x)]);  // point symmetry
      }
  }
  // Width 15, sigma 2.5: the centre over a tap at distance 3 is exp(9 / 12.5).
  const Array k = sim::gaussian_kernel(15);
  EXPECT_NEAR(k.at_as_double(7 * 15 + 7) / k.at_as_double(7 * 15 + 10), std::exp(9.0 / 12.5),
              1e-12);
  EXPECT_THROW((void)sim::gaussian_kernel(0), InvalidInput);
}

TEST(RandomImage, ReproducibleAndInRange) {
  const Array a = sim::random_image(16, 8, 42, -50, 50), b = sim::random_image(16, 8, 42, -50, 50);
  for (std::int64_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.at_as_double(i), b.at_as_double(i));
    EXPECT_GE(a.at_as_double(i), -50);
    EXPECT_LT(a.at_as_double(i), 50);
  }
}

}  // namespace
}  // namespace halfscope

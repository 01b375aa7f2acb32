#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "halfscope/core/metrics.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope {
namespace {

TEST(Metrics, MeanRelativeErrorFollowsEquationFive) {
  // Zero references contribute 0 but still count in N (study 000, eq. 5).
  const std::vector<double> ref = {1.0, -2.0, 0.0, 4.0};
  const std::vector<double> x = {1.1, -2.0, 5.0, 3.0};
  EXPECT_DOUBLE_EQ(mean_relative_error(ref, x), (0.1 + 0.0 + 0.0 + 0.25) / 4.0);
}

TEST(Metrics, CompareGivesAllThreeAndCatchesNonFinite) {
  Array ref = Array::from_values<double>(std::vector<double>{3, 4, 0, 0}, {2, 2});
  Array x = Array::from_values<float>(std::vector<float>{3, 5, 0, 0}, {2, 2});
  ErrorMetrics m = compare(ref, x);
  EXPECT_DOUBLE_EQ(m.mre, 0.25 / 4);
  EXPECT_DOUBLE_EQ(m.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(m.rel_frobenius, 1.0 / 5.0);
  Array bad = Array::from_values<float>(std::vector<float>{3, NAN, 0, 0}, {2, 2});
  m = compare(ref, bad);
  EXPECT_EQ(m.nonfinite, 1);
  EXPECT_TRUE(std::isinf(m.mre));
  EXPECT_THROW((void)compare(ref, ref.reshape({4})), InvalidInput);
}

TEST(Metrics, CompensatedSumsKeepTheMetricExact) {
  // 10^6 identical relative errors of 1e-9: a naive float sum would drift, ours must not.
  std::vector<double> ref(1000000, 1.0), x(1000000, 1.0 + 1e-9);
  EXPECT_NEAR(mean_relative_error(ref, x), 1e-9, 1e-9 * 1e-6);
}

TEST(Precision, NamesRoundTripAndErrorsListTheChoices) {
  for (Precision p : all_precisions()) EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_EQ(parse_precision("FP16"), Precision::Half);
  try {
    (void)parse_precision("quad");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("double, single, tf32, half, mixed, bf16, split"),
              std::string::npos);
  }
  EXPECT_EQ(storage_unit_roundoff(Precision::Mixed), std::ldexp(1.0, -11));
  EXPECT_EQ(compute_unit_roundoff(Precision::Mixed), std::ldexp(1.0, -24));
}

}  // namespace
}  // namespace halfscope

// The table structure function of the GPU covariance generator (src/ao/kernels/vonkarman.cuh)
// against the FP64 reference vonkarman_structure_function, on the host and on the device.
//
// Tolerance: 1e-14 relative (the target of issue 5). Derivation: the fitted polynomial is within
// ~7e-16 of G (measured when the degree was chosen, covariance_tuning.hpp); Horner's rule in
// s in [-1, 1] adds at most 2 x 7 eps x sum |c_k| <= ~4e-15 |G| (the coefficients fall by ~66 per
// degree, so sum |c_k| ~ |G|); the reference is within 1.5e-14 of D at x near 1e-3 by its own
// account but agrees with long double Bessel K to ~1e-16 elsewhere (test_turbulence.cpp), and the
// two meet at 1e-14 with room to spare in the measured maximum (printed below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <vector>

#include "ao/covariance_cuda.hpp"
#include "halfscope/ao/turbulence.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

/// Separations covering every interval of the table and every branch switch of both sides.
std::vector<double> probe_separations(double L0) {
  std::vector<double> x;
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i)
    x.push_back(std::exp(std::log(1e-10) + (std::log(70.0) - std::log(1e-10)) * i / (n - 1)));
  // Octave and interval edges of q = x^2 (the table), the reference's switches, the table's ends.
  for (int e = detail::kVkMinExponent - 2; e <= detail::kVkMaxExponent + 2; ++e)
    for (int j = 0; j <= detail::kVkIntervalsPerOctave; ++j) {
      const double q = std::ldexp(1.0 + static_cast<double>(j) / detail::kVkIntervalsPerOctave, e);
      for (const double f : {1.0 - 1e-15, 1.0, 1.0 + 1e-15}) x.push_back(std::sqrt(q) * f);
    }
  for (const double s : {detail::kVonKarmanSeriesMax, detail::kVonKarmanAsymptoticMin, 45.0})
    for (const double f : {1.0 - 1e-15, 1.0, 1.0 + 1e-15}) x.push_back(s * f);
  std::vector<double> r;
  for (const double v : x) r.push_back(v * L0 / (2.0 * std::numbers::pi));
  r.push_back(0.0);
  return r;
}

double relative(double got, double ref) {
  if (ref == 0.0) return got == 0.0 ? 0.0 : INFINITY;
  return std::fabs(got - ref) / std::fabs(ref);
}

TEST(AoVonKarmanTable, HostTableMatchesReference) {
  for (const double L0 : {10.0, 25.0, 47.3}) {
    double worst = 0;
    for (const double r : probe_separations(L0)) {
      const double ref = vonkarman_structure_function(r, 1.0, L0);
      const double got = detail::vonkarman_structure_function_table(r, L0);
      ASSERT_LE(relative(got, ref), 1e-14) << "r = " << r << ", L0 = " << L0;
      worst = std::max(worst, relative(got, ref));
    }
    std::printf("host table, L0 = %g: max relative error of D %.2e\n", L0, worst);
  }
}

TEST(AoVonKarmanTable, DeviceMatchesReferenceAndHost) {
  HS_REQUIRE_GPU();
  constexpr double eps = std::numeric_limits<double>::epsilon();
  for (const double L0 : {10.0, 25.0, 47.3}) {
    const std::vector<double> r = probe_separations(L0);
    const std::vector<double> gpu = detail::vonkarman_structure_function_cuda(r, L0);
    ASSERT_EQ(gpu.size(), r.size());
    double worst = 0;
    for (std::size_t k = 0; k < r.size(); ++k) {
      const double ref = vonkarman_structure_function(r[k], 1.0, L0);
      ASSERT_LE(relative(gpu[k], ref), 1e-14) << "r = " << r[k] << ", L0 = " << L0;
      // The same arithmetic as the host evaluation (explicit FMA); only the device's sqrt / cbrt
      // of the below-table branch may differ, by their 1-ulp accuracy: 4 ulp in all.
      const double host = detail::vonkarman_structure_function_table(r[k], L0);
      ASSERT_LE(std::fabs(gpu[k] - host), 4.0 * eps * std::fabs(host)) << "r = " << r[k];
      worst = std::max(worst, relative(gpu[k], ref));
    }
    std::printf("device table, L0 = %g: max relative error of D %.2e\n", L0, worst);
  }
}

}  // namespace
}  // namespace halfscope::ao

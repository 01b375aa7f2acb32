// The von Karman table of the GPU covariance generator (see kernels/vonkarman.cuh for how it is
// evaluated), fitted on the host from the reference functions of turbulence.cpp.
//
// Fit. On interval j of octave e, q = 2^e (1 + (j + 1/2 + s/2) / k), s in [-1, 1], k = 16
// intervals per octave. G is analytic in q except at the branch point q = 0, which every interval
// sees 2k half-widths away, so
// Chebyshev interpolation at the n = kVkDegree + 1 nodes s_i = cos(pi (i + 1/2) / n) converges like
// rho^-n, rho = 33 + sqrt(1088) ~ 66 (Trefethen, ATAP ch. 8): 66^-8 ~ 3e-15 times the bound's
// constant, which is small because G grows little on a Bernstein ellipse that stays 32 half-widths
// away from q = 0 (measured: 7.1e-16 at degree 7). The Chebyshev sum is turned into monomials in
// s in long double; in [-1, 1] that costs nothing measurable because the coefficients fall by ~66
// per degree (the monomial coefficients stay below ~|G| 2^n rho^-n).
//
// Reference values: G(x) = detail::vonkarman_bracket (turbulence.cpp): the series for x < 2 (6e-17)
// and Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x) above, x^(5/6) K_{5/6} from the quadrature (x < 16)
// or the asymptotic expansion, exactly the branches of vonkarman_structure_function.
//
// Measured (host, 200,000 log-spaced x in [1e-9, 60]; a similar grid in
// tests/ao/gpu_covariance_vonkarman.cpp on the device): |D_table - D_ref| / D_ref <= 7.1e-16
// (covariance_tuning.hpp lists the other degrees and interval counts tried).
#include <cmath>
#include <numbers>

#include "ao/covariance_cuda.hpp"
#include "ao/covariance_plan.hpp"
#include "halfscope/ao/turbulence.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

using ld = long double;
constexpr ld kA = 5.0L / 6.0L;

VonKarmanTable build_table() {
  constexpr int n = kVkDegree + 1;
  constexpr int k = kVkIntervalsPerOctave;
  const ld pi = std::numbers::pi_v<ld>;
  VonKarmanTable t;
  t.coefficients.assign(static_cast<std::size_t>(kVkIntervals) * kVkStride, 0.0);
  t.by_degree.assign(static_cast<std::size_t>(kVkIntervals) * (kVkDegree + 1), 0.0);

  // Monomial coefficients of the Chebyshev polynomials T_0..T_{n-1}: cheb[d][p].
  ld cheb[n][n] = {};
  cheb[0][0] = 1;
  if (n > 1) cheb[1][1] = 1;
  for (int d = 2; d < n; ++d)
    for (int p = 0; p < n; ++p) cheb[d][p] = (p > 0 ? 2 * cheb[d - 1][p - 1] : 0) - cheb[d - 2][p];

  ld nodes[n];
  for (int i = 0; i < n; ++i) nodes[i] = std::cos(pi * (static_cast<ld>(i) + 0.5L) / n);

  for (int e = kVkMinExponent; e <= kVkMaxExponent; ++e) {
    for (int j = 0; j < k; ++j) {
      ld values[n];
      for (int i = 0; i < n; ++i) {
        const ld m = 1.0L + (static_cast<ld>(j) + 0.5L + nodes[i] / 2.0L) / k;
        values[i] = vonkarman_bracket(std::sqrt(std::ldexp(m, e)));
      }
      ld mono[n] = {};
      for (int d = 0; d < n; ++d) {
        ld a = 0;
        for (int i = 0; i < n; ++i)
          a += values[i] * std::cos(pi * d * (static_cast<ld>(i) + 0.5L) / n);
        a *= (d == 0 ? 1.0L : 2.0L) / n;
        for (int p = 0; p <= d; ++p) mono[p] += a * cheb[d][p];
      }
      const std::ptrdiff_t index = (e - kVkMinExponent) * k + j;
      for (int p = 0; p < n; ++p) {
        t.coefficients[static_cast<std::size_t>(index * kVkStride + p)] =
            static_cast<double>(mono[p]);
        t.by_degree[static_cast<std::size_t>(p * kVkIntervals + index)] =
            static_cast<double>(mono[p]);
      }
    }
  }
  const ld c = 2.0L * pi * std::pow(2.0L, kA - 1.0L);
  t.scalars.limit = static_cast<double>(vonkarman_bracket_limit());
  t.scalars.series_a = static_cast<double>(c / std::tgamma(1.0L + kA));
  t.scalars.series_one = static_cast<double>(c / std::tgamma(2.0L - kA));
  t.k1 = static_cast<double>(2.0L * std::tgamma(1.0L + kA) * std::pow(2.0L, -kA) *
                             std::pow(pi, -8.0L / 3.0L) *
                             std::pow(24.0L / 5.0L * std::tgamma(6.0L / 5.0L), kA));
  return t;
}

}  // namespace

const VonKarmanTable& vonkarman_table() {
  static const VonKarmanTable table = build_table();
  return table;
}

double vonkarman_structure_function_table(double r, double L0) {
  const VonKarmanTable& t = vonkarman_table();
  const double kq = (2.0 * std::numbers::pi / L0) * (2.0 * std::numbers::pi / L0);
  const double weight =
      static_cast<double>(static_cast<ld>(t.k1) * std::pow(static_cast<ld>(L0), 5.0L / 3.0L));
  return weight *
         vonkarman_bracket_q<VkLayout::degree_major>(r * r * kq, t.by_degree.data(), t.scalars);
}

#if !HALFSCOPE_WITH_CUDA
std::vector<double> vonkarman_structure_function_cuda(const std::vector<double>& /*r*/,
                                                      double /*L0*/) {
  throw Unsupported("vonkarman_structure_function_cuda: this build has no CUDA backend");
}

void covariance_cuda_report(const CovariancePlan& /*plan*/, const CovarianceTarget& /*target*/,
                            CovarianceCudaReport* /*report*/,
                            const CovarianceCudaVariant& /*variant*/) {
  throw Unsupported(
      "covariance_cuda: this build has no CUDA backend (reconfigure with "
      "-DHALFSCOPE_WITH_CUDA=ON)");
}

void covariance_cuda(const CovariancePlan& plan, const CovarianceTarget& target) {
  covariance_cuda_report(plan, target, nullptr);
}
#endif

}  // namespace halfscope::ao::detail

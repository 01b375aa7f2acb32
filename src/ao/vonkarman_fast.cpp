// Fast FP64 von Karman structure function (src/ao/vonkarman_fast.hpp; the method is described
// there, the reference it is fitted to in turbulence.cpp).
#include "ao/vonkarman_fast.hpp"

#include <cmath>
#include <numbers>

#include "halfscope/ao/turbulence.hpp"

namespace halfscope::ao::detail {
namespace {

using ld = long double;
constexpr ld kA = 5.0L / 6.0L;

}  // namespace

const VonKarmanFast& VonKarmanFast::instance() {
  static const VonKarmanFast fast;
  return fast;
}

VonKarmanFast::VonKarmanFast() {
  // Series coefficients (turbulence.cpp): G = c [y^a sum_k p_k y^k - y sum_k q_k y^k],
  // p_k = 1 / (k! Gamma(k + 1 + a)), q_k = 1 / ((k + 1)! Gamma(k + 2 - a)), c = 2 pi 2^(-1/6).
  ld factorial = 1.0L;
  for (int k = 0; k < kSeriesTerms; ++k) {
    if (k > 0) factorial *= static_cast<ld>(k);
    series_p_[static_cast<std::size_t>(k)] =
        static_cast<double>(1.0L / (factorial * std::tgamma(static_cast<ld>(k) + 1.0L + kA)));
    series_q_[static_cast<std::size_t>(k)] = static_cast<double>(
        1.0L / (factorial * static_cast<ld>(k + 1) * std::tgamma(static_cast<ld>(k) + 2.0L - kA)));
  }
  for (int k = 0; k < kSeriesTerms; ++k) {
    relative_p_[static_cast<std::size_t>(k)] =
        series_p_[static_cast<std::size_t>(k)] / series_p_[0];
    relative_q_[static_cast<std::size_t>(k)] =
        series_q_[static_cast<std::size_t>(k)] / series_p_[0];
  }
  series_c_ = static_cast<double>(2.0L * std::numbers::pi_v<ld> * std::pow(2.0L, kA - 1.0L));
  limit_ = static_cast<double>(vonkarman_bracket_limit());
  kolmogorov_ = static_cast<double>(2.0L * std::pow(24.0L / 5.0L * std::tgamma(6.0L / 5.0L), kA));

  // Chebyshev interpolation at the N = degree + 1 first-kind nodes of each piece:
  // c_k = (2 / N) sum_j f(s_j) T_k(s_j), the k = 0 coefficient halved; then the monomial
  // coefficients of sum_k c_k T_k(s) (T_0 = 1, T_1 = s, T_{k+1} = 2 s T_k - T_{k-1}), all in long
  // double. The c_k fall by ~34 per degree, so the monomial form loses nothing measurable.
  constexpr int n = kDegree + 1;
  for (int piece = 0; piece < kOctaves * kPerOctave; ++piece) {
    const ld width = static_cast<ld>(kSeriesMax) * std::ldexp(1.0L, piece / kPerOctave) /
                     kPerOctave;  // the octave's width / kPerOctave
    const ld lo = static_cast<ld>(kSeriesMax) * std::ldexp(1.0L, piece / kPerOctave) +
                  width * static_cast<ld>(piece % kPerOctave);
    std::array<ld, n> f{};
    for (int j = 0; j < n; ++j) {
      const ld t = std::cos(std::numbers::pi_v<ld> * (static_cast<ld>(j) + 0.5L) / n);
      f[static_cast<std::size_t>(j)] = vonkarman_bracket(lo + width * 0.5L * (t + 1.0L));
    }
    std::array<ld, n> mono{};
    std::array<ld, n> t_prev{}, t_cur{}, t_next{};
    t_prev[0] = 1.0L;  // T_0
    t_cur[1] = 1.0L;   // T_1
    for (int k = 0; k < n; ++k) {
      ld c = 0.0L;
      for (int j = 0; j < n; ++j)
        c += f[static_cast<std::size_t>(j)] * std::cos(std::numbers::pi_v<ld> * static_cast<ld>(k) *
                                                       (static_cast<ld>(j) + 0.5L) / n);
      c *= (k == 0 ? 1.0L : 2.0L) / n;
      const std::array<ld, n>& tk = k == 0 ? t_prev : t_cur;
      for (int m = 0; m < n; ++m)
        mono[static_cast<std::size_t>(m)] += c * tk[static_cast<std::size_t>(m)];
      if (k >= 1) {
        for (int m = 0; m < n; ++m)
          t_next[static_cast<std::size_t>(m)] =
              (m > 0 ? 2.0L * t_cur[static_cast<std::size_t>(m - 1)] : 0.0L) -
              t_prev[static_cast<std::size_t>(m)];
        t_prev = t_cur;
        t_cur = t_next;
      }
    }
    for (int m = 0; m < n; ++m)
      poly_[static_cast<std::size_t>(piece)][static_cast<std::size_t>(m)] =
          static_cast<double>(mono[static_cast<std::size_t>(m)]);
  }
}

double VonKarmanFast::bracket(double x) const noexcept {
  if (x < kSeriesMax) {
    // G itself (for the tests; D uses small_separation here).
    const double y = 0.25 * x * x;
    double p = series_p_[kSeriesTerms - 1], q = series_q_[kSeriesTerms - 1];
    for (int k = kSeriesTerms - 2; k >= 0; --k) {
      p = p * y + series_p_[static_cast<std::size_t>(k)];
      q = q * y + series_q_[static_cast<std::size_t>(k)];
    }
    return series_c_ * (std::pow(y, 5.0 / 6.0) * p - y * q);
  }
  if (x >= kPiecewiseMax) {
    // x^a K_a(x) ~ sqrt(pi / 2) x^(a - 1/2) e^-x (1 + a1/x + a2/x^2 + a3/x^3 + a4/x^4),
    // a_k = a_{k-1} (4a^2 - (2k-1)^2) / (8k); here it is < 1e-13 of G.
    const double z = 1.0 / x;
    const double series =
        1.0 + z * (2.0 / 9.0 + z * (-7.0 / 81.0 + z * (175.0 / 2187.0 + z * (-2275.0 / 19683.0))));
    return limit_ - 1.2533141373155003 * std::cbrt(x) * std::exp(-x) * series;
  }
  return piecewise(x);
}

double VonKarmanFast::small_separation(double r, double x) const noexcept {
  // k1 L0^(5/3) c p_0 y^(5/6) = K r^(5/3) (the Kolmogorov limit, turbulence.cpp), so
  // D = K r^(5/3) [P(y) / p_0 - y^(1/6) Q(y) / p_0] with y^(1/6) = (x / 2)^(1/3).
  const double y = 0.25 * x * x;
  double p = relative_p_[kSeriesTerms - 1], q = relative_q_[kSeriesTerms - 1];
  for (int k = kSeriesTerms - 2; k >= 0; --k) {
    p = p * y + relative_p_[static_cast<std::size_t>(k)];
    q = q * y + relative_q_[static_cast<std::size_t>(k)];
  }
  return kolmogorov_ * kolmogorov_power(r) * (p - std::cbrt(0.5 * x) * q);
}

double VonKarmanFast::scale(double L0) noexcept {
  if (std::isinf(L0)) return 0.0;
  // k1 = 2 Gamma(11/6) 2^(-5/6) pi^(-8/3) (24/5 Gamma(6/5))^(5/6).
  static const double k1 =
      static_cast<double>(2.0L * std::tgamma(11.0L / 6.0L) * std::pow(2.0L, -kA) *
                          std::pow(std::numbers::pi_v<ld>, -8.0L / 3.0L) *
                          std::pow(24.0L / 5.0L * std::tgamma(6.0L / 5.0L), kA));
  return static_cast<double>(static_cast<ld>(k1) * std::pow(static_cast<ld>(L0), 5.0L / 3.0L));
}

double VonKarmanFast::kolmogorov_power(double r) noexcept {
  return std::pow(r, 5.0 / 3.0);
}

double VonKarmanFast::structure(double r, double L0) const noexcept {
  if (r == 0.0) return 0.0;
  return structure_scaled(r, 2.0 * std::numbers::pi / L0, scale(L0));
}

LayerStructure::LayerStructure(const std::vector<double>& outer_scales)
    : fast_(&VonKarmanFast::instance()) {
  for (const double L0 : outer_scales) {
    two_pi_over_L0_.push_back(std::isinf(L0) ? 0.0 : 2.0 * std::numbers::pi / L0);
    scale_.push_back(VonKarmanFast::scale(L0));
  }
}

}  // namespace halfscope::ao::detail

// Von Karman phase structure function and covariance (see include/halfscope/ao/turbulence.hpp).
//
// Derivation, a = 5/6, y = (x/2)^2. From K_a = pi/2 (I_{-a} - I_a) / sin(a pi) and
// I_nu(x) = sum_k (x/2)^(2k+nu) / (k! Gamma(k+nu+1)):
//   x^a K_a(x) = pi 2^(a-1) / sin(a pi) [ sum_{k>=0} y^k / (k! Gamma(k+1-a))
//                                        - sum_{k>=0} y^(k+a) / (k! Gamma(k+1+a)) ].
// The k = 0 term of the first sum is pi 2^(a-1) / (sin(a pi) Gamma(1-a)) = Gamma(a) 2^(a-1)
// (reflection formula), exactly the constant of D. Dropping it analytically leaves
//   G(x) = Gamma(a) 2^(a-1) - x^a K_a(x)
//        = c [ sum_{k>=0} y^(k+a) / (k! Gamma(k+1+a)) - sum_{k>=1} y^k / (k! Gamma(k+1-a)) ],
//   c = pi 2^(a-1) / sin(a pi) = 2 pi 2^(-1/6)   (sin(5 pi / 6) = 1/2),
// whose leading term c y^a / Gamma(1+a) carries full relative accuracy as x -> 0 (no cancellation
// against the constant). The two sums still cancel partly (by (S1 + S2) / G, ~10 at x = 1), so they
// are accumulated in long double (64-bit significand on x86-64).
//
// The series cannot also give x^a K_a = limit - G at moderate x: the sums grow like e^x while x^a
// K_a falls like e^-x, so its relative error grows like eps_ld e^(2x) (measured 2.5e-12 at x
// = 8.7). Nor can the asymptotic expansion reach down there (below). So three branches, by x:
//   x < 2        series for G; x^a K_a = limit - G loses at most a factor 5 (x^a K_a >= 0.23).
//   2 <= x < 16  trapezoidal rule on x^a int_0^inf exp(-x cosh t) cosh(a t) dt (positive terms).
//   x >= 16      K_a(x) ~ sqrt(pi / (2x)) e^(-x) sum_k a_k / x^k, a_0 = 1,
//                a_k = a_{k-1} (4a^2 - (2k-1)^2) / (8k) (a_1 = 2/9, a_2 = -7/81, a_3 = 175/2187),
//                summed until the terms stop decreasing (optimal truncation).
// In the last two, G = limit - x^a K_a with G >= 0.75: no cancellation.
// Measured against std::cyl_bessel_k in long double (tests/ao/test_turbulence.cpp):
//   at x = 2:  series G 6e-17, quadrature x^a K_a 4e-17 relative;
//   at x = 16: quadrature 6e-17, asymptotic 8e-16 (it is 1.3e-9 at x = 9 and 2.7e-12 at x = 12,
//              ~0.08 e^(-2x): the ECRC/MOAO switch at 0.75 * 2 pi with four terms is far coarser).
// Over x in [1e-3, 200] D agrees with the reference to 1.5e-14 (the reference's own limit at small
// x), C to 8e-16.
//
// The constant k1 = 2 Gamma(11/6) 2^(-5/6) pi^(-8/3) (24/5 Gamma(6/5))^(5/6): the von Karman phase
// spectrum is W(f) = 0.0229 r0^(-5/3) (f^2 + 1/L0^2)^(-11/6), with 0.0229 =
// Gamma(11/6)^2 / (2 pi^(11/3)) (24/5 Gamma(6/5))^(5/6); the covariance is its Hankel transform
// C(r) = 2 pi int f W(f) J0(2 pi f r) df = k1/2 (L0/r0)^(5/3) x^(5/6) K_{5/6}(x) (Sonine-Gegenbauer
// integral int f J0(bf) / (f^2 + z^2)^(11/6) df = (b/2)^(5/6) K_{5/6}(bz) / (z^(5/6) Gamma(11/6))),
// and D = 2 (C(0) - C(r)). Kolmogorov limit: the leading term of G is c y^a / Gamma(11/6) with
// y^a = (pi r / L0)^(5/3), so k1 (L0/r0)^(5/3) times it is
// k1 2 pi 2^(-1/6) pi^(5/3) / Gamma(11/6) (r/r0)^(5/3) = 2 (24/5 Gamma(6/5))^(5/6) (r/r0)^(5/3),
// i.e. 6.88388 (r/r0)^(5/3): L0 cancels, as it must.
#include "halfscope/ao/turbulence.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::ao {
namespace {

using ld = long double;
constexpr ld kA = 5.0L / 6.0L;

/// Constants derived once from tgamma in long double (a few ulp of 2^-64).
struct VonKarmanConstants {
  ld gamma_a = std::tgamma(kA);                            // Gamma(5/6)
  ld bracket_limit = gamma_a * std::pow(2.0L, kA - 1.0L);  // Gamma(5/6) 2^(-1/6)
  ld series_c = 2.0L * std::numbers::pi_v<ld> * std::pow(2.0L, kA - 1.0L);
  ld gamma_1pa = std::tgamma(1.0L + kA);                                         // Gamma(11/6)
  ld gamma_2ma = std::tgamma(2.0L - kA);                                         // Gamma(7/6)
  ld kolmogorov = 2.0L * std::pow(24.0L / 5.0L * std::tgamma(6.0L / 5.0L), kA);  // 6.88388
  ld k1 = 2.0L * gamma_1pa * std::pow(2.0L, -kA) * std::pow(std::numbers::pi_v<ld>, -8.0L / 3.0L) *
          std::pow(24.0L / 5.0L * std::tgamma(6.0L / 5.0L), kA);  // 0.171661
};

const VonKarmanConstants& constants() {
  static const VonKarmanConstants c;
  return c;
}

std::string format_value(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

void check_separation(const char* fn, double r) {
  if (!std::isfinite(r) || r < 0.0) {
    throw InvalidInput(std::string(fn) +
                       ": argument 'r' (separation, m) must be finite and >= 0, found " +
                       format_value(r));
  }
}

void check_r0(const char* fn, double r0) {
  if (!std::isfinite(r0) || !(r0 > 0.0)) {
    throw InvalidInput(std::string(fn) +
                       ": argument 'r0' (Fried parameter, m) must be finite and > 0, found " +
                       format_value(r0));
  }
}

void check_L0(const char* fn, double L0, bool allow_infinite) {
  const bool ok = allow_infinite ? (L0 > 0.0) : (std::isfinite(L0) && L0 > 0.0);
  if (!ok) {
    throw InvalidInput(std::string(fn) + ": argument 'L0' (outer scale, m) must be " +
                       (allow_infinite ? "> 0 (or +inf for Kolmogorov)" : "finite and > 0") +
                       ", found " + format_value(L0));
  }
}

/// Long double series bracket G(x) (see the derivation at the top).
ld bracket_series(ld x) {
  const auto& c = constants();
  const ld y = x * x / 4.0L;
  ld t1 = std::pow(y, kA) / c.gamma_1pa;  // y^a / Gamma(1+a)
  ld t2 = y / c.gamma_2ma;                // y / (1! Gamma(2-a))
  ld s1 = t1;
  ld s2 = t2;
  constexpr ld eps = std::numeric_limits<ld>::epsilon();
  // Both sums have positive terms that fall factorially once k > sqrt(y); below the switch (y < 1)
  // about 15 terms reach eps. The cap only guards against a caller far outside that range.
  for (int k = 1; k < 400; ++k) {
    t1 *= y / (static_cast<ld>(k) * (static_cast<ld>(k) + kA));
    t2 *= y / (static_cast<ld>(k + 1) * (static_cast<ld>(k + 1) - kA));
    s1 += t1;
    s2 += t2;
    if (t1 <= eps * s1 && t2 <= eps * s2) break;
  }
  return c.series_c * (s1 - s2);
}

/// Long double x^a K_a(x) = x^a int_0^inf exp(-x cosh t) cosh(a t) dt by the trapezoidal rule.
/// The integrand is analytic and decaying in the strip |Im t| < pi/2, so the rule converges
/// geometrically, error ~ exp(-pi^2 / h) (Trefethen & Weideman, SIAM Review 2014): h = 1/16 puts
/// it far below eps_ld. Terms are positive, so there is no cancellation at all.
ld bessel_quadrature(ld x) {
  constexpr ld h = 1.0L / 16.0L;
  constexpr ld eps = std::numeric_limits<ld>::epsilon();
  ld sum = 0.5L * std::exp(-x);  // t = 0, half weight
  // The integrand is below eps_ld * sum once x (cosh t - 1) > 44; at x = 2 (the worst case used)
  // that is t ~ 3.9, about 62 nodes.
  for (int k = 1; k < 4000; ++k) {
    const ld t = h * static_cast<ld>(k);
    const ld term = std::exp(-x * std::cosh(t)) * std::cosh(kA * t);
    sum += term;
    if (term <= eps * sum) break;
  }
  return std::pow(x, kA) * h * sum;
}

/// Long double asymptotic x^a K_a(x), optimally truncated.
ld bessel_asymptotic(ld x) {
  const ld four_a2 = 4.0L * kA * kA;
  ld term = 1.0L;
  ld sum = 1.0L;
  constexpr ld eps = std::numeric_limits<ld>::epsilon();
  for (int k = 1; k < 200; ++k) {
    const ld odd = static_cast<ld>(2 * k - 1);
    const ld next = term * (four_a2 - odd * odd) / (8.0L * static_cast<ld>(k) * x);
    if (std::fabs(next) >= std::fabs(term)) break;  // the series starts to diverge
    term = next;
    sum += term;
    if (std::fabs(term) <= eps * std::fabs(sum)) break;
  }
  return std::sqrt(std::numbers::pi_v<ld> / 2.0L) * std::pow(x, kA - 0.5L) * std::exp(-x) * sum;
}

/// x = 2 pi r / L0 in long double (r and L0 are exact doubles; the division rounds once).
ld reduced_separation(double r, double L0) {
  return 2.0L * std::numbers::pi_v<ld> * static_cast<ld>(r) / static_cast<ld>(L0);
}

/// x^a K_a(x) and G(x) = limit - x^a K_a(x), each from the branch that has it without cancellation.
struct BesselAndBracket {
  ld bessel;
  ld bracket;
};

BesselAndBracket evaluate(ld x) {
  const ld limit = constants().bracket_limit;
  if (x < static_cast<ld>(detail::kVonKarmanSeriesMax)) {
    // x^a K_a >= 0.23 here, so limit - G loses at most a factor 5 (of eps_ld).
    const ld g = bracket_series(x);
    return {limit - g, g};
  }
  // G >= 0.75 here, so limit - x^a K_a loses nothing.
  const ld f = x < static_cast<ld>(detail::kVonKarmanAsymptoticMin) ? bessel_quadrature(x)
                                                                    : bessel_asymptotic(x);
  return {f, limit - f};
}

}  // namespace

namespace detail {

long double vonkarman_bracket(long double x) {
  return evaluate(x).bracket;
}

long double vonkarman_bracket_limit() {
  return constants().bracket_limit;
}

double vonkarman_bracket_series(double x) {
  return static_cast<double>(bracket_series(x));
}

double vonkarman_bessel_quadrature(double x) {
  return static_cast<double>(bessel_quadrature(x));
}

double vonkarman_bessel_asymptotic(double x) {
  return static_cast<double>(bessel_asymptotic(x));
}

}  // namespace detail

namespace {

/// The result in FP64, or NumericalError where it overflows (extreme L0/r0 or r/r0 ratios that
/// long double still holds): never a silent inf.
double finite_result(const char* fn, ld value, double r, double r0, double L0) {
  const auto out = static_cast<double>(value);
  if (!std::isfinite(out)) {
    throw NumericalError(std::string(fn) + ": result overflows FP64 for r = " + format_value(r) +
                         ", r0 = " + format_value(r0) + ", L0 = " + format_value(L0) +
                         " (expected (L0/r0)^(5/3) and (r/r0)^(5/3) below ~1e307)");
  }
  return out;
}

}  // namespace

double vonkarman_structure_function(double r, double r0, double L0) {
  constexpr const char* fn = "vonkarman_structure_function";
  check_separation(fn, r);
  check_r0(fn, r0);
  check_L0(fn, L0, /*allow_infinite=*/true);
  if (r == 0.0) return 0.0;
  const auto& c = constants();
  const ld r_over_r0 = static_cast<ld>(r) / static_cast<ld>(r0);
  if (std::isinf(L0)) {
    return finite_result(fn, c.kolmogorov * std::pow(r_over_r0, 5.0L / 3.0L), r, r0, L0);
  }
  const ld scale = c.k1 * std::pow(static_cast<ld>(L0) / static_cast<ld>(r0), 5.0L / 3.0L);
  return finite_result(fn, scale * evaluate(reduced_separation(r, L0)).bracket, r, r0, L0);
}

double vonkarman_phase_covariance(double r, double r0, double L0) {
  constexpr const char* fn = "vonkarman_phase_covariance";
  check_separation(fn, r);
  check_r0(fn, r0);
  check_L0(fn, L0, /*allow_infinite=*/false);
  const auto& c = constants();
  const ld scale = 0.5L * c.k1 * std::pow(static_cast<ld>(L0) / static_cast<ld>(r0), 5.0L / 3.0L);
  return finite_result(fn, scale * evaluate(reduced_separation(r, L0)).bessel, r, r0, L0);
}

}  // namespace halfscope::ao

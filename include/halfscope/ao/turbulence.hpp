// Atmospheric turbulence statistics for adaptive-optics tomography (issue 5): the von Karman phase
// structure function and phase covariance of one turbulent layer, in FP64 on the CPU. These are
// the per-element building block of the slope covariance matrices (Cmm, Ctm, Ctt).
//
// Units: separations r, Fried parameter r0 and outer scale L0 in metres; results in rad^2 of phase
// at the wavelength r0 refers to (500 nm by the usual convention: r0 scales as lambda^(6/5)).
// Formulas, numerics and measured accuracy: docs/ao.md.
#pragma once

namespace halfscope::ao {

/// Von Karman phase structure function D(r) = <(phi(p) - phi(p + r))^2> in rad^2:
///   D(r) = k1 (L0/r0)^(5/3) [Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x)],  x = 2 pi r / L0,
///   k1 = 2 Gamma(11/6) 2^(-5/6) pi^(-8/3) (24/5 Gamma(6/5))^(5/6) ~ 0.171661.
/// Accurate to ~1e-15 relative at every separation (small x: series with the constant term
/// cancelled analytically; moderate x: trapezoidal rule; large x: asymptotic expansion of K_{5/6}).
/// r = 0 gives 0. L0 = +inf gives the Kolmogorov limit 2 (24/5 Gamma(6/5))^(5/6) (r/r0)^(5/3)
/// = 6.88388 (r/r0)^(5/3). Throws InvalidInput unless r is finite and >= 0, r0 finite and > 0, L0 >
/// 0 (finite or +inf).
[[nodiscard]] double vonkarman_structure_function(double r, double r0, double L0);

/// Von Karman phase covariance C(r) = <phi(p) phi(p + r)> in rad^2 (zero-mean phase):
///   C(r) = k1/2 (L0/r0)^(5/3) x^(5/6) K_{5/6}(x),  x = 2 pi r / L0,
/// so that D(r) = 2 (C(0) - C(r)) and C(0) = k1/2 (L0/r0)^(5/3) Gamma(5/6) 2^(-1/6) is the phase
/// variance. Computed directly (not as C(0) - D/2), so it keeps its relative accuracy in the tail
/// r >> L0. Throws InvalidInput unless r is finite and >= 0, r0 finite and > 0, L0 finite and > 0
/// (the variance diverges in the Kolmogorov limit).
[[nodiscard]] double vonkarman_phase_covariance(double r, double r0, double L0);

namespace detail {

/// x below which G(x) = Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x) comes from the small-x series.
inline constexpr double kVonKarmanSeriesMax = 2.0;

/// x at and above which x^(5/6) K_{5/6}(x) comes from the asymptotic expansion; between the two
/// switches from the trapezoidal rule on its integral representation. The measurements that chose
/// both are in turbulence.cpp and docs/ao.md.
inline constexpr double kVonKarmanAsymptoticMin = 16.0;

/// G(x) = Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x) by the series (exposed so the tests can measure
/// each branch at the switches).
[[nodiscard]] double vonkarman_bracket_series(double x);

/// G(x) in long double from the branch that has it without cancellation (series below
/// kVonKarmanSeriesMax, limit - x^(5/6) K_{5/6}(x) above): the reference the fast evaluators of
/// the covariance backends (vonkarman_fast.cpp, covariance_cuda_table.cpp) are fitted to.
[[nodiscard]] long double vonkarman_bracket(long double x);

/// The limit of G at large x, Gamma(5/6) 2^(-1/6), in long double.
[[nodiscard]] long double vonkarman_bracket_limit();

/// x^(5/6) K_{5/6}(x) by the trapezoidal rule on x^(5/6) int_0^inf exp(-x cosh t) cosh(5t/6) dt.
[[nodiscard]] double vonkarman_bessel_quadrature(double x);

/// x^(5/6) K_{5/6}(x) by the asymptotic expansion (optimally truncated).
[[nodiscard]] double vonkarman_bessel_asymptotic(double x);

}  // namespace detail

}  // namespace halfscope::ao
